package runtimecorrelationprocessor

import (
	"context"
	"reflect"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor/processortest"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"

	"github.com/otelcol-ai/otelcol-ai/internal/window"
	"github.com/otelcol-ai/otelcol-ai/processor/runtimecorrelationprocessor/internal/metadata"
	"github.com/otelcol-ai/otelcol-ai/processor/runtimecorrelationprocessor/internal/metadatatest"
)

// The windows of TestSpanAnnotation, against a span over [1, 2) ms.
var (
	spBefore = win(safepoint, 900*us, 200*us, 0)  // 100 µs inside
	spInside = win(safepoint, 1500*us, 100*us, 0) // 100 µs inside
	waitEnd  = win(gilWait, 1950*us, 550*us, 12)  // 50 µs inside
	gcAfter  = win(gcPause, 2*ms, 100*us, 0)      // touches the end: outside
	waitAll  = win(gilWait, 0, 5*ms, 13)          // covers the span: 1 ms
)

func attrsOf(s ptrace.Span) map[string]any { return s.Attributes().AsRaw() }

func TestSpanAnnotation(t *testing.T) {
	tests := []struct {
		name    string
		windows []window.Window
		want    map[string]any
	}{
		{name: "no window overlaps", windows: []window.Window{gcAfter}, want: map[string]any{}},
		{
			name:    "sums per kind of the intersections",
			windows: []window.Window{spBefore, spInside, waitEnd, gcAfter},
			want: map[string]any{
				"runtime.overlap.jvm.safepoint.duration":   200 * us,
				"runtime.overlap.jvm.safepoint.count":      int64(2),
				"runtime.overlap.python.gil.wait.duration": 50 * us,
				"runtime.overlap.python.gil.wait.count":    int64(1),
			},
		},
		{
			name:    "overlapping windows of one kind add up",
			windows: []window.Window{waitEnd, waitAll},
			want: map[string]any{
				"runtime.overlap.python.gil.wait.duration": 1050 * us,
				"runtime.overlap.python.gil.wait.count":    int64(2),
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, nil)
			if len(tt.windows) > 0 {
				h.sendWindows(proc, tt.windows...)
			}
			h.sendSpans(spanTraces(proc, spanAt{"infer", 1 * ms, 2 * ms}))
			span := spansByName(h.traceSink.AllTraces())["infer"]
			if got := attrsOf(span); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("attrsOf(span): got %v, want %v", got, tt.want)
			}
			if got := span.Events().Len(); got != 0 {
				t.Errorf("span.Events().Len(): got %v, want %v", got, 0)
			}
		})
	}
}

func TestSpanEventsPlaceEachWindow(t *testing.T) {
	h := newHarness(t, func(cfg *Config) { cfg.Spans.Events = true })
	h.sendWindows(proc, spBefore, spInside, waitEnd)
	h.sendSpans(spanTraces(proc, spanAt{"infer", 1 * ms, 2 * ms}))
	events := spansByName(h.traceSink.AllTraces())["infer"].Events()
	type ev struct {
		name  string
		at    int64
		attrs map[string]any
	}
	var got []ev
	for i := 0; i < events.Len(); i++ {
		e := events.At(i)
		got = append(got, ev{e.Name(), int64(e.Timestamp()) - t0, e.Attributes().AsRaw()})
	}
	pid := proc.pid
	if want := []ev{
		{"jvm.safepoint", 1 * ms, map[string]any{"runtime.window.duration": 200 * us, "runtime.overlap.duration": 100 * us, "process.pid": pid}},
		{"jvm.safepoint", 1500 * us, map[string]any{"runtime.window.duration": 100 * us, "runtime.overlap.duration": 100 * us, "process.pid": pid}},
		{"python.gil.wait", 1950 * us, map[string]any{"runtime.window.duration": 550 * us, "runtime.overlap.duration": 50 * us, "thread.id": int64(12), "process.pid": pid}},
	}; !reflect.DeepEqual(got, want) {
		t.Errorf("span events: got %v, want %v", got, want)
	}
}

func TestChildSpansPlaceEachWindowInsideTheParent(t *testing.T) {
	h := newHarness(t, func(cfg *Config) {
		cfg.Spans.ChildSpans = true
		cfg.Spans.MaxPlacements = 2
	})
	h.sendWindows(proc, spBefore, spInside, waitEnd)
	h.sendSpans(spanTraces(proc, spanAt{"infer", 1 * ms, 2 * ms}))
	out := h.traceSink.AllTraces()[0]
	if got := out.SpanCount(); got != 3 {
		t.Fatalf("the parent and two children (max_placements): got %v, want %v", got, 3)
	}
	sss := out.ResourceSpans().At(0).ScopeSpans()
	if got := sss.Len(); got != 2 {
		t.Fatalf("sss.Len(): got %v, want %v", got, 2)
	}
	parent := sss.At(0).Spans().At(0)
	if got := attrsOf(parent)["runtime.overlap.jvm.safepoint.count"]; !reflect.DeepEqual(got, int64(2)) {
		t.Errorf("totals count every window: got %v, want %v", got, int64(2))
	}
	if got := attrsOf(parent)["runtime.overlap.python.gil.wait.count"]; !reflect.DeepEqual(got, int64(1)) {
		t.Errorf("attrsOf(parent)[\"runtime.overlap.python.gil.wait.count\"]: got %v, want %v", got, int64(1))
	}
	if got := sss.At(1).Scope().Name(); got != metadata.ScopeName {
		t.Errorf("sss.At(1).Scope().Name(): got %q, want %q", got, metadata.ScopeName)
	}
	children := sss.At(1).Spans()
	wantRanges := [][2]int64{{1 * ms, 1100 * us}, {1500 * us, 1600 * us}}
	ids := map[pcommon.SpanID]bool{}
	for i := 0; i < children.Len(); i++ {
		c := children.At(i)
		if got := c.Name(); got != "jvm.safepoint" {
			t.Errorf("c.Name(): got %q, want %q", got, "jvm.safepoint")
		}
		if got := c.TraceID(); got != parent.TraceID() {
			t.Errorf("c.TraceID(): got %v, want %v", got, parent.TraceID())
		}
		if got := c.ParentSpanID(); got != parent.SpanID() {
			t.Errorf("c.ParentSpanID(): got %v, want %v", got, parent.SpanID())
		}
		if got := c.Kind(); got != ptrace.SpanKindInternal {
			t.Errorf("c.Kind(): got %v, want %v", got, ptrace.SpanKindInternal)
		}
		if got := [2]int64{int64(c.StartTimestamp()) - t0, int64(c.EndTimestamp()) - t0}; got != wantRanges[i] {
			t.Errorf("[2]int64{int64(c.StartTimestamp()) - t0, int64(c.EndTimestamp()) - t0}: got %v, want %v", got, wantRanges[i])
		}
		if c.SpanID().IsEmpty() {
			t.Errorf("c.SpanID().IsEmpty() is true")
		}
		ids[c.SpanID()] = true
	}
	if got := len(ids); got != 2 {
		t.Errorf("distinct child span ids: got %d, want %d", got, 2)
	}

	// The same span again (a retried batch) gets the same child ids.
	h.sendSpans(spanTraces(proc, spanAt{"infer", 1 * ms, 2 * ms}))
	again := h.traceSink.AllTraces()[1].ResourceSpans().At(0).ScopeSpans().At(1).Spans()
	for i := 0; i < again.Len(); i++ {
		if !ids[again.At(i).SpanID()] {
			t.Errorf("ids[again.At(i).SpanID()] is false")
		}
	}
}

func TestSpansWithoutIdentityAreMarkedUnmatched(t *testing.T) {
	h := newHarness(t, nil)
	h.sendWindows(proc, waitAll)
	h.sendSpans(spanTraces(resource{host: "node-1"}, spanAt{"no-pid", 1 * ms, 2 * ms}, spanAt{"no-pid-2", 1 * ms, 2 * ms}))
	got := spansByName(h.traceSink.AllTraces())
	for _, name := range []string{"no-pid", "no-pid-2"} {
		if got2 := attrsOf(got[name]); !reflect.DeepEqual(got2, map[string]any{"runtime.overlap.unmatched": "no_identity"}) {
			t.Errorf("%v: got %v, want %v", name, got2, map[string]any{"runtime.overlap.unmatched": "no_identity"})
		}
	}
	res := h.traceSink.AllTraces()[0].ResourceSpans().At(0).Resource().Attributes()
	_, has := res.Get("runtime.correlation.identity")
	if has {
		t.Errorf("an unmatched resource names no identity (has is true)")
	}
	metadatatest.AssertEqualProcessorRuntimecorrelationSpansUnmatched(t, h.tel,
		[]metricdata.DataPoint[int64]{{Value: 2, Attributes: attribute.NewSet(attribute.String("reason", "no_identity"))}},
		metricdatatest.IgnoreTimestamp())
}

func TestSpansWaitForLateWindows(t *testing.T) {
	h := newHarness(t, func(cfg *Config) { cfg.Spans.Delay = 2 * time.Second })
	// The span ended just now (the clock reads t0 + 1 s).
	h.clock.Advance(-time.Second + 2*time.Millisecond)
	h.sendSpans(spanTraces(proc, spanAt{"infer", 1 * ms, 2 * ms}))
	if got := h.traceSink.AllTraces(); len(got) != 0 {
		t.Errorf("held for windows: got %v, want empty", got)
	}
	metadatatest.AssertEqualProcessorRuntimecorrelationSpansWaiting(t, h.tel,
		[]metricdata.DataPoint[int64]{{Value: 1}}, metricdatatest.IgnoreTimestamp())

	// JFR flushes its safepoint a second later; the GIL wait came at once.
	h.sendWindows(proc, waitEnd)
	h.clock.Advance(time.Second)
	h.sendWindows(proc, spInside)
	if got := h.traces.releaseDue(h.clock.Now()); got != 0 {
		t.Errorf("not due before the delay: got %v, want %v", got, 0)
	}

	h.clock.Advance(time.Second)
	if got := h.traces.releaseDue(h.clock.Now()); got != 1 {
		t.Errorf("h.traces.releaseDue(h.clock.Now()): got %v, want %v", got, 1)
	}
	span := spansByName(h.traceSink.AllTraces())["infer"]
	if got, want := attrsOf(span), map[string]any{
		"runtime.overlap.jvm.safepoint.duration":   100 * us,
		"runtime.overlap.jvm.safepoint.count":      int64(1),
		"runtime.overlap.python.gil.wait.duration": 50 * us,
		"runtime.overlap.python.gil.wait.count":    int64(1),
	}; !reflect.DeepEqual(got, want) {
		t.Errorf("attrsOf(span): got %v, want %v", got, want)
	}
	metadatatest.AssertEqualProcessorRuntimecorrelationSpansWaiting(t, h.tel,
		[]metricdata.DataPoint[int64]{{Value: 0}}, metricdatatest.IgnoreTimestamp())
	_, err := h.tel.GetMetric("otelcol_processor_runtimecorrelation_windows_late")
	if err == nil {
		t.Errorf("no window was late so far: got nil error, want an error")
	}

	// A window for that span arriving now is late, and counted; one that
	// does not touch any forwarded span is not.
	h.sendWindows(proc, spBefore)
	h.sendWindows(proc, gcAfter)
	metadatatest.AssertEqualProcessorRuntimecorrelationWindowsLate(t, h.tel,
		[]metricdata.DataPoint[int64]{{Value: 1}}, metricdatatest.IgnoreTimestamp())
}

func TestDueTime(t *testing.T) {
	h := newHarness(t, func(cfg *Config) { cfg.Spans.Delay = 2 * time.Second })
	now := time.Unix(0, t0+10*int64(time.Second))
	tests := []struct {
		name    string
		spanEnd int64 // relative to now, ns
		want    time.Duration
	}{
		{"ended long ago: no wait", -time.Minute.Nanoseconds(), 0},
		{"ended 1.5 s ago: the rest of the delay", -1500 * ms, 500 * time.Millisecond},
		{"ended now: the whole delay", 0, 2 * time.Second},
		{"ends in the future: never more than the delay", time.Hour.Nanoseconds(), 2 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			end := now.UnixNano() + tt.spanEnd
			td := spanTraces(proc, spanAt{"s", end - t0 - ms, end - t0})
			if got := h.traces.dueTime(td, now).Sub(now); got != tt.want {
				t.Errorf("h.traces.dueTime(td, now).Sub(now): got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestMaxWaitingReleasesTheEarliestDue(t *testing.T) {
	h := newHarness(t, func(cfg *Config) {
		cfg.Spans.Delay = 2 * time.Second
		cfg.Spans.MaxWaiting = 2
	})
	h.clock.Advance(-time.Second + 2*time.Millisecond)
	h.sendSpans(spanTraces(proc, spanAt{"a", 1 * ms, 2 * ms}))
	h.sendSpans(spanTraces(proc, spanAt{"b", 0, 1 * ms}))
	h.sendSpans(spanTraces(proc, spanAt{"c", 1 * ms, 2 * ms}))
	got := spansByName(h.traceSink.AllTraces())
	if got2 := len(got); got2 != 1 {
		t.Errorf("len(spansByName): got %d, want %d", got2, 1)
	}
	if _, ok := got["b"]; !ok {
		t.Errorf("b ended first, so was due first: got %v, want it to contain %q", got, "b")
	}
	metadatatest.AssertEqualProcessorRuntimecorrelationSpansReleasedEarly(t, h.tel,
		[]metricdata.DataPoint[int64]{{Value: 1}}, metricdatatest.IgnoreTimestamp())
	metadatatest.AssertEqualProcessorRuntimecorrelationSpansWaiting(t, h.tel,
		[]metricdata.DataPoint[int64]{{Value: 2}}, metricdatatest.IgnoreTimestamp())
}

func TestShutdownFlushesWaitingSpans(t *testing.T) {
	h := newHarness(t, func(cfg *Config) {
		cfg.Spans.Delay = time.Hour
		cfg.Windows.Retention = 2 * time.Hour
	})
	h.sendWindows(proc, waitAll)
	for _, name := range []string{"a", "b", "c"} {
		h.sendSpans(spanTraces(proc, spanAt{name, 1 * ms, 2 * ms}, spanAt{name + "2", 6 * ms, 7 * ms}))
	}
	if got := h.traceSink.AllTraces(); len(got) != 0 {
		t.Fatalf("h.traceSink.AllTraces(): got %v, want empty", got)
	}
	if err := h.traces.shutdown(t.Context()); err != nil {
		t.Fatalf("h.traces.shutdown: %v", err)
	}
	got := spansByName(h.traceSink.AllTraces())
	if got2 := len(got); got2 != 6 {
		t.Fatalf("nothing lost: got %d, want %d", got2, 6)
	}
	for _, name := range []string{"a", "b", "c"} {
		if got2 := attrsOf(got[name])["runtime.overlap.python.gil.wait.duration"]; !reflect.DeepEqual(got2, 1*ms) {
			t.Errorf("%v: got %v, want %v", name, got2, 1*ms)
		}
		if got2 := attrsOf(got[name+"2"]); len(got2) != 0 {
			t.Errorf("%v: got %v, want empty", name+"2", got2)
		}
	}
	// After shutdown a late batch is annotated and passed at once.
	h.sendSpans(spanTraces(proc, spanAt{"d", 1 * ms, 2 * ms}))
	if _, ok := spansByName(h.traceSink.AllTraces())["d"]; !ok {
		t.Errorf("span d after shutdown: not passed on, want it passed at once")
	}
	if err := h.traces.shutdown(t.Context()); err != nil {
		t.Fatalf("shutdown twice: %v", err)
	}
}

// TestTimerReleasesSpans runs the pipeline's own timer: logs and traces
// processors of one component ID, built by the factory and started, share
// their windows.
func TestTimerReleasesSpans(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	cfg.Spans.Delay = 20 * time.Millisecond
	set := processortest.NewNopSettings(metadata.Type)
	logSink, traceSink := new(consumertest.LogsSink), new(consumertest.TracesSink)
	logs, err := NewFactory().CreateLogs(t.Context(), set, cfg, logSink)
	if err != nil {
		t.Fatalf("NewFactory().CreateLogs: %v", err)
	}
	traces, err := NewFactory().CreateTraces(t.Context(), set, cfg, traceSink)
	if err != nil {
		t.Fatalf("NewFactory().CreateTraces: %v", err)
	}
	host := componenttest.NewNopHost()
	if err := logs.Start(t.Context(), host); err != nil {
		t.Fatalf("logs.Start: %v", err)
	}
	if err := traces.Start(t.Context(), host); err != nil {
		t.Fatalf("traces.Start: %v", err)
	}

	now := time.Now().UnixNano()
	w := window.Window{Kind: window.KindJVMGCPause, Start: now - int64(time.Second), Duration: 10 * time.Millisecond}
	if err := logs.ConsumeLogs(measured(t.Context()), windowLogs(t, proc, w)); err != nil {
		t.Fatalf("logs.ConsumeLogs: %v", err)
	}
	td := spanTraces(proc, spanAt{"infer", now - t0 - int64(time.Second) - 5*ms, now - t0 - int64(time.Second) + 5*ms})
	if err := traces.ConsumeTraces(t.Context(), td); err != nil {
		t.Fatalf("traces.ConsumeTraces: %v", err)
	}
	for deadline := time.Now().Add(10 * time.Second); traceSink.SpanCount() != 1; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Errorf("traceSink.SpanCount(): got %d after 10s, want 1", traceSink.SpanCount())
			break
		}
	}

	if err := traces.Shutdown(context.Background()); err != nil {
		t.Fatalf("traces.Shutdown: %v", err)
	}
	if err := logs.Shutdown(context.Background()); err != nil {
		t.Fatalf("logs.Shutdown: %v", err)
	}
	span := spansByName(traceSink.AllTraces())["infer"]
	if got := attrsOf(span)["runtime.overlap.jvm.gc.pause.duration"]; !reflect.DeepEqual(got, 5*ms) {
		t.Errorf("attrsOf(span)[\"runtime.overlap.jvm.gc.pause.duration\"]: got %v, want %v", got, 5*ms)
	}
	if got := correlators.Len(); got != 0 {
		t.Errorf("the shared state is gone with its last pipeline: got %v, want %v", got, 0)
	}
}
