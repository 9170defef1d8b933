package repository

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/otelcol-ai/otelcol-ai/internal/procroot"
	"github.com/otelcol-ai/otelcol-ai/internal/window"
	"github.com/otelcol-ai/otelcol-ai/pkg/jfr"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/jfrstream"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/jvmevent"
)

// fixture is a one-chunk recording a JDK 17 JVM wrote.
var fixture = filepath.Join("..", "..", "..", "..", "pkg", "jfr", "testdata", "g1-default-jdk17.jfr")

// chunkFile returns the fixture's chunk moved later in time by shift, with
// the JVM's final-chunk flag set or cleared.
func chunkFile(t *testing.T, shift time.Duration, final bool) []byte {
	t.Helper()
	data, err := os.ReadFile(fixture)
	if err != nil {
		t.Fatal(err)
	}
	be := binary.BigEndian
	be.PutUint64(data[32:], be.Uint64(data[32:])+uint64(shift))
	flags := be.Uint16(data[66:]) &^ 2
	if final {
		flags |= 2
	}
	be.PutUint16(data[66:], flags)
	return data
}

// fixturePauses is the number of GC pause windows in the fixture's chunk.
func fixturePauses(t *testing.T) int {
	t.Helper()
	c, err := jfr.NewChunk(chunkFile(t, 0, false), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var b jvmevent.Batch
	s := jfrstream.New()
	if err := s.Chunk(c, &b); err != nil {
		t.Fatal(err)
	}
	s.Flush(&b, true)
	n := 0
	for _, w := range b.Windows {
		if w.Kind == window.KindJVMGCPause {
			n++
		}
	}
	if n == 0 {
		t.Fatal("fixture has no GC pauses")
	}
	return n
}

type polled struct {
	pauses int
	ended  bool
	err    error
}

func poll(s *Source) polled {
	var p polled
	p.err = s.Poll(context.Background(), func(b jvmevent.Batch) {
		for _, w := range b.Windows {
			if w.Kind == window.KindJVMGCPause {
				p.pauses++
			}
		}
		p.ended = p.ended || b.Ended
	})
	return p
}

func write(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestCorruptChunkIsReportedOnceAndSkipped: a chunk whose records are
// damaged is reported once, naming the repository and file, and the next
// chunk is read as usual; the chunk marked final ends the repository.
func TestCorruptChunkIsReportedOnceAndSkipped(t *testing.T) {
	want := fixturePauses(t)
	base := t.TempDir()
	repo := filepath.Join(base, "2026_11_29_10_00_00_4242")
	write(t, filepath.Join(repo, "2026_11_29_10_00_00.jfr"), chunkFile(t, 0, false))
	s := New(Config{Include: []string{filepath.Join(base, "2*_*")}, DiscoveryInterval: time.Hour})
	defer s.Close()
	if p := poll(s); p.err != nil || p.pauses != want {
		t.Fatalf("first chunk: %+v, want %d pauses", p, want)
	}

	bad := chunkFile(t, time.Second, false)
	copy(bad[68:], []byte{0xff, 0xff, 0xff, 0xff, 0x7f})
	write(t, filepath.Join(repo, "2026_11_29_10_00_01.jfr"), bad)
	p := poll(s)
	if p.err == nil || !strings.Contains(p.err.Error(), repo) || !strings.Contains(p.err.Error(), "2026_11_29_10_00_01.jfr") {
		t.Fatalf("corrupt chunk: %+v", p)
	}
	if p := poll(s); p.err != nil {
		t.Fatalf("the same problem reported again: %v", p.err)
	}

	write(t, filepath.Join(repo, "2026_11_29_10_00_02.jfr"), chunkFile(t, 2*time.Second, true))
	if p := poll(s); p.err != nil || p.pauses != want || !p.ended {
		t.Fatalf("chunk after the corrupt one: %+v, want %d pauses and the end", p, want)
	}
	if f := s.Following(); len(f) != 0 {
		t.Fatalf("still following %v", f)
	}
	if p := poll(s); p.pauses != 0 || p.err != nil {
		t.Fatalf("a repository read to its end was read again: %+v", p)
	}
}

// TestTruncatedChunkIsAbandonedForTheNext: a chunk cut short (its header
// announces more than the file has) holds the repository only until a
// later chunk shows the JVM moved on.
func TestTruncatedChunkIsAbandonedForTheNext(t *testing.T) {
	want := fixturePauses(t)
	base := t.TempDir()
	repo := filepath.Join(base, "2026_11_29_10_00_00_4243")
	full := chunkFile(t, 0, false)
	write(t, filepath.Join(repo, "a.jfr"), full[:len(full)/2])
	s := New(Config{Include: []string{filepath.Join(base, "2*_*")}, DiscoveryInterval: time.Hour})
	defer s.Close()
	if p := poll(s); p.err != nil || p.pauses != 0 {
		t.Fatalf("a chunk still being written: %+v", p)
	}
	write(t, filepath.Join(repo, "b.jfr"), chunkFile(t, time.Second, true))
	p := poll(s)
	if p.err == nil || !strings.Contains(p.err.Error(), "a.jfr") || p.pauses != want || !p.ended {
		t.Fatalf("after the next chunk appeared: %+v, want an error naming a.jfr and %d pauses", p, want)
	}
}

// TestRepositoryDeletedWhileRead: the JVM (here: whoever owns the folder)
// deletes the repository; the receiver ends it quietly.
func TestRepositoryDeletedWhileRead(t *testing.T) {
	base := t.TempDir()
	repo := filepath.Join(base, "2026_11_29_10_00_00_4244")
	write(t, filepath.Join(repo, "a.jfr"), chunkFile(t, 0, false))
	s := New(Config{Include: []string{filepath.Join(base, "2*_*")}, DiscoveryInterval: time.Hour})
	defer s.Close()
	if p := poll(s); p.err != nil || p.pauses == 0 {
		t.Fatalf("first poll: %+v", p)
	}
	if err := os.RemoveAll(repo); err != nil {
		t.Fatal(err)
	}
	if p := poll(s); p.err != nil || !p.ended {
		t.Fatalf("after deletion: %+v", p)
	}
	if f := s.Following(); len(f) != 0 {
		t.Fatalf("still following %v", f)
	}
}

// TestSameRepositoryByTwoPathsFollowedOnce: a pattern that reaches a
// repository another pattern (or discovery) already follows under another
// path (a symlink, /proc/<pid>/root) does not make it read twice.
func TestSameRepositoryByTwoPathsFollowedOnce(t *testing.T) {
	base := t.TempDir()
	repo := filepath.Join(base, "real", "2026_11_29_10_00_00_4245")
	write(t, filepath.Join(repo, "a.jfr"), chunkFile(t, 0, true))
	link := filepath.Join(base, "link")
	if err := os.Symlink(filepath.Join(base, "real"), link); err != nil {
		t.Fatal(err)
	}
	s := New(Config{Include: []string{filepath.Join(base, "real", "2*_*"), filepath.Join(link, "2*_*")}, DiscoveryInterval: time.Hour})
	defer s.Close()
	want := fixturePauses(t)
	if p := poll(s); p.err != nil || p.pauses != want {
		t.Fatalf("%+v, want %d pauses once", p, want)
	}
}

// TestStalePatternRepositoryEnds: a repository found by a pattern whose
// chunk is never finished and stops growing (a JVM killed with its
// repository preserved) is let go after staleAfter.
func TestStalePatternRepositoryEnds(t *testing.T) {
	old := staleAfter
	staleAfter = 50 * time.Millisecond
	defer func() { staleAfter = old }()
	base := t.TempDir()
	repo := filepath.Join(base, "2026_11_29_10_00_00_4246")
	chunk := chunkFile(t, 0, false)
	chunk[64] = 5 // in progress: never finished
	write(t, filepath.Join(repo, "a.jfr"), chunk)
	s := New(Config{Include: []string{filepath.Join(base, "2*_*")}, DiscoveryInterval: time.Hour})
	defer s.Close()
	if f := s.Followed(); len(f) != 0 {
		t.Fatalf("followed before the first poll: %+v", f)
	}
	if p := poll(s); p.err != nil || p.pauses == 0 || p.ended {
		t.Fatalf("first poll: %+v", p)
	}
	// What the receiver's JFR-over-xlog preference reads: a pattern's
	// repository, its JVM's own pid, and the chunk JFR reports from.
	h, err := jfr.ParseHeader(chunk[:jfr.HeaderSize])
	if err != nil {
		t.Fatal(err)
	}
	if f := s.Followed(); len(f) != 1 || f[0].Dir != repo || f[0].Discovered || f[0].JVM.PID != 4246 ||
		(f[0].OwnPID != 4246 && int64(f[0].OwnPID) != s.followers[repo].stream.PID()) || f[0].From != h.StartNanos {
		t.Errorf("followed %+v, want %s from %d", f, repo, h.StartNanos)
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(s.Following()) > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
		if p := poll(s); p.err != nil {
			t.Fatal(p.err)
		}
	}
	if f := s.Following(); len(f) != 0 {
		t.Fatalf("a stale repository is still followed: %v", f)
	}
}

// TestChunkCreatedAndDeletedBetweenPollsIsRead: the JVM begins a chunk,
// finishes it and deletes the repository (it exits) between two polls.
// The watcher opened the file when it was created, so its events arrive.
func TestChunkCreatedAndDeletedBetweenPollsIsRead(t *testing.T) {
	s, repo, want := afterFirstChunk(t, "2026_11_29_10_00_00_4246", true)
	write(t, filepath.Join(repo, "b.jfr"), chunkFile(t, time.Second, true))
	waitHeld(t, s.followers[repo].early, "b.jfr")
	lastChunkAfterDeletion(t, s, repo, want)
}

// TestNextChunkFileHeldBeforeItsHeader: without inotify, a chunk file that
// exists but has no header yet (the JVM creates the next file before it
// finishes the current one) is opened and held, and read after the JVM
// wrote it and deleted the repository.
func TestNextChunkFileHeldBeforeItsHeader(t *testing.T) {
	s, repo, want := afterFirstChunk(t, "2026_11_29_10_00_00_4247", false, "b.jfr")
	if f := s.followers[repo]; f == nil || f.held["b.jfr"] == nil {
		t.Fatal("b.jfr is not held")
	}
	file, err := os.OpenFile(filepath.Join(repo, "b.jfr"), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := file.Write(chunkFile(t, time.Second, true)); err != nil {
		t.Fatal(err)
	}
	file.Close()
	lastChunkAfterDeletion(t, s, repo, want)
}

// afterFirstChunk makes a repository folder named name holding a.jfr (a
// finished chunk, not the last) and the empty files named by empty, and a
// source (with or without inotify) that has read a.jfr; want is the number
// of GC pauses in a chunk.
func afterFirstChunk(t *testing.T, name string, inotify bool, empty ...string) (s *Source, repo string, want int) {
	t.Helper()
	want = fixturePauses(t)
	base := t.TempDir()
	repo = filepath.Join(base, name)
	write(t, filepath.Join(repo, "a.jfr"), chunkFile(t, 0, false))
	for _, e := range empty {
		write(t, filepath.Join(repo, e), nil)
	}
	s = New(Config{Include: []string{filepath.Join(base, "2*_*")}, DiscoveryInterval: time.Hour})
	s.noWatcher = !inotify
	t.Cleanup(func() { s.Close() })
	if p := poll(s); p.err != nil || p.pauses != want || p.ended {
		t.Fatalf("first chunk: %+v, want %d pauses", p, want)
	}
	if inotify && s.watcher == nil {
		t.Fatal("no inotify watcher")
	}
	return s, repo, want
}

// lastChunkAfterDeletion deletes repo, as a JVM does at exit, and checks
// that the next poll reads the last chunk (want pauses) and ends it.
func lastChunkAfterDeletion(t *testing.T, s *Source, repo string, want int) {
	t.Helper()
	if err := os.RemoveAll(repo); err != nil {
		t.Fatal(err)
	}
	if p := poll(s); p.err != nil || p.pauses != want || !p.ended {
		t.Fatalf("after the repository was deleted: %+v, want %d pauses and the end", p, want)
	}
	if f := s.Following(); len(f) != 0 {
		t.Fatalf("still following %v", f)
	}
}

// TestProbedRepositoryFolderRemadeUnderItsNameIsRead: HotSpot makes a
// repository folder to check that it can, deletes it, and makes the real
// one, often within the same second and so under the same name (seen with
// JFR.start through the attach protocol and with -XX:StartFlightRecording
// in a busy JVM). A follower that met the probe ends when it is deleted;
// the folder made under its name afterwards is another folder, and is
// followed and read.
func TestProbedRepositoryFolderRemadeUnderItsNameIsRead(t *testing.T) {
	want := fixturePauses(t)
	base := t.TempDir()
	repo := filepath.Join(base, "2026_11_29_10_00_00_4248")
	if err := os.Mkdir(repo, 0o755); err != nil {
		t.Fatal(err)
	}
	s := New(Config{Include: []string{filepath.Join(base, "2*_*")}, DiscoveryInterval: time.Hour})
	defer s.Close()
	if p := poll(s); p.err != nil || p.pauses != 0 || p.ended {
		t.Fatalf("the probe folder: %+v", p)
	}
	if f := s.Following(); len(f) != 1 {
		t.Fatalf("following %v, want the probe folder", f)
	}
	// Deleted before the next discovery: its follower ends.
	if err := os.Remove(repo); err != nil {
		t.Fatal(err)
	}
	if p := poll(s); p.err != nil || !p.ended {
		t.Fatalf("after the probe folder was deleted: %+v, want its end", p)
	}
	// The real repository, under the same name, before any discovery
	// could see the name gone.
	write(t, filepath.Join(repo, "a.jfr"), chunkFile(t, 0, true))
	s.Rescan()
	p := poll(s)
	if p.err != nil || p.pauses != want {
		t.Fatalf("the repository made under the probe's name: %+v, want %d pauses", p, want)
	}
	// A folder that ended and is still the same folder stays ended.
	s.Rescan()
	if p := poll(s); p.pauses != 0 {
		t.Errorf("a repository read to its end was read again: %+v", p)
	}
}

// TestProbedRepositoryFolderRemadeWhileWaitedFor: the real repository is
// made under the probe's name after the follower that met the probe found
// it gone, the JVM running: the follower goes on looking for its name for
// a while, and then reads the new folder, watching it, so a chunk the JVM
// makes, finishes and deletes (it exits) before the next poll is read too.
func TestProbedRepositoryFolderRemadeWhileWaitedFor(t *testing.T) {
	want := fixturePauses(t)
	s, repo := followProbe(t, 4249)
	if err := os.Remove(repo); err != nil {
		t.Fatal(err)
	}
	if p := poll(s); p.err != nil || p.ended || p.pauses != 0 {
		t.Fatalf("the probe deleted: %+v, want the follower to go on looking for its name", p)
	}
	if err := os.Mkdir(repo, 0o755); err != nil {
		t.Fatal(err)
	}
	if p := poll(s); p.err != nil || p.ended || p.pauses != 0 {
		t.Fatalf("its name remade: %+v, want the follower to go on", p)
	}
	f := s.followers[repo]
	if f == nil || f.early == nil {
		t.Fatalf("the remade folder is not followed and watched: %+v", f)
	}
	// A chunk made and the folder deleted between two polls: held by the
	// new watch.
	write(t, filepath.Join(repo, "a.jfr"), chunkFile(t, 0, true))
	waitHeld(t, f.early, "a.jfr")
	if err := os.RemoveAll(repo); err != nil {
		t.Fatal(err)
	}
	if p := poll(s); p.err != nil || p.pauses != want {
		t.Fatalf("after the chunk and the folder were deleted: %+v, want %d pauses", p, want)
	}
}

// TestProbedRepositoryFolderRemadeBetweenPolls: the probe folder is deleted
// and the real one made under its name between two polls, so that no poll
// finds the name gone. The follower tells the new folder from the one it
// watches (the kernel dropped that watch; the inode differs) and watches
// the new one, so a chunk the JVM makes, finishes and deletes (it exits)
// before the next poll is read; a chunk made before the new watch began is
// found by listing the new folder again.
func TestProbedRepositoryFolderRemadeBetweenPolls(t *testing.T) {
	want := fixturePauses(t)
	s, repo := followProbe(t, 4250)
	probe := s.followers[repo].early
	if probe == nil {
		t.Fatal("the probe folder is not watched")
	}
	if err := os.Remove(repo); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(repo, "a.jfr"), chunkFile(t, 0, false))
	if p := poll(s); p.err != nil || p.ended || p.pauses != want {
		t.Fatalf("the folder remade with a chunk: %+v, want %d pauses", p, want)
	}
	f := s.followers[repo]
	if f == nil || f.early == nil || f.early == probe {
		t.Fatalf("the remade folder is not watched afresh (followed: %v)", f != nil)
	}
	write(t, filepath.Join(repo, "b.jfr"), chunkFile(t, time.Second, true))
	waitHeld(t, f.early, "b.jfr")
	if err := os.RemoveAll(repo); err != nil {
		t.Fatal(err)
	}
	if p := poll(s); p.err != nil || p.pauses != want || !p.ended {
		t.Fatalf("after the last chunk and the folder were deleted: %+v, want %d pauses and the end", p, want)
	}
}

// followProbe makes an empty repository folder (HotSpot's probe) for the
// JVM pid and a source that follows it as a discovered JVM's repository is
// followed (a folder inside the JVM's root, here a temporary folder; the
// JVM running) and has polled it once.
func followProbe(t *testing.T, pid int) (*Source, string) {
	t.Helper()
	base := t.TempDir()
	repo := filepath.Join(base, fmt.Sprintf("2026_11_29_10_00_00_%d", pid))
	if err := os.Mkdir(repo, 0o755); err != nil {
		t.Fatal(err)
	}
	s := New(Config{DiscoveryInterval: time.Hour})
	t.Cleanup(func() { s.Close() })
	info, err := os.Stat(repo)
	if err != nil {
		t.Fatal(err)
	}
	c := candidate{inside: "/" + filepath.Base(repo), dir: repo, info: info, discovered: true,
		jvm: jvmevent.JVM{PID: pid, Source: repo}, alive: func() bool { return true }}
	if s.add(&scanState{found: map[string]bool{}}, c, opened{open: func() (*procroot.Root, error) { return procroot.OpenDir(base) }}) == nil {
		t.Fatal("not followed")
	}
	if p := poll(s); p.err != nil || p.pauses != 0 || p.ended {
		t.Fatalf("the probe folder: %+v", p)
	}
	return s, repo
}

// waitHeld waits up to 10 s for the watch e to hold the chunk file name.
func waitHeld(t *testing.T, e *early, name string) {
	t.Helper()
	held := func() bool {
		e.mu.Lock()
		defer e.mu.Unlock()
		return e.files[name] != nil
	}
	for deadline := time.Now().Add(10 * time.Second); !held(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the watch did not open %s", name)
		}
	}
}
