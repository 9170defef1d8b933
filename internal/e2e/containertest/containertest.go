// Package containertest makes containers for tests out of real kernel
// namespaces and cgroups, shaped as a Kubernetes node with containerd shows
// them to a node agent: each container's main process is pid 1 of its own PID
// namespace, has its own UTS (hostname), mount (/proc remounted, a private
// /tmp) and cgroup namespaces, and sits from its first instruction in
//
//	<cgroup2>/kubepods.slice/kubepods-<qos>.slice/kubepods-<qos>-pod<uid>.slice/cri-containerd-<id>.scope
//
// (Guaranteed pods directly under kubepods.slice). A Pod has a sandbox
// ("pause") container, as kubelet starts one, and its containers' /etc/hostname
// is bind-mounted from the sandbox's folder, as containerd's CRI does: that
// mount is what SDK container detectors read under cgroup v2.
//
// Containers share the host's network namespace, so that they reach a
// collector on loopback. Everything is removed in t.Cleanup, also when the
// test fails.
package containertest // import "github.com/otelcol-ai/otelcol-ai/internal/e2e/containertest"

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
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

	// hostnameFile is bind-mounted on /etc/hostname (set by Pod).
	hostnameFile string
}

// Container is a running container.
type Container struct {
	// ID, PodUID and Hostname are the container's identity.
	ID, PodUID, Hostname string
	// PID is the host's pid of the container's pid 1 (the command itself).
	PID int
	// Cgroup is the container's cgroup as /proc/<pid>/cgroup shows it from
	// the host: "/kubepods.slice/…/cri-containerd-<id>.scope".
	Cgroup string
	// Stdout and Stderr are the files the command writes to.
	Stdout, Stderr string

	cmd  *exec.Cmd
	dir  string // the cgroup's folder
	done chan struct{}
	err  error
}

// Pod is a pod's slice with its sandbox container running.
type Pod struct {
	// UID, QoS and Hostname are the pod's.
	UID, QoS, Hostname string
	// Cgroup is the pod's slice as /proc/<pid>/cgroup shows it.
	Cgroup string
	// Sandbox is the pod's pause container.
	Sandbox *Container

	hostnameFile string
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
// sleeps as the pause process does (its comm is "pause", as kubelet's is).
// Containers started with the pod's Start join it. Skips the test when
// containers cannot be made here.
func StartPod(t testing.TB, uid, qos, hostname string) *Pod {
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
	p := &Pod{UID: uid, QoS: qos, Hostname: hostname, Cgroup: PodSlice(qos, uid)}
	// Unregistered with Cleanup until the slice exists; cleanups run last
	// first, so the slice goes after every container in it.
	root, _ := CgroupRoot()
	if err := makeSlices(t, root, p.Cgroup); err != nil {
		t.Fatal(err)
	}
	sandboxID := NewID()
	// containerd keeps a sandbox's hostname, hosts and resolv.conf in
	// io.containerd.grpc.v1.cri/sandboxes/<sandbox id>/ and bind-mounts
	// them into each of the pod's containers.
	state := filepath.Join(t.TempDir(), "var", "lib", "containerd", "io.containerd.grpc.v1.cri", "sandboxes", sandboxID)
	if err := os.MkdirAll(state, 0o755); err != nil {
		t.Fatal(err)
	}
	p.hostnameFile = filepath.Join(state, "hostname")
	if err := os.WriteFile(p.hostnameFile, []byte(hostname+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	pause, err := pauseBinary()
	if err != nil {
		t.Fatal(err)
	}
	p.Sandbox = start(t, Spec{PodUID: uid, ID: sandboxID, QoS: qos, Hostname: hostname,
		Args: []string{pause, "infinity"}, hostnameFile: p.hostnameFile})
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

// Start starts a container of the pod: spec's PodUID, QoS and Hostname are
// the pod's.
func (p *Pod) Start(t testing.TB, spec Spec) *Container {
	t.Helper()
	spec.PodUID, spec.QoS, spec.Hostname, spec.hostnameFile = p.UID, p.QoS, p.Hostname, p.hostnameFile
	return start(t, spec)
}

// Start starts a container on its own (its pod slice is made if needed, with
// no sandbox). Skips the test when containers cannot be made here.
func Start(t testing.TB, spec Spec) *Container {
	t.Helper()
	if why := Supported(); why != "" {
		t.Skip(why)
	}
	if spec.PodUID == "" {
		spec.PodUID = NewPodUID()
	}
	if spec.QoS == "" {
		spec.QoS = BestEffort
	}
	root, _ := CgroupRoot()
	if err := makeSlices(t, root, PodSlice(spec.QoS, spec.PodUID)); err != nil {
		t.Fatal(err)
	}
	return start(t, spec)
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
// host's view), the pod's hostname file and a private /tmp, sets the
// hostname and execs the command, which so stays pid 1. $0 is the hostname,
// $1 the hostname file ("" for none), $2 the cgroup mounts ("type options
// point" lines), the rest the command.
const shim = `set -e
mount -t proc proc /proc
umount -R -l "${2%%
*}"
printf '%s\n' "${2#*
}" | while read -r type opts point; do
	if [ -n "$type" ]; then mkdir -p "$point"; mount -t "$type" -o "$opts" "$type" "$point"; fi
done
if [ -n "$1" ]; then mount --bind "$1" /etc/hostname; fi
mount -t tmpfs -o mode=1777 tmpfs /tmp
hostname "$0"
shift 2
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
	c := &Container{ID: spec.ID, PodUID: spec.PodUID, Hostname: spec.Hostname,
		Cgroup: PodSlice(spec.QoS, spec.PodUID) + "/" + ScopeName(spec.ID), done: make(chan struct{})}
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
	args := append([]string{"-c", shim, spec.Hostname, spec.hostnameFile, mounts}, spec.Args...)
	c.cmd = exec.Command(sh, args...)
	c.cmd.Dir = spec.Dir
	if c.cmd.Dir == "" {
		c.cmd.Dir = "/"
	}
	c.cmd.Env = append([]string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"HOME=/root", "HOSTNAME=" + spec.Hostname}, spec.Env...)
	c.cmd.Stdin, c.cmd.Stdout, c.cmd.Stderr = spec.Stdin, stdout, stderr
	c.cmd.SysProcAttr = &syscall.SysProcAttr{
		// clone3 with CLONE_INTO_CGROUP: the process is in the scope from
		// its first instruction, and is pid 1 of its new PID namespace.
		Cloneflags:  syscall.CLONE_NEWPID | syscall.CLONE_NEWUTS,
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
