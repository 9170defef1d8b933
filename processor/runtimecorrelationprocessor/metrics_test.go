package runtimecorrelationprocessor

import (
	"context"
	"reflect"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/otelcol-ai/otelcol-ai/processor/runtimecorrelationprocessor/internal/metadata"
)

// point is one data point of an overlap metric, flattened.
type point struct {
	resource      map[string]any
	metric        string
	first, second string
	value         float64
	start         int64
}

func points(md pmetric.Metrics) []point {
	var out []point
	for i := 0; i < md.ResourceMetrics().Len(); i++ {
		rm := md.ResourceMetrics().At(i)
		ms := rm.ScopeMetrics().At(0).Metrics()
		for j := 0; j < ms.Len(); j++ {
			m := ms.At(j)
			dps := m.Sum().DataPoints()
			for k := 0; k < dps.Len(); k++ {
				dp := dps.At(k)
				v := dp.DoubleValue()
				if dp.ValueType() == pmetric.NumberDataPointValueTypeInt {
					v = float64(dp.IntValue())
				}
				first, _ := dp.Attributes().Get(attrOverlapFirstKind)
				second, _ := dp.Attributes().Get(attrOverlapSecondKind)
				out = append(out, point{rm.Resource().Attributes().AsRaw(), m.Name(), first.Str(), second.Str(), v, int64(dp.StartTimestamp())})
			}
		}
	}
	return out
}

func TestOverlapMetricsArePerScopeAndPair(t *testing.T) {
	h := newHarness(t, nil)
	other := resource{host: "node-1", pid: 7}
	start := h.clock.Now().UnixNano()
	h.sendWindows(proc, win(safepoint, 0, 1*ms, 0), win(gcPause, 10*ms, 4*ms, 0))
	h.sendWindows(proc, win(gilWait, 500*us, 1*ms, 1), win(gilWait, 11*ms, 1*ms, 1), win(gilWait, 13*ms, 2*ms, 2))
	h.sendWindows(other, win(safepoint, 0, 1*ms, 0), win(pyGC, 250*us, 250*us, 1))

	md := h.c.overlapMetrics()
	pid7 := map[string]any{"host.name": "node-1", "process.pid": int64(7)}
	pid4242 := map[string]any{"host.name": "node-1", "process.pid": int64(4242)}
	if got, want := points(md), []point{
		{pid7, "runtime.overlap.count", "jvm.safepoint", "python.gc.pause", 1, start},
		{pid7, "runtime.overlap.duration", "jvm.safepoint", "python.gc.pause", 250e-6, start},
		{pid4242, "runtime.overlap.count", "jvm.safepoint", "python.gil.wait", 1, start},
		{pid4242, "runtime.overlap.count", "jvm.gc.pause", "python.gil.wait", 2, start},
		{pid4242, "runtime.overlap.duration", "jvm.safepoint", "python.gil.wait", 500e-6, start},
		{pid4242, "runtime.overlap.duration", "jvm.gc.pause", "python.gil.wait", 2e-3, start},
	}; !reflect.DeepEqual(got, want) {
		t.Errorf("points(md): got %v, want %v", got, want)
	}
	m := md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(1)
	if got := m.Unit(); got != "s" {
		t.Errorf("m.Unit(): got %q, want %q", got, "s")
	}
	if !m.Sum().IsMonotonic() {
		t.Errorf("m.Sum().IsMonotonic() is false")
	}
	if got := m.Sum().AggregationTemporality(); got != pmetric.AggregationTemporalityCumulative {
		t.Errorf("m.Sum().AggregationTemporality(): got %v, want %v", got, pmetric.AggregationTemporalityCumulative)
	}
	scope, _ := m.Sum().DataPoints().At(0).Attributes().Get(attrOverlapScope)
	if got := scope.Str(); got != "process" {
		t.Errorf("scope.Str(): got %q, want %q", got, "process")
	}

	// Once a process's windows have all left the index, its series go; a
	// process still sending windows keeps its cumulative series.
	h.clock.Advance(time.Hour)
	h.sendWindows(proc, win(safepoint, int64(30*time.Minute), 1*ms, 0))
	later := points(h.c.overlapMetrics())
	if got := len(later); got != 4 {
		t.Fatalf("len(points): got %d, want %d", got, 4)
	}
	for _, p := range later {
		if !reflect.DeepEqual(p.resource, pid4242) {
			t.Errorf("p.resource: got %v, want %v", p.resource, pid4242)
		}
	}
	if got := later[1].value; got != 2.0 {
		t.Errorf("later[1].value: got %v, want %v", got, 2.0)
	}
}

func TestMetricsPipelinePassesThroughAndEmitsAtShutdown(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	cfg.Spans.Delay = 0
	set := processortest.NewNopSettings(metadata.Type)
	logSink, metricSink := new(consumertest.LogsSink), new(consumertest.MetricsSink)
	logs, err := NewFactory().CreateLogs(t.Context(), set, cfg, logSink)
	if err != nil {
		t.Fatalf("NewFactory().CreateLogs: %v", err)
	}
	metrics, err := NewFactory().CreateMetrics(t.Context(), set, cfg, metricSink)
	if err != nil {
		t.Fatalf("NewFactory().CreateMetrics: %v", err)
	}
	if err := logs.Start(t.Context(), componenttest.NewNopHost()); err != nil {
		t.Fatalf("logs.Start: %v", err)
	}
	if err := metrics.Start(t.Context(), componenttest.NewNopHost()); err != nil {
		t.Fatalf("metrics.Start: %v", err)
	}

	in := pmetric.NewMetrics()
	in.ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty().Metrics().AppendEmpty().SetName("jvm.gc.duration")
	if err := metrics.ConsumeMetrics(t.Context(), in); err != nil {
		t.Fatalf("metrics.ConsumeMetrics: %v", err)
	}
	if got := len(metricSink.AllMetrics()); got != 1 {
		t.Fatalf("len(metricSink.AllMetrics()): got %d, want %d", got, 1)
	}
	if got := metricSink.AllMetrics()[0].ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).Name(); got != "jvm.gc.duration" {
		t.Errorf("metricSink.AllMetrics()[0].ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).Name(): got %q, want %q", got, "jvm.gc.duration")
	}

	now := time.Now().UnixNano()
	ws := windowLogs(t, proc, win(safepoint, now-t0-int64(time.Second), 2*ms, 0), win(gilWait, now-t0-int64(time.Second)+ms, 2*ms, 3))
	if err := logs.ConsumeLogs(measured(t.Context()), ws); err != nil {
		t.Fatalf("logs.ConsumeLogs: %v", err)
	}
	if err := metrics.Shutdown(context.Background()); err != nil {
		t.Fatalf("metrics.Shutdown: %v", err)
	}
	if err := logs.Shutdown(context.Background()); err != nil {
		t.Fatalf("logs.Shutdown: %v", err)
	}
	if got := len(metricSink.AllMetrics()); got != 2 {
		t.Fatalf("the final emission at shutdown: got %d, want %d", got, 2)
	}
	got := points(metricSink.AllMetrics()[1])
	if got2 := len(got); got2 != 2 {
		t.Fatalf("len(points): got %d, want %d", got2, 2)
	}
	if got2 := got[0].value; got2 != 1.0 {
		t.Errorf("got[0].value: got %v, want %v", got2, 1.0)
	}
	if got2 := got[1].value; got2 != 1e-3 {
		t.Errorf("got[1].value: got %v, want %v", got2, 1e-3)
	}
}

// TestOverlapMetricSwitchedOff: metrics::<name>::enabled false leaves that
// metric out and keeps the other.
func TestOverlapMetricSwitchedOff(t *testing.T) {
	h := newHarness(t, func(cfg *Config) { cfg.Metrics.RuntimeOverlapDuration.Enabled = false })
	h.sendWindows(proc, win(safepoint, 0, 1*ms, 0))
	h.sendWindows(proc, win(gilWait, 500*us, 1*ms, 1))
	var names []string
	for _, p := range points(h.c.overlapMetrics()) {
		names = append(names, p.metric)
	}
	if want := []string{"runtime.overlap.count"}; !reflect.DeepEqual(names, want) {
		t.Errorf("metrics: got %v, want %v", names, want)
	}
}
