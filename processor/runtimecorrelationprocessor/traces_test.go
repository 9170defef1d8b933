package runtimecorrelationprocessor

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
			assert.Equal(t, tt.want, attrsOf(span))
			assert.Equal(t, 0, span.Events().Len())
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
	assert.Equal(t, []ev{
		{"jvm.safepoint", 1 * ms, map[string]any{"runtime.window.duration": 200 * us, "runtime.overlap.duration": 100 * us, "process.pid": pid}},
		{"jvm.safepoint", 1500 * us, map[string]any{"runtime.window.duration": 100 * us, "runtime.overlap.duration": 100 * us, "process.pid": pid}},
		{"python.gil.wait", 1950 * us, map[string]any{"runtime.window.duration": 550 * us, "runtime.overlap.duration": 50 * us, "thread.id": int64(12), "process.pid": pid}},
	}, got)
}

func TestChildSpansPlaceEachWindowInsideTheParent(t *testing.T) {
	h := newHarness(t, func(cfg *Config) {
		cfg.Spans.ChildSpans = true
		cfg.Spans.MaxPlacements = 2
	})
	h.sendWindows(proc, spBefore, spInside, waitEnd)
	h.sendSpans(spanTraces(proc, spanAt{"infer", 1 * ms, 2 * ms}))
	out := h.traceSink.AllTraces()[0]
	require.Equal(t, 3, out.SpanCount(), "the parent and two children (max_placements)")
	sss := out.ResourceSpans().At(0).ScopeSpans()
	require.Equal(t, 2, sss.Len())
	parent := sss.At(0).Spans().At(0)
	assert.Equal(t, int64(2), attrsOf(parent)["runtime.overlap.jvm.safepoint.count"], "totals count every window")
	assert.Equal(t, int64(1), attrsOf(parent)["runtime.overlap.python.gil.wait.count"])
	assert.Equal(t, metadata.ScopeName, sss.At(1).Scope().Name())
	children := sss.At(1).Spans()
	wantRanges := [][2]int64{{1 * ms, 1100 * us}, {1500 * us, 1600 * us}}
	ids := map[pcommon.SpanID]bool{}
	for i := 0; i < children.Len(); i++ {
		c := children.At(i)
		assert.Equal(t, "jvm.safepoint", c.Name())
		assert.Equal(t, parent.TraceID(), c.TraceID())
		assert.Equal(t, parent.SpanID(), c.ParentSpanID())
		assert.Equal(t, ptrace.SpanKindInternal, c.Kind())
		assert.Equal(t, wantRanges[i], [2]int64{int64(c.StartTimestamp()) - t0, int64(c.EndTimestamp()) - t0})
		assert.False(t, c.SpanID().IsEmpty())
		ids[c.SpanID()] = true
	}
	assert.Len(t, ids, 2, "distinct child span ids")

	// The same span again (a retried batch) gets the same child ids.
	h.sendSpans(spanTraces(proc, spanAt{"infer", 1 * ms, 2 * ms}))
	again := h.traceSink.AllTraces()[1].ResourceSpans().At(0).ScopeSpans().At(1).Spans()
	for i := 0; i < again.Len(); i++ {
		assert.True(t, ids[again.At(i).SpanID()])
	}
}

func TestSpansWithoutIdentityAreMarkedUnmatched(t *testing.T) {
	h := newHarness(t, nil)
	h.sendWindows(proc, waitAll)
	h.sendSpans(spanTraces(resource{host: "node-1"}, spanAt{"no-pid", 1 * ms, 2 * ms}, spanAt{"no-pid-2", 1 * ms, 2 * ms}))
	got := spansByName(h.traceSink.AllTraces())
	for _, name := range []string{"no-pid", "no-pid-2"} {
		assert.Equal(t, map[string]any{"runtime.overlap.unmatched": "no_identity"}, attrsOf(got[name]), name)
	}
	res := h.traceSink.AllTraces()[0].ResourceSpans().At(0).Resource().Attributes()
	_, has := res.Get("runtime.correlation.identity")
	assert.False(t, has, "an unmatched resource names no identity")
	metadatatest.AssertEqualProcessorRuntimecorrelationSpansUnmatched(t, h.tel,
		[]metricdata.DataPoint[int64]{{Value: 2, Attributes: attribute.NewSet(attribute.String("reason", "no_identity"))}},
		metricdatatest.IgnoreTimestamp())
}

func TestSpansWaitForLateWindows(t *testing.T) {
	h := newHarness(t, func(cfg *Config) { cfg.Spans.Delay = 2 * time.Second })
	// The span ended just now (the clock reads t0 + 1 s).
	h.clock.Advance(-time.Second + 2*time.Millisecond)
	h.sendSpans(spanTraces(proc, spanAt{"infer", 1 * ms, 2 * ms}))
	assert.Empty(t, h.traceSink.AllTraces(), "held for windows")
	metadatatest.AssertEqualProcessorRuntimecorrelationSpansWaiting(t, h.tel,
		[]metricdata.DataPoint[int64]{{Value: 1}}, metricdatatest.IgnoreTimestamp())

	// JFR flushes its safepoint a second later; the GIL wait came at once.
	h.sendWindows(proc, waitEnd)
	h.clock.Advance(time.Second)
	h.sendWindows(proc, spInside)
	assert.Equal(t, 0, h.traces.releaseDue(h.clock.Now()), "not due before the delay")

	h.clock.Advance(time.Second)
	assert.Equal(t, 1, h.traces.releaseDue(h.clock.Now()))
	span := spansByName(h.traceSink.AllTraces())["infer"]
	assert.Equal(t, map[string]any{
		"runtime.overlap.jvm.safepoint.duration":   100 * us,
		"runtime.overlap.jvm.safepoint.count":      int64(1),
		"runtime.overlap.python.gil.wait.duration": 50 * us,
		"runtime.overlap.python.gil.wait.count":    int64(1),
	}, attrsOf(span))
	metadatatest.AssertEqualProcessorRuntimecorrelationSpansWaiting(t, h.tel,
		[]metricdata.DataPoint[int64]{{Value: 0}}, metricdatatest.IgnoreTimestamp())
	_, err := h.tel.GetMetric("otelcol_processor_runtimecorrelation_windows_late")
	assert.Error(t, err, "no window was late so far")

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
			assert.Equal(t, tt.want, h.traces.dueTime(td, now).Sub(now))
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
	assert.Len(t, got, 1)
	assert.Contains(t, got, "b", "b ended first, so was due first")
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
	require.Empty(t, h.traceSink.AllTraces())
	require.NoError(t, h.traces.shutdown(t.Context()))
	got := spansByName(h.traceSink.AllTraces())
	require.Len(t, got, 6, "nothing lost")
	for _, name := range []string{"a", "b", "c"} {
		assert.Equal(t, 1*ms, attrsOf(got[name])["runtime.overlap.python.gil.wait.duration"], name)
		assert.Empty(t, attrsOf(got[name+"2"]), name+"2")
	}
	// After shutdown a late batch is annotated and passed at once.
	h.sendSpans(spanTraces(proc, spanAt{"d", 1 * ms, 2 * ms}))
	assert.Contains(t, spansByName(h.traceSink.AllTraces()), "d")
	require.NoError(t, h.traces.shutdown(t.Context()), "shutdown twice")
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
	require.NoError(t, err)
	traces, err := NewFactory().CreateTraces(t.Context(), set, cfg, traceSink)
	require.NoError(t, err)
	host := componenttest.NewNopHost()
	require.NoError(t, logs.Start(t.Context(), host))
	require.NoError(t, traces.Start(t.Context(), host))

	now := time.Now().UnixNano()
	w := window.Window{Kind: window.KindJVMGCPause, Start: now - int64(time.Second), Duration: 10 * time.Millisecond}
	require.NoError(t, logs.ConsumeLogs(t.Context(), windowLogs(t, proc, w)))
	td := spanTraces(proc, spanAt{"infer", now - t0 - int64(time.Second) - 5*ms, now - t0 - int64(time.Second) + 5*ms})
	require.NoError(t, traces.ConsumeTraces(t.Context(), td))
	assert.Eventually(t, func() bool { return traceSink.SpanCount() == 1 }, 10*time.Second, 5*time.Millisecond)

	require.NoError(t, traces.Shutdown(context.Background()))
	require.NoError(t, logs.Shutdown(context.Background()))
	span := spansByName(traceSink.AllTraces())["infer"]
	assert.Equal(t, 5*ms, attrsOf(span)["runtime.overlap.jvm.gc.pause.duration"])
	assert.Equal(t, 0, correlators.Len(), "the shared state is gone with its last pipeline")
}
