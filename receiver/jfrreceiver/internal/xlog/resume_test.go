package xlog

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/otelcol-ai/otelcol-ai/internal/window"
)

// restartedSource is a new source (a restarted collector) resuming from
// the positions the last one saved.
func restartedSource(dir string, clock *window.Clock, saved map[string]Position) *Source {
	return NewSource(Config{Include: []string{filepath.Join(dir, "gc.log")}, DiscoveryInterval: time.Hour, Clock: clock, Resume: saved})
}

// savedAfter is a source (the collector before a restart) that followed
// dir's gc.log from its creation and read line, closed; it returns where it
// stood.
func savedAfter(t *testing.T, dir string, clock *window.Clock, line string) map[string]Position {
	t.Helper()
	path := filepath.Join(dir, "gc.log")
	appendFile(t, path, "")
	s := restartedSource(dir, clock, nil)
	defer s.Close()
	pollAll(t, s)
	appendFile(t, path, line)
	pollAll(t, s)
	return s.Positions()
}

func setMtime(t *testing.T, path string, at time.Time) {
	t.Helper()
	if err := os.Chtimes(path, at, at); err != nil {
		t.Fatal(err)
	}
}

// TestResumeAfterRestart: a line half written at shutdown is read whole
// once after the restart; a file rotated twice while the collector was
// down (logrotate numbering: gc.log -> gc.log.1 -> gc.log.2) is read from
// the saved offset in its renamed file, then the file rotated after it,
// then the new one, each line once; a file truncated meanwhile is read
// from its start; a saved file gone altogether leaves the new one read
// from its start.
func TestResumeAfterRestart(t *testing.T) {
	clock := window.NewFixedClock(1_000_000_000)
	t.Run("partial_line", func(t *testing.T) {
		dir := t.TempDir()
		path := filepath.Join(dir, "gc.log")
		appendFile(t, path, "")
		s := restartedSource(dir, clock, nil)
		pollAll(t, s)
		half := len(g1Pause17) / 2
		appendFile(t, path, g1Safepoint17+"\n"+g1Pause17[:half])
		if b := pollAll(t, s); len(b.Windows) != 1 {
			t.Fatalf("before the restart: %+v", b.Windows)
		}
		saved := s.Positions()
		s.Close()
		appendFile(t, path, g1Pause17[half:]+"\n")
		s2 := restartedSource(dir, clock, saved)
		defer s2.Close()
		b := pollAll(t, s2)
		if len(b.Windows) != 1 || b.Windows[0].Kind != window.KindJVMGCPause {
			t.Fatalf("after the restart: %+v, want the split pause only", b.Windows)
		}
	})
	t.Run("rotated_twice", func(t *testing.T) {
		dir := t.TempDir()
		path := filepath.Join(dir, "gc.log")
		appendFile(t, path, "")
		s := restartedSource(dir, clock, nil)
		pollAll(t, s)
		appendFile(t, path, g1Safepoint17+"\n")
		if b := pollAll(t, s); len(b.Windows) != 1 {
			t.Fatalf("before the restart: %+v", b.Windows)
		}
		saved := s.Positions()
		s.Close()
		base := time.Now().Add(-time.Hour)
		appendFile(t, path, g1Pause17+"\n") // A, in the saved file
		setMtime(t, path, base)
		if err := os.Rename(path, path+".1"); err != nil {
			t.Fatal(err)
		}
		appendFile(t, path, zSafepoint25+"\n") // B
		setMtime(t, path, base.Add(time.Minute))
		if err := os.Rename(path+".1", path+".2"); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(path, path+".1"); err != nil {
			t.Fatal(err)
		}
		appendFile(t, path, zPause25+"\n") // C
		s2 := restartedSource(dir, clock, saved)
		defer s2.Close()
		var kinds []window.Kind
		for range 3 { // the chain is read over polls
			for _, w := range pollAll(t, s2).Windows {
				kinds = append(kinds, w.Kind)
			}
		}
		want := []window.Kind{window.KindJVMGCPause, window.KindJVMSafepoint, window.KindJVMGCPause}
		if len(kinds) != len(want) || kinds[0] != want[0] || kinds[1] != want[1] || kinds[2] != want[2] {
			t.Fatalf("after the restart: %v, want %v (A, B, C once each, in order)", kinds, want)
		}
	})
	t.Run("truncated", func(t *testing.T) {
		dir := t.TempDir()
		path := filepath.Join(dir, "gc.log")
		saved := savedAfter(t, dir, clock, g1Safepoint17+"\n"+g1Pause17+"\n")
		if err := os.Truncate(path, 0); err != nil {
			t.Fatal(err)
		}
		appendFile(t, path, zSafepoint25+"\n")
		s2 := restartedSource(dir, clock, saved)
		defer s2.Close()
		if b := pollAll(t, s2); len(b.Windows) != 1 || b.Windows[0].Kind != window.KindJVMSafepoint {
			t.Fatalf("after the restart: %+v, want the new line", b.Windows)
		}
	})
	t.Run("gone", func(t *testing.T) {
		dir := t.TempDir()
		path := filepath.Join(dir, "gc.log")
		saved := savedAfter(t, dir, clock, g1Safepoint17+"\n")
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
		appendFile(t, path, zSafepoint25+"\n"+zPause25+"\n")
		s2 := restartedSource(dir, clock, saved)
		defer s2.Close()
		if b := pollAll(t, s2); len(b.Windows) != 2 {
			t.Fatalf("after the restart: %+v, want the new file whole", b.Windows)
		}
	})
}

// TestRotatedTwiceBetweenPolls: HotSpot renames gc.log to gc.log.N
// whenever it is full; when that happens twice between two polls (a
// busy JVM, a collector starved of CPU), the file renamed in between is
// read whole after the rest of the old one and before the new one: none is
// skipped and none read twice, also when the renames come while a restart
// reads the files rotated during the downtime.
func TestRotatedTwiceBetweenPolls(t *testing.T) {
	clock := window.NewFixedClock(1_000_000_000)
	kinds := func(ws []window.Window) []window.Kind {
		var out []window.Kind
		for _, w := range ws {
			out = append(out, w.Kind)
		}
		return out
	}
	base := time.Now().Add(-time.Hour)
	// rotate renames gc.log as HotSpot does (the writer closed it before
	// the rename) and starts a new one holding line, written at mtime.
	rotate := func(t *testing.T, path string, n int, line string, mtime time.Time) {
		t.Helper()
		if err := os.Rename(path, fmt.Sprintf("%s.%d", path, n)); err != nil {
			t.Fatal(err)
		}
		appendFile(t, path, line+"\n")
		setMtime(t, path, mtime)
	}

	t.Run("running", func(t *testing.T) {
		dir := t.TempDir()
		path := filepath.Join(dir, "gc.log")
		appendFile(t, path, "")
		s := restartedSource(dir, clock, nil)
		defer s.Close()
		pollAll(t, s)
		appendFile(t, path, g1Safepoint17+"\n")
		if b := pollAll(t, s); len(b.Windows) != 1 {
			t.Fatalf("before the rotations: %+v", b.Windows)
		}
		appendFile(t, path, g1Pause17+"\n") // A: the rest of the old file
		setMtime(t, path, base)
		rotate(t, path, 0, zSafepoint25, base.Add(time.Second)) // B: renamed in between
		rotate(t, path, 1, zPause25, base.Add(2*time.Second))   // C: the new file
		got := kinds(pollAll(t, s).Windows)
		want := []window.Kind{window.KindJVMGCPause, window.KindJVMSafepoint, window.KindJVMGCPause}
		if !slices.Equal(got, want) {
			t.Fatalf("after two rotations: %v, want %v (A, B, C once each, in order)", got, want)
		}
		// And the next rotation again finds only what is new: the files
		// read before are older than the one just read, or read already.
		setMtime(t, path+".0", base.Add(3*time.Second)) // a touched old file: not read again
		rotate(t, path, 2, g1Safepoint17, base.Add(4*time.Second))
		if got := kinds(pollAll(t, s).Windows); !slices.Equal(got, []window.Kind{window.KindJVMSafepoint}) {
			t.Fatalf("after a third rotation: %v, want the new file's safepoint only", got)
		}
	})

	t.Run("restart", func(t *testing.T) {
		dir := t.TempDir()
		path := filepath.Join(dir, "gc.log")
		saved := savedAfter(t, dir, clock, g1Safepoint17+"\n")
		// A, with more lines after its pause than a poll reads.
		appendFile(t, path, g1Pause17+"\n"+strings.Repeat("filler\n", maxReadPerPoll/7+1))
		setMtime(t, path, base)
		rotate(t, path, 0, zSafepoint25, base.Add(time.Second)) // B, current when the restart lists the folder
		s2 := restartedSource(dir, clock, saved)
		defer s2.Close()
		got := kinds(pollAll(t, s2).Windows) // A's pause; the rest of A is left for the next poll
		// B is rotated out and C written while the restart is still
		// reading A.
		rotate(t, path, 1, zPause25, base.Add(2*time.Second))
		for range 2 {
			got = append(got, kinds(pollAll(t, s2).Windows)...)
		}
		want := []window.Kind{window.KindJVMGCPause, window.KindJVMSafepoint, window.KindJVMGCPause}
		if !slices.Equal(got, want) {
			t.Fatalf("after the restart: %v, want %v (A, B, C once each, in order)", got, want)
		}
	})
}
