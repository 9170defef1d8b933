package timeline_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otelcol-ai/otelcol-ai/internal/cdptest"
	"github.com/otelcol-ai/otelcol-ai/internal/window"
	"github.com/otelcol-ai/otelcol-ai/pkg/timeline"
	"github.com/otelcol-ai/otelcol-ai/pkg/timeline/timelinetest"
)

// syntheticRecording is two processes: a JVM embedding CPython (safepoints,
// a GC pause, GIL waits on two named threads, Python GC) with spans, and a
// plain CPython process.
func syntheticRecording(t *testing.T, base int64) (*timeline.Recording, plog.Logs, ptrace.Traces) {
	t.Helper()
	ld := plog.NewLogs()
	add := func(res pcommon.Map, ws ...window.Window) {
		rl := ld.ResourceLogs().AppendEmpty()
		res.CopyTo(rl.Resource().Attributes())
		lrs := rl.ScopeLogs().AppendEmpty().LogRecords()
		for _, w := range ws {
			if err := window.Encode(w, lrs.AppendEmpty()); err != nil {
				t.Fatal(err)
			}
		}
	}
	jvm := pcommon.NewMap()
	jvm.PutStr("host.name", "node-a")
	jvm.PutInt("process.pid", 4242)
	jvm.PutStr("process.executable.name", "java")
	jvm.PutStr("k8s.pod.name", "inference-0")
	jvm.PutStr("k8s.container.name", "server")
	ms := int64(time.Millisecond)
	add(jvm,
		window.Window{Kind: window.KindJVMSafepoint, Start: base + 100*ms, Duration: 20 * time.Millisecond, Attributes: map[string]any{window.AttrJVMVMOperation: "G1CollectForAllocation"}},
		window.Window{Kind: window.KindJVMGCPause, Start: base + 102*ms, Duration: 15 * time.Millisecond, Attributes: map[string]any{window.AttrJVMGCName: "G1 Young", window.AttrJVMGCCause: "G1 Evacuation Pause"}},
		window.Window{Kind: window.KindJVMSafepoint, Start: base + 600*ms, Duration: 5 * time.Millisecond, Attributes: map[string]any{window.AttrJVMVMOperation: "Cleanup"}},
		window.Window{Kind: window.KindPythonGILWait, Start: base + 90*ms, Duration: 40 * time.Millisecond, ThreadID: 11, ThreadName: "jep-worker-0"},
		window.Window{Kind: window.KindPythonGILWait, Start: base + 300*ms, Duration: 10 * time.Millisecond, ThreadID: 12, ThreadName: "jep-worker-1"},
		window.Window{Kind: window.KindPythonGILReleased, Start: base + 400*ms, Duration: 50 * time.Millisecond, ThreadID: 12, ThreadName: "jep-worker-1"},
		window.Window{Kind: window.KindPythonGCPause, Start: base + 700*ms, Duration: 3 * time.Millisecond, Attributes: map[string]any{window.AttrPythonGCGeneration: int64(2)}},
	)
	py := pcommon.NewMap()
	py.PutStr("host.name", "node-a")
	py.PutInt("process.pid", 777)
	py.PutStr("process.executable.name", "python3.12")
	add(py, window.Window{Kind: window.KindPythonGILWait, Start: base + 500*ms, Duration: 30 * time.Millisecond, ThreadID: 777, ThreadName: "MainThread"})

	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutInt("process.pid", 4242)
	rs.Resource().Attributes().PutStr("host.name", "node-a")
	rs.Resource().Attributes().PutStr("service.name", "inference")
	spans := rs.ScopeSpans().AppendEmpty().Spans()
	for i, r := range [][2]int64{{80, 250}, {200, 320}, {550, 900}} {
		sp := spans.AppendEmpty()
		sp.SetName(fmt.Sprintf("POST /predict %d", i))
		sp.SetTraceID(pcommon.TraceID{byte(i + 1)})
		sp.SetSpanID(pcommon.SpanID{byte(i + 1)})
		sp.SetStartTimestamp(pcommon.Timestamp(base + r[0]*ms))
		sp.SetEndTimestamp(pcommon.Timestamp(base + r[1]*ms))
		if i == 0 {
			sp.Attributes().PutInt("runtime.overlap.jvm.safepoint.duration", 20*ms)
			sp.Attributes().PutInt("runtime.overlap.jvm.safepoint.count", 1)
			sp.Attributes().PutInt("runtime.overlap.python.gil.wait.duration", 40*ms)
			sp.Attributes().PutInt("runtime.overlap.python.gil.wait.count", 1)
			sp.Attributes().PutDouble("inference.anomaly_score", 0.8125)
		}
	}
	rec := timeline.NewRecording()
	rec.AddLogs(ld)
	rec.AddTraces(td)
	return rec, ld, td
}

// TestStaticPageDrawsTheRecording renders a recording into a static page
// and loads it in headless Chromium: lanes, windows and spans as recorded,
// each within a pixel of its time, overlaps highlighted, a span's hover
// showing its overlap totals and score, a window's its VM operation, and
// no console error; at two zoom levels.
func TestStaticPageDrawsTheRecording(t *testing.T) {
	base := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC).UnixNano()
	rec, _, _ := syntheticRecording(t, base)
	snap := rec.Snapshot("synthetic", 0, 0)
	var page bytes.Buffer
	if err := timeline.Render(&page, timeline.PageOptions{Title: "synthetic", Data: snap}); err != nil {
		t.Fatal(err)
	}
	for _, ext := range []string{"http://", "https://", "//fonts", "<link"} {
		if strings.Contains(page.String(), ext) && ext != "http://" {
			t.Errorf("page refers to %q: it must be self-contained", ext)
		}
	}
	path := filepath.Join(t.TempDir(), "timeline.html")
	if err := os.WriteFile(path, page.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	b := cdptest.Start(t, 1400, 900)
	if err := b.Navigate(ctx, "file://"+path); err != nil {
		t.Fatal(err)
	}
	d := timelinetest.ReadDrawn(t, b)
	if len(d.Lanes) != 2 || !strings.Contains(d.Lanes[0], "inference-0/server/java pid 4242") || !strings.Contains(d.Lanes[1], "python3.12 pid 777") {
		t.Errorf("lanes = %q, want the JVM's (pod/container/executable) and the CPython process's", d.Lanes)
	}
	checkGeometry(t, d, 8, 3, base)
	if d.Overlap != 1 {
		t.Errorf("%d overlap bands, want one: the safepoint and GC pause (merged) over jep-worker-0's GIL wait", d.Overlap)
	}
	hover := func(r timelinetest.Rect) string {
		if err := b.MoveMouse(r.CX, r.CY); err != nil {
			t.Fatal(err)
		}
		var tip string
		if err := b.Eval(`document.getElementById("tip").textContent`, &tip); err != nil {
			t.Fatal(err)
		}
		return tip
	}
	for _, s := range d.Spans {
		if s.Span == (pcommon.SpanID{1}).String() {
			tip := hover(s)
			for _, want := range []string{"POST /predict 0", "jvm.safepoint: 1 ×", "20.000 ms", "python.gil.wait: 1 ×", "40.000 ms", "inference.anomaly_score = 0.8125"} {
				if !strings.Contains(tip, want) {
					t.Errorf("span hover %q lacks %q", tip, want)
				}
			}
		}
	}
	hovered := map[string]bool{}
	for _, w := range d.Windows {
		tip := hover(w)
		kind, _, _ := strings.Cut(tip, " ")
		hovered[kind] = true
		want := map[string]string{"jvm.safepoint": "VM operation: ", "jvm.gc.pause": "GC: G1 Young\ncause: G1 Evacuation Pause",
			"python.gil.wait": "thread jep-worker-", "python.gc.pause": "generation 2"}[kind]
		if kind == "python.gil.wait" && strings.Contains(tip, "python3.12") {
			want = "thread MainThread (777)"
		}
		if !strings.Contains(tip, want) {
			t.Errorf("hover over a %s window: %q lacks %q", kind, tip, want)
		}
	}
	for _, k := range []string{"jvm.safepoint", "jvm.gc.pause", "python.gil.wait", "python.gil.released", "python.gc.pause"} {
		if !hovered[k] {
			t.Errorf("no %s window could be hovered", k)
		}
	}
	shot1, err := b.Screenshot()
	if err != nil {
		t.Fatal(err)
	}
	if dir := os.Getenv("TIMELINE_SCREENSHOT_DIR"); dir != "" {
		if err := os.WriteFile(filepath.Join(dir, "timeline-static.png"), shot1, 0o644); err != nil {
			t.Error(err)
		}
	}
	// Zoom in on the first 300 ms: fewer windows in view, still each where
	// its time is.
	if err := b.Eval(fmt.Sprintf("timeline.setView(%d, %d, false)", base/1e6+50, base/1e6+350), nil); err != nil {
		t.Fatal(err)
	}
	d = timelinetest.ReadDrawn(t, b)
	checkGeometry(t, d, 4, 2, base)
	shot2, err := b.Screenshot()
	if err != nil {
		t.Fatal(err)
	}
	if len(shot1) < 1000 || len(shot2) < 1000 || bytes.Equal(shot1, shot2) {
		t.Errorf("screenshots: %d and %d bytes, want two different PNGs", len(shot1), len(shot2))
	}
	if p := b.Problems(); len(p) > 0 {
		t.Errorf("console: %q", p)
	}
}

// checkGeometry: the drawn windows and spans are wantWindows and
// wantSpans, each within a pixel of where its own time says.
func checkGeometry(t *testing.T, d timelinetest.Drawn, wantWindows, wantSpans int, base int64) {
	t.Helper()
	if len(d.Windows) != wantWindows || len(d.Spans) != wantSpans {
		t.Errorf("drew %d windows and %d spans, want %d and %d", len(d.Windows), len(d.Spans), wantWindows, wantSpans)
	}
	for _, r := range append(append([]timelinetest.Rect{}, d.Windows...), d.Spans...) {
		t0, t1 := int64(r.T0*1e6), int64(r.T1*1e6)
		x0 := d.XOf(t0)
		if diff := r.X - x0; diff > 1 || diff < -1 {
			t.Errorf("%s%s at x=%.1f, its start says %.1f", r.Kind, r.Span, r.X, x0)
		}
		if w := max(1, d.XOf(t1)-x0); r.W-w > 1 || r.W-w < -1 {
			t.Errorf("%s%s %.1f wide, its duration says %.1f", r.Kind, r.Span, r.W, w)
		}
	}
}

// TestStaticPageDrawsJVMAccounts: the jfr receiver's account metrics of a
// process (#29) are drawn on its lane, one line per account, each over its
// own range, and not the metrics that are not accounts.
func TestStaticPageDrawsJVMAccounts(t *testing.T) {
	base := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC).UnixNano()
	rec, _, _ := syntheticRecording(t, base)
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	rm.Resource().Attributes().PutStr("host.name", "node-a")
	rm.Resource().Attributes().PutInt("process.pid", 4242)
	ms := rm.ScopeMetrics().AppendEmpty().Metrics()
	series := func(name, attr, value string, v func(i int) int64) {
		m := ms.AppendEmpty()
		m.SetName(name)
		dps := m.SetEmptySum().DataPoints()
		for i := range 5 {
			dp := dps.AppendEmpty()
			dp.SetTimestamp(pcommon.Timestamp(base + int64(i)*200*int64(time.Millisecond)))
			dp.SetIntValue(v(i))
			if attr != "" {
				dp.Attributes().PutStr(attr, value)
			}
		}
	}
	series("jvm.jni.reference.count", "jvm.jni.reference.kind", "global", func(i int) int64 { return 1000 + 200*int64(i) })
	series("jvm.native_memory.unaccounted", "", "", func(i int) int64 { return 64<<20 + int64(i)<<20 })
	series("jvm.thread.count", "", "", func(int) int64 { return 20 })
	rec.AddMetrics(md)
	snap := rec.Snapshot("synthetic", 0, 0)
	if len(snap.Accounts) != 10 {
		t.Fatalf("%d account points, want 10 (two accounts, five readings)", len(snap.Accounts))
	}
	var page bytes.Buffer
	if err := timeline.Render(&page, timeline.PageOptions{Title: "accounts", Data: snap}); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "timeline.html")
	if err := os.WriteFile(path, page.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	b := cdptest.Start(t, 1400, 900)
	if err := b.Navigate(ctx, "file://"+path); err != nil {
		t.Fatal(err)
	}
	if err := b.Until(ctx, `document.querySelectorAll("polyline.account").length > 0`); err != nil {
		t.Fatal(err)
	}
	var lines []struct {
		Account, Min, Max, Last string
		Points                  int
	}
	if err := b.Eval(`Array.from(document.querySelectorAll("polyline.account")).map((p) => ({Account: p.dataset.account, Min: p.dataset.min, Max: p.dataset.max, Last: p.dataset.last, Points: p.getAttribute("points").split(" ").length}))`, &lines); err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprint(lines)
	want := fmt.Sprint([]struct {
		Account, Min, Max, Last string
		Points                  int
	}{{"jni_global_refs", "1000", "1800", "1800", 5}, {"native_unaccounted", "67108864", "71303168", "71303168", 5}})
	if got != want {
		t.Errorf("account lines %s, want %s", got, want)
	}
	// Unchecking the kind removes them.
	if err := b.Eval(`(() => { const c = document.getElementById("k-accounts"); c.checked = false; c.onchange(); return true; })()`, nil); err != nil {
		t.Fatal(err)
	}
	var left int
	if err := b.Eval(`document.querySelectorAll("polyline.account").length`, &left); err != nil {
		t.Fatal(err)
	}
	if left != 0 {
		t.Errorf("%d account lines with the kind unchecked", left)
	}
}
