package attach

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/otelcol-ai/otelcol-ai/internal/stallfs"
)

// readyProcesstest adds to the fake proc root of c a second containerised
// JVM, pid, that sees itself as pid 1: ready to be attached (perf-data
// file, Signal Dispatcher thread) and answering every command on its
// attach socket with success and no recording. It returns its connections.
func readyProcesstest(t *testing.T, c fakeContainer, pid int) *atomic.Int32 {
	t.Helper()
	dir := filepath.Join(c.proc, strconv.Itoa(pid))
	root := filepath.Join(filepath.Dir(c.root), "rootfs"+strconv.Itoa(pid))
	for _, d := range []string{filepath.Join(dir, "task", strconv.Itoa(pid+1)), filepath.Join(root, "tmp", "hsperfdata_app"), filepath.Join(root, "app")} {
		must(t, os.MkdirAll(d, 0o755))
	}
	must(t, os.Symlink(root, filepath.Join(dir, "root")))
	must(t, os.Symlink("/app", filepath.Join(dir, "cwd")))
	must(t, os.WriteFile(filepath.Join(dir, "stat"), []byte(strconv.Itoa(pid)+" (java) S 1 1 1 0 -1 4194304 0 0 0 0 0 0 0 0 20 0 1 0 4242 0 0"), 0o644))
	must(t, os.WriteFile(filepath.Join(dir, "status"), []byte("Name:\tjava\nNSpid:\t"+strconv.Itoa(pid)+"\t1\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(dir, "task", strconv.Itoa(pid+1), "comm"), []byte("Signal Dispatch\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(root, "tmp", "hsperfdata_app", "1"), nil, 0o644))
	return listen(t, filepath.Join(root, "tmp", ".java_pid1"), "0\nNo available recordings.\n")
}

// considerGuarded runs r.Consider(j) and fails the test if it has not
// returned within 5 s (a call on a stalled mount on the caller's goroutine
// would never return); it returns how long it took.
func considerGuarded(t *testing.T, r *Recorder, j JVM) time.Duration {
	t.Helper()
	start := time.Now()
	done := make(chan error, 1)
	go func() { done <- r.Consider(j, false) }()
	select {
	case err := <-done:
		if err != nil {
			t.Logf("consider pid %d: %v", j.PID, err)
		}
		return time.Since(start)
	case <-time.After(5 * time.Second):
		t.Fatalf("Consider(pid %d) did not return within 5 s: a call on the JVM's files holds the receiver", j.PID)
		return 0
	}
}

// TestStalledTmpHoldsOnlyItsJVM: a JVM's /tmp is a FUSE mount whose calls
// block until released (stallfs), as a hard NFS mount whose server is
// gone. Looking whether it is ready to be attached (its perf-data file in
// /tmp) hangs, in the exchange's own goroutine: discovery goes on at once,
// another JVM of the same recorder is attached, the stall is reported
// (status, Stalled) once after Timeout and stallGrace, and StopAll stops
// the other JVM's recording without waiting for the exchange known to
// hang (an exchange not yet known to hang is waited for until that bound).
func TestStalledTmpHoldsOnlyItsJVM(t *testing.T) {
	c := newFakeContainer(t, "/app")
	must(t, os.Mkdir(filepath.Join(c.root, "stalled"), 0o755))
	mount := stallfs.MountAt(t, filepath.Join(c.root, "stalled"))
	mount.WriteFile("tmp/hsperfdata_app/1", nil)
	must(t, os.Symlink("/stalled/tmp", filepath.Join(c.root, "tmp")))
	c.thread(t, fakePID+1, "Signal Dispatch")
	conns := readyProcesstest(t, c, 4400)
	var stalls atomic.Int32
	r := NewRecorder(RecorderConfig{ProcRoot: c.proc, Enabled: true, Timeout: time.Second, Stalled: func() { stalls.Add(1) },
		Settings: func(JVM) (string, func(), error) { return "profile", func() {}, nil }})
	stalled, other := JVM{PID: fakePID, NSPID: 1, StartTicks: 4242}, JVM{PID: 4400, NSPID: 1, StartTicks: 4242}

	mount.Stall()
	took := considerGuarded(t, r, stalled)
	t.Logf("discovery of the JVM whose /tmp hangs: %v", took)
	begun := time.Now()
	for deadline := begun.Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		considerGuarded(t, r, stalled)
		considerGuarded(t, r, other)
		if s, _ := r.Status(other.PID, other.StartTicks); s.State == StateRecordingOurs {
			break
		}
		if time.Now().After(deadline) {
			s, _ := r.Status(other.PID, other.StartTicks)
			t.Fatalf("the other JVM: %q (%q) after 10 s, want %s", s.State, s.Reason, StateRecordingOurs)
		}
	}
	t.Logf("the other JVM attached %v after the stall began", time.Since(begun))
	if err := mount.WaitBlocked(t.Context()); err != nil {
		t.Fatal(err)
	}
	for time.Since(begun) < time.Second+stallGrace+500*time.Millisecond {
		considerGuarded(t, r, stalled)
		time.Sleep(50 * time.Millisecond)
	}
	s, _ := r.Status(stalled.PID, stalled.StartTicks)
	if s.State != StateFound || !strings.Contains(s.Reason, "has not returned") {
		t.Errorf("the stalled JVM: %q (%q), want found, reported stalled", s.State, s.Reason)
	}
	if n := stalls.Load(); n != 1 {
		t.Errorf("%d stalls counted, want 1", n)
	}

	before := conns.Load()
	start := time.Now()
	r.StopAll()
	took = time.Since(start)
	t.Logf("StopAll with the stalled exchange still hanging: %v", took)
	if took > time.Second+stallGrace+time.Second {
		t.Errorf("StopAll took %v, want at most Timeout and stallGrace (%v)", took, time.Second+stallGrace)
	}
	if conns.Load() != before+1 {
		t.Errorf("the other JVM got %d connections at StopAll, want 1 (JFR.stop)", conns.Load()-before)
	}
	if mount.Blocked() == 0 {
		t.Error("no call was blocked at StopAll: the test proved nothing")
	}
}
