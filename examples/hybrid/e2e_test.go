// Package hybrid_test runs the hybrid example end to end: the built
// otelcol-ai with the jfr, pythongil and otlp receivers and the
// runtimecorrelation processor (collector.yaml), against the Java service
// embedding CPython through Jep (make run-embedded) and beside a CPython
// sidecar (make run-sidecar). It checks what the collector wrote against
// the windows it exported.
package hybrid_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otelcol-ai/otelcol-ai/internal/e2etest"
	"github.com/otelcol-ai/otelcol-ai/internal/window"
)

const requests = 120

// ready requires the binary to have the three components, and skips unless
// the rest of what the scenario needs is here: root for the eBPF probes, a
// JDK and Maven.
func ready(t *testing.T) {
	t.Helper()
	e2etest.RequireComponents(t, "jfr", "pythongil", "runtimecorrelation")
	if os.Geteuid() != 0 {
		t.Skip("hybrid end-to-end: the pythongil receiver's probes need root")
	}
	for _, tool := range []string{"java", "mvn", "make", "python3"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("hybrid end-to-end: %s not found", tool)
		}
	}
}

func runMake(t *testing.T, ctx context.Context, args ...string) {
	t.Helper()
	cmd := exec.CommandContext(ctx, "make", append([]string{"--no-print-directory"}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make %v: %v\n%s", args, err, out)
	}
	t.Logf("make %v:\n%s", args, tail(string(out), 2000))
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// TestEmbeddedJVMAndCPython: one JVM embedding CPython, matched per process.
func TestEmbeddedJVMAndCPython(t *testing.T) { runScenario(t, "embedded", "process", "") }

// TestJVMAndCPythonSideBySide: a JVM and a CPython process on one host,
// matched per host.
func TestJVMAndCPythonSideBySide(t *testing.T) { runScenario(t, "sidecar", "host", "") }

// scenario is what a run left: the collector's output folder, the JVM's
// pid, the exported windows per pid and the overlap records.
type scenario struct {
	out      string
	jvm      int64
	windows  map[int64][]window.Window
	overlaps []overlapRecord
}

// runScenario runs one mode against collector.yaml, with extra merged over
// it when not empty, and checks what the collector wrote.
func runScenario(t *testing.T, mode, scope, extra string) scenario {
	ready(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	runMake(t, ctx, "setup")

	out := t.TempDir()
	config, err := filepath.Abs("collector.yaml")
	if err != nil {
		t.Fatal(err)
	}
	c := e2etest.Start(t, e2etest.Options{
		Configs:    []string{config},
		ConfigYAML: extra,
		Env:        map[string]string{"HYBRID_OUT": out, "HYBRID_MATCH_SCOPE": scope},
	})
	if err := c.WaitHealthy(60 * time.Second); err != nil {
		t.Fatal(err)
	}
	runMake(t, ctx, "run-"+mode, fmt.Sprintf("REQUESTS=%d", requests), "OUT="+out,
		"OTLP_ENDPOINT=http://"+c.Endpoints.OTLPGRPC, fmt.Sprintf("SIDECAR=127.0.0.1:%d", e2etest.FreePorts(t, 1)[0]))
	if err := c.Eventually(60*time.Second, func() bool {
		return len(readSpans(t, filepath.Join(out, "traces.jsonl"))) == requests
	}); err != nil {
		t.Fatal(err)
	}
	if code, err := c.Stop(60 * time.Second); err != nil || code != 0 {
		t.Fatalf("stop: exit %d, %v", code, err)
	}

	windows, overlaps, observed := readLogs(t, filepath.Join(out, "logs.jsonl"))
	spans := readSpans(t, filepath.Join(out, "traces.jsonl"))
	if len(spans) != requests {
		t.Fatalf("%d spans, want %d", len(spans), requests)
	}
	jvm := spans[0].pid
	// The windows a span is matched with: its process's, or in host scope
	// every process's on the host.
	scoped := func(pid int64) []window.Window {
		if scope == "process" {
			return windows[pid]
		}
		var all []window.Window
		for _, ws := range windows {
			all = append(all, ws...)
		}
		return all
	}
	byKind := map[window.Kind]int{}
	for _, w := range scoped(jvm) {
		byKind[w.Kind]++
	}
	t.Logf("windows matched with the JVM's spans (pid %d, scope %s): %v; overlap records: %d", jvm, scope, byKind, len(overlaps))
	if byKind[window.KindPythonGILReleased]+byKind[window.KindPythonGILWait] == 0 || byKind[window.KindJVMGCPause]+byKind[window.KindJVMSafepoint] == 0 {
		t.Fatalf("no JVM or no GIL windows in the JVM's scope: %v", byKind)
	}

	// Each JVM pause is reported once, though collector.yaml reads both the
	// JVM's JFR repository and its -Xlog file (the jfr receiver prefers
	// JFR): two safepoints of one JVM never overlap.
	for pid, ws := range windows {
		var safepoints []window.Window
		for _, w := range ws {
			if w.Kind == window.KindJVMSafepoint {
				safepoints = append(safepoints, w)
			}
		}
		sort.Slice(safepoints, func(i, j int) bool { return safepoints[i].Start < safepoints[j].Start })
		for i := 1; i < len(safepoints); i++ {
			if prev := safepoints[i-1]; safepoints[i].Start < prev.End() {
				t.Errorf("pid %d: safepoints [%d +%d] and [%d +%d] overlap: a pause reported twice",
					pid, prev.Start, prev.Duration, safepoints[i].Start, safepoints[i].Duration)
				break
			}
		}
	}

	// Each span's totals are the sums of its windows' intersections,
	// recomputed here from the exported windows of its scope. A span waits
	// until at least its end + spans::delay (3 s), so every window the
	// receivers saw before its end + 2 s (1 s for the pipeline) is in its
	// totals; a window seen later may have missed it (and is counted late by
	// the processor). Totals must lie between the two sums, and equal the
	// full sum for most spans.
	exact := 0
	for _, s := range spans {
		all, early := map[string]int64{}, map[string]int64{}
		for _, w := range scoped(s.pid) {
			d := min(w.End(), s.end) - max(w.Start, s.start)
			if d <= 0 {
				continue
			}
			add := func(m map[string]int64) {
				m["runtime.overlap."+string(w.Kind)+".duration"] += d
				m["runtime.overlap."+string(w.Kind)+".count"]++
			}
			add(all)
			if observed[windowKey(w)] <= s.end+int64(2*time.Second) {
				add(early)
			}
		}
		got := map[string]int64{}
		for k, v := range s.attrs {
			if !strings.HasPrefix(k, "runtime.overlap.") {
				continue
			}
			n, ok := v.(int64)
			if !ok { // runtime.overlap.unmatched: a string
				t.Errorf("span %d: %s = %v", s.request, k, v)
				continue
			}
			got[k] = n
		}
		if s.attrs["inference.model.name"] != "runtime_overlap" {
			t.Errorf("span %d: not scored by the default model: %v", s.request, s.attrs)
		}
		if fmt.Sprint(got) == fmt.Sprint(all) {
			exact++
		}
		for k, v := range all {
			if got[k] < early[k] || got[k] > v {
				t.Errorf("span %d [%d, %d): %s = %d, want between %d (windows seen in time) and %d (all windows)",
					s.request, s.start, s.end, k, got[k], early[k], v)
			}
		}
		for k := range got {
			if _, ok := all[k]; !ok {
				t.Errorf("span %d: %s = %d, but no exported window of that kind overlaps it", s.request, k, got[k])
			}
		}
		if s.end < s.start || s.start < windowsStart(windows[s.pid])-int64(time.Minute) {
			t.Errorf("span %d: timestamps [%d, %d) inconsistent with its windows", s.request, s.start, s.end)
		}
	}
	t.Logf("%d of %d spans' totals equal the sums over every exported window", exact, len(spans))
	if exact < len(spans)/2 {
		t.Errorf("only %d of %d spans match the exported windows exactly", exact, len(spans))
	}

	// At least one JVM pause of the service overlapped a GIL window: in
	// the same process (embedded) or in the sidecar (side by side). Every
	// overlap record agrees with its two windows.
	cross := 0
	for _, o := range overlaps {
		if !strings.HasPrefix(o.first, "jvm.") || !strings.HasPrefix(o.second, "python.gil.") {
			continue
		}
		if o.firstPID == jvm && (o.secondPID == jvm) == (mode == "embedded") {
			cross++
		}
		start, end := max(o.firstStart, o.secondStart), min(o.firstStart+o.firstDur, o.secondStart+o.secondDur)
		if o.timestamp != start || o.duration != end-start || o.duration <= 0 {
			t.Errorf("overlap %+v: want start %d, duration %d", o, start, end-start)
		}
	}
	if cross == 0 {
		t.Errorf("no runtime.overlap of the JVM's pauses with a GIL window (%s)", mode)
	}

	return scenario{out: out, jvm: jvm, windows: windows, overlaps: overlaps}
}

func windowsStart(ws []window.Window) int64 {
	first := int64(0)
	for _, w := range ws {
		if first == 0 || w.Start < first {
			first = w.Start
		}
	}
	return first
}

type span struct {
	request, pid int64
	start, end   int64
	attrs        map[string]any
}

type overlapRecord struct {
	first, second           string
	secondTID               int64
	firstPID, secondPID     int64
	firstStart, secondStart int64
	firstDur, secondDur     int64
	timestamp, duration     int64
}

func readSpans(t *testing.T, path string) []span {
	t.Helper()
	var out []span
	for _, td := range readLines(t, path, (&ptrace.JSONUnmarshaler{}).UnmarshalTraces) {
		for i := 0; i < td.ResourceSpans().Len(); i++ {
			rs := td.ResourceSpans().At(i)
			pid := intAttr(rs.Resource().Attributes(), window.ResourcePID)
			for j := 0; j < rs.ScopeSpans().Len(); j++ {
				spans := rs.ScopeSpans().At(j).Spans()
				for k := 0; k < spans.Len(); k++ {
					s := spans.At(k)
					if s.Name() != "infer" {
						continue
					}
					out = append(out, span{
						request: intAttr(s.Attributes(), "hybrid.request"), pid: pid,
						start: int64(s.StartTimestamp()), end: int64(s.EndTimestamp()),
						attrs: s.Attributes().AsRaw(),
					})
				}
			}
		}
	}
	return out
}

// readLogs returns the exported windows per pid, each once (the index
// keeps exact duplicates once), and the overlap records.
func readLogs(t *testing.T, path string) (map[int64][]window.Window, []overlapRecord, map[string]int64) {
	t.Helper()
	windows := map[int64][]window.Window{}
	observed := map[string]int64{}
	var overlaps []overlapRecord
	for _, ld := range readLines(t, path, (&plog.JSONUnmarshaler{}).UnmarshalLogs) {
		for i := 0; i < ld.ResourceLogs().Len(); i++ {
			rl := ld.ResourceLogs().At(i)
			pid := intAttr(rl.Resource().Attributes(), window.ResourcePID)
			for j := 0; j < rl.ScopeLogs().Len(); j++ {
				lrs := rl.ScopeLogs().At(j).LogRecords()
				for k := 0; k < lrs.Len(); k++ {
					lr := lrs.At(k)
					if lr.EventName() == "runtime.overlap" {
						a := lr.Attributes()
						overlaps = append(overlaps, overlapRecord{
							first: strAttr(a, "runtime.overlap.first.kind"), second: strAttr(a, "runtime.overlap.second.kind"),
							secondTID: intAttr(a, "runtime.overlap.second.thread.id"),
							firstPID:  intAttr(a, "runtime.overlap.first.process.pid"), secondPID: intAttr(a, "runtime.overlap.second.process.pid"),
							firstStart: intAttr(a, "runtime.overlap.first.start"), secondStart: intAttr(a, "runtime.overlap.second.start"),
							firstDur: intAttr(a, "runtime.overlap.first.duration"), secondDur: intAttr(a, "runtime.overlap.second.duration"),
							timestamp: int64(lr.Timestamp()), duration: intAttr(a, "runtime.overlap.duration"),
						})
						continue
					}
					w, err := window.Decode(lr)
					if err != nil {
						continue
					}
					w.Attributes = map[string]any{"pid": pid}
					key := windowKey(w)
					if _, dup := observed[key]; dup {
						continue
					}
					observed[key] = int64(lr.ObservedTimestamp())
					windows[pid] = append(windows[pid], w)
				}
			}
		}
	}
	return windows, overlaps, observed
}

// windowKey identifies a window as the processor's index does.
func windowKey(w window.Window) string {
	return fmt.Sprint(w.Attributes["pid"], w.Kind, w.Start, w.Duration, w.ThreadID)
}

func intAttr(m pcommon.Map, k string) int64 {
	v, _ := m.Get(k)
	return v.Int()
}

func strAttr(m pcommon.Map, k string) string {
	v, _ := m.Get(k)
	return v.Str()
}

// readLines reads a file exporter's output with the harness's reader.
func readLines[T any](t *testing.T, path string, decode func([]byte) (T, error)) []T {
	t.Helper()
	out, err := e2etest.ReadJSONLines(path, decode)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
