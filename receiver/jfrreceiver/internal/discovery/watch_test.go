package discovery

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// TestWatchAnnouncesRepositoryFolder: a JVM's repository folder made in
// its repository base announces it; another pid's folder and a file of
// another name do not. The "JVM" is this process, its root the host's.
func TestWatchAnnouncesRepositoryFolder(t *testing.T) {
	w, err := NewWatch()
	if err != nil {
		t.Skipf("no inotify: %v", err)
	}
	defer w.Close()
	base := t.TempDir()
	self := os.Getpid()
	j := JVM{PID: self, NSPID: self, ProcRoot: "/proc", RepositoryBase: base}
	if watching, _ := w.Add(t.Context(), j); !watching {
		t.Fatal("nothing watched")
	}
	if w.Watching() != 1 {
		t.Fatalf("watching %d JVMs, want 1", w.Watching())
	}
	for _, name := range []string{"2026_12_01_10_00_00_" + strconv.Itoa(self+1), "unrelated"} {
		if err := os.Mkdir(filepath.Join(base, name), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-w.Ready():
		t.Fatalf("announced by another pid's folder: %v", w.Take())
	case <-time.After(100 * time.Millisecond):
	}
	if err := os.Mkdir(filepath.Join(base, "2026_12_01_10_00_00_"+strconv.Itoa(self)), 0o755); err != nil {
		t.Fatal(err)
	}
	select {
	case <-w.Ready():
	case <-time.After(5 * time.Second):
		t.Fatal("the JVM's repository folder did not announce it")
	}
	got := w.Take()
	if len(got) != 1 || got[0].PID != self {
		t.Fatalf("announced %v, want pid %d", got, self)
	}
	w.Remove(self)
	if w.Watching() != 0 {
		t.Fatalf("watching %d JVMs after Remove", w.Watching())
	}
}
