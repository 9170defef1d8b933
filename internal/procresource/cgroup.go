package procresource

import (
	"bytes"
	"strings"
)

// Container runtimes recognised from cgroup paths (values for
// Container.Runtime, as OTel's container.runtime.name spells them).
const (
	RuntimeDocker     = "docker"
	RuntimeContainerd = "containerd"
	RuntimeCRIO       = "cri-o"
	RuntimePodman     = "podman"
)

// Container is what a process's cgroup membership says about where it runs.
// Zero fields mean "not known": a host process has an empty Container.
type Container struct {
	// ID is the full 64-hex-digit container id.
	ID string
	// Runtime is one of the Runtime* constants, or "" when the path names
	// a container without saying which runtime made it (cgroupfs-driver
	// Kubernetes paths).
	Runtime string
	// PodUID is the Kubernetes pod UID with dashes (8-4-4-4-12), taken from
	// the kubepods part of the path.
	PodUID string
}

// scopePrefixes maps the prefix of a systemd scope name to the runtime that
// creates it. Longer prefixes that share a stem come first.
var scopePrefixes = []struct {
	prefix  string
	runtime string
}{
	{"cri-containerd-", RuntimeContainerd},
	{"containerd-", RuntimeContainerd},
	{"docker-", RuntimeDocker},
	{"crio-", RuntimeCRIO},
	{"libpod-", RuntimePodman},
}

// ParseCgroup reads the contents of /proc/<pid>/cgroup (cgroup v1, v2 or
// hybrid) and returns the container and pod the process belongs to: those of
// the first line that names a container, or else of the first that names a
// pod. Lines it does not understand are skipped: the result is empty for
// host processes, never an error.
//
// Identity comes from the outermost segments of a path, the ones kubelet and
// the container runtime made (see parseCgroupPath): a tenant may own the
// subtree below its container's cgroup (a delegated cgroup, or a writable
// cgroupfs inside a privileged container) and build there any path it likes.
func ParseCgroup(data []byte) Container {
	var podOnly Container
	var last []byte
	for len(data) > 0 {
		var line []byte
		line, data, _ = bytes.Cut(data, []byte{'\n'})
		// hierarchy-ID:controller-list:cgroup-path; the path may itself
		// contain ':' so split only twice.
		_, rest, ok := bytes.Cut(line, []byte{':'})
		if !ok {
			continue
		}
		_, path, ok := bytes.Cut(rest, []byte{':'})
		// cgroup v1 repeats one path for most hierarchies: parse it once.
		if !ok || len(path) <= 1 || bytes.Equal(path, last) {
			continue
		}
		last = path
		c := parseCgroupPath(string(path))
		// Cloned: a substring would keep the whole line alive in every
		// cache that holds the result.
		if c.ID != "" {
			return Container{ID: strings.Clone(c.ID), Runtime: c.Runtime, PodUID: strings.Clone(c.PodUID)}
		}
		if c.PodUID != "" && podOnly.PodUID == "" {
			podOnly.PodUID = strings.Clone(c.PodUID)
		}
	}
	return podOnly
}

// parseCgroupPath extracts container id, runtime and pod UID from one cgroup
// path. It walks segments from the root down and stops at the first that
// names a pod or a container:
//
//   - a pod slice (kubelet's "kubepods-<qos>-pod<uid>.slice" or
//     "pod<uid>"): the pod, and the container is the pod's child if that is
//     a container cgroup, as the runtime makes it (not a grandchild: a
//     container whose child is CRI-O's conmon, or anything else, is none);
//   - a container cgroup outside any pod (docker, podman, containerd without
//     kubelet): that container, in no pod.
//
// Everything below is ignored: only the levels down to the container's are
// made by kubelet and the runtime; below, the container's own processes may
// write, and a tenant with such a subtree could otherwise nest a copy of
// another pod's slice and scope there and be taken for that pod. A runtime
// nested inside a container (kind's nodes, docker-in-docker) is seen from
// outside as the outer container, for the same reason.
func parseCgroupPath(path string) Container {
	path = strings.Trim(path, "/")
	// path[:start] is above seg, path[:end] down to it: slices of path
	// rather than joined strings, since every process's cgroup is parsed.
	for start := 0; start < len(path); {
		end := start + strings.IndexByte(path[start:], '/')
		if end < start {
			end = len(path)
		}
		seg, above := path[start:end], strings.TrimSuffix(path[:start], "/")
		if uid, ok := podUIDFromSegment(seg); ok {
			c := Container{PodUID: uid}
			child, _, _ := strings.Cut(path[min(end+1, len(path)):], "/")
			if id, rt, ok := containerFromSegment(child, path[:end]); ok {
				c.ID, c.Runtime = id, rt
			}
			return c
		}
		if id, rt, ok := containerFromSegment(seg, above); ok {
			return Container{ID: id, Runtime: rt}
		}
		start = end + 1
	}
	return Container{}
}

// lastSegment splits "a/b/c" into "c" and "a/b".
func lastSegment(path string) (seg, parent string) {
	i := strings.LastIndexByte(path, '/')
	if i < 0 {
		return path, ""
	}
	return path[i+1:], path[:i]
}

// containerFromSegment recognises one path segment as a container cgroup:
// either a systemd scope ("cri-containerd-<id>.scope", "docker-<id>.scope",
// "crio-<id>.scope", "libpod-<id>.scope") or a bare id under a parent that
// says whose it is ("/docker/<id>", "/kubepods/.../pod<uid>/<id>").
func containerFromSegment(seg, parents string) (id, runtime string, ok bool) {
	name := strings.TrimSuffix(seg, ".scope")
	if strings.HasPrefix(name, "crio-conmon-") {
		// CRI-O's monitor process, not the container itself.
		return "", "", false
	}
	// The cgroupfs driver names CRI-O's and cri-dockerd's container cgroups
	// like the systemd scopes, without the ".scope".
	for _, p := range scopePrefixes {
		if rest, found := strings.CutPrefix(name, p.prefix); found && isContainerID(rest) {
			return rest, p.runtime, true
		}
	}
	if name != seg || !isContainerID(name) {
		return "", "", false
	}
	for parents != "" {
		var parent string
		parent, parents = lastSegment(parents)
		switch parent {
		case "docker":
			return name, RuntimeDocker, true
		case "crio":
			return name, RuntimeCRIO, true
		case "containerd", "k8s.io":
			return name, RuntimeContainerd, true
		case "libpod_parent":
			return name, RuntimePodman, true
		}
		if strings.HasPrefix(parent, "kubepods") {
			return name, "", true
		}
	}
	// A bare 64-hex segment under any other parent (a runtime not listed
	// here) is still a container id; the runtime is unknown.
	return name, "", true
}

// podUIDFromSegment recognises the pod level of a kubepods hierarchy:
// "pod<uid>" (cgroupfs driver, dashes) or "kubepods-<qos>-pod<uid>.slice"
// (systemd driver, underscores).
func podUIDFromSegment(seg string) (string, bool) {
	var raw string
	switch {
	case strings.HasPrefix(seg, "pod"):
		raw = seg[len("pod"):]
	case strings.Contains(seg, "kubepods") && strings.HasSuffix(seg, ".slice"):
		// "kubepods-<qos>-pod<uid>.slice", or under a kubelet --cgroup-root
		// such as kind's "kubelet-kubepods-<qos>-pod<uid>.slice".
		i := strings.LastIndex(seg, "-pod")
		if i < 0 {
			return "", false
		}
		raw = strings.TrimSuffix(seg[i+len("-pod"):], ".slice")
	default:
		return "", false
	}
	uid := strings.ReplaceAll(raw, "_", "-")
	if !isUUID(uid) {
		return "", false
	}
	return uid, true
}

// isContainerID reports whether s is a 64-digit lower-case hex id, the form
// docker, containerd and CRI-O all use.
func isContainerID(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isHex(s[i]) {
			return false
		}
	}
	return true
}

// isUUID reports whether s has the 8-4-4-4-12 hex form of a pod UID.
func isUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < len(s); i++ {
		switch i {
		case 8, 13, 18, 23:
			if s[i] != '-' {
				return false
			}
		default:
			if !isHex(s[i]) {
				return false
			}
		}
	}
	return true
}

func isHex(b byte) bool {
	return ('0' <= b && b <= '9') || ('a' <= b && b <= 'f')
}
