package repository

import (
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/otelcol-ai/otelcol-ai/internal/window"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/jvmevent"
)

// The tests of this file are written as a container on the node would
// attack the agent: through what it writes into its JFR repository. Each
// fake proc tree holds a hostile "JVM" beside an honest one whose recording
// must keep arriving whole.

// repoName is the repository folder of a containerised JVM that sees
// itself as pid 1.
const repoName = "2026_11_29_10_00_00_1"

// fakeJVMtest makes a process pid in the fake proc filesystem proc: a java
// executable whose root is a folder of its own, with an empty repository
// folder in its /tmp; it returns that root and the repository folder (both
// host paths).
func fakeJVMtest(t *testing.T, proc string, pid int) (root, repo string) {
	t.Helper()
	dir := filepath.Join(proc, strconv.Itoa(pid))
	root = filepath.Join(t.TempDir(), "rootfs")
	repo = filepath.Join(root, "tmp", repoName)
	for _, d := range []string{dir, repo} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	files := map[string]string{
		"stat":    strconv.Itoa(pid) + " (java) S 1 1 1 0 -1 4194304 0 0 0 0 0 0 0 0 20 0 1 0 4242 0 0",
		"cmdline": "java\x00-XX:StartFlightRecording\x00Main\x00",
		"status":  "Name:\tjava\nNSpid:\t" + strconv.Itoa(pid) + "\t1\n",
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for link, target := range map[string]string{"exe": "/usr/lib/jvm/bin/java", "root": root} {
		if err := os.Symlink(target, filepath.Join(dir, link)); err != nil {
			t.Fatal(err)
		}
	}
	return root, repo
}

// nodetest is a fake node: two JVMs in containers, pid 101 (hostile) and
// pid 102 (honest, its repository holding one finished fixture chunk).
type nodetest struct {
	proc               string
	hostileRoot        string
	hostile, honest    string // repository folders, host paths
	hostileKey, honKey string // the folders as the source names them
	want               int    // GC pauses in the honest chunk
}

func newNodetest(t *testing.T) *nodetest {
	t.Helper()
	n := &nodetest{proc: t.TempDir(), want: fixturePauses(t)}
	n.hostileRoot, n.hostile = fakeJVMtest(t, n.proc, 101)
	_, n.honest = fakeJVMtest(t, n.proc, 102)
	n.hostileKey = filepath.Join(n.proc, "101", "root", "tmp", repoName)
	n.honKey = filepath.Join(n.proc, "102", "root", "tmp", repoName)
	write(t, filepath.Join(n.honest, "a.jfr"), chunkFile(t, 0, true))
	return n
}

// refusalstest counts the source's refusals by reason.
type refusalstest struct {
	mu sync.Mutex
	by map[string]int
}

func (r *refusalstest) add(reason string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.by == nil {
		r.by = map[string]int{}
	}
	r.by[reason]++
}

func (r *refusalstest) get(reason string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.by[reason]
}

// source returns a source discovering the node's JVMs, with the receiver's
// default caps unless cfg sets them.
func (n *nodetest) source(t *testing.T, refused *refusalstest, cfg Config) *Source {
	t.Helper()
	cfg.Discover, cfg.ProcRoot, cfg.DiscoveryInterval, cfg.Refused = true, n.proc, time.Hour, refused.add
	if cfg.MaxChunkSize == 0 {
		cfg.MaxChunkSize = 64 << 20
	}
	if cfg.MaxMemory == 0 {
		cfg.MaxMemory = 256 << 20
	}
	s := New(cfg)
	t.Cleanup(func() { s.Close() })
	return s
}

// pausesBy counts GC pause windows by the repository they came from.
type pausesBy struct {
	pauses map[string]int
	ended  map[string]bool
	err    error
}

// pollGuarded polls s on another goroutine and fails the test if the poll
// has not returned within 10 s (a source blocked on a FIFO never would);
// it returns what the poll emitted and how long it took.
func pollGuarded(t *testing.T, s *Source) (pausesBy, time.Duration) {
	t.Helper()
	got := pausesBy{pauses: map[string]int{}, ended: map[string]bool{}}
	done := make(chan struct{})
	start := time.Now()
	go func() {
		defer close(done)
		got.err = s.Poll(context.Background(), func(b jvmevent.Batch) {
			for _, w := range b.Windows {
				if w.Kind == window.KindJVMGCPause {
					got.pauses[b.JVM.Source]++
				}
			}
			got.ended[b.JVM.Source] = got.ended[b.JVM.Source] || b.Ended
		})
	}()
	select {
	case <-done:
		return got, time.Since(start)
	case <-time.After(10 * time.Second):
		t.Fatal("a poll did not return within 10 s: a source is blocked")
		return got, 0
	}
}

// TestChunkSymlinkOutOfTheRootIsNotRead: a container makes chunk files
// that are symlinks to a chunk on the host (absolute, and relative with
// `..`). They resolve inside the container's root, where they lead
// nowhere: refused, counted once each, and their events never arrive. The
// same holds for a folder found by a pattern, which is its own root.
func TestChunkSymlinkOutOfTheRootIsNotRead(t *testing.T) {
	n := newNodetest(t)
	host := filepath.Join(t.TempDir(), "host-secret.jfr")
	write(t, host, chunkFile(t, time.Second, true))
	pattern := filepath.Join(t.TempDir(), "2026_11_29_10_00_00_7")
	if err := os.MkdirAll(pattern, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{n.hostile, pattern} {
		up := strings.Repeat("../", strings.Count(dir, "/")+2)
		for name, target := range map[string]string{"abs.jfr": host, "rel.jfr": up + strings.TrimPrefix(host, "/")} {
			if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
				t.Fatal(err)
			}
		}
	}
	var refused refusalstest
	s := n.source(t, &refused, Config{Include: []string{pattern}})
	got, _ := pollGuarded(t, s)
	if got.pauses[n.hostileKey] != 0 || got.pauses[pattern] != 0 {
		t.Errorf("the host's chunk was read through a symlink: %v", got.pauses)
	}
	if got.pauses[n.honKey] != n.want || !got.ended[n.honKey] {
		t.Errorf("honest JVM: %d pauses, ended %v; want %d and the end", got.pauses[n.honKey], got.ended[n.honKey], n.want)
	}
	if c := refused.get(RefusedOutsideRoot); c != 4 {
		t.Errorf("%d refused as outside the root, want 4 (2 symlinks × 2 folders)", c)
	}
	if got.err == nil || !strings.Contains(got.err.Error(), "does not resolve inside the JVM's root") || !strings.Contains(got.err.Error(), n.hostileKey) {
		t.Errorf("refusal not reported with the repository: %v", got.err)
	}
	// Counted and reported once: the next polls list the same files.
	for range 2 {
		if again, _ := pollGuarded(t, s); again.err != nil || again.pauses[n.hostileKey] != 0 {
			t.Errorf("next poll: %+v", again)
		}
	}
	if c := refused.get(RefusedOutsideRoot); c != 4 {
		t.Errorf("refusals counted again: %d", c)
	}
}

// TestFIFOChunkDoesNotBlock: a FIFO named like a chunk file, in the
// repository when the source starts and created later (opened by the
// watcher), and a symlink named like a chunk to a directory: refused
// without blocking. The honest JVM delivers its chunk, and a chunk it
// begins and deletes after the FIFO appeared (the watcher must still be
// opening files) arrives too.
func TestFIFOChunkDoesNotBlock(t *testing.T) {
	n := newNodetest(t)
	if err := unix.Mkfifo(filepath.Join(n.hostile, "2026_11_29_10_00_00.jfr"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(".", filepath.Join(n.hostile, "dir.jfr")); err != nil {
		t.Fatal(err)
	}
	var refused refusalstest
	s := n.source(t, &refused, Config{})
	got, took := pollGuarded(t, s)
	t.Logf("first poll, with a FIFO chunk in one repository: %v", took)
	if got.pauses[n.honKey] != n.want || !got.ended[n.honKey] {
		t.Errorf("honest JVM: %d pauses, ended %v; want %d and the end", got.pauses[n.honKey], got.ended[n.honKey], n.want)
	}
	if c := refused.get(RefusedNotRegular); c != 2 {
		t.Errorf("%d refused as not regular, want 2 (the FIFO and the directory)", c)
	}
	if got.err == nil || !strings.Contains(got.err.Error(), "not a regular file") {
		t.Errorf("refusal not reported: %v", got.err)
	}

	// A second honest repository in the hostile JVM's container would be
	// hostile too; use the honest node's next JVM instead: pid 103.
	_, next := fakeJVMtest(t, n.proc, 103)
	nextKey := filepath.Join(n.proc, "103", "root", "tmp", repoName)
	write(t, filepath.Join(next, "a.jfr"), chunkFile(t, 0, false))
	s.lastScan = time.Time{} // discover pid 103 now
	if got, _ := pollGuarded(t, s); got.pauses[nextKey] != n.want {
		t.Fatalf("pid 103: %d pauses, want %d", got.pauses[nextKey], n.want)
	}
	if err := unix.Mkfifo(filepath.Join(n.hostile, "2026_11_29_10_00_05.jfr"), 0o644); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(next, "b.jfr"), chunkFile(t, time.Second, true))
	held := func() bool {
		e := s.followers[nextKey].early
		e.mu.Lock()
		defer e.mu.Unlock()
		return e.files["b.jfr"] != nil
	}
	for deadline := time.Now().Add(10 * time.Second); !held(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the watcher did not open b.jfr after the FIFO was created: it is blocked")
		}
	}
	if err := os.RemoveAll(next); err != nil {
		t.Fatal(err)
	}
	got, took = pollGuarded(t, s)
	t.Logf("poll with a second FIFO: %v", took)
	if got.pauses[nextKey] != n.want || !got.ended[nextKey] {
		t.Errorf("pid 103's last chunk: %d pauses, ended %v; want %d and the end", got.pauses[nextKey], got.ended[nextKey], n.want)
	}
	if c := refused.get(RefusedNotRegular); c != 3 {
		t.Errorf("%d refused as not regular, want 3", c)
	}
}

// TestSparseChunkClaiming2GiBIsRefused: a chunk file whose header (a real
// chunk's, size patched) claims 2 GiB, truncated to 2 GiB so that the
// claim looks backed by data: refused before anything is allocated for it
// (the heap allocated during the poll stays far under 64 MiB), counted,
// reported with the claim and the cap; the honest JVM delivers.
func TestSparseChunkClaiming2GiBIsRefused(t *testing.T) {
	n := newNodetest(t)
	const claim = 2 << 30
	data := chunkFile(t, 0, false)
	binary.BigEndian.PutUint64(data[8:], claim)
	sparse := filepath.Join(n.hostile, "2026_11_29_10_00_00.jfr")
	write(t, sparse, data)
	if err := os.Truncate(sparse, claim); err != nil {
		t.Fatal(err)
	}
	var refused refusalstest
	s := n.source(t, &refused, Config{})

	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	got, took := pollGuarded(t, s)
	runtime.ReadMemStats(&after)
	// TotalAlloc only grows: its growth bounds the poll's peak heap growth.
	allocated := after.TotalAlloc - before.TotalAlloc
	t.Logf("poll with a 2 GiB claim: %.1f MiB allocated in all (peak heap growth at most that), %v", float64(allocated)/(1<<20), took)
	if allocated >= 64<<20 {
		t.Errorf("the poll allocated %d bytes for a chunk claiming %d", allocated, claim)
	}
	if got.pauses[n.honKey] != n.want || !got.ended[n.honKey] {
		t.Errorf("honest JVM: %d pauses, ended %v; want %d and the end", got.pauses[n.honKey], got.ended[n.honKey], n.want)
	}
	if c := refused.get(RefusedTooLarge); c != 1 {
		t.Errorf("%d refused as too large, want 1", c)
	}
	if got.err == nil || !strings.Contains(got.err.Error(), "chunk claims 2147483648 bytes, limit is 67108864") {
		t.Errorf("refusal not reported with the claim and the cap: %v", got.err)
	}
	if h := s.HeldBytes(); h != 0 {
		t.Errorf("%d bytes held after the honest chunk was read and the hostile one refused", h)
	}
	// The follower moved past the refused chunk: it is not tried again.
	if again, _ := pollGuarded(t, s); again.err != nil || refused.get(RefusedTooLarge) != 1 {
		t.Errorf("next poll: %+v, %d refusals", again, refused.get(RefusedTooLarge))
	}
}

// TestMemoryBudgetSharedByRepositories: five repositories each hold a
// chunk the JVM is still writing; the budget fits three. Three are read
// whole (whichever reserve first: the repositories are read at once), the
// other two chunks refused and counted; when a JVM goes, its memory is
// given back.
func TestMemoryBudgetSharedByRepositories(t *testing.T) {
	want := fixturePauses(t)
	chunk := chunkFile(t, 0, false)
	chunk[64] = 5 // in progress: held between polls
	size := int64(len(chunk))
	base := t.TempDir()
	var repos []string
	for i := range 5 {
		repo := filepath.Join(base, "2026_11_29_10_00_0"+strconv.Itoa(i)+"_"+strconv.Itoa(4300+i))
		write(t, filepath.Join(repo, "a.jfr"), chunk)
		repos = append(repos, repo)
	}
	var refused refusalstest
	s := New(Config{Include: []string{filepath.Join(base, "2*_*")}, DiscoveryInterval: time.Hour,
		MaxChunkSize: 16 << 20, MaxMemory: 3*size + size/2, Refused: refused.add})
	defer s.Close()
	got, _ := pollGuarded(t, s)
	var read []string
	for _, repo := range repos {
		switch got.pauses[repo] {
		case want:
			read = append(read, repo)
		case 0:
		default:
			t.Errorf("%s: %d pauses, want %d or none", filepath.Base(repo), got.pauses[repo], want)
		}
	}
	if len(read) != 3 {
		t.Fatalf("%d repositories read whole, want 3 (pauses %v)", len(read), got.pauses)
	}
	if c := refused.get(RefusedOverBudget); c != 2 {
		t.Errorf("%d chunks refused over the budget, want 2", c)
	}
	if got.err == nil || !strings.Contains(got.err.Error(), "repositories::max_memory_mib") {
		t.Errorf("budget refusal not reported: %v", got.err)
	}
	if h := s.HeldBytes(); h != 3*size {
		t.Errorf("%d bytes held, want %d (three chunks)", h, 3*size)
	}
	if err := os.RemoveAll(read[0]); err != nil {
		t.Fatal(err)
	}
	if got, _ := pollGuarded(t, s); !got.ended[read[0]] {
		t.Fatalf("deleted repository not ended: %+v", got)
	}
	if h := s.HeldBytes(); h != 2*size {
		t.Errorf("%d bytes held after one repository ended, want %d", h, 2*size)
	}
	if c := refused.get(RefusedOverBudget); c != 2 {
		t.Errorf("refused chunks tried again: %d refusals", c)
	}
}

// hogChunktest returns an unfinished chunk of exactly size bytes: the
// fixture's chunk (GC pauses included) followed by one record of a type no
// metadata declares, whose bytes are zeros, so that every byte the header
// claims exists and is read. Written with sparse, it costs no disk.
func hogChunktest(t *testing.T, size int64) (head []byte) {
	t.Helper()
	data := chunkFile(t, 0, false)
	data[64] = 5 // in progress: held between polls
	pad := size - int64(len(data))
	// Record size, then type id, as five- and three-byte varints (JFR's
	// compressed integers accept the longer forms).
	for i := range 4 {
		data = append(data, 0x80|byte(pad>>(7*i))&0x7f)
	}
	data = append(data, byte(pad>>28)&0x7f, 0xff, 0xff, 0x7f)
	binary.BigEndian.PutUint64(data[8:], uint64(size))
	return data
}

// TestOneJVMCannotTakeTheWholeBudget: a container's JVM keeps four
// repositories, each with an unfinished chunk whose every claimed byte
// exists, of the largest size allowed (64 MiB): together the whole default
// budget (256 MiB). It holds one JVM's share (a quarter), its other chunks
// are refused as over budget, and another JVM's chunk that comes later is
// read whole.
func TestOneJVMCannotTakeTheWholeBudget(t *testing.T) {
	const chunk = 64 << 20
	n := newNodetest(t)
	honest := filepath.Join(n.honest, "a.jfr")
	if err := os.Remove(honest); err != nil { // written after the hog holds its chunks
		t.Fatal(err)
	}
	for i := range maxRepositoriesPerJVM {
		repo := filepath.Join(n.hostileRoot, "tmp", "2026_11_29_10_00_0"+strconv.Itoa(i)+"_1")
		path := filepath.Join(repo, "2026_11_29_10_00_00.jfr")
		write(t, path, hogChunktest(t, chunk))
		if err := os.Truncate(path, chunk); err != nil {
			t.Fatal(err)
		}
	}
	var refused refusalstest
	s := n.source(t, &refused, Config{MaxChunkSize: chunk, MaxMemory: 4 * chunk})
	hog := tenant{pid: 101, start: 4242}
	first, _ := pollGuarded(t, s)
	hogHeld := s.memory.heldBy(hog)
	t.Logf("the hog's four repositories: %d followed, %d MiB held of %d MiB, %d chunks refused over budget", len(s.Following()), hogHeld>>20, s.cfg.MaxMemory>>20, refused.get(RefusedOverBudget))
	if len(s.Following()) != maxRepositoriesPerJVM+1 {
		t.Fatalf("following %v, want the hog's %d repositories and the honest one", s.Following(), maxRepositoriesPerJVM)
	}
	if hogHeld != chunk {
		t.Errorf("the hog holds %d bytes, want one chunk (%d, its share)", hogHeld, chunk)
	}
	if c := refused.get(RefusedOverBudget); c != maxRepositoriesPerJVM-1 {
		t.Errorf("%d of the hog's chunks refused over budget, want %d", c, maxRepositoriesPerJVM-1)
	}
	if first.err == nil || !strings.Contains(first.err.Error(), "its share") {
		t.Errorf("share refusal not reported: %v", first.err)
	}

	write(t, honest, chunkFile(t, 0, true))
	var got pausesBy
	for range 50 { // the watcher opens it, or the next listing finds it
		if got, _ = pollGuarded(t, s); got.pauses[n.honKey] != 0 || got.ended[n.honKey] {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("the honest JVM's chunk beside the hog: %d of %d pauses, ended %v; %d MiB held in all", got.pauses[n.honKey], n.want, got.ended[n.honKey], s.HeldBytes()>>20)
	if got.pauses[n.honKey] != n.want || !got.ended[n.honKey] {
		t.Errorf("honest JVM: %d pauses, ended %v; want %d and the end", got.pauses[n.honKey], got.ended[n.honKey], n.want)
	}
	if c := refused.get(RefusedOverBudget); c != maxRepositoriesPerJVM-1 {
		t.Errorf("%d chunks refused over budget, want only the hog's %d", c, maxRepositoriesPerJVM-1)
	}
}

// TestPanicInOneRepositoryDisablesOnlyIt: decoding one JVM's chunk panics
// (a test hook stands in for a decoder bug a hostile chunk would hit). The
// panic is recovered and reported as an error naming the repository, that
// repository ends and is not read again while it exists, and the other
// JVM delivers everything.
func TestPanicInOneRepositoryDisablesOnlyIt(t *testing.T) {
	n := newNodetest(t)
	write(t, filepath.Join(n.hostile, "a.jfr"), chunkFile(t, 0, false))
	var refused refusalstest
	s := n.source(t, &refused, Config{})
	decoded := 0
	s.beforeSegment = func(dir string) {
		if dir == n.hostileKey {
			decoded++
			panic("index out of range in a hostile chunk")
		}
	}
	got, _ := pollGuarded(t, s)
	if got.err == nil || !strings.Contains(got.err.Error(), "panic while decoding: index out of range in a hostile chunk") || !strings.Contains(got.err.Error(), n.hostileKey) {
		t.Errorf("panic not reported: %v", got.err)
	}
	if c := refused.get(RefusedPanic); c != 1 {
		t.Errorf("%d panics counted, want 1", c)
	}
	if !got.ended[n.hostileKey] || contains(s.Following(), n.hostileKey) {
		t.Errorf("the repository that panicked is still followed: ended %v, following %v", got.ended[n.hostileKey], s.Following())
	}
	if got.pauses[n.honKey] != n.want || !got.ended[n.honKey] {
		t.Errorf("honest JVM: %d pauses, ended %v; want %d and the end", got.pauses[n.honKey], got.ended[n.honKey], n.want)
	}
	if s.HeldBytes() != 0 {
		t.Errorf("%d bytes still held", s.HeldBytes())
	}
	s.lastScan = time.Time{} // discover again: the JVM still runs
	if again, _ := pollGuarded(t, s); again.err != nil || decoded != 1 || contains(s.Following(), n.hostileKey) {
		t.Errorf("the disabled repository was read again: %+v, decoded %d times", again, decoded)
	}
}

// TestManyFollowersLeakNoDescriptors: repositories of discovered JVMs and
// of patterns come and go (each follower holds its root, a watch and its
// chunk files); once they are gone, the process has the descriptors it
// had after the first ones went.
func TestManyFollowersLeakNoDescriptors(t *testing.T) {
	proc := t.TempDir()
	base := t.TempDir()
	var refused refusalstest
	s := New(Config{Discover: true, ProcRoot: proc, Include: []string{filepath.Join(base, "2*_*")},
		DiscoveryInterval: time.Hour, MaxMemory: 256 << 20, Refused: refused.add})
	defer s.Close()
	want := fixturePauses(t)
	fds := 0
	for round := range 4 {
		if round == 1 {
			// After the first round: the watcher's descriptor (and the
			// runtime's poller) stay.
			fds = openFDstest(t)
		}
		var dirs []string
		for i := range 10 {
			pid := 200 + 10*round + i
			root, repo := fakeJVMtest(t, proc, pid)
			write(t, filepath.Join(repo, "a.jfr"), chunkFile(t, 0, false))
			pat := filepath.Join(base, "2026_11_29_10_00_00_"+strconv.Itoa(pid))
			write(t, filepath.Join(pat, "a.jfr"), chunkFile(t, 0, false))
			dirs = append(dirs, root, pat, filepath.Join(proc, strconv.Itoa(pid)))
		}
		s.lastScan = time.Time{}
		got, _ := pollGuarded(t, s)
		total := 0
		for _, p := range got.pauses {
			total += p
		}
		if len(s.Following()) != 20 || total != 20*want {
			t.Fatalf("round %d: following %d, %d pauses; want 20 and %d", round, len(s.Following()), total, 20*want)
		}
		for _, d := range dirs {
			if err := os.RemoveAll(d); err != nil {
				t.Fatal(err)
			}
		}
		s.lastScan = time.Time{}
		pollGuarded(t, s)
		if f := s.Following(); len(f) != 0 {
			t.Fatalf("round %d: still following %v", round, f)
		}
	}
	if got := openFDstest(t); got != fds {
		t.Errorf("%d descriptors open after the followers went, %d before", got, fds)
	}
	if len(refused.by) != 0 {
		t.Errorf("honest repositories refused: %v", refused.by)
	}
}

func openFDstest(t *testing.T) int {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(entries)
}

// TestStalledRepositoryDoesNotHoldTheOthers: a read that hangs (a chunk
// file on a stalled FUSE or NFS mount in the JVM's container) holds only
// its own repository: the others are read at every poll, the stall is
// reported and counted once, and the stalled repository's events arrive
// once its read returns.
func TestStalledRepositoryDoesNotHoldTheOthers(t *testing.T) {
	old := pollTimeout
	pollTimeout = time.Second // the honest read must fit in it on a busy host
	defer func() { pollTimeout = old }()
	n := newNodetest(t)
	write(t, filepath.Join(n.hostile, "a.jfr"), chunkFile(t, 0, false))
	var refused refusalstest
	s := n.source(t, &refused, Config{})
	release := make(chan struct{})
	var once sync.Once
	s.beforeSegment = func(dir string) {
		if dir == n.hostileKey {
			once.Do(func() { <-release })
		}
	}
	first, _ := pollGuarded(t, s)
	if first.err == nil || !strings.Contains(first.err.Error(), "has not returned after") || !strings.Contains(first.err.Error(), n.hostileKey) {
		t.Errorf("stall not reported: %v", first.err)
	}
	if first.pauses[n.honKey] != n.want || first.pauses[n.hostileKey] != 0 {
		t.Errorf("first poll: %v; want %d pauses of the honest JVM and none of the stalled one", first.pauses, n.want)
	}
	second, _ := pollGuarded(t, s)
	if second.err != nil || second.pauses[n.hostileKey] != 0 {
		t.Errorf("second poll, still stalled: %+v; want no new report and nothing of it", second)
	}
	if c := refused.get(RefusedStalled); c != 1 {
		t.Errorf("%d stalls counted, want 1", c)
	}
	// Once its read returns, a later poll takes its events (a read known
	// stalled is not waited for: the poll after the release may come
	// before the read ends).
	close(release)
	var third pausesBy
	for range 50 {
		if third, _ = pollGuarded(t, s); third.pauses[n.hostileKey] != 0 || third.ended[n.hostileKey] {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if third.pauses[n.hostileKey] != n.want {
		t.Errorf("after the read returned: %d pauses of the stalled JVM, want %d", third.pauses[n.hostileKey], n.want)
	}
	if !contains(s.Following(), n.hostileKey) && !third.ended[n.hostileKey] {
		t.Errorf("the stalled repository was dropped: following %v", s.Following())
	}
}
