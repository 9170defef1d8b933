// Package containertest makes containers for tests out of real kernel
// namespaces and cgroups, shaped as a Kubernetes node with containerd shows
// them to a node agent: each container's main process is pid 1 of its own PID
// namespace, has its own UTS (hostname), mount (/proc remounted, a private
// /tmp) and cgroup namespaces, and sits from its first instruction in
//
//	<cgroup2>/kubepods.slice/kubepods-<qos>.slice/kubepods-<qos>-pod<uid>.slice/cri-containerd-<id>.scope
//
// (Guaranteed pods directly under kubepods.slice; all under a CgroupParent
// when one is given). A Pod has a sandbox ("pause") container, as kubelet
// starts one, and its containers' /etc/hostname is bind-mounted from the
// sandbox's folder, as containerd's CRI does: that mount is what SDK
// container detectors read under cgroup v2. A pod with its
// own network also gets its /etc/hosts (its name is its IP, as kubelet
// writes it) and an /etc/resolv.conf naming the host's end of its veth,
// where no DNS server listens: a lookup fails at once instead of waiting
// on the node's resolver, which a pod's network cannot reach.
//
// Each pod has its own network namespace, as a CNI plugin gives it: the
// sandbox is made in a new one and the pod's containers join it, so they
// share its loopback, its address and its hostname; a veth pair joins it to
// the host's namespace (the node's, where a DaemonSet agent with hostPorts
// listens), on a /30 of 10.250.0.0/16 picked at random per pod, the pod's
// default route via the host's end. A pod made with HostNetwork, and a
// container started on its own, share the host's network namespace instead.
// Everything is removed in t.Cleanup, also when the test fails; a test
// binary that dies takes its pods' namespaces and veths with it (the
// sandbox dies with it, and with it the last holder of the namespace).
package containertest // import "github.com/otelcol-ai/otelcol-ai/internal/e2etest/containertest"

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// QoS classes, as kubelet names their slices.
const (
	BestEffort = "besteffort"
	Burstable  = "burstable"
	Guaranteed = "guaranteed"
)

// Spec says what to run in a container. Empty fields are filled in: a random
// container id and pod UID, QoS BestEffort, hostname "containertest".
type Spec struct {
	// PodUID is the pod's UID, with dashes (as the API server writes it).
	PodUID string
	// ID is the container id, 64 lower-case hex digits.
	ID string
	// QoS is BestEffort, Burstable or Guaranteed.
	QoS string
	// Hostname is the container's (the pod's) hostname.
	Hostname string
	// Args is the command; Args[0] is looked up in PATH.
	Args []string
	// Env is the container's whole environment besides PATH, HOME and
	// HOSTNAME, as "KEY=value".
	Env []string
	// Dir is the working directory ("/" when empty).
	Dir string
	// Stdin, when set, is the container's standard input.
	Stdin io.Reader
	// Volumes are host folders the container sees at the same paths, as
	// a runtime's volume mounts: those under /tmp stay visible through
	// the container's private /tmp (a checkout or a cache there). At most
	// four, absolute, without white space.
	Volumes []string
	// CgroupParent is as PodSpec's; a Pod's containers get the pod's.
	CgroupParent string

	// podFiles is the sandbox's folder whose hostname, hosts and
	// resolv.conf, those present, are bind-mounted on /etc's (set by Pod).
	podFiles string
	// netNS is the network namespace the container joins ("" for the
	// host's; set by Pod); newNetNS makes it a new one (a sandbox's).
	netNS    string
	newNetNS bool
}

// Container is a running container.
type Container struct {
	// ID, PodUID and Hostname are the container's identity.
	ID, PodUID, Hostname string
	// PID is the host's pid of the container's pid 1 (the command itself).
	PID int
	// Cgroup is the container's cgroup as /proc/<pid>/cgroup shows it from
	// the host: "[<parent>]/kubepods.slice/…/cri-containerd-<id>.scope".
	Cgroup string
	// Stdout and Stderr are the files the command writes to.
	Stdout, Stderr string

	args []string
	cmd  *exec.Cmd
	dir  string // the cgroup's folder
	done chan struct{}
	err  error
}

// PodSpec says what pod to make. Empty fields are filled in: a random UID,
// QoS BestEffort, hostname "containertest".
type PodSpec struct {
	// UID is the pod's UID, with dashes.
	UID string
	// QoS is BestEffort, Burstable or Guaranteed.
	QoS string
	// Hostname is the pod's hostname (its name).
	Hostname string
	// HostNetwork puts the pod in the host's network namespace, as
	// hostNetwork: true does, instead of a network of its own.
	HostNetwork bool
	// CgroupParent is the cgroup, under the cgroup2 root, that holds the
	// pod's kubepods.slice, as kubelet's --cgroup-root does ("" for the
	// root itself): a name of the test's own keeps its slices apart from
	// those of tests running at the same time. It is removed with them.
	CgroupParent string
}

// Pod is a pod's slice with its sandbox container running.
type Pod struct {
	// UID, QoS and Hostname are the pod's.
	UID, QoS, Hostname string
	// Cgroup is the pod's slice as /proc/<pid>/cgroup shows it.
	Cgroup string
	// Sandbox is the pod's pause container.
	Sandbox *Container
	// IP is the pod's address, and HostIP the host's end of its veth: the
	// pod's default gateway, where it reaches an agent of the node. Both
	// are invalid with HostNetwork.
	IP, HostIP netip.Addr
	// HostInterface is the host's end of the pod's veth pair, and NetNS
	// the pod's network namespace (/proc/<sandbox pid>/ns/net); both ""
	// with HostNetwork.
	HostInterface, NetNS string

	podFiles, cgroupParent string
}

// NewID returns a random container id: 64 hex digits.
func NewID() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// NewPodUID returns a random pod UID (a version 4 UUID).
func NewPodUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

// Supported returns why containers cannot be made here, or "" when they can:
// they need root and a cgroup2 mount.
func Supported() string {
	if os.Geteuid() != 0 {
		return "containertest: namespaces and cgroups need root"
	}
	if _, err := CgroupRoot(); err != nil {
		return "containertest: " + err.Error()
	}
	return ""
}

// CgroupRoot returns where the cgroup2 (unified) hierarchy is mounted, from
// /proc/self/mountinfo: /sys/fs/cgroup on a pure v2 host,
// /sys/fs/cgroup/unified on a hybrid one.
func CgroupRoot() (string, error) {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return "", err
	}
	return cgroup2Mount(data)
}

func cgroup2Mount(mountinfo []byte) (string, error) {
	sc := bufio.NewScanner(bytes.NewReader(mountinfo))
	for sc.Scan() {
		// "<id> <parent> <maj:min> <root> <mount point> <options> [optional...] - <fstype> <source> <super options>"
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok {
			continue
		}
		f, g := strings.Fields(pre), strings.Fields(post)
		if len(f) >= 5 && len(g) >= 1 && g[0] == "cgroup2" && f[3] == "/" {
			return unescapeMountinfo(f[4]), nil
		}
	}
	if err := sc.Err(); err != nil {
		return "", err
	}
	return "", errors.New("no cgroup2 mount in /proc/self/mountinfo")
}

// unescapeMountinfo undoes the octal escapes (\040 for a space) of a
// mountinfo path.
func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// PodSlice returns the pod's cgroup path under the cgroup2 root, as the
// systemd cgroup driver names it.
func PodSlice(qos, podUID string) string {
	uid := strings.ReplaceAll(podUID, "-", "_")
	if qos == Guaranteed {
		return "/kubepods.slice/kubepods-pod" + uid + ".slice"
	}
	return "/kubepods.slice/kubepods-" + qos + ".slice/kubepods-" + qos + "-pod" + uid + ".slice"
}

// ScopeName returns the containerd scope of container id.
func ScopeName(id string) string { return "cri-containerd-" + id + ".scope" }

// StartPod makes the slice of a pod and starts its sandbox container, which
// sleeps as the pause process does (its comm is "pause", as kubelet's is),
// in the pod's new network namespace, joined to the host's by a veth pair
// (unless spec.HostNetwork). Containers started with the pod's Start join
// it. Skips the test when containers cannot be made here.
func StartPod(t testing.TB, spec PodSpec) *Pod {
	t.Helper()
	if spec.Hostname == "" {
		spec.Hostname = "containertest"
	}
	// Cleanups run last first: the slice goes after every container in it.
	slice := newPodSlice(t, spec.UID, spec.QoS, spec.CgroupParent)
	uid, qos, hostname, parent := slice.uid, slice.qos, spec.Hostname, slice.parent
	p := &Pod{UID: uid, QoS: qos, Hostname: hostname, Cgroup: slice.cgroup, cgroupParent: parent}
	sandboxID := NewID()
	// containerd keeps a sandbox's hostname, hosts and resolv.conf in
	// io.containerd.grpc.v1.cri/sandboxes/<sandbox id>/ and bind-mounts
	// them into each of the pod's containers.
	state := filepath.Join(t.TempDir(), "var", "lib", "containerd", "io.containerd.grpc.v1.cri", "sandboxes", sandboxID)
	if err := os.MkdirAll(state, 0o755); err != nil {
		t.Fatal(err)
	}
	p.podFiles = state
	if err := os.WriteFile(filepath.Join(state, "hostname"), []byte(hostname+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	pause, err := pauseBinary()
	if err != nil {
		t.Fatal(err)
	}
	p.Sandbox = start(t, Spec{PodUID: uid, ID: sandboxID, QoS: qos, Hostname: hostname,
		Args: []string{pause, "infinity"}, CgroupParent: parent, podFiles: p.podFiles, newNetNS: !spec.HostNetwork})
	if !spec.HostNetwork {
		p.NetNS = fmt.Sprintf("/proc/%d/ns/net", p.Sandbox.PID)
		if err := attachNetwork(t, p); err != nil {
			t.Fatal(err)
		}
		if err := writeResolverFiles(state, p); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

// pauseBinary returns a link named pause to sleep, outside /tmp (which each
// container gets empty): the link's name becomes the process's comm, which
// is how a node agent tells a pod's sandbox process.
func pauseBinary() (string, error) {
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		return "", err
	}
	dir, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	dir = filepath.Join(dir, "otelcol-ai-containertest")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	link := filepath.Join(dir, "pause")
	if target, err := os.Readlink(link); err == nil && target == sleep {
		return link, nil
	}
	tmp := fmt.Sprintf("%s.%d", link, os.Getpid())
	_ = os.Remove(tmp)
	if err := os.Symlink(sleep, tmp); err != nil {
		return "", err
	}
	return link, os.Rename(tmp, link)
}

// Start starts a container of the pod: spec's PodUID, QoS, Hostname and
// CgroupParent are the pod's.
func (p *Pod) Start(t testing.TB, spec Spec) *Container {
	t.Helper()
	spec.PodUID, spec.QoS, spec.Hostname, spec.podFiles = p.UID, p.QoS, p.Hostname, p.podFiles
	spec.CgroupParent = p.cgroupParent
	spec.netNS, spec.newNetNS = p.NetNS, false
	return start(t, spec)
}

// Start starts a container on its own (its pod slice is made if needed, with
// no sandbox), in the host's network namespace. Skips the test when
// containers cannot be made here.
func Start(t testing.TB, spec Spec) *Container {
	t.Helper()
	slice := newPodSlice(t, spec.PodUID, spec.QoS, spec.CgroupParent)
	spec.PodUID, spec.QoS, spec.CgroupParent = slice.uid, slice.qos, slice.parent
	return start(t, spec)
}

// podSlice is a pod's cgroup: its UID and QoS class, the cgroup parent
// it is under ("" for the root) and its path.
type podSlice struct{ uid, qos, parent, cgroup string }

// newPodSlice skips the test when containers cannot be made here, gives the
// pod its defaults (a new UID, BestEffort) and a clean cgroup parent, and
// makes its slice, removed when the test ends.
func newPodSlice(t testing.TB, uid, qos, parent string) podSlice {
	t.Helper()
	if why := Supported(); why != "" {
		t.Skip(why)
	}
	if uid == "" {
		uid = NewPodUID()
	}
	if qos == "" {
		qos = BestEffort
	}
	parent = cleanCgroupParent(parent)
	slice := podSlice{uid: uid, qos: qos, parent: parent, cgroup: parent + PodSlice(qos, uid)}
	root, _ := CgroupRoot()
	if err := makeSlices(t, root, slice.cgroup); err != nil {
		t.Fatal(err)
	}
	return slice
}

// cleanCgroupParent returns parent as a cgroup path ("/a/b", no "..": it
// stays under the root), or "" for the root.
func cleanCgroupParent(parent string) string {
	if parent = filepath.Clean("/" + parent); parent == "/" {
		return ""
	}
	return parent
}

// makeSlices creates each missing folder of path under root and registers
// their removal, deepest first, for when the test ends. A slice another test
// still uses (not empty) is left.
func makeSlices(t testing.TB, root, path string) error {
	t.Helper()
	dir := root
	for _, seg := range strings.Split(strings.Trim(path, "/"), "/") {
		dir = filepath.Join(dir, seg)
		err := os.Mkdir(dir, 0o755)
		if errors.Is(err, os.ErrExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("containertest: cgroup %s: %w", dir, err)
		}
		made := dir
		t.Cleanup(func() { removeCgroup(t, made) })
	}
	return nil
}

// removeCgroup removes an empty cgroup folder, retrying briefly: the kernel
// drops a reaped process from cgroup.procs a moment after wait returns.
func removeCgroup(t testing.TB, dir string) {
	var err error
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if err = syscall.Rmdir(dir); err == nil || errors.Is(err, syscall.ENOENT) {
			return
		}
		if !errors.Is(err, syscall.EBUSY) {
			break
		}
		if children, _ := os.ReadDir(dir); hasSubdir(children) {
			return // a slice still holding another test's pods
		}
	}
	t.Errorf("containertest: remove cgroup %s: %v", dir, err)
}

func hasSubdir(entries []os.DirEntry) bool {
	for _, e := range entries {
		if e.IsDir() {
			return true
		}
	}
	return false
}

// shim runs as the container's pid 1 before the command: it mounts the
// container's /proc, its cgroup hierarchies (seen from its cgroup namespace,
// as a runtime mounts them: a JVM reads its limits there and fails on the
// host's view), the pod's hostname, hosts and resolv.conf files and a
// private /tmp (with the volumes under /tmp bound back in: each opened
// before the tmpfs hides it and bound from its descriptor), sets the
// hostname and execs the command, which so stays pid 1. $0 is the hostname,
// $1 the pod's folder of those files ("" for none), $2 the cgroup mounts ("type options
// point" lines), $3 the volumes (space-separated), the rest the command.
const shim = `set -e
mount -t proc proc /proc
umount -R -l "${2%%
*}"
printf '%s\n' "${2#*
}" | while read -r type opts point; do
	if [ -n "$type" ]; then mkdir -p "$point"; mount -t "$type" -o "$opts" "$type" "$point"; fi
done
for f in hostname hosts resolv.conf; do
	if [ -n "$1" ] && [ -e "$1/$f" ]; then mount --bind "$1/$f" "/etc/$f"; fi
done
i=9
for v in $3; do
	case "$v" in /tmp/*) eval "exec $i<\"\$v\""; i=$((i-1));; esac
done
mount -t tmpfs -o mode=1777 tmpfs /tmp
i=9
for v in $3; do
	case "$v" in /tmp/*) mkdir -p "$v"; mount --no-canonicalize --bind "/proc/self/fd/$i" "$v"; eval "exec $i<&-"; i=$((i-1));; esac
done
hostname "$0"
shift 3
exec "$@"`

// cgroupMounts lists the host's cgroup hierarchies (v1 and v2) as the
// shim's lines: first the folder that holds them, which the shim unmounts
// (the host's mounts would show through the namespace as "/../.." roots,
// which the JDK trips on), then "type options point" lines, the first a
// tmpfs on that folder: a fresh /sys/fs/cgroup, as a runtime gives it.
func cgroupMounts() (string, error) {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return "", err
	}
	var b strings.Builder
	top, err := CgroupRoot()
	if err != nil {
		return "", err
	}
	if filepath.Base(top) == "unified" {
		top = filepath.Dir(top) // hybrid: v1 hierarchies beside it
	}
	fmt.Fprintf(&b, "%s\ntmpfs mode=755 %s\n", top, top)
	for _, line := range strings.Split(string(data), "\n") {
		pre, post, ok := strings.Cut(line, " - ")
		if !ok {
			continue
		}
		f, g := strings.Fields(pre), strings.Fields(post)
		if len(f) < 5 || len(g) < 3 || (g[0] != "cgroup" && g[0] != "cgroup2") || f[3] != "/" ||
			strings.ContainsAny(f[4], "\\ ") || (f[4] != top && !strings.HasPrefix(f[4], top+"/")) {
			continue
		}
		fmt.Fprintf(&b, "%s %s %s\n", g[0], g[2], f[4])
	}
	return b.String(), nil
}

func start(t testing.TB, spec Spec) *Container {
	t.Helper()
	if len(spec.Args) == 0 {
		t.Fatal("containertest: no command")
	}
	if spec.ID == "" {
		spec.ID = NewID()
	}
	if spec.Hostname == "" {
		spec.Hostname = "containertest"
	}
	root, err := CgroupRoot()
	if err != nil {
		t.Fatal(err)
	}
	c := &Container{ID: spec.ID, PodUID: spec.PodUID, Hostname: spec.Hostname, args: spec.Args,
		Cgroup: spec.CgroupParent + PodSlice(spec.QoS, spec.PodUID) + "/" + ScopeName(spec.ID), done: make(chan struct{})}
	c.dir = filepath.Join(root, c.Cgroup)
	if err := os.Mkdir(c.dir, 0o755); err != nil {
		t.Fatalf("containertest: cgroup %s: %v", c.dir, err)
	}
	t.Cleanup(func() { removeCgroup(t, c.dir) })
	cgroupFD, err := syscall.Open(c.dir, syscall.O_DIRECTORY|syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		t.Fatalf("containertest: open cgroup %s: %v", c.dir, err)
	}
	defer syscall.Close(cgroupFD)

	logs := t.TempDir()
	c.Stdout, c.Stderr = filepath.Join(logs, "stdout"), filepath.Join(logs, "stderr")
	stdout, err := os.Create(c.Stdout)
	if err != nil {
		t.Fatal(err)
	}
	defer stdout.Close()
	stderr, err := os.Create(c.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	defer stderr.Close()

	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Fatal(err)
	}
	mounts, err := cgroupMounts()
	if err != nil {
		t.Fatal(err)
	}
	if len(spec.Volumes) > 4 {
		t.Fatalf("containertest: %d volumes, at most 4", len(spec.Volumes))
	}
	for _, v := range spec.Volumes {
		if !filepath.IsAbs(v) || strings.ContainsAny(v, " \t\n") {
			t.Fatalf("containertest: volume %q: an absolute path without white space", v)
		}
	}
	args := append([]string{sh, "-c", shim, spec.Hostname, spec.podFiles, mounts, strings.Join(spec.Volumes, " ")}, spec.Args...)
	if spec.netNS != "" {
		// nsenter joins the pod's network namespace and execs the shim
		// without forking (no --pid): the shim stays pid 1. The host's
		// /proc is still mounted here, where the sandbox's pid names it.
		nsenter, err := exec.LookPath("nsenter")
		if err != nil {
			t.Fatal(err)
		}
		args = append([]string{nsenter, "--net=" + spec.netNS, "--"}, args...)
	}
	c.cmd = exec.Command(args[0], args[1:]...)
	c.cmd.Dir = spec.Dir
	if c.cmd.Dir == "" {
		c.cmd.Dir = "/"
	}
	c.cmd.Env = append([]string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"HOME=/root", "HOSTNAME=" + spec.Hostname}, spec.Env...)
	c.cmd.Stdin, c.cmd.Stdout, c.cmd.Stderr = spec.Stdin, stdout, stderr
	cloneflags := uintptr(syscall.CLONE_NEWPID | syscall.CLONE_NEWUTS)
	if spec.newNetNS {
		cloneflags |= syscall.CLONE_NEWNET
	}
	c.cmd.SysProcAttr = &syscall.SysProcAttr{
		// clone3 with CLONE_INTO_CGROUP: the process is in the scope from
		// its first instruction, and is pid 1 of its new PID namespace
		// (and, for a sandbox, the first of its pod's network namespace).
		Cloneflags:  cloneflags,
		UseCgroupFD: true,
		CgroupFD:    cgroupFD,
		// Unshared in the child, once it is in the scope: the cgroup
		// namespace is rooted there, as containerd makes it on cgroup v2
		// (the process sees "0::/"). For CLONE_NEWNS Go also makes /
		// private, so the shim's mounts stay inside the container.
		Unshareflags: syscall.CLONE_NEWNS | syscall.CLONE_NEWCGROUP,
		// A test binary that dies leaves no container behind; the kernel
		// then kills the rest of its PID namespace.
		Pdeathsig: syscall.SIGKILL,
	}
	if err := c.cmd.Start(); err != nil {
		t.Fatalf("containertest: start %v: %v", spec.Args, err)
	}
	c.PID = c.cmd.Process.Pid
	go func() {
		c.err = c.cmd.Wait()
		close(c.done)
	}()
	t.Cleanup(func() {
		c.Kill()
		if t.Failed() {
			t.Logf("container %s (%s, host pid %d) stdout:\n%s\nstderr:\n%s", spec.Hostname, c.ID[:12], c.PID, tailOf(c.Stdout), tailOf(c.Stderr))
		}
	})
	return c
}

// Exited reports whether the container's pid 1 has ended.
func (c *Container) Exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// WaitExec waits up to timeout until pid 1 runs the command, once the shim
// has set the container up and exec'd it: from then on its comm and
// executable are the command's, as a node agent reads them (a sandbox is
// told by its comm "pause"). The command is known by its command line, the
// Args, until it rewrites it; one that exits first is an error.
func (c *Container) WaitExec(timeout time.Duration) error {
	want := strings.Join(c.args, "\x00") + "\x00"
	for deadline := time.Now().Add(timeout); ; time.Sleep(time.Millisecond) {
		if c.Exited() {
			return fmt.Errorf("containertest: %s (host pid %d) exited before running %v: %w", c.Hostname, c.PID, c.args, c.err)
		}
		if cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", c.PID)); err == nil && string(cmdline) == want {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("containertest: %s (host pid %d) not running %v after %s", c.Hostname, c.PID, c.args, timeout)
		}
	}
}

// Wait waits up to timeout for pid 1 to exit by itself and returns how it
// exited (nil: status 0).
func (c *Container) Wait(timeout time.Duration) error {
	select {
	case <-c.done:
		return c.err
	case <-time.After(timeout):
		return fmt.Errorf("containertest: %s (host pid %d) still running after %s", c.Hostname, c.PID, timeout)
	}
}

// Stop sends SIGTERM to pid 1 (which, as any init, must handle it) and waits
// up to timeout, then kills it. It returns how it exited.
func (c *Container) Stop(timeout time.Duration) error {
	if !c.Exited() {
		_ = c.cmd.Process.Signal(syscall.SIGTERM)
	}
	if err := c.Wait(timeout); err == nil || c.Exited() {
		return err
	}
	c.Kill()
	return fmt.Errorf("containertest: %s (host pid %d) ignored SIGTERM for %s", c.Hostname, c.PID, timeout)
}

// Kill kills pid 1, which takes every process of its PID namespace with it,
// and reaps it.
func (c *Container) Kill() {
	if !c.Exited() {
		_ = c.cmd.Process.Kill()
	}
	<-c.done
}

func tailOf(path string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	if len(data) > 4000 {
		data = data[len(data)-4000:]
	}
	return string(data)
}

// podNetworks is where pods get their /30s: a range for tests, which a node
// of a cluster does not route.
var podNetworks = netip.MustParsePrefix("10.250.0.0/16")

// attachNetwork joins the pod's network namespace to the host's, as a CNI
// plugin does: a veth pair, the host's end (named for the pod's /30, so
// that two runs picking one /30 at once collide on the name) in the host's
// namespace with the /30's first address, the pod's end as eth0 with the
// second, lo up, the default route via the host's end. The veth is
// deleted in t.Cleanup (deleting one end deletes both); the namespace goes
// with the sandbox.
func attachNetwork(t testing.TB, p *Pod) error {
	t.Helper()
	ip, err := exec.LookPath("ip")
	if err != nil {
		return fmt.Errorf("containertest: pod network: %w", err)
	}
	nsenter, err := exec.LookPath("nsenter")
	if err != nil {
		return fmt.Errorf("containertest: pod network: %w", err)
	}
	used, err := hostPrefixes(ip)
	if err != nil {
		return err
	}
	blocks := 1 << (30 - podNetworks.Bits())
	for range 32 {
		var r [2]byte
		_, _ = rand.Read(r[:])
		block := (int(r[0])<<8 | int(r[1])) % blocks
		subnet := blockPrefix(podNetworks, block)
		if overlapsAny(subnet, used) {
			continue
		}
		name := fmt.Sprintf("oaiv%04x", block)
		out, err := exec.Command(ip, "link", "add", name, "type", "veth",
			"peer", "name", "eth0", "netns", strconv.Itoa(p.Sandbox.PID)).CombinedOutput()
		if err != nil {
			if bytes.Contains(out, []byte("File exists")) {
				continue
			}
			return fmt.Errorf("containertest: ip link add %s: %w: %s", name, err, bytes.TrimSpace(out))
		}
		t.Cleanup(func() {
			if out, err := exec.Command(ip, "link", "del", name).CombinedOutput(); err != nil && !bytes.Contains(out, []byte("Cannot find device")) {
				t.Errorf("containertest: ip link del %s: %v: %s", name, err, bytes.TrimSpace(out))
			}
		})
		p.HostInterface = name
		p.HostIP = subnet.Addr().Next()
		p.IP = p.HostIP.Next()
		host := fmt.Sprintf("addr add %s/30 dev %s\nlink set %s up\n", p.HostIP, name, name)
		pod := fmt.Sprintf("link set lo up\naddr add %s/30 dev eth0\nlink set eth0 up\nroute add default via %s\n", p.IP, p.HostIP)
		if err := ipBatch(exec.Command(ip, "-batch", "-"), host); err != nil {
			return err
		}
		return ipBatch(exec.Command(nsenter, "--net="+p.NetNS, ip, "-batch", "-"), pod)
	}
	return fmt.Errorf("containertest: no free /30 in %s after 32 tries (host's prefixes %v)", podNetworks, used)
}

// writeResolverFiles writes the hosts and resolv.conf of a pod with its own
// network into its sandbox's folder (dir).
func writeResolverFiles(dir string, p *Pod) error {
	hosts := fmt.Sprintf("# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n%s\t%s\n", p.IP, p.Hostname)
	if err := os.WriteFile(filepath.Join(dir, "hosts"), []byte(hosts), 0o644); err != nil {
		return fmt.Errorf("containertest: pod hosts: %w", err)
	}
	resolv := fmt.Sprintf("nameserver %s\noptions timeout:1 attempts:1\n", p.HostIP)
	if err := os.WriteFile(filepath.Join(dir, "resolv.conf"), []byte(resolv), 0o644); err != nil {
		return fmt.Errorf("containertest: pod resolv.conf: %w", err)
	}
	return nil
}

// ipBatch runs an `ip -batch -` command with the given lines.
func ipBatch(cmd *exec.Cmd, lines string) error {
	cmd.Stdin = strings.NewReader(lines)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("containertest: %v <<%q: %w: %s", cmd.Args, lines, err, bytes.TrimSpace(out))
	}
	return nil
}

// blockPrefix returns the n-th /30 of within.
func blockPrefix(within netip.Prefix, n int) netip.Prefix {
	a := within.Addr().As4()
	base := uint32(a[0])<<24 | uint32(a[1])<<16 | uint32(a[2])<<8 | uint32(a[3])
	base += uint32(n) << 2
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{byte(base >> 24), byte(base >> 16), byte(base >> 8), byte(base)}), 30)
}

// overlapsAny: an address or route of the host at least as specific as
// podNetworks lies in subnet (a broader route, such as a cluster's /8, is
// no conflict: the /30 is more specific).
func overlapsAny(subnet netip.Prefix, used []netip.Prefix) bool {
	for _, u := range used {
		if u.Bits() >= podNetworks.Bits() && u.Overlaps(subnet) {
			return true
		}
	}
	return false
}

// hostPrefixes lists the IPv4 addresses (as their prefixes) and route
// destinations of the host's network namespace.
func hostPrefixes(ip string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	addrs, err := exec.Command(ip, "-o", "-4", "addr", "show").Output()
	if err != nil {
		return nil, fmt.Errorf("containertest: ip addr show: %w", err)
	}
	for _, line := range strings.Split(string(addrs), "\n") {
		// "4: eth0    inet 192.0.2.2/24 brd ..."
		f := strings.Fields(line)
		for i := 0; i+1 < len(f); i++ {
			if f[i] == "inet" {
				if p, err := netip.ParsePrefix(f[i+1]); err == nil {
					out = append(out, p)
				}
			}
		}
	}
	routes, err := exec.Command(ip, "-o", "-4", "route", "show", "table", "all").Output()
	if err != nil {
		return nil, fmt.Errorf("containertest: ip route show: %w", err)
	}
	for _, line := range strings.Split(string(routes), "\n") {
		// "[type] <dst> ...": "192.0.2.0/24 dev eth0", "local 127.0.0.1 dev lo table local"
		f := strings.Fields(line)
		for i := 0; i < len(f) && i < 2; i++ {
			if p, err := netip.ParsePrefix(f[i]); err == nil {
				out = append(out, p)
				break
			}
			if a, err := netip.ParseAddr(f[i]); err == nil {
				out = append(out, netip.PrefixFrom(a, a.BitLen()))
				break
			}
		}
	}
	return out, nil
}
