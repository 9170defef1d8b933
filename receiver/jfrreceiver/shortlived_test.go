package jfrreceiver

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.uber.org/zap"

	"github.com/otelcol-ai/otelcol-ai/internal/e2etest"
	"github.com/otelcol-ai/otelcol-ai/internal/procevents"
	"github.com/otelcol-ai/otelcol-ai/internal/window"
	"github.com/otelcol-ai/otelcol-ai/pkg/jfr/jfrtest"
)

// shortJava runs for 300 ms from main, collecting every 50 ms; compiled
// ahead so that the JVM's life is its start and those 300 ms.
const shortJava = `public class Short {
    static volatile Object sink;
    public static void main(String[] args) throws Exception {
        long end = System.currentTimeMillis() + 300;
        long next = 0;
        while (System.currentTimeMillis() < end) {
            for (int i = 0; i < 1000; i++) sink = new byte[1024];
            if (System.currentTimeMillis() >= next) {
                System.gc();
                next = System.currentTimeMillis() + 50;
            }
        }
    }
}
`

// compileShort compiles Short.java into a folder of its own and returns it.
func compileShort(t *testing.T, j jfrtest.JDK) string {
	t.Helper()
	dir := t.TempDir()
	src := filepath.Join(dir, "Short.java")
	if err := os.WriteFile(src, []byte(shortJava), 0o644); err != nil {
		t.Fatal(err)
	}
	javac := filepath.Join(filepath.Dir(j.Java()), "javac")
	if out, err := exec.Command(javac, "-d", dir, src).CombinedOutput(); err != nil {
		t.Fatalf("javac: %v\n%s", err, out)
	}
	return dir
}

// needProcessEvents skips where no process events can be had (not root);
// CI runs as root with eBPF, so it fails there.
func needProcessEvents(t *testing.T) {
	t.Helper()
	s := procevents.Subscribe(zap.NewNop())
	defer s.Close()
	if s.Mechanism() != procevents.MechanismNone {
		return
	}
	if os.Getenv("CI") != "" {
		t.Fatal("no process events (eBPF or the proc connector) in CI")
	}
	t.Skip("no process events here (needs root)")
}

// TestShortLivedJVMIsFollowedFromItsExec: JVMs that live 300 ms past their
// start, started while the receiver runs with discovery and polling every
// hour, are followed from their exec on (the process events, then their
// announcements, then their exit make the receiver look): the GC pauses of
// one logging with -Xlog and of one recording JFR arrive, each with its pid.
func TestShortLivedJVMIsFollowedFromItsExec(t *testing.T) {
	needProcessEvents(t)
	j := jfrtest.Find(t, 17)
	classes := compileShort(t, j)
	for _, tc := range []struct {
		name  string
		flags func(dir string) []string
	}{
		{"xlog", func(dir string) []string {
			return []string{"-Xlog:gc*,safepoint:file=" + filepath.Join(dir, "gc.log") + ":time,uptimenanos,timenanos,pid,level,tags"}
		}},
		{"jfr", func(dir string) []string {
			return []string{"-XX:FlightRecorderOptions:repository=" + dir, "-XX:StartFlightRecording"}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			cfg := NewFactory().CreateDefaultConfig().(*Config)
			cfg.PollInterval = time.Hour
			cfg.Repositories.DiscoveryInterval = time.Hour
			cfg.Repositories.Attach.Enabled = false
			cfg.XLog.DiscoveryInterval = time.Hour
			cfg.XLog.Discover = true
			r, logs := startLogs(t, cfg)
			defer func() {
				if err := r.Shutdown(t.Context()); err != nil {
					t.Error(err)
				}
			}()
			// Started at once: the receiver's first scan may still be
			// running, and the JVM must be seen all the same (the process
			// events are subscribed to before it).
			args := append([]string{"-Xmx64m", "-XX:+UseSerialGC"}, tc.flags(dir)...)
			args = append(args, "-cp", classes, "Short")
			cmd := exec.Command(j.Java(), args...)
			cmd.Dir = dir
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			started := time.Now()
			if err := cmd.Run(); err != nil {
				t.Fatalf("java: %v\n%s", err, out.String())
			}
			lived := time.Since(started)
			pid := int64(cmd.Process.Pid)
			var pauses int
			deadline := time.Now().Add(10 * time.Second)
			for pauses == 0 && time.Now().Before(deadline) {
				time.Sleep(50 * time.Millisecond)
				pauses = countKind(logs.AllLogs(), pid, window.KindJVMGCPause)
			}
			if pauses == 0 {
				t.Fatalf("no GC pause of the JVM (pid %d, lived %v) arrived; %d records in all: %v", pid, lived, logs.LogRecordCount(), kindsByPID(logs.AllLogs()))
			}
			// System.gc every 50 ms for 300 ms: some 6 collections.
			if pauses < 3 {
				t.Errorf("%d GC pauses of pid %d, want the ~6 of its 300 ms", pauses, pid)
			}
			if d := duplicates(logs.AllLogs(), pid); d > 0 {
				t.Errorf("%d windows of pid %d came more than once", d, pid)
			}
			first := firstStart(logs.AllLogs(), pid)
			t.Logf("%s: JVM lived %v; %d GC pause windows, the first window starting %v after the JVM's exec",
				tc.name, lived.Round(time.Millisecond), pauses, time.Duration(first-started.UnixNano()).Round(time.Millisecond))
		})
	}
}

// countKind counts the windows of one kind from one pid.
func countKind(batches []plog.Logs, pid int64, kind window.Kind) int {
	n := 0
	for _, w := range e2etest.WindowsOf(batches, pid) {
		if w.Kind == kind {
			n++
		}
	}
	return n
}

// kindsByPID counts windows by pid and kind, for failure messages.
func kindsByPID(batches []plog.Logs) map[int64]map[window.Kind]int {
	out := map[int64]map[window.Kind]int{}
	eachRecord(batches, func(res pcommon.Resource, lr plog.LogRecord) {
		pid := pidOf(res)
		if out[pid] == nil {
			out[pid] = map[window.Kind]int{}
		}
		w, _ := window.Decode(lr)
		out[pid][w.Kind]++
	})
	return out
}

// firstStart is the earliest window start (Unix ns) from one pid.
func firstStart(batches []plog.Logs, pid int64) int64 {
	var first int64
	for _, w := range e2etest.WindowsOf(batches, pid) {
		if first == 0 || w.Start < first {
			first = w.Start
		}
	}
	return first
}

// duplicates counts the windows from one pid equal to one before them.
func duplicates(batches []plog.Logs, pid int64) int {
	type key struct {
		kind     window.Kind
		start    int64
		duration time.Duration
		thread   int64
	}
	seen := map[key]bool{}
	n := 0
	for _, w := range e2etest.WindowsOf(batches, pid) {
		k := key{w.Kind, w.Start, time.Duration(w.Duration), w.ThreadID}
		if seen[k] {
			n++
		}
		seen[k] = true
	}
	return n
}
