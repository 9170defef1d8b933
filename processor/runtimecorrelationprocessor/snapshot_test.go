package runtimecorrelationprocessor

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/otelcol-ai/otelcol-ai/internal/sharedcomponent"
	"github.com/otelcol-ai/otelcol-ai/internal/window"
	"github.com/otelcol-ai/otelcol-ai/pkg/timeline"
)

var allOfIt = timeline.Query{From: t0, To: t0 + int64(time.Second), MaxWindows: 1000, Buckets: 100, MaxSpans: 1000}

// TestSnapshotIsFoundByComponentID: the correlator registers under its
// component ID while it exists, and not after.
func TestSnapshotIsFoundByComponentID(t *testing.T) {
	h := newHarness(t, nil)
	src, err := timeline.Lookup(h.set.ID.String())
	if err != nil {
		t.Fatal(err)
	}
	if src != timeline.Source(h.c) {
		t.Fatalf("registered %v, want the harness's correlator", src)
	}
}

// TestSnapshotRecordsOnlyWhileWatched: windows are in every snapshot (the
// index keeps them); spans, thread names and window details are recorded
// only after a snapshot was taken, and no more once timelineWatchTTL has
// passed without one.
func TestSnapshotRecordsOnlyWhileWatched(t *testing.T) {
	h := newHarness(t, nil)
	sp := win(window.KindJVMSafepoint, 100*ms, 20*ms, 0)
	sp.Attributes = map[string]any{window.AttrJVMVMOperation: "G1CollectForAllocation"}
	h.sendWindows(proc, sp)
	h.sendSpans(spanTraces(proc, spanAt{"before", 90 * ms, 200 * ms}))
	s, err := h.c.Snapshot(allOfIt)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Windows) != 1 || len(s.Spans) != 0 || s.Windows[0].Detail != "" {
		t.Fatalf("unwatched: %d windows (detail %q), %d spans; want the window without details and no span",
			len(s.Windows), s.Windows[0].Detail, len(s.Spans))
	}
	gw := win(window.KindPythonGILWait, 110*ms, 30*ms, 11)
	gw.ThreadName = "jep-worker-0"
	sp2 := win(window.KindJVMSafepoint, 300*ms, 5*ms, 0)
	sp2.Attributes = map[string]any{window.AttrJVMVMOperation: "Cleanup"}
	h.sendWindows(proc, gw, sp2)
	h.sendSpans(spanTraces(proc, spanAt{"after", 100 * ms, 400 * ms}))
	s, err = h.c.Snapshot(allOfIt)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Lanes) != 1 || s.Lanes[0].PID != proc.pid || s.Lanes[0].Threads[11] != "jep-worker-0" {
		t.Fatalf("lanes %+v, want pid %d with thread 11 named jep-worker-0", s.Lanes, proc.pid)
	}
	byStart := map[int64]timeline.Window{}
	for _, w := range s.Windows {
		byStart[s.Base+w.Start] = w
	}
	if got := byStart[t0+300*ms]; got.Kind != "jvm.safepoint" || got.Detail != "Cleanup" || got.Dur != 5*ms {
		t.Errorf("safepoint after watching: %+v, want Cleanup for 5ms", got)
	}
	if got := byStart[t0+110*ms]; got.Kind != "python.gil.wait" || got.TID != 11 {
		t.Errorf("GIL wait: %+v", got)
	}
	if len(s.Spans) != 1 || s.Spans[0].Name != "after" || s.Base+s.Spans[0].Start != t0+100*ms || s.Spans[0].Dur != 300*ms {
		t.Fatalf("spans %+v, want only the one sent while watched", s.Spans)
	}
	ov := s.Spans[0].Overlap
	if ov["jvm.safepoint"] != (timeline.OverlapTotal{Duration: 25 * ms, Count: 2}) || ov["python.gil.wait"] != (timeline.OverlapTotal{Duration: 30 * ms, Count: 1}) {
		t.Errorf("span overlap totals %+v, want 2 safepoints for 25ms and a GIL wait of 30ms", ov)
	}

	h.clock.Advance(timelineWatchTTL + time.Second)
	if h.c.watched() {
		t.Fatal("still recording after timelineWatchTTL without a snapshot")
	}
	h.sendSpans(spanTraces(proc, spanAt{"late", 500 * ms, 600 * ms}))
	h.c.timeline.mu.Lock()
	n := len(h.c.timeline.spans.buf)
	h.c.timeline.mu.Unlock()
	if n != 1 {
		t.Errorf("%d spans recorded, want 1: none once nobody looks", n)
	}
}

// TestSnapshotGPUMemoryFromTheMetricsPipeline: gpu.process.memory.usage
// points seen in the metrics pipeline join their process's lane.
func TestSnapshotGPUMemoryFromTheMetricsPipeline(t *testing.T) {
	h := newHarness(t, nil)
	if _, err := h.c.Snapshot(allOfIt); err != nil {
		t.Fatal(err)
	}
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	proc.put(rm.Resource().Attributes())
	m := rm.ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
	m.SetName(timeline.MetricGPUProcessMemory)
	dps := m.SetEmptySum().DataPoints()
	for i, v := range []int64{1 << 30, 3 << 29} {
		dp := dps.AppendEmpty()
		dp.SetTimestamp(pcommonTS(t0 + int64(i+1)*100*ms))
		dp.SetIntValue(v)
		dp.Attributes().PutStr("device_id", "GPU-0")
	}
	mp := newMetricsProcessor(mustAcquire(t, h), nil)
	if _, err := mp.processMetrics(context.Background(), md); err != nil {
		t.Fatal(err)
	}
	mp.ref.Release()
	s, err := h.c.Snapshot(allOfIt)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.GPU) != 2 || s.GPU[1].Bytes != 3<<29 || s.GPU[1].Device != "GPU-0" || s.Base+s.GPU[1].T != t0+200*ms || s.Lanes[s.GPU[1].Lane].PID != proc.pid {
		t.Fatalf("gpu %+v lanes %+v", s.GPU, s.Lanes)
	}
}

// TestSnapshotOfManyWindowsIsASummary: with the index holding 200000
// windows, a snapshot of the whole range returns bucketed counts whose
// total is every window, not the windows. (pkg/timeline's
// TestLivePageSummarisesAMillionWindows does a million, in the browser.)
func TestSnapshotOfManyWindowsIsASummary(t *testing.T) {
	h := newHarness(t, func(c *Config) {
		c.Windows.MaxWindows, c.Windows.MaxPerScope = 1_000_000, 1_000_000
		c.OverlapPairs = [][]window.Kind{}
	})
	const n, batch = 200_000, 10_000
	for i := 0; i < n; i += batch {
		ws := make([]window.Window, batch)
		for j := range ws {
			ws[j] = win(window.KindPythonGILWait, int64(i+j)*4500, 500, int64(j%8+1))
		}
		h.sendWindows(proc, ws...)
	}
	q := allOfIt
	q.MaxWindows, q.Buckets = 5000, 1000
	start := time.Now()
	s, err := h.c.Snapshot(q)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("snapshot of %d windows: %s", s.WindowsInRange, time.Since(start))
	if s.WindowsInRange != n || len(s.Windows) != 0 || len(s.Summary) == 0 || len(s.Summary) > 1000 {
		t.Fatalf("%d in range, %d windows, %d buckets; want %d summarised in at most 1000 buckets", s.WindowsInRange, len(s.Windows), len(s.Summary), n)
	}
	total := 0
	for _, b := range s.Summary {
		total += b.Count
	}
	if total != n {
		t.Errorf("buckets count %d windows, want %d", total, n)
	}
}

// TestSnapshotFilters: pid and kind filters keep only what they name.
func TestSnapshotFilters(t *testing.T) {
	h := newHarness(t, nil)
	other := resource{host: "node-1", pid: 99}
	h.sendWindows(proc, win(window.KindJVMSafepoint, 100*ms, 20*ms, 0), win(window.KindPythonGILWait, 100*ms, 20*ms, 3))
	h.sendWindows(other, win(window.KindPythonGILWait, 100*ms, 20*ms, 3))
	q := allOfIt
	q.PID, q.Kinds = 99, []string{"python.gil.wait"}
	s, err := h.c.Snapshot(q)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Lanes) != 1 || s.Lanes[0].PID != 99 || len(s.Windows) != 1 {
		t.Fatalf("lanes %+v windows %+v, want pid 99's one GIL wait", s.Lanes, s.Windows)
	}
	q = allOfIt
	q.Kinds = []string{"jvm.safepoint"}
	if s, _ = h.c.Snapshot(q); len(s.Windows) != 1 || s.Windows[0].Kind != "jvm.safepoint" {
		t.Fatalf("windows %+v, want the safepoint only", s.Windows)
	}
}

func mustAcquire(t *testing.T, h *harness) *sharedcomponent.Ref[*correlator] {
	t.Helper()
	ref, err := acquire(h.set, h.cfg)
	if err != nil {
		t.Fatal(err)
	}
	return ref
}

func pcommonTS(ns int64) pcommon.Timestamp { return pcommon.Timestamp(ns) }

// BenchmarkSnapshot is what one poll of the timeline page costs the
// collector at the default window cap: a snapshot of the last 30 s of
// 100000 windows over 4 processes (summarised beyond 5000) plus 5000
// recorded spans. Its ns/op over 1e9 is the CPU share of a page polling
// once a second.
func BenchmarkSnapshot(b *testing.B) {
	c := benchCorrelator(b, 100_000)
	rng := rand.New(rand.NewPCG(1, 2))
	start := int64(1<<62) - int64(30*time.Second)
	for i := range 100 {
		c.ingestLogs(measured(context.Background()), windowBatch(start+int64(i)*benchBatch*100_000, rng))
	}
	c.timeline.watchedUntil.Store(1 << 62)
	for i := range 5000 {
		c.timeline.addSpans([]tlSpan{{scope: scopeKey{host: "node-1", pid: int64(1000 + i%4)}, start: start + int64(i)*5_000_000, end: start + int64(i)*5_000_000 + 3_000_000,
			span: timeline.Span{Name: "POST /predict", Overlap: map[string]timeline.OverlapTotal{"jvm.safepoint": {Duration: 1000, Count: 1}}}}})
	}
	q := timeline.Query{Last: 30 * time.Second, MaxWindows: 5000, Buckets: 1000, MaxSpans: 5000}
	b.ReportAllocs()
	for b.Loop() {
		s, err := c.Snapshot(q)
		if err != nil || s.WindowsInRange == 0 {
			b.Fatal(err, s.WindowsInRange)
		}
	}
}
