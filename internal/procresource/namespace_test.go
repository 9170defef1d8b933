package procresource

import (
	"errors"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/otelcol-ai/otelcol-ai/internal/e2e/containertest"
)

// These tests make "containers" from real kernel namespaces with
// containertest: a process that is pid 1 of its own pid, UTS and mount
// namespaces, born into a cgroup named as kubelet and containerd name them,
// under a top cgroup of the test's own so that concurrent tests never share
// a directory. They need root.

// cgroupParent returns a top cgroup for one test's pods.
func cgroupParent() string { return "/otelcol-ai-procresource-" + containertest.NewID()[:8] }

// startContainer starts sleep as pid 1 of a container of its own pod and
// waits for it to have exec'd, so that comm is sleep's.
func startContainer(t *testing.T) *containertest.Container {
	t.Helper()
	c := containertest.Start(t, containertest.Spec{CgroupParent: cgroupParent(), Args: []string{sleepPath(t), "30"}})
	require.NoError(t, c.WaitExec(5*time.Second))
	return c
}

func sleepPath(t *testing.T) string {
	p, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip("no sleep binary")
	}
	return p
}

func TestRealContainerIdentity(t *testing.T) {
	c := startContainer(t)
	pid, id := c.PID, c.ID

	r := NewReader("", 0)
	got, err := r.Identity(pid)
	require.NoError(t, err)
	start, err := r.StartTicks(pid)
	require.NoError(t, err)
	assert.Equal(t, Identity{PID: pid, VPID: 1, StartTicks: start, ContainerID: id, PodUID: c.PodUID}, got)

	x := NewIndex(r, time.Second)
	byContainer, ok := x.ByContainer(id, 1)
	assert.True(t, ok)
	assert.Equal(t, got, byContainer)
	assert.Equal(t, []Identity{got}, x.ByPod(c.PodUID, 1))
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
	pod := containertest.StartPod(t, containertest.PodSpec{HostNetwork: true, CgroupParent: cgroupParent()})
	cA := pod.Start(t, containertest.Spec{Args: []string{sleepPath(t), "30"}})
	cB := pod.Start(t, containertest.Spec{Args: []string{sleepPath(t), "30"}})
	sandbox, a, b := pod.Sandbox.ID, cA.ID, cB.ID

	r := NewReader("", 0)
	identity := func(c *containertest.Container) Identity {
		require.NoError(t, c.WaitExec(5*time.Second), "comm is the command's (the sandbox's pause)")
		id, err := r.Identity(c.PID)
		require.NoError(t, err)
		require.Equal(t, 1, id.VPID)
		return id
	}
	idA, idB := identity(cA), identity(cB)
	identity(pod.Sandbox)
	x := NewIndex(r, time.Millisecond)

	got, ok := x.ByContainer(a, 1)
	assert.True(t, ok)
	assert.Equal(t, idA, got)
	got, ok = x.ByContainer(b, 1)
	assert.True(t, ok)
	assert.Equal(t, idB, got)
	assert.ElementsMatch(t, []Identity{idA, idB}, x.ByPod(pod.UID, 1), "both pid 1 of the pod, the sandbox's not among them")
	_, ok = x.ByContainer(sandbox, 1)
	assert.False(t, ok, "the sandbox's id with pid 1 names two processes: not answered")

	// Container B exits: the sandbox's id with pid 1 now names one.
	cB.Kill()
	time.Sleep(2 * time.Millisecond) // past minRescan: entries are confirmed again
	got, ok = x.ByContainer(sandbox, 1)
	assert.True(t, ok)
	assert.Equal(t, idA, got)
	assert.Equal(t, []Identity{idA}, x.ByPod(pod.UID, 1))
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
