package procresource

import (
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"sync"
	"testing"
	"time"
	"unsafe"
)

// fakeClock is a settable clock for an Index.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// newIndexWithClock returns an index whose time only moves when the test
// says so.
func newIndexWithClock(root string, minRescan time.Duration) (*Index, *fakeClock) {
	c := &fakeClock{t: time.Unix(1_700_000_000, 0)}
	x := NewIndex(NewReader(root, 0), minRescan)
	x.now, x.epoch = c.now, c.now()
	return x, c
}

const (
	sandboxID = "5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a"
	appA      = "a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0"
	appB      = "b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0"
	otherPod  = "9f8e7d6c-5b4a-4938-8271-605f4e3d2c1b"
)

func podCgroup(uid, containerID string) string {
	us := []byte(uid)
	for i, c := range us {
		if c == '-' {
			us[i] = '_'
		}
	}
	return "0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" + string(us) + ".slice/cri-containerd-" + containerID + ".scope\n"
}

// writePod writes a pod as kubelet and containerd make one: a pause
// sandbox and two app containers, each its own pid namespace (all three
// pid 1), plus a worker in container A; and a host process.
func writePod(t *testing.T, root string) {
	writeFakeProc(t, root, fakeProcess{pid: 1000, comm: "pause", start: 100, nspid: []int{1000, 1}, cgroup: podCgroup(podUID, sandboxID)})
	writeFakeProc(t, root, fakeProcess{pid: 1010, comm: "java", start: 110, nspid: []int{1010, 1}, cgroup: podCgroup(podUID, appA)})
	writeFakeProc(t, root, fakeProcess{pid: 1011, comm: "java", start: 111, nspid: []int{1011, 7}, cgroup: podCgroup(podUID, appA)})
	writeFakeProc(t, root, fakeProcess{pid: 1020, comm: "python3", start: 120, nspid: []int{1020, 1}, cgroup: podCgroup(podUID, appB)})
	writeFakeProc(t, root, fakeProcess{pid: 500, comm: "sshd", start: 5, nspid: []int{500}, cgroup: "0::/system.slice/ssh.service\n"})
}

func TestIndexLookups(t *testing.T) {
	root := t.TempDir()
	writePod(t, root)
	x, _ := newIndexWithClock(root, time.Second)

	idA := Identity{PID: 1010, VPID: 1, StartTicks: 110, ContainerID: appA, PodUID: podUID}
	idA7 := Identity{PID: 1011, VPID: 7, StartTicks: 111, ContainerID: appA, PodUID: podUID}
	idB := Identity{PID: 1020, VPID: 1, StartTicks: 120, ContainerID: appB, PodUID: podUID}

	t.Run("by host pid", func(t *testing.T) {
		got, ok := x.ByHostPID(1010)
		if !ok {
			t.Errorf("x.ByHostPID: ok is false")
		}
		if got != idA {
			t.Errorf("x.ByHostPID: got %v, want %v", got, idA)
		}
		got, ok = x.ByHostPID(500)
		if !ok {
			t.Errorf("x.ByHostPID: ok is false")
		}
		if got != (Identity{PID: 500, VPID: 500, StartTicks: 5}) {
			t.Errorf("x.ByHostPID: got %v, want %v", got, Identity{PID: 500, VPID: 500, StartTicks: 5})
		}
		got, ok = x.ByHostPID(1000)
		if !ok {
			t.Errorf("the sandbox is a process of the node like any other (ok is false)")
		}
		if got.ContainerID != sandboxID {
			t.Errorf("got.ContainerID: got %q, want %q", got.ContainerID, sandboxID)
		}
	})
	t.Run("two pid 1 in two containers are told apart", func(t *testing.T) {
		got, ok := x.ByContainer(appA, 1)
		if !ok {
			t.Errorf("x.ByContainer: ok is false")
		}
		if got != idA {
			t.Errorf("x.ByContainer: got %v, want %v", got, idA)
		}
		got, ok = x.ByContainer(appB, 1)
		if !ok {
			t.Errorf("x.ByContainer: ok is false")
		}
		if got != idB {
			t.Errorf("x.ByContainer: got %v, want %v", got, idB)
		}
		got, ok = x.ByContainer(appA, 7)
		if !ok {
			t.Errorf("x.ByContainer: ok is false")
		}
		if got != idA7 {
			t.Errorf("x.ByContainer: got %v, want %v", got, idA7)
		}
	})
	t.Run("a vpid the container lacks is not another container's", func(t *testing.T) {
		_, ok := x.ByContainer(appB, 7)
		if ok {
			t.Errorf("container A's pid 7 is not container B's (ok is true)")
		}
	})
	t.Run("by pod: both pid 1, never the sandbox", func(t *testing.T) {
		if got := x.ByPod(podUID, 1); !sameElements(got, []Identity{idA, idB}) {
			t.Errorf("x.ByPod: got %v, want %v in any order", got, []Identity{idA, idB})
		}
		if got := x.ByPod(podUID, 7); !reflect.DeepEqual(got, []Identity{idA7}) {
			t.Errorf("x.ByPod(podUID, 7): got %v, want %v", got, []Identity{idA7})
		}
		if got := x.ByPod(otherPod, 1); len(got) != 0 {
			t.Errorf("x.ByPod(otherPod, 1): got %v, want empty", got)
		}
	})
	t.Run("sandbox id with a vpid two containers have: ambiguous", func(t *testing.T) {
		_, ok := x.ByContainer(sandboxID, 1)
		if ok {
			t.Errorf("the pause process is not an answer and two app containers have pid 1 (ok is true)")
		}
	})
	t.Run("sandbox id with a vpid one container has: that process", func(t *testing.T) {
		got, ok := x.ByContainer(sandboxID, 7)
		if !ok {
			t.Errorf("x.ByContainer: ok is false")
		}
		if got != idA7 {
			t.Errorf("x.ByContainer: got %v, want %v", got, idA7)
		}
	})
	t.Run("seen as: pids of processes in pid namespaces of their own", func(t *testing.T) {
		if !x.SeenAs(1) {
			t.Errorf("two app containers are pid 1 (x.SeenAs(1) is false)")
		}
		if !x.SeenAs(7) {
			t.Errorf("container A's worker is pid 7 (x.SeenAs(7) is false)")
		}
		if x.SeenAs(500) {
			t.Errorf("the host's sshd is pid 500 in the node's own namespace (x.SeenAs(500) is true)")
		}
		if x.SeenAs(1010) {
			t.Errorf("1010 is a host pid, not a pid any process sees itself as (x.SeenAs(1010) is true)")
		}
		if x.SeenAs(0) {
			t.Errorf("x.SeenAs(0) is true")
		}
	})
	t.Run("identities no local process has", func(t *testing.T) {
		_, ok := x.ByContainer(cid, 1)
		if ok {
			t.Errorf("x.ByContainer: ok is true")
		}
		_, ok = x.ByHostPID(31337)
		if ok {
			t.Errorf("x.ByHostPID: ok is true")
		}
		_, ok = x.ByContainer("", 1)
		if ok {
			t.Errorf("x.ByContainer: ok is true")
		}
		_, ok = x.ByContainer(appA, 0)
		if ok {
			t.Errorf("x.ByContainer: ok is true")
		}
	})
	if got := x.Stats().Tracked; got != 5 {
		t.Errorf("x.Stats().Tracked: got %v, want %v", got, 5)
	}
}

func TestIndexSandboxResolvesWhenUnique(t *testing.T) {
	root := t.TempDir()
	writeFakeProc(t, root, fakeProcess{pid: 2000, comm: "pause", start: 1, nspid: []int{2000, 1}, cgroup: podCgroup(podUID, sandboxID)})
	writeFakeProc(t, root, fakeProcess{pid: 2001, comm: "java", start: 2, nspid: []int{2001, 1}, cgroup: podCgroup(podUID, appA)})
	x, _ := newIndexWithClock(root, time.Second)

	got, ok := x.ByContainer(sandboxID, 1)
	if !ok {
		t.Fatalf("the one app container's pid 1, as an SDK that read the sandbox's id means (ok is false)")
	}
	if got != (Identity{PID: 2001, VPID: 1, StartTicks: 2, ContainerID: appA, PodUID: podUID}) {
		t.Errorf("x.ByContainer: got %v, want %v", got, Identity{PID: 2001, VPID: 1, StartTicks: 2, ContainerID: appA, PodUID: podUID})
	}
	if got := len(x.ByPod(podUID, 1)); got != 1 {
		t.Errorf("a single-container pod's pid 1 is one process: the sandbox does not count: got %d, want %d", got, 1)
	}
}

// TestIndexPIDReuse: a new process with an old pid never answers with the
// old one's identity, whether the index finds out on a hit or at a scan.
func TestIndexPIDReuse(t *testing.T) {
	root := t.TempDir()
	writePod(t, root)
	x, clock := newIndexWithClock(root, time.Second)
	_, ok := x.ByContainer(appA, 1)
	if !ok {
		t.Fatalf("x.ByContainer: ok is false")
	}

	// Container A's main process exits and a host process takes pid 1010.
	writeFakeProc(t, root, fakeProcess{pid: 1010, comm: "cron", start: 9000, nspid: []int{1010}, cgroup: "0::/system.slice/cron.service\n"})

	// Within minRescan of the scan that confirmed it, the entry is still
	// trusted (that is the bound on staleness); past it, it is read again.
	clock.advance(2 * time.Second)
	_, ok = x.ByContainer(appA, 1)
	if ok {
		t.Errorf("the old container's pid 1 is gone; the new pid 1010 is not in container A (ok is true)")
	}
	got, ok := x.ByHostPID(1010)
	if !ok {
		t.Fatalf("x.ByHostPID: ok is false")
	}
	if got != (Identity{PID: 1010, VPID: 1010, StartTicks: 9000}) {
		t.Errorf("the new process's own identity: got %v, want %v", got, Identity{PID: 1010, VPID: 1010, StartTicks: 9000})
	}
	st := x.Stats()
	if st.Reused != uint64(1) {
		t.Errorf("st.Reused: got %v, want %v", st.Reused, uint64(1))
	}
	if st.Scans != uint64(2) {
		t.Errorf("one scan at the first lookup, one when the old entry was found dead: got %v, want %v", st.Scans, uint64(2))
	}

	// A reuse found by a scan, not a hit: pid 1020 gets a new process; the
	// next scan (on a miss) replaces the entry.
	writeFakeProc(t, root, fakeProcess{pid: 1020, comm: "python3", start: 9100, nspid: []int{1020, 1}, cgroup: podCgroup(otherPod, appB)})
	clock.advance(2 * time.Second)
	_, ok = x.ByHostPID(4444) // a miss: scans
	if ok {
		t.Errorf("x.ByHostPID: ok is true")
	}
	got, ok = x.ByContainer(appB, 1)
	if !ok {
		t.Fatalf("x.ByContainer: ok is false")
	}
	if got != (Identity{PID: 1020, VPID: 1, StartTicks: 9100, ContainerID: appB, PodUID: otherPod}) {
		t.Errorf("x.ByContainer: got %v, want %v", got, Identity{PID: 1020, VPID: 1, StartTicks: 9100, ContainerID: appB, PodUID: otherPod})
	}
	if got := x.ByPod(podUID, 1); len(got) != 0 {
		t.Errorf("pid 1020 left the pod with its old process: got %v, want empty", got)
	}
	if got := x.Stats().Reused; got != uint64(2) {
		t.Errorf("x.Stats().Reused: got %v, want %v", got, uint64(2))
	}
}

func TestIndexDropsExited(t *testing.T) {
	root := t.TempDir()
	writePod(t, root)
	x, clock := newIndexWithClock(root, time.Second)
	_, ok := x.ByHostPID(500)
	if !ok {
		t.Fatalf("x.ByHostPID: ok is false")
	}
	if got := x.Stats().Tracked; got != 5 {
		t.Fatalf("x.Stats().Tracked: got %v, want %v", got, 5)
	}

	if err := os.RemoveAll(filepath.Join(root, "500")); err != nil {
		t.Fatalf("os.RemoveAll: %v", err)
	}
	if err := os.RemoveAll(filepath.Join(root, "1011")); err != nil {
		t.Fatalf("os.RemoveAll: %v", err)
	}
	clock.advance(2 * time.Second)
	_, ok = x.ByHostPID(500)
	if ok {
		t.Errorf("x.ByHostPID: ok is true")
	}
	st := x.Stats()
	if st.Tracked != 3 {
		t.Errorf("both exited processes are dropped at the scan: got %v, want %v", st.Tracked, 3)
	}
	if st.Exited != uint64(2) {
		t.Errorf("st.Exited: got %v, want %v", st.Exited, uint64(2))
	}
	_, ok = x.ByContainer(sandboxID, 7)
	if ok {
		t.Errorf("x.ByContainer: ok is true")
	}
}

// TestIndexRescansBounded: a flood of lookups for identities no local
// process has scans the proc root once per minRescan, not once each.
func TestIndexRescansBounded(t *testing.T) {
	root := t.TempDir()
	writePod(t, root)
	x, clock := newIndexWithClock(root, time.Second)
	for i := range 10_000 {
		x.ByContainer(cid, i%50+1)
		x.ByPod(otherPod, 1)
		x.ByHostPID(40_000 + i)
	}
	st := x.Stats()
	if st.Scans != uint64(1) {
		t.Errorf("st.Scans: got %v, want %v", st.Scans, uint64(1))
	}
	if st.Throttled != uint64(30_000-1) {
		t.Errorf("st.Throttled: got %v, want %v", st.Throttled, uint64(30_000-1))
	}

	for range 3 {
		clock.advance(1100 * time.Millisecond)
		for i := range 1000 {
			x.ByContainer(cid, i+1)
		}
	}
	if got := x.Stats().Scans; got != uint64(4) {
		t.Errorf("one scan per elapsed minRescan: got %v, want %v", got, uint64(4))
	}

	// Hits never scan.
	clock.advance(1100 * time.Millisecond)
	for range 1000 {
		_, ok := x.ByContainer(appA, 1)
		if !ok {
			t.Fatalf("x.ByContainer: ok is false")
		}
	}
	if got := x.Stats().Scans; got != uint64(4) {
		t.Errorf("x.Stats().Scans: got %v, want %v", got, uint64(4))
	}
}

func TestIndexNewProcessFoundOnMiss(t *testing.T) {
	root := t.TempDir()
	writePod(t, root)
	x, clock := newIndexWithClock(root, time.Second)
	_, ok := x.ByContainer(cid, 1)
	if ok {
		t.Fatalf("x.ByContainer: ok is true")
	}

	writeFakeProc(t, root, fakeProcess{pid: 3000, comm: "java", start: 300, nspid: []int{3000, 1}, cgroup: podCgroup(otherPod, cid)})
	_, ok = x.ByContainer(cid, 1)
	if ok {
		t.Errorf("within minRescan of the last scan a miss does not scan (ok is true)")
	}
	clock.advance(time.Second)
	got, ok := x.ByContainer(cid, 1)
	if !ok {
		t.Errorf("a container started since the last scan is found once a scan is due (ok is false)")
	}
	if got.PID != 3000 {
		t.Errorf("got.PID: got %v, want %v", got.PID, 3000)
	}
}

func TestIndexUnreadableCgroupCounted(t *testing.T) {
	root := t.TempDir()
	writePod(t, root)
	if err := os.Remove(filepath.Join(root, "1020", "cgroup")); err != nil {
		t.Fatalf("os.Remove: %v", err)
	}
	if err := os.Mkdir(filepath.Join(root, "1020", "cgroup"), 0o755); err != nil {
		t.Fatalf("os.Mkdir: %v", err)
	}
	// not a pid
	if err := os.MkdirAll(filepath.Join(root, "self"), 0o755); err != nil {
		t.Fatalf("os.MkdirAll: %v", err)
	}
	// a pid with no files: gone
	if err := os.MkdirAll(filepath.Join(root, "77"), 0o755); err != nil {
		t.Fatalf("os.MkdirAll: %v", err)
	}
	writeFakeProc(t, root, fakeProcess{pid: 88, comm: "x", start: 1, nspid: []int{88}})
	// malformed: unreadable
	if err := os.WriteFile(filepath.Join(root, "88", "stat"), []byte("88 x S"), 0o644); err != nil {
		t.Fatalf("os.WriteFile: %v", err)
	}
	x, _ := newIndexWithClock(root, time.Second)

	got, ok := x.ByHostPID(1020)
	if !ok {
		t.Fatalf("x.ByHostPID: ok is false")
	}
	if got != (Identity{PID: 1020, VPID: 1, StartTicks: 120}) {
		t.Errorf("container unknown, not guessed: got %v, want %v", got, Identity{PID: 1020, VPID: 1, StartTicks: 120})
	}
	_, ok = x.ByContainer(appB, 1)
	if ok {
		t.Errorf("x.ByContainer: ok is true")
	}
	st := x.Stats()
	if st.Unreadable != uint64(2) {
		t.Errorf("the directory for a cgroup, the malformed stat: got %v, want %v", st.Unreadable, uint64(2))
	}
	if st.Tracked != 5 {
		t.Errorf("st.Tracked: got %v, want %v", st.Tracked, 5)
	}
	_, ok = x.ByHostPID(88)
	if ok {
		t.Errorf("x.ByHostPID: ok is true")
	}
}

// TestIndexConcurrent runs lookups against scans (go test -race).
func TestIndexConcurrent(t *testing.T) {
	root := t.TempDir()
	writePod(t, root)
	x := NewIndex(NewReader(root, 0), time.Millisecond)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 300 {
				if id, ok := x.ByContainer(appA, 1); ok {
					if id.PID != 1010 {
						t.Errorf("id.PID: got %v, want %v", id.PID, 1010)
					}
				}
				x.ByPod(podUID, 1)
				x.ByHostPID(10_000 + g*1000 + i)
			}
		})
	}
	wg.Wait()
	if got := x.Stats().Tracked; got != 5 {
		t.Errorf("x.Stats().Tracked: got %v, want %v", got, 5)
	}
}

// writeManyProcesses writes n container processes, ten per container, two
// containers per pod.
func writeManyProcesses(tb testing.TB, root string, n int) {
	for i := range n {
		pid := 10_000 + i
		container := strconv.FormatInt(int64(0x1000_0000+i/10), 16)
		for len(container) < 64 {
			container += "0"
		}
		pod := manyProcessesPod(i)
		dir := filepath.Join(root, strconv.Itoa(pid))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			tb.Fatal(err)
		}
		stat := strconv.Itoa(pid) + " (java) S 1 1 1 0 -1 4194304 100 0 0 0 5 3 0 0 20 0 1 0 " + strconv.Itoa(1000+i) + " 1000000 100 18446744073709551615 0 0 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0\n"
		status := "Name:\tjava\nPid:\t" + strconv.Itoa(pid) + "\nNSpid:\t" + strconv.Itoa(pid) + "\t" + strconv.Itoa(i%10+1) + "\n"
		for name, data := range map[string]string{"stat": stat, "status": status, "cgroup": podCgroup(pod, container)} {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
				tb.Fatal(err)
			}
		}
	}
}

// manyProcessesPod is the pod of writeManyProcesses's i-th process.
func manyProcessesPod(i int) string {
	return "00000000-0000-4000-8000-" + strconv.FormatInt(int64(0x1000_0000_0000+i/20), 16)
}

func TestIndexManyProcesses(t *testing.T) {
	root := t.TempDir()
	writeManyProcesses(t, root, 200)
	x, _ := newIndexWithClock(root, time.Second)
	_, ok := x.ByHostPID(10_000)
	if !ok {
		t.Fatalf("x.ByHostPID: ok is false")
	}
	if got := x.Stats().Tracked; got != 200 {
		t.Errorf("x.Stats().Tracked: got %v, want %v", got, 200)
	}
	if got := len(x.ByPod(manyProcessesPod(0), 3)); got != 2 {
		t.Errorf("both containers of the pod have a vpid 3: got %d, want %d", got, 2)
	}
	if got := len(x.ByPod(manyProcessesPod(199), 3)); got != 2 {
		t.Errorf("len(x.ByPod(manyProcessesPod(199), 3)): got %d, want %d", got, 2)
	}
	st := x.state.Load()
	first := st.byPID[10_000].id.ContainerID
	if got := st.byPID[10_009].id.ContainerID; got != first {
		t.Errorf("st.byPID[10_009].id.ContainerID: got %q, want %q", got, first)
	}
	if unsafeStringData(st.byPID[10_009].id.ContainerID) != unsafeStringData(first) {
		t.Errorf("the processes of one container share one copy of its id: got %p, want the same pointer as %p", unsafeStringData(st.byPID[10_009].id.ContainerID), unsafeStringData(first))
	}
}

func unsafeStringData(s string) *byte { return unsafe.StringData(s) }

// sameElements reports whether a and b hold the same elements, each as many
// times, in any order (elements compared with reflect.DeepEqual).
func sameElements[T any](a, b []T) bool {
	if len(a) != len(b) {
		return false
	}
	used := make([]bool, len(b))
next:
	for _, x := range a {
		for j, y := range b {
			if !used[j] && reflect.DeepEqual(x, y) {
				used[j] = true
				continue next
			}
		}
		return false
	}
	return true
}
