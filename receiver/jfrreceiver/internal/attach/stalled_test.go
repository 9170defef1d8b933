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
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/discovery"
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
func considerGuarded(t *testing.T, r *Recorder, j discovery.JVM) time.Duration {
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
		Settings: func(discovery.JVM) (string, func(), error) { return "profile", func() {}, nil }})
	stalled, other := discovery.JVM{PID: fakePID, NSPID: 1, StartTicks: 4242}, discovery.JVM{PID: 4400, NSPID: 1, StartTicks: 4242}

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

// TestStalledOptOutHoldsOnlyItsJVM: a JVM's /proc/<pid> stops answering
// (stallfs in place of its folder of the fake proc root), as a read of a
// process's environ or cmdline does while its memory map is locked.
// Reading its opt-out hangs in a goroutine of its own: Consider returns
// after checkWait the first time and at once after, another JVM of the
// same recorder is attached meanwhile, the stall is reported (status,
// Stalled) once after checkStall, StopAll does not wait for the read, and
// once the folder answers the read is taken and the JVM goes on.
func TestStalledOptOutHoldsOnlyItsJVM(t *testing.T) {
	c := newFakeContainer(t, "/app")
	c.thread(t, fakePID+1, "Signal Dispatch")
	conns := readyProcesstest(t, c, 4400)
	const pid = 4500
	dir := filepath.Join(c.proc, strconv.Itoa(pid))
	must(t, os.Mkdir(dir, 0o755))
	mount := stallfs.MountAt(t, dir)
	mount.WriteFile("stat", []byte(strconv.Itoa(pid)+" (java) S 1 1 1 0 -1 4194304 0 0 0 0 0 0 0 0 20 0 1 0 4242 0 0"))
	mount.WriteFile("status", []byte("Name:\tjava\nNSpid:\t"+strconv.Itoa(pid)+"\t1\n"))
	mount.WriteFile("cmdline", []byte("java\x00-jar\x00app.jar\x00"))
	mount.WriteFile("environ", []byte("PATH=/usr/bin\x00"))
	var stalls atomic.Int32
	r := NewRecorder(RecorderConfig{ProcRoot: c.proc, Enabled: true, Timeout: time.Second, Stalled: func() { stalls.Add(1) },
		Settings: func(discovery.JVM) (string, func(), error) { return "profile", func() {}, nil }})
	stalled, other := discovery.JVM{PID: pid, NSPID: 1, StartTicks: 4242}, discovery.JVM{PID: 4400, NSPID: 1, StartTicks: 4242}

	mount.Stall()
	begun := time.Now()
	took := considerGuarded(t, r, stalled)
	t.Logf("discovery of the JVM whose /proc hangs: %v (checkWait %v)", took, checkWait)
	if took > checkWait+time.Second {
		t.Errorf("Consider took %v, want about checkWait (%v)", took, checkWait)
	}
	var slowest time.Duration
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		slowest = max(slowest, considerGuarded(t, r, stalled))
		considerGuarded(t, r, other)
		if s, _ := r.Status(other.PID, other.StartTicks); s.State == StateRecordingOurs {
			break
		}
		if time.Now().After(deadline) {
			s, _ := r.Status(other.PID, other.StartTicks)
			t.Fatalf("the other JVM: %q (%q) after 10 s, want %s", s.State, s.Reason, StateRecordingOurs)
		}
	}
	t.Logf("the other JVM attached %v after the stall began; later discoveries of the stalled JVM took %v at most", time.Since(begun), slowest)
	if slowest > checkWait*3/4 {
		t.Errorf("a later Consider of the stalled JVM took %v: it waited for the read again", slowest)
	}
	if mount.Blocked() == 0 {
		t.Fatal("no call blocked on the stalled /proc folder: the test stalls nothing")
	}
	if s, _ := r.Status(stalled.PID, stalled.StartTicks); s.State != StateFound || s.Reason != "reading its opt-out" {
		t.Errorf("the stalled JVM before checkStall: %q (%q), want found, reading its opt-out", s.State, s.Reason)
	}
	for time.Since(begun) < checkStall+300*time.Millisecond {
		considerGuarded(t, r, stalled)
		time.Sleep(50 * time.Millisecond)
	}
	considerGuarded(t, r, stalled)
	s, _ := r.Status(stalled.PID, stalled.StartTicks)
	if s.State != StateFound || !strings.Contains(s.Reason, "has not returned") {
		t.Errorf("the stalled JVM after checkStall: %q (%q), want found, reported stalled", s.State, s.Reason)
	}
	if n := stalls.Load(); n != 1 {
		t.Errorf("%d stalls counted, want 1", n)
	}
	if n := r.Counts()[StateFound]; n != 1 {
		t.Errorf("%d JVMs counted found, want 1", n)
	}

	before := conns.Load()
	start := time.Now()
	r.StopAll()
	t.Logf("StopAll with the opt-out read still hanging: %v", time.Since(start))
	if took := time.Since(start); took > time.Second {
		t.Errorf("StopAll took %v with the opt-out read hanging, want no wait for it", took)
	}
	if conns.Load() != before+1 {
		t.Errorf("the other JVM got %d connections at StopAll, want 1 (JFR.stop)", conns.Load()-before)
	}

	// Answering again, the read returns and is taken at the next
	// discovery: the JVM (no opt-out) goes on to its attach exchange.
	r = NewRecorder(RecorderConfig{ProcRoot: c.proc, Enabled: true, Timeout: time.Second,
		Settings: func(discovery.JVM) (string, func(), error) { return "profile", func() {}, nil }})
	mount.Stall()
	considerGuarded(t, r, stalled)
	mount.Release()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		considerGuarded(t, r, stalled)
		s, _ := r.Status(stalled.PID, stalled.StartTicks)
		if !strings.Contains(s.Reason, "reading its opt-out") {
			t.Logf("after the release: %q (%q)", s.State, s.Reason)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("5 s after the release: %q (%q), want the read taken", s.State, s.Reason)
		}
	}
	r.StopAll()
}
