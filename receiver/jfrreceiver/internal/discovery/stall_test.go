package discovery

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/otelcol-ai/otelcol-ai/internal/fsdeadline"
	"github.com/otelcol-ai/otelcol-ai/internal/procevents"
	"github.com/otelcol-ai/otelcol-ai/internal/stallfs"
)

// processGuarded hands e one batch of process events and fails the test if
// it has not returned within 10 s (a call on a stalled mount on the events'
// goroutine would never return); it returns what the batch found and how
// long it took.
func processGuarded(t *testing.T, e *Events, evs ...procevents.Event) (Arrivals, time.Duration) {
	t.Helper()
	start := time.Now()
	done := make(chan Arrivals, 1)
	go func() { done <- e.processEvents(context.Background(), procevents.Batch{Events: evs}) }()
	select {
	case a := <-done:
		return a, time.Since(start)
	case <-time.After(10 * time.Second):
		t.Fatalf("a batch of process events (%v) did not return within 10 s: a call on a JVM's folders holds discovery", evs)
		return Arrivals{}, 0
	}
}

// heldFDstest counts this process's descriptors of inotify instances and
// of files under dir.
func heldFDstest(t *testing.T, dir string) (inotify, under int) {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		target, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name()))
		switch {
		case err != nil:
		case target == "anon_inode:inotify":
			inotify++
		case strings.HasPrefix(target, dir):
			under++
		}
	}
	return inotify, under
}

// TestStalledWatchHoldsOnlyItsJVM: a JVM's /tmp is a FUSE mount whose calls
// block until released (stallfs), as a hard NFS mount's do once its server
// is gone. Watching its folders at its exec hangs, in a goroutine of its
// own: the batch of process events gives up on it at the deadline
// (fsdeadline.Timeout), counts and logs it once, and the JVM is looked at
// again as one no watch follows is (its exit reported too); a JVM exec'd
// in the next batch is watched at once and announces itself. The watch
// closes while the call still hangs; once the mount answers, what the call
// watched is removed and its descriptor closed (goleak in TestMain for its
// goroutine).
func TestStalledWatchHoldsOnlyItsJVM(t *testing.T) {
	proc := t.TempDir()
	stalledRoot := fakeProcess(t, proc, 4321, 1, "/usr/lib/jvm/java-17/bin/java", "java", "-jar", "app.jar")
	must(t, os.Remove(filepath.Join(stalledRoot, "tmp")))
	must(t, os.Mkdir(filepath.Join(stalledRoot, "stalled"), 0o755))
	mount := stallfs.MountAt(t, filepath.Join(stalledRoot, "stalled"))
	mount.WriteFile("tmp/hsperfdata_app/1", nil)
	// A link inside the root resolves inside it: /tmp is the mount's.
	must(t, os.Symlink("/stalled/tmp", filepath.Join(stalledRoot, "tmp")))
	otherRoot := fakeProcess(t, proc, 4400, 1, "/usr/lib/jvm/java-17/bin/java", "java", "-jar", "app.jar")

	instances, _ := heldFDstest(t, stalledRoot)
	w, err := NewWatch()
	if err != nil {
		t.Skipf("no inotify: %v", err)
	}
	core, logs := observer.New(zap.WarnLevel)
	stalls := 0
	e := &Events{scanner: NewScanner(proc), watch: w, logger: zap.New(core), stalled: func() { stalls++ }, unwatched: map[int]unwatchedJVM{}}

	mount.Stall()
	a, took := processGuarded(t, e, procevents.Event{Kind: procevents.Exec, PID: 4321})
	t.Logf("the batch with the exec of the JVM whose /tmp hangs: %v", took)
	if took < fsdeadline.Timeout-100*time.Millisecond || took > fsdeadline.Timeout+time.Second {
		t.Errorf("the batch took %v, want about fsdeadline.Timeout (%v)", took, fsdeadline.Timeout)
	}
	if len(a.JVMs) != 1 || a.JVMs[0].PID != 4321 {
		t.Errorf("the batch found %v, want pid 4321", a.JVMs)
	}
	if _, ok := e.unwatched[4321]; !ok || w.watched(4321) {
		t.Error("the JVM whose /tmp hangs is not looked at again as an unwatched JVM")
	}
	if stalls != 1 || logs.FilterMessageSnippet("has not returned").Len() != 1 {
		t.Errorf("%d stalls counted, %d logged; want 1 and 1", stalls, logs.FilterMessageSnippet("has not returned").Len())
	}
	if mount.Blocked() == 0 {
		t.Fatal("no call blocked on the stalled mount: the test stalls nothing")
	}

	a, took = processGuarded(t, e, procevents.Event{Kind: procevents.Exec, PID: 4400})
	t.Logf("the next batch, another JVM's exec, during the stall: %v", took)
	if took > fsdeadline.Timeout/2 || !w.watched(4400) {
		t.Errorf("the other JVM: watched %v after %v, want watched at once", w.watched(4400), took)
	}
	must(t, os.Mkdir(filepath.Join(otherRoot, "tmp", "hsperfdata_app"), 0o755))
	select {
	case <-w.Ready():
		if got := w.Take(); len(got) != 1 || got[0].PID != 4400 {
			t.Errorf("announced %v, want pid 4400", got)
		}
	case <-time.After(5 * time.Second):
		t.Error("the other JVM's hsperfdata folder did not announce it")
	}
	a, _ = processGuarded(t, e, procevents.Event{Kind: procevents.Exit, PID: 4321})
	if len(a.Exited) != 1 || a.Exited[0] != 4321 {
		t.Errorf("the exit of the JVM whose /tmp hangs: exited %v, want [4321]", a.Exited)
	}
	if stalls != 1 {
		t.Errorf("%d stalls counted after the other JVM, want still 1", stalls)
	}

	start := time.Now()
	w.Close()
	t.Logf("closing the watch with the call still hanging: %v", time.Since(start))
	if took := time.Since(start); took > time.Second {
		t.Errorf("Close took %v with a call hanging, want no wait for it", took)
	}
	mount.Release()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		w.mu.Lock()
		unclaimed := len(w.unclaimed)
		w.mu.Unlock()
		inotify, under := heldFDstest(t, stalledRoot)
		if unclaimed == 0 && inotify == instances && under == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("5 s after the release: %d watches unclaimed, %d inotify descriptors (%d before), %d in the JVM's root", unclaimed, inotify, instances, under)
		}
	}
}
