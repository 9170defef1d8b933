package jfrreceiver

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/otelcol-ai/otelcol-ai/internal/window"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/jvmevent"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/repository"
)

// TestPreferenceMatchesTheWritingJVM: which repository records the JVM
// that writes an -Xlog file. A discovered log and a discovered repository
// match on pid and start time; a pattern's log matches a pattern's
// repository on the pid decorator against the pid the JVM sees (folder
// name or jdk.JVMInformation); a pattern's log matches a discovered
// repository when that process holds the file open (two containers' pid
// 1 JVMs are not confused), and on the pids where its fd folder cannot be
// read.
func TestPreferenceMatchesTheWritingJVM(t *testing.T) {
	dir := t.TempDir()
	procRoot := filepath.Join(dir, "proc")
	held := filepath.Join(dir, "a", "gc.log")
	other := filepath.Join(dir, "b", "gc.log")
	for _, p := range []string{held, other} {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("x\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// Process 100 holds a/gc.log open (fd 3) and other files.
	fd := filepath.Join(procRoot, "100", "fd")
	if err := os.MkdirAll(fd, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, target := range map[string]string{"0": "/dev/null", "3": held, "4": dir} {
		if err := os.Symlink(target, filepath.Join(fd, name)); err != nil {
			t.Fatal(err)
		}
	}
	p := newPreference(procRoot, nil, zap.NewNop())

	discovered := repository.Followed{Dir: "/proc/100/root/tmp/2026_01_01_00_00_00_1", Discovered: true,
		JVM: jvmevent.JVM{PID: 100, StartTicks: 7}, OwnPID: 1, From: 1}
	gone := repository.Followed{Dir: "/proc/200/root/tmp/2026_01_01_00_00_00_1", Discovered: true,
		JVM: jvmevent.JVM{PID: 200, StartTicks: 9}, OwnPID: 1, From: 1}
	pattern := repository.Followed{Dir: "/var/jfr/2026_01_01_00_00_00_4242", JVM: jvmevent.JVM{PID: 4242}, OwnPID: 4242, From: 1}
	for _, tc := range []struct {
		name string
		repo repository.Followed
		log  jvmevent.JVM
		want bool
	}{
		{"discovered log, same process", discovered, jvmevent.JVM{PID: 100, StartTicks: 7, Source: other}, true},
		{"discovered log, pid reused", discovered, jvmevent.JVM{PID: 100, StartTicks: 8, Source: held}, false},
		{"discovered log, other process", discovered, jvmevent.JVM{PID: 101, StartTicks: 7, Source: held}, false},
		{"pattern log held open by the JVM", discovered, jvmevent.JVM{PID: 1, Source: held}, true},
		{"pattern log held open, no pid decorator", discovered, jvmevent.JVM{Source: held}, true},
		{"pattern log of another container's pid 1", discovered, jvmevent.JVM{PID: 1, Source: other}, false},
		{"fd folder unreadable: same own pid", gone, jvmevent.JVM{PID: 1, Source: other}, true},
		{"fd folder unreadable: other pid", gone, jvmevent.JVM{PID: 2, Source: other}, false},
		{"pattern repository, same pid", pattern, jvmevent.JVM{PID: 4242, Source: other}, true},
		{"pattern repository, other pid", pattern, jvmevent.JVM{PID: 4243, Source: other}, false},
		{"pattern repository, pid not yet known", pattern, jvmevent.JVM{Source: other}, false},
		{"pattern repository, JVMInformation's pid", repository.Followed{Dir: "/var/jfr/custom", OwnPID: 77, From: 1}, jvmevent.JVM{PID: 77, Source: other}, true},
	} {
		if got := p.matches(tc.repo, tc.log); got != tc.want {
			t.Errorf("%s: matches %v, want %v", tc.name, got, tc.want)
		}
	}
	// The answers about open files are remembered per process and file.
	if a, ok := p.held[heldKey{100, 7, held}]; !ok || !a.held {
		t.Errorf("held cache %+v", p.held)
	}
}

// fakeRepos is the repository source as the preference sees it.
type fakeRepos struct{ list []repository.Followed }

func (f *fakeRepos) followed() []repository.Followed { return f.list }

func sp(kind window.Kind, end int64, d time.Duration, attrs map[string]any) window.Window {
	return window.Window{Kind: kind, Start: end - int64(d), Duration: d, Attributes: attrs}
}

// TestPreferenceDropsLogWhileJFRCovers: an -Xlog file's windows and
// safepoints are dropped from the start of the first chunk the JVM's
// repository was read from until the repository is let go; earlier and
// later ones are kept; the skip and the resumption are logged once each.
func TestPreferenceDropsLogWhileJFRCovers(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	repos := &fakeRepos{}
	p := newPreference("/nonexistent", repos.followed, zap.New(core))
	now := time.Unix(1000, 0)
	p.now = func() time.Time { return now }
	from := now.UnixNano() - int64(5*time.Second)
	repos.list = []repository.Followed{{Dir: "/var/jfr/2026_01_01_00_00_00_42", JVM: jvmevent.JVM{PID: 42}, OwnPID: 42, From: from}}
	logJVM := jvmevent.JVM{PID: 42, Source: "/var/log/gc.log"}
	ms := int64(time.Millisecond)

	b := jvmevent.Batch{JVM: logJVM,
		Windows: []window.Window{
			sp(window.KindJVMSafepoint, from-ms, time.Millisecond, nil), // before JFR's first chunk: kept
			sp(window.KindJVMSafepoint, from+ms, time.Millisecond, nil), // dropped
			sp(window.KindJVMGCPause, from+2*ms, time.Millisecond, nil), // dropped
		},
		Safepoints: []jvmevent.Safepoint{{End: from - ms, Duration: time.Millisecond}, {End: from + ms, Duration: time.Millisecond}},
	}
	if !p.fromXlog(&b) {
		t.Error("the log's first covered batch does not say it became covered (its safepoint series would stay beside JFR's)")
	}
	if len(b.Windows) != 1 || b.Windows[0].End() != from-ms || len(b.Safepoints) != 1 || b.Safepoints[0].End != from-ms {
		t.Fatalf("kept %+v, %+v", b.Windows, b.Safepoints)
	}
	// Another JVM's log (another pid) is not touched.
	o := jvmevent.Batch{JVM: jvmevent.JVM{PID: 43, Source: "/var/log/other.log"}, Windows: []window.Window{sp(window.KindJVMSafepoint, from+ms, time.Millisecond, nil)}}
	if p.fromXlog(&o) {
		t.Error("another JVM's log said it became covered")
	}
	if len(o.Windows) != 1 {
		t.Fatalf("another JVM's log lost its window")
	}
	b = jvmevent.Batch{JVM: logJVM, Windows: []window.Window{sp(window.KindJVMSafepoint, from+3*ms, time.Millisecond, nil)}}
	if p.fromXlog(&b) {
		t.Error("a later batch of a covered log said it became covered again")
	}
	if len(b.Windows) != 0 {
		t.Fatalf("covered window kept: %+v", b.Windows)
	}
	if n := logs.FilterMessageSnippet("skipped").Len(); n != 1 {
		t.Errorf("%d skip messages, want 1: %v", n, logs.All())
	}
	if e := logs.FilterMessageSnippet("skipped").All(); len(e) == 1 {
		if f := e[0].ContextMap(); f["file"] != "/var/log/gc.log" || f["repository"] != "/var/jfr/2026_01_01_00_00_00_42" {
			t.Errorf("skip message fields %v", f)
		}
	}

	// The repository is let go (the recording stopped, the JVM runs on).
	repos.list = nil
	now = now.Add(time.Second)
	until := now.UnixNano()
	b = jvmevent.Batch{JVM: logJVM, Windows: []window.Window{
		sp(window.KindJVMSafepoint, until-ms, time.Millisecond, nil), // JFR reported it
		sp(window.KindJVMSafepoint, until+ms, time.Millisecond, nil), // after: kept
	}}
	p.fromXlog(&b)
	if len(b.Windows) != 1 || b.Windows[0].End() != until+ms {
		t.Fatalf("after the repository was let go: %+v", b.Windows)
	}
	if n := logs.FilterMessageSnippet("read again").Len(); n != 1 {
		t.Errorf("%d resume messages, want 1: %v", n, logs.All())
	}
	// Forgotten after retainFor.
	now = now.Add(retainFor + time.Second)
	p.sync()
	if len(p.covers) != 0 {
		t.Errorf("coverage kept: %v", p.covers)
	}
}

// TestPreferenceHandover: a log read before its JVM's repository was found
// sent windows that JFR then reports again from its first chunk: JFR's
// copies (same kind, ends within 2 ms, same GC id / VM operation) are
// dropped, JFR's other windows kept, and the log's later ones dropped.
func TestPreferenceHandover(t *testing.T) {
	repos := &fakeRepos{}
	p := newPreference("/nonexistent", repos.followed, zap.NewNop())
	now := time.Unix(1000, 0)
	p.now = func() time.Time { return now }
	t0 := now.UnixNano() - int64(3*time.Second)
	us := int64(time.Microsecond)
	logJVM := jvmevent.JVM{PID: 42, Source: "/var/log/gc.log"}
	op := func(o string) map[string]any { return map[string]any{window.AttrJVMVMOperation: o} }
	gc := func(id int64) map[string]any { return map[string]any{window.AttrJVMGCID: id} }

	b := jvmevent.Batch{JVM: logJVM, Windows: []window.Window{
		sp(window.KindJVMSafepoint, t0-int64(time.Second), time.Millisecond, op("Cleanup")), // before the recording
		sp(window.KindJVMSafepoint, t0+100*us, 50*time.Microsecond, op("G1CollectForAllocation")),
		sp(window.KindJVMGCPause, t0+90*us, 40*time.Microsecond, gc(3)),
	}, Safepoints: []jvmevent.Safepoint{{End: t0 + 100*us, Duration: 50 * time.Microsecond, Operation: "G1CollectForAllocation"}}}
	p.fromXlog(&b)
	if len(b.Windows) != 3 {
		t.Fatalf("uncovered log lost windows: %+v", b.Windows)
	}

	// The repository is found; its first chunk starts before those pauses.
	dir := "/var/jfr/2026_01_01_00_00_00_42"
	repos.list = []repository.Followed{{Dir: dir, JVM: jvmevent.JVM{PID: 42}, OwnPID: 42, From: t0 - int64(time.Millisecond)}}
	j := jvmevent.Batch{JVM: jvmevent.JVM{PID: 42, Source: dir}, Windows: []window.Window{
		sp(window.KindJVMSafepoint, t0+130*us, 90*time.Microsecond, op("G1CollectForAllocation")),  // copy
		sp(window.KindJVMGCPause, t0+95*us, 40*time.Microsecond, gc(4)),                            // not a copy: GC 4
		sp(window.KindJVMSafepoint, t0+5*int64(time.Millisecond), time.Millisecond, op("Cleanup")), // new
	}, Safepoints: []jvmevent.Safepoint{
		{End: t0 + 130*us, Duration: 90 * time.Microsecond, Operation: "G1CollectForAllocation"},
		{End: t0 + 5*int64(time.Millisecond), Duration: time.Millisecond, Operation: "Cleanup"},
	}}
	p.fromJFR(&j)
	if len(j.Windows) != 2 || j.Windows[0].Kind != window.KindJVMGCPause || j.Windows[1].End() != t0+5*int64(time.Millisecond) {
		t.Errorf("JFR windows after handover: %+v", j.Windows)
	}
	if len(j.Safepoints) != 1 || j.Safepoints[0].Operation != "Cleanup" {
		t.Errorf("JFR safepoints after handover: %+v", j.Safepoints)
	}
	// GC 3 comes in JFR's next flush: still dropped.
	j = jvmevent.Batch{JVM: jvmevent.JVM{PID: 42, Source: dir}, Windows: []window.Window{sp(window.KindJVMGCPause, t0+91*us, 41*time.Microsecond, gc(3))}}
	p.fromJFR(&j)
	if len(j.Windows) != 0 {
		t.Errorf("late JFR copy kept: %+v", j.Windows)
	}
	// From now on the log's windows are dropped.
	b = jvmevent.Batch{JVM: logJVM, Windows: []window.Window{sp(window.KindJVMSafepoint, t0+5*int64(time.Millisecond), time.Millisecond, op("Cleanup"))}}
	p.fromXlog(&b)
	if len(b.Windows) != 0 {
		t.Errorf("covered log window kept: %+v", b.Windows)
	}
	// Copies are not looked for after pendingFor.
	c := p.covers[dir]
	c.pendingWindows = append(c.pendingWindows, sp(window.KindJVMSafepoint, t0+9*int64(time.Millisecond), time.Millisecond, nil))
	now = now.Add(pendingFor + time.Second)
	j = jvmevent.Batch{JVM: jvmevent.JVM{PID: 42, Source: dir}, Windows: []window.Window{sp(window.KindJVMSafepoint, t0+9*int64(time.Millisecond), time.Millisecond, nil)}}
	p.fromJFR(&j)
	if len(j.Windows) != 1 || len(c.pendingWindows) != 0 {
		t.Errorf("after pendingFor: %+v, pending %d", j.Windows, len(c.pendingWindows))
	}
}

// TestPreferencePairsALateLogLine: on a busy host the log's safepoint line
// is written, and stamped, milliseconds after the safepoint ended (seen:
// JFR 15.57 ms from its begin, the log 26.33 ms from 4.9 µs before): the
// starts pair them, and JFR's copy is dropped; a safepoint of its own a
// few milliseconds later is not taken for a copy.
func TestPreferencePairsALateLogLine(t *testing.T) {
	repos := &fakeRepos{}
	p := newPreference("/nonexistent", repos.followed, zap.NewNop())
	now := time.Unix(1000, 0)
	p.now = func() time.Time { return now }
	t0 := now.UnixNano() - int64(3*time.Second)
	op := map[string]any{window.AttrJVMVMOperation: "G1CollectForAllocation"}
	logJVM := jvmevent.JVM{PID: 42, Source: "/var/log/gc.log"}
	logStart, logDur := t0, 26331558*time.Nanosecond
	b := jvmevent.Batch{JVM: logJVM, Windows: []window.Window{sp(window.KindJVMSafepoint, logStart+int64(logDur), logDur, op)},
		Safepoints: []jvmevent.Safepoint{{End: logStart + int64(logDur), Duration: logDur, Operation: "G1CollectForAllocation"}}}
	p.fromXlog(&b)

	dir := "/var/jfr/2026_01_01_00_00_00_42"
	repos.list = []repository.Followed{{Dir: dir, JVM: jvmevent.JVM{PID: 42}, OwnPID: 42, From: t0 - int64(time.Millisecond)}}
	jfrStart, jfrDur := t0+4870, 15572272*time.Nanosecond
	later := jfrStart + int64(40*time.Millisecond)
	j := jvmevent.Batch{JVM: jvmevent.JVM{PID: 42, Source: dir}, Windows: []window.Window{
		sp(window.KindJVMSafepoint, jfrStart+int64(jfrDur), jfrDur, op),
		sp(window.KindJVMSafepoint, later+int64(time.Millisecond), time.Millisecond, op),
	}, Safepoints: []jvmevent.Safepoint{
		{End: jfrStart + int64(jfrDur), Duration: jfrDur, Operation: "G1CollectForAllocation"},
		{End: later + int64(time.Millisecond), Duration: time.Millisecond, Operation: "G1CollectForAllocation"},
	}}
	p.fromJFR(&j)
	if len(j.Windows) != 1 || j.Windows[0].Start != later {
		t.Errorf("JFR windows: %+v, want only the later safepoint's", j.Windows)
	}
	if len(j.Safepoints) != 1 || j.Safepoints[0].End != later+int64(time.Millisecond) {
		t.Errorf("JFR safepoints: %+v, want only the later one", j.Safepoints)
	}
}

// TestPreferencePairsASkewedCopy: on a loaded host the log's copy of a
// 95 ms safepoint started and ended 2.6 ms from JFR's (the hybrid e2e test
// found it reported twice): copies that overlap are one pause, since a
// JVM's pauses never overlap one another, however far their clocks
// disagree; a safepoint 3 ms after the log's ends is its own.
func TestPreferencePairsASkewedCopy(t *testing.T) {
	repos := &fakeRepos{}
	p := newPreference("/nonexistent", repos.followed, zap.NewNop())
	now := time.Unix(1000, 0)
	p.now = func() time.Time { return now }
	t0 := now.UnixNano() - int64(3*time.Second)
	op := map[string]any{window.AttrJVMVMOperation: "G1CollectForAllocation"}
	logDur := 95121205 * time.Nanosecond
	b := jvmevent.Batch{JVM: jvmevent.JVM{PID: 42, Source: "/var/log/gc.log"},
		Windows:    []window.Window{sp(window.KindJVMSafepoint, t0+int64(logDur), logDur, op)},
		Safepoints: []jvmevent.Safepoint{{End: t0 + int64(logDur), Duration: logDur, Operation: "G1CollectForAllocation"}}}
	p.fromXlog(&b)

	dir := "/var/jfr/2026_01_01_00_00_00_42"
	repos.list = []repository.Followed{{Dir: dir, JVM: jvmevent.JVM{PID: 42}, OwnPID: 42, From: t0 - int64(time.Millisecond)}}
	jfrStart, jfrDur := t0+2616942, 95162362*time.Nanosecond
	later := t0 + int64(logDur) + int64(3*time.Millisecond)
	j := jvmevent.Batch{JVM: jvmevent.JVM{PID: 42, Source: dir}, Windows: []window.Window{
		sp(window.KindJVMSafepoint, jfrStart+int64(jfrDur), jfrDur, op),
		sp(window.KindJVMSafepoint, later+int64(time.Millisecond), time.Millisecond, op),
	}, Safepoints: []jvmevent.Safepoint{
		{End: jfrStart + int64(jfrDur), Duration: jfrDur, Operation: "G1CollectForAllocation"},
		{End: later + int64(time.Millisecond), Duration: time.Millisecond, Operation: "G1CollectForAllocation"},
	}}
	p.fromJFR(&j)
	if len(j.Windows) != 1 || j.Windows[0].Start != later {
		t.Errorf("JFR windows: %+v, want only the later safepoint's", j.Windows)
	}
	if len(j.Safepoints) != 1 || j.Safepoints[0].End != later+int64(time.Millisecond) {
		t.Errorf("JFR safepoints: %+v, want only the later one", j.Safepoints)
	}
}
