package procresource

import (
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
		assert.True(t, ok)
		assert.Equal(t, idA, got)
		got, ok = x.ByHostPID(500)
		assert.True(t, ok)
		assert.Equal(t, Identity{PID: 500, VPID: 500, StartTicks: 5}, got)
		got, ok = x.ByHostPID(1000)
		assert.True(t, ok, "the sandbox is a process of the node like any other")
		assert.Equal(t, sandboxID, got.ContainerID)
	})
	t.Run("two pid 1 in two containers are told apart", func(t *testing.T) {
		got, ok := x.ByContainer(appA, 1)
		assert.True(t, ok)
		assert.Equal(t, idA, got)
		got, ok = x.ByContainer(appB, 1)
		assert.True(t, ok)
		assert.Equal(t, idB, got)
		got, ok = x.ByContainer(appA, 7)
		assert.True(t, ok)
		assert.Equal(t, idA7, got)
	})
	t.Run("a vpid the container lacks is not another container's", func(t *testing.T) {
		_, ok := x.ByContainer(appB, 7)
		assert.False(t, ok, "container A's pid 7 is not container B's")
	})
	t.Run("by pod: both pid 1, never the sandbox", func(t *testing.T) {
		assert.ElementsMatch(t, []Identity{idA, idB}, x.ByPod(podUID, 1))
		assert.Equal(t, []Identity{idA7}, x.ByPod(podUID, 7))
		assert.Empty(t, x.ByPod(otherPod, 1))
	})
	t.Run("sandbox id with a vpid two containers have: ambiguous", func(t *testing.T) {
		_, ok := x.ByContainer(sandboxID, 1)
		assert.False(t, ok, "the pause process is not an answer and two app containers have pid 1")
	})
	t.Run("sandbox id with a vpid one container has: that process", func(t *testing.T) {
		got, ok := x.ByContainer(sandboxID, 7)
		assert.True(t, ok)
		assert.Equal(t, idA7, got)
	})
	t.Run("seen as: pids of processes in pid namespaces of their own", func(t *testing.T) {
		assert.True(t, x.SeenAs(1), "two app containers are pid 1")
		assert.True(t, x.SeenAs(7), "container A's worker is pid 7")
		assert.False(t, x.SeenAs(500), "the host's sshd is pid 500 in the node's own namespace")
		assert.False(t, x.SeenAs(1010), "1010 is a host pid, not a pid any process sees itself as")
		assert.False(t, x.SeenAs(0))
	})
	t.Run("identities no local process has", func(t *testing.T) {
		_, ok := x.ByContainer(cid, 1)
		assert.False(t, ok)
		_, ok = x.ByHostPID(31337)
		assert.False(t, ok)
		_, ok = x.ByContainer("", 1)
		assert.False(t, ok)
		_, ok = x.ByContainer(appA, 0)
		assert.False(t, ok)
	})
	assert.Equal(t, 5, x.Stats().Tracked)
}

func TestIndexSandboxResolvesWhenUnique(t *testing.T) {
	root := t.TempDir()
	writeFakeProc(t, root, fakeProcess{pid: 2000, comm: "pause", start: 1, nspid: []int{2000, 1}, cgroup: podCgroup(podUID, sandboxID)})
	writeFakeProc(t, root, fakeProcess{pid: 2001, comm: "java", start: 2, nspid: []int{2001, 1}, cgroup: podCgroup(podUID, appA)})
	x, _ := newIndexWithClock(root, time.Second)

	got, ok := x.ByContainer(sandboxID, 1)
	require.True(t, ok, "the one app container's pid 1, as an SDK that read the sandbox's id means")
	assert.Equal(t, Identity{PID: 2001, VPID: 1, StartTicks: 2, ContainerID: appA, PodUID: podUID}, got)
	assert.Len(t, x.ByPod(podUID, 1), 1, "a single-container pod's pid 1 is one process: the sandbox does not count")
}

// TestIndexPIDReuse: a new process with an old pid never answers with the
// old one's identity, whether the index finds out on a hit or at a scan.
func TestIndexPIDReuse(t *testing.T) {
	root := t.TempDir()
	writePod(t, root)
	x, clock := newIndexWithClock(root, time.Second)
	_, ok := x.ByContainer(appA, 1)
	require.True(t, ok)

	// Container A's main process exits and a host process takes pid 1010.
	writeFakeProc(t, root, fakeProcess{pid: 1010, comm: "cron", start: 9000, nspid: []int{1010}, cgroup: "0::/system.slice/cron.service\n"})

	// Within minRescan of the scan that confirmed it, the entry is still
	// trusted (that is the bound on staleness); past it, it is read again.
	clock.advance(2 * time.Second)
	_, ok = x.ByContainer(appA, 1)
	assert.False(t, ok, "the old container's pid 1 is gone; the new pid 1010 is not in container A")
	got, ok := x.ByHostPID(1010)
	require.True(t, ok)
	assert.Equal(t, Identity{PID: 1010, VPID: 1010, StartTicks: 9000}, got, "the new process's own identity")
	st := x.Stats()
	assert.Equal(t, uint64(1), st.Reused)
	assert.Equal(t, uint64(2), st.Scans, "one scan at the first lookup, one when the old entry was found dead")

	// A reuse found by a scan, not a hit: pid 1020 gets a new process; the
	// next scan (on a miss) replaces the entry.
	writeFakeProc(t, root, fakeProcess{pid: 1020, comm: "python3", start: 9100, nspid: []int{1020, 1}, cgroup: podCgroup(otherPod, appB)})
	clock.advance(2 * time.Second)
	_, ok = x.ByHostPID(4444) // a miss: scans
	assert.False(t, ok)
	got, ok = x.ByContainer(appB, 1)
	require.True(t, ok)
	assert.Equal(t, Identity{PID: 1020, VPID: 1, StartTicks: 9100, ContainerID: appB, PodUID: otherPod}, got)
	assert.Empty(t, x.ByPod(podUID, 1), "pid 1020 left the pod with its old process")
	assert.Equal(t, uint64(2), x.Stats().Reused)
}

func TestIndexDropsExited(t *testing.T) {
	root := t.TempDir()
	writePod(t, root)
	x, clock := newIndexWithClock(root, time.Second)
	_, ok := x.ByHostPID(500)
	require.True(t, ok)
	require.Equal(t, 5, x.Stats().Tracked)

	require.NoError(t, os.RemoveAll(filepath.Join(root, "500")))
	require.NoError(t, os.RemoveAll(filepath.Join(root, "1011")))
	clock.advance(2 * time.Second)
	_, ok = x.ByHostPID(500)
	assert.False(t, ok)
	st := x.Stats()
	assert.Equal(t, 3, st.Tracked, "both exited processes are dropped at the scan")
	assert.Equal(t, uint64(2), st.Exited)
	_, ok = x.ByContainer(sandboxID, 7)
	assert.False(t, ok)
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
	assert.Equal(t, uint64(1), st.Scans)
	assert.Equal(t, uint64(30_000-1), st.Throttled)

	for range 3 {
		clock.advance(1100 * time.Millisecond)
		for i := range 1000 {
			x.ByContainer(cid, i+1)
		}
	}
	assert.Equal(t, uint64(4), x.Stats().Scans, "one scan per elapsed minRescan")

	// Hits never scan.
	clock.advance(1100 * time.Millisecond)
	for range 1000 {
		_, ok := x.ByContainer(appA, 1)
		require.True(t, ok)
	}
	assert.Equal(t, uint64(4), x.Stats().Scans)
}

func TestIndexNewProcessFoundOnMiss(t *testing.T) {
	root := t.TempDir()
	writePod(t, root)
	x, clock := newIndexWithClock(root, time.Second)
	_, ok := x.ByContainer(cid, 1)
	require.False(t, ok)

	writeFakeProc(t, root, fakeProcess{pid: 3000, comm: "java", start: 300, nspid: []int{3000, 1}, cgroup: podCgroup(otherPod, cid)})
	_, ok = x.ByContainer(cid, 1)
	assert.False(t, ok, "within minRescan of the last scan a miss does not scan")
	clock.advance(time.Second)
	got, ok := x.ByContainer(cid, 1)
	assert.True(t, ok, "a container started since the last scan is found once a scan is due")
	assert.Equal(t, 3000, got.PID)
}

func TestIndexUnreadableCgroupCounted(t *testing.T) {
	root := t.TempDir()
	writePod(t, root)
	require.NoError(t, os.Remove(filepath.Join(root, "1020", "cgroup")))
	require.NoError(t, os.Mkdir(filepath.Join(root, "1020", "cgroup"), 0o755))
	require.NoError(t, os.MkdirAll(filepath.Join(root, "self"), 0o755)) // not a pid
	require.NoError(t, os.MkdirAll(filepath.Join(root, "77"), 0o755))   // a pid with no files: gone
	writeFakeProc(t, root, fakeProcess{pid: 88, comm: "x", start: 1, nspid: []int{88}})
	require.NoError(t, os.WriteFile(filepath.Join(root, "88", "stat"), []byte("88 x S"), 0o644)) // malformed: unreadable
	x, _ := newIndexWithClock(root, time.Second)

	got, ok := x.ByHostPID(1020)
	require.True(t, ok)
	assert.Equal(t, Identity{PID: 1020, VPID: 1, StartTicks: 120}, got, "container unknown, not guessed")
	_, ok = x.ByContainer(appB, 1)
	assert.False(t, ok)
	st := x.Stats()
	assert.Equal(t, uint64(2), st.Unreadable, "the directory for a cgroup, the malformed stat")
	assert.Equal(t, 5, st.Tracked)
	_, ok = x.ByHostPID(88)
	assert.False(t, ok)
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
					assert.Equal(t, 1010, id.PID)
				}
				x.ByPod(podUID, 1)
				x.ByHostPID(10_000 + g*1000 + i)
			}
		})
	}
	wg.Wait()
	assert.Equal(t, 5, x.Stats().Tracked)
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
	require.True(t, ok)
	assert.Equal(t, 200, x.Stats().Tracked)
	assert.Len(t, x.ByPod(manyProcessesPod(0), 3), 2, "both containers of the pod have a vpid 3")
	assert.Len(t, x.ByPod(manyProcessesPod(199), 3), 2)
	st := x.state.Load()
	first := st.byPID[10_000].id.ContainerID
	assert.Equal(t, first, st.byPID[10_009].id.ContainerID)
	assert.Same(t, unsafeStringData(first), unsafeStringData(st.byPID[10_009].id.ContainerID), "the processes of one container share one copy of its id")
}

func unsafeStringData(s string) *byte { return unsafe.StringData(s) }
