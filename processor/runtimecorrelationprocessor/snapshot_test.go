package runtimecorrelationprocessor

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"

	"github.com/otelcol-ai/otelcol-ai/extension/runtimestateextension/runtimestatetest"
	"github.com/otelcol-ai/otelcol-ai/internal/runtimestate"
	"github.com/otelcol-ai/otelcol-ai/internal/sharedcomponent"
	"github.com/otelcol-ai/otelcol-ai/internal/window"
	"github.com/otelcol-ai/otelcol-ai/pkg/timeline"
	"github.com/otelcol-ai/otelcol-ai/processor/runtimecorrelationprocessor/internal/metadatatest"
	"github.com/otelcol-ai/otelcol-ai/processor/runtimecorrelationprocessor/internal/windowindex"
)

var allOfIt = timeline.Query{From: t0, To: t0 + int64(time.Second), MaxWindows: 1000, Buckets: 100, MaxSpans: 1000}

// TestSnapshotIsFoundByComponentID: with runtime_state, the correlator
// registers in the runtimestate extension under its component ID once a
// pipeline of it starts, and not after it shuts down; a runtime_state that
// names no started extension fails the start.
func TestSnapshotIsFoundByComponentID(t *testing.T) {
	host, store := runtimestatetest.Start(t)
	extID := runtimestatetest.ID

	h := newHarness(t, func(c *Config) { c.RuntimeState = &extID })
	if _, err := store.Timelines().Lookup(h.set.ID.String()); err == nil {
		t.Fatal("registered before any pipeline started")
	}
	if err := h.logs.Start(context.Background(), host); err != nil {
		t.Fatal(err)
	}
	src, err := store.Timelines().Lookup(h.set.ID.String())
	if err != nil {
		t.Fatal(err)
	}
	if src != timeline.Source(h.c) {
		t.Fatalf("registered %v, want the harness's correlator", src)
	}
	if err := h.traces.start(context.Background(), host); err != nil {
		t.Fatal(err) // a second pipeline binds nothing more
	}
	if names := store.Timelines().Names(); len(names) != 1 {
		t.Errorf("registered %v, want the one correlator", names)
	}
	_ = h.traces.shutdown(context.Background())
	_ = h.logs.Shutdown(context.Background())
	if _, err := store.Timelines().Lookup(h.set.ID.String()); err == nil {
		t.Error("still registered after shutdown")
	}

	missing := component.MustNewIDWithName("runtimestate", "absent")
	h2 := newHarness(t, func(c *Config) { c.RuntimeState = &missing })
	if err := h2.logs.Start(context.Background(), host); err == nil || !strings.Contains(err.Error(), "runtime_state: runtimestate: extension not found: runtimestate/absent") {
		t.Errorf("start with an absent extension: %v", err)
	}
}

// TestSnapshotShowsWhatCameBeforeAnyoneLooked: spans, thread names and
// window details sent before the first snapshot are all in it (one opens
// the page after something happened), the spans with the totals of the
// windows that overlapped them.
func TestSnapshotShowsWhatCameBeforeAnyoneLooked(t *testing.T) {
	h := newHarness(t, nil)
	sp := win(window.KindJVMSafepoint, 100*ms, 20*ms, 0)
	sp.Attributes = map[string]any{window.AttrJVMVMOperation: "G1CollectForAllocation"}
	gw := win(window.KindPythonGILWait, 110*ms, 30*ms, 11)
	gw.ThreadName = "jep-worker-0"
	sp2 := win(window.KindJVMSafepoint, 300*ms, 5*ms, 0)
	sp2.Attributes = map[string]any{window.AttrJVMVMOperation: "Cleanup"}
	h.sendWindows(proc, sp, gw, sp2)
	h.sendSpans(spanTraces(proc, spanAt{"POST /predict", 100 * ms, 400 * ms}, spanAt{"GET /health", 500 * ms, 510 * ms}))
	s, err := h.c.Snapshot(allOfIt)
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
	if got := byStart[t0+100*ms]; got.Kind != "jvm.safepoint" || got.Detail != "G1CollectForAllocation" || got.Dur != 20*ms {
		t.Errorf("first safepoint: %+v, want G1CollectForAllocation for 20ms", got)
	}
	if got := byStart[t0+300*ms]; got.Kind != "jvm.safepoint" || got.Detail != "Cleanup" || got.Dur != 5*ms {
		t.Errorf("second safepoint: %+v, want Cleanup for 5ms", got)
	}
	if got := byStart[t0+110*ms]; got.Kind != "python.gil.wait" || got.TID != 11 {
		t.Errorf("GIL wait: %+v", got)
	}
	if len(s.Spans) != 2 {
		t.Fatalf("spans %+v, want both sent before the first snapshot", s.Spans)
	}
	// The newest first.
	if got := s.Spans[1]; got.Name != "POST /predict" || s.Base+got.Start != t0+100*ms || got.Dur != 300*ms ||
		got.TraceID != "01010000000000000000000000000000" || got.SpanID != "0201000000000000" {
		t.Errorf("span %+v, want POST /predict from 100ms for 300ms, trace 0101…, span 0201…", got)
	}
	ov := s.Spans[1].Overlap
	if len(ov) != 2 || ov["jvm.safepoint"] != (timeline.OverlapTotal{Duration: 25 * ms, Count: 2}) || ov["python.gil.wait"] != (timeline.OverlapTotal{Duration: 30 * ms, Count: 1}) {
		t.Errorf("span overlap totals %+v, want 2 safepoints for 25ms and a GIL wait of 30ms", ov)
	}
	if got := s.Spans[0]; got.Name != "GET /health" || got.Overlap != nil {
		t.Errorf("span %+v, want GET /health with nothing overlapping it", got)
	}
}

// TestSnapshotSpansAreBoundedInCountAndBytes: the recent spans are the
// newest within timeline::max_spans and timeline::max_bytes, whichever
// binds first, and what they hold stays within the bytes.
func TestSnapshotSpansAreBoundedInCountAndBytes(t *testing.T) {
	long := strings.Repeat("n", 300) // clipped to timeline.MaxText
	tests := []struct {
		name     string
		maxSpans int
		maxBytes int64
		spanName string
		sent     int
	}{
		{"count binds", 50, 1 << 20, "POST /predict", 200},
		{"bytes bind", 10_000, 64 << 10, long, 2000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, func(cfg *Config) {
				cfg.Timeline.MaxSpans, cfg.Timeline.MaxBytes = tt.maxSpans, tt.maxBytes
			})
			// A window makes the process known; it overlaps no span.
			h.sendWindows(proc, win(window.KindJVMSafepoint, 900*ms, ms, 0))
			var spans []spanAt
			for i := range tt.sent {
				spans = append(spans, spanAt{tt.spanName, int64(i) * 100_000, int64(i)*100_000 + 50_000})
			}
			h.sendSpans(spanTraces(proc, spans...))
			h.c.timeline.mu.Lock()
			held, bytes := h.c.timeline.spans.Len(), h.c.timeline.spans.Bytes()
			h.c.timeline.mu.Unlock()
			perSpan := tlSpanCost + int64(min(len(tt.spanName), timeline.MaxText)) + int64(len(proc.host))
			want := min(tt.maxSpans, int(tt.maxBytes/perSpan))
			if held != want || bytes > tt.maxBytes || bytes != int64(held)*perSpan {
				t.Fatalf("held %d spans in %d bytes, want %d of %d bytes each within %d", held, bytes, want, perSpan, tt.maxBytes)
			}
			// The collector reports what the ring holds.
			metadatatest.AssertEqualProcessorRuntimecorrelationTimelineSpans(t, h.tel,
				[]metricdata.DataPoint[int64]{{Value: int64(want)}}, metricdatatest.IgnoreTimestamp())
			metadatatest.AssertEqualProcessorRuntimecorrelationTimelineSpanBytes(t, h.tel,
				[]metricdata.DataPoint[int64]{{Value: int64(want) * perSpan}}, metricdatatest.IgnoreTimestamp())
			s, err := h.c.Snapshot(timeline.Query{From: t0, To: t0 + int64(time.Second), MaxWindows: 1000, Buckets: 100, MaxSpans: 100_000})
			if err != nil {
				t.Fatal(err)
			}
			if len(s.Spans) != want {
				t.Fatalf("snapshot has %d spans, want %d", len(s.Spans), want)
			}
			// The newest kept: the first is the last sent.
			if got, wantStart := s.Base+s.Spans[0].Start, t0+int64(tt.sent-1)*100_000; got != wantStart {
				t.Errorf("newest span starts at %d, want %d", got, wantStart)
			}
			if got, wantStart := s.Base+s.Spans[len(s.Spans)-1].Start, t0+int64(tt.sent-want)*100_000; got != wantStart {
				t.Errorf("oldest span kept starts at %d, want %d", got, wantStart)
			}
		})
	}
}

// storeHarness is a harness whose correlator is bound to a runtimestate
// extension, on node-1 (where the test resources live).
func storeHarness(t *testing.T) (*harness, *runtimestate.Store) {
	t.Helper()
	host, store := runtimestatetest.Start(t)
	extID := runtimestatetest.ID
	h := newHarness(t, func(c *Config) { c.RuntimeState = &extID })
	h.c.node.HostName = proc.host
	if err := h.logs.Start(context.Background(), host); err != nil {
		t.Fatal(err)
	}
	return h, store
}

// TestSnapshotGPUMemoryFromTheRuntimeState: the GPU memory the nvml
// receiver shares through the runtimestate extension joins its process's
// lane, with its device (or none), in range; what comes down the metrics
// pipeline does not (a workload may send anything there).
func TestSnapshotGPUMemoryFromTheRuntimeState(t *testing.T) {
	h, store := storeHarness(t)
	p := runtimestate.Process{PID: int(proc.pid)}
	store.RecordGPU(p, "GPU-0", time.Unix(0, t0+100*ms), 1<<30)
	store.RecordGPU(p, "", time.Unix(0, t0+200*ms), 3<<29)
	store.RecordGPU(p, "", time.Unix(0, t0+5*int64(time.Second)), 1) // out of range

	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	proc.put(rm.Resource().Attributes())
	m := rm.ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
	m.SetName(timeline.MetricGPUProcessMemory)
	dp := m.SetEmptySum().DataPoints().AppendEmpty()
	dp.SetTimestamp(pcommonTS(t0 + 300*ms))
	dp.SetIntValue(7)
	mp := newMetricsProcessor(mustAcquire(t, h), nil)
	if _, err := mp.processMetrics(context.Background(), md); err != nil {
		t.Fatal(err)
	}
	mp.ref.Release()

	s, err := h.c.Snapshot(allOfIt)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.GPU) != 2 || s.GPU[0].Device != "GPU-0" || s.GPU[1].Bytes != 3<<29 || s.GPU[1].Device != "" || s.Base+s.GPU[1].T != t0+200*ms || s.Lanes[s.GPU[1].Lane].PID != proc.pid {
		t.Fatalf("gpu %+v lanes %+v", s.GPU, s.Lanes)
	}
}

// TestSnapshotJVMAccountsFromTheRuntimeState: the accounts the jfr
// receiver shares through the runtimestate extension join their process's
// lane as account points (#29: unaccounted native memory, global JNI
// references, direct buffers, metaspace), and the heap does not.
func TestSnapshotJVMAccountsFromTheRuntimeState(t *testing.T) {
	h, store := storeHarness(t)
	p := runtimestate.Process{PID: int(proc.pid)}
	at := time.Unix(0, t0+100*ms)
	for account, v := range map[string]int64{"native_unaccounted": 64 << 20, "jni_global_refs": 18025, "direct_buffers": 8 << 20, "metaspace": 30 << 20, "heap": 5 << 20} {
		store.Record(p, account, at, v)
	}
	s, err := h.c.Snapshot(allOfIt)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, a := range s.Accounts {
		if s.Lanes[a.Lane].PID != proc.pid || s.Base+a.T != t0+100*ms {
			t.Errorf("account point %+v on lane %+v", a, s.Lanes[a.Lane])
		}
		got[a.Account] = a.Value
	}
	want := map[string]int64{"native_unaccounted": 64 << 20, "jni_global_refs": 18025, "direct_buffers": 8 << 20, "metaspace": 30 << 20}
	if fmt.Sprint(got) != fmt.Sprint(want) || len(s.Accounts) != 4 {
		t.Errorf("accounts %v (%d points), want %v", got, len(s.Accounts), want)
	}
	// A query for other kinds leaves them out.
	q := allOfIt
	q.Kinds = []string{timeline.KindGPU}
	if s, _ := h.c.Snapshot(q); len(s.Accounts) != 0 {
		t.Errorf("%d account points for a gpu-only query", len(s.Accounts))
	}
}

// TestStorePointsAreThinnedEvenly: a series with more readings in range
// than a snapshot takes gives maxSeriesPoints of them, spread evenly from
// its first to its newest; the total is bounded too.
func TestStorePointsAreThinnedEvenly(t *testing.T) {
	var rs []runtimestate.Reading
	for i := range 2000 {
		rs = append(rs, runtimestate.Reading{At: time.Unix(0, int64(i)), Value: int64(i)})
	}
	var got []int64
	if n := eachInRange(rs, 1999, maxStorePoints, func(_, v int64) { got = append(got, v) }); n != maxSeriesPoints || len(got) != n {
		t.Fatalf("%d points (%d called), want %d", n, len(got), maxSeriesPoints)
	}
	if got[0] != 0 || got[len(got)-1] != 1999 {
		t.Errorf("first %d, last %d: want 0 and 1999", got[0], got[len(got)-1])
	}
	for i := 1; i < len(got); i++ {
		if d := got[i] - got[i-1]; d < 3 || d > 5 {
			t.Fatalf("step %d between points %d and %d: not even", d, i-1, i)
		}
	}
	got = nil
	if n := eachInRange(rs, 9, maxStorePoints, func(_, v int64) { got = append(got, v) }); n != 10 || got[9] != 9 {
		t.Errorf("up to t=9: %v", got)
	}
	if n := eachInRange(rs, 1999, 3, func(int64, int64) {}); n != 3 {
		t.Errorf("with room for 3: %d", n)
	}
	if n := eachInRange(rs, 1999, 0, func(int64, int64) {}); n != 0 {
		t.Errorf("with no room: %d", n)
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
	for i := range 5000 {
		c.timeline.addSpans([]tlSpan{{scope: scopeKey{host: "node-1", pid: int64(1000 + i%4)}, start: start + int64(i)*5_000_000, end: start + int64(i)*5_000_000 + 3_000_000,
			name: "POST /predict", overlap: []kindTotal{{kind: 0, count: 1, dur: 1000}}}})
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

// BenchmarkRecentSpans is what keeping the recent spans for the timeline
// costs per span, on top of annotating it: copying what the page shows of
// a request span (a short name, two kinds of overlapping windows) and
// adding it to the ring at the default bound, full, so that each add also
// evicts. It reports the ring's bytes at that bound as the collector
// charges them (MiB-held) and as the heap measures them (MiB-heap).
func BenchmarkRecentSpans(b *testing.B) {
	cfg := createDefaultConfig().(*Config)
	td := spanTraces(proc, spanAt{"POST /predict", 100 * ms, 400 * ms})
	span := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0)
	span.SetTraceID(pcommon.TraceID{0x5b, 0x8e, 0xff, 0xf7, 0x98, 0x03, 0x81, 0x03, 0xd2, 0x69, 0xb6, 0x33, 0x81, 0x3f, 0xc6, 0x0c})
	span.SetSpanID(pcommon.SpanID{0xee, 0xe1, 0x9b, 0x7e, 0xc3, 0xc1, 0xb1, 0x74})
	matches := []windowindex.Entry{
		{Start: t0 + 90*ms, End: t0 + 120*ms, Kind: 0},
		{Start: t0 + 200*ms, End: t0 + 205*ms, Kind: 0},
		{Start: t0 + 110*ms, End: t0 + 140*ms, ThreadID: 11, Kind: 3},
	}
	key := scopeKey{host: "node-1", pid: 4242}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	t := newTimelineState(cfg)
	for i := range cfg.Timeline.MaxSpans {
		span.SetName(fmt.Sprintf("POST /predict/%d", i%100)) // names of their own, as from the wire
		t.addSpans([]tlSpan{recordSpan(key, span, t0+100*ms, t0+400*ms, totalsOf(matches, t0+100*ms, t0+400*ms))})
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	held, heap := float64(t.spans.Bytes())/(1<<20), float64(after.HeapAlloc-before.HeapAlloc)/(1<<20)
	span.SetName("POST /predict")
	batch := make([]tlSpan, 0, benchBatch)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i += benchBatch {
		batch = batch[:0]
		for range min(benchBatch, b.N-i) {
			batch = append(batch, recordSpan(key, span, t0+100*ms, t0+400*ms, totalsOf(matches, t0+100*ms, t0+400*ms)))
		}
		t.addSpans(batch)
	}
	b.StopTimer()
	if t.spans.Len() != cfg.Timeline.MaxSpans {
		b.Fatalf("%d spans held, want the default bound %d", t.spans.Len(), cfg.Timeline.MaxSpans)
	}
	b.ReportMetric(held, "MiB-held")
	b.ReportMetric(heap, "MiB-heap")
}
