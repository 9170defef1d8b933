package xlog

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/otelcol-ai/otelcol-ai/internal/window"
)

// restartedSource is a new source (a restarted collector) resuming from
// the positions the last one saved.
func restartedSource(dir string, clock *window.Clock, saved map[string]Position) *Source {
	return NewSource(Config{Include: []string{filepath.Join(dir, "gc.log")}, DiscoveryInterval: time.Hour, Clock: clock, Resume: saved})
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
		appendFile(t, path, "")
		s := restartedSource(dir, clock, nil)
		pollAll(t, s)
		appendFile(t, path, g1Safepoint17+"\n"+g1Pause17+"\n")
		pollAll(t, s)
		saved := s.Positions()
		s.Close()
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
		appendFile(t, path, "")
		s := restartedSource(dir, clock, nil)
		pollAll(t, s)
		appendFile(t, path, g1Safepoint17+"\n")
		pollAll(t, s)
		saved := s.Positions()
		s.Close()
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
