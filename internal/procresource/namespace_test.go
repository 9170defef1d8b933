package procresource

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/otelcol-ai/otelcol-ai/internal/e2etest/containertest"
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
	if err := c.WaitExec(5 * time.Second); err != nil {
		t.Fatalf("c.WaitExec: %v", err)
	}
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
	if err != nil {
		t.Fatalf("r.Identity: %v", err)
	}
	start, err := r.StartTicks(pid)
	if err != nil {
		t.Fatalf("r.StartTicks: %v", err)
	}
	if got != (Identity{PID: pid, VPID: 1, StartTicks: start, ContainerID: id, PodUID: c.PodUID}) {
		t.Errorf("r.Identity: got %v, want %v", got, Identity{PID: pid, VPID: 1, StartTicks: start, ContainerID: id, PodUID: c.PodUID})
	}

	x := NewIndex(r, time.Second)
	byContainer, ok := x.ByContainer(id, 1)
	if !ok {
		t.Errorf("x.ByContainer: ok is false")
	}
	if byContainer != got {
		t.Errorf("x.ByContainer: got %v, want %v", byContainer, got)
	}
	if got2 := x.ByPod(c.PodUID, 1); !reflect.DeepEqual(got2, []Identity{got}) {
		t.Errorf("x.ByPod(c.PodUID, 1): got %v, want %v", got2, []Identity{got})
	}
	byPID, ok := x.ByHostPID(pid)
	if !ok {
		t.Errorf("x.ByHostPID: ok is false")
	}
	if byPID != got {
		t.Errorf("x.ByHostPID: got %v, want %v", byPID, got)
	}
	_, ok = x.ByContainer(id, pid)
	if ok {
		t.Errorf("the container's process is pid 1 inside, not its host pid (ok is true)")
	}

	self, ok := x.ByHostPID(os.Getpid())
	if !ok {
		t.Fatalf("x.ByHostPID: ok is false")
	}
	if self.VPID != os.Getpid() {
		t.Errorf("the test runs in the host's pid namespace: got %v, want %v", self.VPID, os.Getpid())
	}
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
		if err := c.WaitExec(5 * time.Second); err != nil {
			t.Fatalf("comm is the command's (the sandbox's pause): %v", err)
		}
		id, err := r.Identity(c.PID)
		if err != nil {
			t.Fatalf("r.Identity: %v", err)
		}
		if id.VPID != 1 {
			t.Fatalf("id.VPID: got %v, want %v", id.VPID, 1)
		}
		return id
	}
	idA, idB := identity(cA), identity(cB)
	identity(pod.Sandbox)
	x := NewIndex(r, time.Millisecond)

	got, ok := x.ByContainer(a, 1)
	if !ok {
		t.Errorf("x.ByContainer: ok is false")
	}
	if got != idA {
		t.Errorf("x.ByContainer: got %v, want %v", got, idA)
	}
	got, ok = x.ByContainer(b, 1)
	if !ok {
		t.Errorf("x.ByContainer: ok is false")
	}
	if got != idB {
		t.Errorf("x.ByContainer: got %v, want %v", got, idB)
	}
	if got := x.ByPod(pod.UID, 1); !sameElements(got, []Identity{idA, idB}) {
		t.Errorf("both pid 1 of the pod, the sandbox's not among them: got %v, want %v in any order", got, []Identity{idA, idB})
	}
	_, ok = x.ByContainer(sandbox, 1)
	if ok {
		t.Errorf("the sandbox's id with pid 1 names two processes: not answered (ok is true)")
	}

	// Container B exits: the sandbox's id with pid 1 now names one.
	cB.Kill()
	time.Sleep(2 * time.Millisecond) // past minRescan: entries are confirmed again
	got, ok = x.ByContainer(sandbox, 1)
	if !ok {
		t.Errorf("x.ByContainer: ok is false")
	}
	if got != idA {
		t.Errorf("x.ByContainer: got %v, want %v", got, idA)
	}
	if got := x.ByPod(pod.UID, 1); !reflect.DeepEqual(got, []Identity{idA}) {
		t.Errorf("x.ByPod(pod.UID, 1): got %v, want %v", got, []Identity{idA})
	}
	_, ok = x.ByContainer(b, 1)
	if ok {
		t.Errorf("an exited container's process is not found (ok is true)")
	}
}

// TestRealReadsThroughExitedProcessFail: the property Identity relies on
// to read stat, status and cgroup from one process.
func TestRealReadsThroughExitedProcessFail(t *testing.T) {
	cmd := exec.Command(sleepPath(t), "30")
	if err := cmd.Start(); err != nil {
		t.Fatalf("cmd.Start: %v", err)
	}
	pid := cmd.Process.Pid
	dir, err := unix.Open("/proc/"+strconv.Itoa(pid), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatalf("unix.Open: %v", err)
	}
	defer unix.Close(dir)
	var s scratch
	_, err = NewReader("", 0).readProcess(dir, ".", pid, &s, nil)
	if err != nil {
		t.Fatalf("NewReader(\"\", 0).readProcess: %v", err)
	}

	if err := cmd.Process.Kill(); err != nil {
		t.Fatalf("cmd.Process.Kill: %v", err)
	}
	_ = cmd.Wait()
	_, err = NewReader("", 0).readProcess(dir, ".", pid, &s, nil)
	if !errors.Is(err, ErrNoProcess) {
		t.Errorf("got %v (errors.Is(err, ErrNoProcess) is false)", err)
	}
	if !exited(dir) {
		t.Errorf("exited(dir) is false")
	}
}

// TestRealNestedCgroupClaimsNoOtherPod plays a tenant that can write below
// its container's cgroup (a delegated subtree): it copies a victim pod's
// slice and scope there, as kubelet and containerd name them, and moves its
// own pid 1 in. Its identity stays its own container's and pod's, and the
// victim's container and pod still name the victim's process alone.
func TestRealNestedCgroupClaimsNoOtherPod(t *testing.T) {
	parent := cgroupParent()
	victim := containertest.Start(t, containertest.Spec{CgroupParent: parent, Args: []string{sleepPath(t), "30"}})
	attacker := containertest.Start(t, containertest.Spec{CgroupParent: parent, Args: []string{sleepPath(t), "30"}})
	for _, c := range []*containertest.Container{victim, attacker} {
		if err := c.WaitExec(5 * time.Second); err != nil {
			t.Fatalf("c.WaitExec: %v", err)
		}
	}
	root, err := containertest.CgroupRoot()
	if err != nil {
		t.Fatal(err)
	}
	own := filepath.Join(root, attacker.Cgroup)
	nested := filepath.Join(own, containertest.PodSlice(containertest.BestEffort, victim.PodUID), containertest.ScopeName(victim.ID))
	if err := os.MkdirAll(nested, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Back to its own scope, if still alive, so that the copies can go.
		_ = os.WriteFile(filepath.Join(own, "cgroup.procs"), []byte(strconv.Itoa(attacker.PID)), 0)
		for dir := nested; dir != own; dir = filepath.Dir(dir) {
			if err := os.Remove(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
				t.Errorf("remove %s: %v", dir, err)
			}
		}
	})
	if err := os.WriteFile(filepath.Join(nested, "cgroup.procs"), []byte(strconv.Itoa(attacker.PID)), 0); err != nil {
		t.Fatalf("moving the attacker into its copy of the victim's scope: %v", err)
	}
	cgroup, err := os.ReadFile("/proc/" + strconv.Itoa(attacker.PID) + "/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(cgroup), "/"+containertest.ScopeName(attacker.ID)+"/") || !strings.HasSuffix(strings.TrimSpace(string(cgroup)), containertest.ScopeName(victim.ID)) {
		t.Fatalf("the attacker's cgroup is not the victim's scope nested in its own:\n%s", cgroup)
	}

	r := NewReader("", 0)
	identity := func(c *containertest.Container) Identity {
		start, err := r.StartTicks(c.PID)
		if err != nil {
			t.Fatalf("r.StartTicks: %v", err)
		}
		return Identity{PID: c.PID, VPID: 1, StartTicks: start, ContainerID: c.ID, PodUID: c.PodUID}
	}
	wantAttacker, wantVictim := identity(attacker), identity(victim)
	got, err := r.Identity(attacker.PID)
	if err != nil {
		t.Fatalf("r.Identity: %v", err)
	}
	if got != wantAttacker {
		t.Errorf("the attacker's identity: got %v, want %v (its own container and pod)", got, wantAttacker)
	}

	x := NewIndex(r, time.Second)
	got, ok := x.ByContainer(victim.ID, 1)
	if !ok || got != wantVictim {
		t.Errorf("x.ByContainer(victim's id, 1): got %v, %v; want %v, true (the victim alone)", got, ok, wantVictim)
	}
	if got := x.ByPod(victim.PodUID, 1); !reflect.DeepEqual(got, []Identity{wantVictim}) {
		t.Errorf("x.ByPod(victim's pod, 1): got %v, want %v", got, []Identity{wantVictim})
	}
	got, ok = x.ByContainer(attacker.ID, 1)
	if !ok || got != wantAttacker {
		t.Errorf("x.ByContainer(attacker's id, 1): got %v, %v; want %v, true", got, ok, wantAttacker)
	}
}
