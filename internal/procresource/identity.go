package procresource

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"syscall"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"golang.org/x/sys/unix"

	"github.com/otelcol-ai/otelcol-ai/internal/procroot"
	"github.com/otelcol-ai/otelcol-ai/internal/window"
)

// Identity names one process as the node sees it and as it sees itself.
type Identity struct {
	PID         int    // host pid (the proc root's pid namespace)
	VPID        int    // innermost NSpid (== PID outside a pid namespace)
	StartTicks  uint64 // /proc/<pid>/stat field 22; with PID, survives pid reuse
	ContainerID string // "" outside a container
	PodUID      string // "" outside a pod
}

// Identity returns the identity part of r.
func (r Resource) Identity() Identity {
	return Identity{PID: r.PID, VPID: r.VPID, StartTicks: r.StartTicks, ContainerID: r.Container.ID, PodUID: r.Container.PodUID}
}

// Node is the node's identity.
type Node struct{ HostName, K8sNodeName string }

// EnvNodeName is the variable the Helm chart fills with the node's name from
// the downward API (spec.nodeName).
const EnvNodeName = "K8S_NODE_NAME"

// LocalNode returns the identity of the node the collector runs on:
// K8S_NODE_NAME when it is set (in a pod, os.Hostname would be the agent
// pod's name, which no span carries), else os.Hostname() (a bare host).
func LocalNode() Node {
	return nodeFrom(os.Getenv(EnvNodeName), os.Hostname)
}

func nodeFrom(k8sNodeName string, hostname func() (string, error)) Node {
	if k8sNodeName != "" {
		return Node{HostName: k8sNodeName, K8sNodeName: k8sNodeName}
	}
	h, err := hostname()
	if err != nil {
		return Node{}
	}
	return Node{HostName: h}
}

// IdentitySetter receives the identity attributes. An mdatagen
// ResourceBuilder with these resource attributes declared satisfies it, so
// a receiver whose resources are generated keeps their enabled switches.
type IdentitySetter interface {
	SetHostName(string)
	SetK8sNodeName(string)
	SetProcessPid(int64)
	SetProcessVpid(int64)
	SetContainerID(string)
	SetK8sPodUID(string)
}

// SetIdentity hands s every identity attribute that is known: host.name and
// k8s.node.name from node, process.pid and process.vpid when positive,
// container.id and k8s.pod.uid when not empty. A zero Identity names only
// the node.
func SetIdentity(s IdentitySetter, id Identity, node Node) {
	if node.HostName != "" {
		s.SetHostName(node.HostName)
	}
	if node.K8sNodeName != "" {
		s.SetK8sNodeName(node.K8sNodeName)
	}
	if id.PID > 0 {
		s.SetProcessPid(int64(id.PID))
	}
	if id.VPID > 0 {
		s.SetProcessVpid(int64(id.VPID))
	}
	if id.ContainerID != "" {
		s.SetContainerID(id.ContainerID)
	}
	if id.PodUID != "" {
		s.SetK8sPodUID(id.PodUID)
	}
}

// PutIdentity writes the identity attributes (see SetIdentity) onto a
// resource's attributes.
func PutIdentity(attrs pcommon.Map, id Identity, node Node) {
	SetIdentity(mapSetter{attrs}, id, node)
}

type mapSetter struct{ m pcommon.Map }

func (s mapSetter) SetHostName(v string)    { s.m.PutStr(window.ResourceHostName, v) }
func (s mapSetter) SetK8sNodeName(v string) { s.m.PutStr(window.ResourceNodeName, v) }
func (s mapSetter) SetProcessPid(v int64)   { s.m.PutInt(window.ResourcePID, v) }
func (s mapSetter) SetProcessVpid(v int64)  { s.m.PutInt(window.ResourceVPID, v) }
func (s mapSetter) SetContainerID(v string) { s.m.PutStr(window.ResourceContainerID, v) }
func (s mapSetter) SetK8sPodUID(v string)   { s.m.PutStr(window.ResourceK8sPodUID, v) }

// Identity reads pid's identity: start ticks, NSpid and cgroup, all from
// one process even if the pid is reused meanwhile. It fails with
// ErrNoProcess (wrapped) when the process is gone; a status or cgroup file
// that cannot be read or parsed leaves VPID, or the container and pod,
// unknown.
func (r *Reader) Identity(pid int) (Identity, error) {
	id, _, err := r.IdentityWithCgroup(pid)
	return id, err
}

// CgroupFile is a process's /proc/<pid>/cgroup as one read of its
// identity found it.
type CgroupFile struct {
	Data []byte // the file, capped; nil when it could not be read
	Err  error  // why it could not be read: the container and pod are unknown then
}

// IdentityWithCgroup is Identity, and also returns the cgroup file the
// container and pod were read from (the same process's), for a caller
// that looks at more of the membership than they name.
func (r *Reader) IdentityWithCgroup(pid int) (Identity, CgroupFile, error) {
	s := newScratch()
	p, err := r.readProcess(unix.AT_FDCWD, filepath.Join(r.root, strconv.Itoa(pid)), pid, &s, nil)
	if err != nil {
		return Identity{}, CgroupFile{}, err
	}
	if p.cgroupErr != nil {
		return p.id, CgroupFile{Err: p.cgroupErr}, nil
	}
	return p.id, CgroupFile{Data: s.cgroup}, nil
}

// Caps on the identity files beyond those of Resolve.
const (
	// maxStatus: about 1.5 KiB; its CPU and memory-node masks grow with
	// the machine.
	maxStatus = 64 << 10
)

// scratch holds the buffers one goroutine reuses to read many processes.
type scratch struct{ stat, status, cgroup []byte }

// newScratch returns buffers sized for the usual files (a stat line of a
// few hundred bytes, a status of about 1.5 KiB); a longer file grows its
// buffer, up to the file's cap.
func newScratch() scratch {
	return scratch{stat: make([]byte, 0, 1024), status: make([]byte, 0, 4096), cgroup: make([]byte, 0, 1024)}
}

// processRead is what one read of a /proc/<pid> directory says.
type processRead struct {
	id        Identity
	container Container
	// pause: the process's comm is "pause", the sandbox binary every
	// Kubernetes runtime starts first in a pod.
	pause bool
	// statusErr and cgroupErr say why VPID or the container is unknown.
	statusErr, cgroupErr error
}

// readProcess reads the process directory name (relative to dirfd) through
// one descriptor: once a process has exited, reads through its directory
// fail, even when a new process has its pid, so stat, status and cgroup
// always describe one process. known, when not nil, is the identity last
// read for this pid with a VPID: when its start ticks still match, status
// (which cannot change) is not read again, only the cgroup (a process can
// be moved).
func (r *Reader) readProcess(dirfd int, name string, pid int, s *scratch, known *Identity) (processRead, error) {
	// Followed if a link, as a path would be: a test's proc root may link
	// a pid to the real /proc entry.
	dir, err := procroot.Openat(dirfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return processRead{}, r.processError(pid, "open", err)
	}
	defer unix.Close(dir)

	s.stat, err = procroot.ReadProcFileAt(dir, "stat", s.stat, maxStat)
	if err != nil {
		return processRead{}, r.processError(pid, "stat", err)
	}
	st, err := ParseStat(s.stat)
	if err != nil {
		return processRead{}, fmt.Errorf("procresource: pid %d stat: %w", pid, err)
	}
	start := st.StartTicks
	p := processRead{id: Identity{PID: pid, StartTicks: start}, pause: string(st.Comm) == "pause"}

	if known != nil && known.StartTicks == start && known.VPID > 0 {
		p.id.VPID = known.VPID
	} else if s.status, err = procroot.ReadProcFileAt(dir, "status", s.status, maxStatus); err != nil {
		if gone(err) && exited(dir) {
			return processRead{}, r.processError(pid, "status", err)
		}
		p.statusErr = fmt.Errorf("procresource: pid %d status: %w", pid, err)
	} else if vpid, ok := parseNSpid(s.status); ok {
		p.id.VPID = vpid
	} else {
		p.statusErr = fmt.Errorf("procresource: pid %d status: no NSpid line", pid)
	}

	if s.cgroup, err = procroot.ReadProcFileAt(dir, "cgroup", s.cgroup, maxCgroup); err != nil {
		if gone(err) && exited(dir) {
			return processRead{}, r.processError(pid, "cgroup", err)
		}
		p.cgroupErr = fmt.Errorf("procresource: pid %d cgroup: %w", pid, err)
	} else {
		p.container = ParseCgroup(s.cgroup)
		p.id.ContainerID, p.id.PodUID = p.container.ID, p.container.PodUID
	}
	return p, nil
}

// exited tells a process that exited while its directory was read from a
// file that is simply missing (a proc tree that is not the kernel's): the
// directory of an exited process has no stat either.
func exited(dir int) bool {
	var st unix.Stat_t
	return gone(unix.Fstatat(dir, "stat", &st, unix.AT_SYMLINK_NOFOLLOW))
}

// gone reports whether err says the process no longer exists: its
// directory's files vanish (ENOENT) or refuse reads (ESRCH) once it exits.
func gone(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ESRCH)
}

func (r *Reader) processError(pid int, what string, err error) error {
	if gone(err) {
		return fmt.Errorf("procresource: pid %d under %s: %w", pid, r.root, ErrNoProcess)
	}
	return fmt.Errorf("procresource: pid %d %s: %w", pid, what, err)
}

// parseNSpid returns the last pid of the status file's NSpid line: the
// process's pid in its own (innermost) pid namespace.
func parseNSpid(status []byte) (int, bool) {
	line, ok := StatusField(status, "NSpid")
	if !ok {
		return 0, false
	}
	field := line[bytes.LastIndexAny(line, " \t")+1:]
	v, ok := parseDecimal(field)
	if !ok || v == 0 || v > 1<<31-1 {
		return 0, false
	}
	return int(v), true
}
