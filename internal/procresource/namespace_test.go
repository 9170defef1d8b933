package procresource

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// These tests make "containers" from real kernel namespaces: a process in
// its own pid, UTS and mount namespaces, born (clone3 CLONE_INTO_CGROUP, as
// runc places a container's init) into a cgroup named as kubelet and
// containerd name them, under the unified hierarchy. They need root.

// cgroup2Root returns where the unified hierarchy is mounted, or skips.
func cgroup2Root(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to make namespaces and cgroups")
	}
	f, err := os.Open("/proc/self/mountinfo")
	require.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// ... mount-point ... - fstype source options
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok || !strings.HasPrefix(post, "cgroup2 ") {
			continue
		}
		if fields := strings.Fields(pre); len(fields) >= 5 {
			return fields[4]
		}
	}
	t.Skip("no cgroup2 hierarchy mounted")
	return ""
}

func randomHex(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, n/2)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return hex.EncodeToString(b)
}

func randomPodUID(t *testing.T) string {
	h := randomHex(t, 32)
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// testPod is a pod slice made by a test: kubepods.slice/kubepods-besteffort.
// slice/kubepods-besteffort-pod<uid>.slice, under a top cgroup of the test's
// own so that concurrent tests never share a directory.
type testPod struct {
	uid string
	dir string
}

func newTestPod(t *testing.T) testPod {
	root := cgroup2Root(t)
	uid := randomPodUID(t)
	top := filepath.Join(root, "otelcol-ai-procresource-"+randomHex(t, 8))
	dir := filepath.Join(top, "kubepods.slice", "kubepods-besteffort.slice",
		"kubepods-besteffort-pod"+strings.ReplaceAll(uid, "-", "_")+".slice")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	t.Cleanup(func() { removeCgroups(t, top) })
	return testPod{uid: uid, dir: dir}
}

// removeCgroups removes a cgroup tree, leaves first; its processes have
// exited by then (cleanups run in reverse order).
func removeCgroups(t *testing.T, top string) {
	var dirs []string
	_ = filepath.WalkDir(top, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	for i := len(dirs) - 1; i >= 0; i-- {
		if err := unix.Rmdir(dirs[i]); err != nil {
			t.Errorf("remove cgroup %s: %v", dirs[i], err)
		}
	}
}

// startContainer starts program (sleep, or a link to it named as the
// process should be named) as pid 1 of new pid, UTS and mount namespaces in
// the pod's scope cri-containerd-<id>.scope. The process is killed and
// reaped when the test ends.
func startContainer(t *testing.T, pod testPod, id, program string) *exec.Cmd {
	t.Helper()
	scope := filepath.Join(pod.dir, "cri-containerd-"+id+".scope")
	require.NoError(t, os.Mkdir(scope, 0o755))
	cg, err := unix.Open(scope, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	require.NoError(t, err)
	defer unix.Close(cg)
	cmd := exec.Command(program, "30")
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWPID | syscall.CLONE_NEWUTS | syscall.CLONE_NEWNS,
		UseCgroupFD: true,
		CgroupFD:    cg,
		Pdeathsig:   syscall.SIGKILL,
	}
	require.NoError(t, cmd.Start(), "start %s in %s", program, scope)
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	// The child is in the cgroup from its first instruction; wait for it to
	// have exec'd, so that comm is the program's.
	want := filepath.Base(program)
	deadline := time.Now().Add(2 * time.Second)
	for {
		comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", cmd.Process.Pid))
		if err == nil && strings.TrimSpace(string(comm)) == want {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("pid %d never became %s", cmd.Process.Pid, want)
		}
		time.Sleep(time.Millisecond)
	}
	return cmd
}

func sleepPath(t *testing.T) string {
	p, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip("no sleep binary")
	}
	return p
}

// pausePath returns a link to sleep named pause: its process's comm is
// "pause", as a Kubernetes sandbox's is.
func pausePath(t *testing.T) string {
	p := filepath.Join(t.TempDir(), "pause")
	require.NoError(t, os.Symlink(sleepPath(t), p))
	return p
}

func TestRealContainerIdentity(t *testing.T) {
	pod := newTestPod(t)
	id := randomHex(t, 64)
	cmd := startContainer(t, pod, id, sleepPath(t))
	pid := cmd.Process.Pid

	r := NewReader("", 0)
	got, err := r.Identity(pid)
	require.NoError(t, err)
	start, err := r.StartTicks(pid)
	require.NoError(t, err)
	assert.Equal(t, Identity{PID: pid, VPID: 1, StartTicks: start, ContainerID: id, PodUID: pod.uid}, got)

	x := NewIndex(r, time.Second)
	byContainer, ok := x.ByContainer(id, 1)
	assert.True(t, ok)
	assert.Equal(t, got, byContainer)
	assert.Equal(t, []Identity{got}, x.ByPod(pod.uid, 1))
	byPID, ok := x.ByHostPID(pid)
	assert.True(t, ok)
	assert.Equal(t, got, byPID)
	_, ok = x.ByContainer(id, pid)
	assert.False(t, ok, "the container's process is pid 1 inside, not its host pid")

	self, ok := x.ByHostPID(os.Getpid())
	require.True(t, ok)
	assert.Equal(t, os.Getpid(), self.VPID, "the test runs in the host's pid namespace")
}

// TestRealPodTwoContainersAndSandbox: a pod with a pause sandbox and two
// app containers, all three pid 1 of their own pid namespaces.
func TestRealPodTwoContainersAndSandbox(t *testing.T) {
	pod := newTestPod(t)
	sandbox, a, b := randomHex(t, 64), randomHex(t, 64), randomHex(t, 64)
	pause := startContainer(t, pod, sandbox, pausePath(t))
	cmdA := startContainer(t, pod, a, sleepPath(t))
	cmdB := startContainer(t, pod, b, sleepPath(t))

	r := NewReader("", 0)
	identity := func(cmd *exec.Cmd) Identity {
		id, err := r.Identity(cmd.Process.Pid)
		require.NoError(t, err)
		require.Equal(t, 1, id.VPID)
		return id
	}
	idA, idB := identity(cmdA), identity(cmdB)
	identity(pause)
	x := NewIndex(r, time.Millisecond)

	got, ok := x.ByContainer(a, 1)
	assert.True(t, ok)
	assert.Equal(t, idA, got)
	got, ok = x.ByContainer(b, 1)
	assert.True(t, ok)
	assert.Equal(t, idB, got)
	assert.ElementsMatch(t, []Identity{idA, idB}, x.ByPod(pod.uid, 1), "both pid 1 of the pod, the sandbox's not among them")
	_, ok = x.ByContainer(sandbox, 1)
	assert.False(t, ok, "the sandbox's id with pid 1 names two processes: not answered")

	// Container B exits: the sandbox's id with pid 1 now names one.
	require.NoError(t, cmdB.Process.Kill())
	_ = cmdB.Wait()
	time.Sleep(2 * time.Millisecond) // past minRescan: entries are confirmed again
	got, ok = x.ByContainer(sandbox, 1)
	assert.True(t, ok)
	assert.Equal(t, idA, got)
	assert.Equal(t, []Identity{idA}, x.ByPod(pod.uid, 1))
	_, ok = x.ByContainer(b, 1)
	assert.False(t, ok, "an exited container's process is not found")
}

// TestRealReadsThroughExitedProcessFail: the property Identity relies on
// to read stat, status and cgroup from one process.
func TestRealReadsThroughExitedProcessFail(t *testing.T) {
	cmd := exec.Command(sleepPath(t), "30")
	require.NoError(t, cmd.Start())
	pid := cmd.Process.Pid
	dir, err := unix.Open("/proc/"+strconv.Itoa(pid), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	require.NoError(t, err)
	defer unix.Close(dir)
	var s scratch
	_, err = NewReader("", 0).readProcess(dir, ".", pid, &s, nil)
	require.NoError(t, err)

	require.NoError(t, cmd.Process.Kill())
	_ = cmd.Wait()
	_, err = NewReader("", 0).readProcess(dir, ".", pid, &s, nil)
	assert.True(t, errors.Is(err, ErrNoProcess), "got %v", err)
	assert.True(t, exited(dir))
}
