package discovery

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/otelcol-ai/otelcol-ai/internal/fsdeadline"
	"github.com/otelcol-ai/otelcol-ai/internal/procdiscovery/procdiscoverytest"
	"github.com/otelcol-ai/otelcol-ai/internal/procevents"
	"github.com/otelcol-ai/otelcol-ai/internal/stallfs"
)

// sendGuarded hands e one batch of process events and waits until e hands
// over what it found that satisfies want, failing the test after 10 s (a
// call on a stalled mount on the events' goroutine would hold it for
// ever); it returns that and how long it took.
func sendGuarded(t *testing.T, e *Events, feed *procdiscoverytest.Feed, want func(Arrivals) bool, evs ...procevents.Event) (Arrivals, time.Duration) {
	t.Helper()
	start := time.Now()
	feed.Send(false, evs...)
	deadline := time.After(10 * time.Second)
	for {
		select {
		case <-e.Ready():
			if a := e.Take(); want(a) {
				return a, time.Since(start)
			}
		case <-deadline:
			t.Fatalf("a batch of process events (%v) was not handled within 10 s: a call on a JVM's folders holds discovery", evs)
			return Arrivals{}, 0
		}
	}
}

// jvmIn reports whether a holds pid among its JVMs.
func jvmIn(pid int) func(Arrivals) bool {
	return func(a Arrivals) bool {
		return slices.ContainsFunc(a.JVMs, func(j JVM) bool { return j.PID == pid })
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
	var stalls atomic.Int32
	feed := procdiscoverytest.NewFeed()
	e := newEvents(NewScanner(proc), feed, w, zap.New(core), func() { stalls.Add(1) })

	mount.Stall()
	a, took := sendGuarded(t, e, feed, jvmIn(4321), procevents.Event{Kind: procevents.Exec, PID: 4321})
	t.Logf("the batch with the exec of the JVM whose /tmp hangs: %v", took)
	if took < fsdeadline.Timeout-100*time.Millisecond || took > fsdeadline.Timeout+time.Second {
		t.Errorf("the batch took %v, want about fsdeadline.Timeout (%v)", took, fsdeadline.Timeout)
	}
	if len(a.JVMs) != 1 {
		t.Errorf("the batch found %v, want pid 4321", a.JVMs)
	}
	if w.watched(4321) {
		t.Error("the JVM whose /tmp hangs is watched")
	}
	// Looked at again as a JVM no watch follows is: announced anew.
	sendGuarded(t, e, feed, jvmIn(4321))
	if n := stalls.Load(); n != 1 || logs.FilterMessageSnippet("has not returned").Len() != 1 {
		t.Errorf("%d stalls counted, %d logged; want 1 and 1", n, logs.FilterMessageSnippet("has not returned").Len())
	}
	if mount.Blocked() == 0 {
		t.Fatal("no call blocked on the stalled mount: the test stalls nothing")
	}

	_, took = sendGuarded(t, e, feed, jvmIn(4400), procevents.Event{Kind: procevents.Exec, PID: 4400})
	t.Logf("the next batch, another JVM's exec, during the stall: %v", took)
	if took > fsdeadline.Timeout/2 || !w.watched(4400) {
		t.Errorf("the other JVM: watched %v after %v, want watched at once", w.watched(4400), took)
	}
	must(t, os.Mkdir(filepath.Join(otherRoot, "tmp", "hsperfdata_app"), 0o755))
	// Only its watch announces 4400 again (a watched JVM is not rechecked).
	sendGuarded(t, e, feed, jvmIn(4400))
	a, _ = sendGuarded(t, e, feed, func(a Arrivals) bool { return len(a.Exited) > 0 }, procevents.Event{Kind: procevents.Exit, PID: 4321})
	if len(a.Exited) != 1 || a.Exited[0] != 4321 {
		t.Errorf("the exit of the JVM whose /tmp hangs: exited %v, want [4321]", a.Exited)
	}
	if n := stalls.Load(); n != 1 {
		t.Errorf("%d stalls counted after the other JVM, want still 1", n)
	}

	start := time.Now()
	e.Close()
	t.Logf("closing the events and the watch with the call still hanging: %v", time.Since(start))
	if took := time.Since(start); took > time.Second {
		t.Errorf("Close took %v with a call hanging, want no wait for it", took)
	}
	if !feed.Closed() {
		t.Error("Close did not close the events' source")
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
