package runtimecorrelationprocessor

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
	assert.Equal(t, []point{
		{pid7, "runtime.overlap.count", "jvm.safepoint", "python.gc.pause", 1, start},
		{pid7, "runtime.overlap.duration", "jvm.safepoint", "python.gc.pause", 250e-6, start},
		{pid4242, "runtime.overlap.count", "jvm.safepoint", "python.gil.wait", 1, start},
		{pid4242, "runtime.overlap.count", "jvm.gc.pause", "python.gil.wait", 2, start},
		{pid4242, "runtime.overlap.duration", "jvm.safepoint", "python.gil.wait", 500e-6, start},
		{pid4242, "runtime.overlap.duration", "jvm.gc.pause", "python.gil.wait", 2e-3, start},
	}, points(md))
	m := md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(1)
	assert.Equal(t, "s", m.Unit())
	assert.True(t, m.Sum().IsMonotonic())
	assert.Equal(t, pmetric.AggregationTemporalityCumulative, m.Sum().AggregationTemporality())
	scope, _ := m.Sum().DataPoints().At(0).Attributes().Get(attrOverlapScope)
	assert.Equal(t, "process", scope.Str())

	// Once a process's windows have all left the index, its series go; a
	// process still sending windows keeps its cumulative series.
	h.clock.Advance(time.Hour)
	h.sendWindows(proc, win(safepoint, int64(30*time.Minute), 1*ms, 0))
	later := points(h.c.overlapMetrics())
	require.Len(t, later, 4)
	for _, p := range later {
		assert.Equal(t, pid4242, p.resource)
	}
	assert.Equal(t, 2.0, later[1].value)
}

func TestMetricsPipelinePassesThroughAndEmitsAtShutdown(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	cfg.Spans.Delay = 0
	set := processortest.NewNopSettings(metadata.Type)
	logSink, metricSink := new(consumertest.LogsSink), new(consumertest.MetricsSink)
	logs, err := NewFactory().CreateLogs(t.Context(), set, cfg, logSink)
	require.NoError(t, err)
	metrics, err := NewFactory().CreateMetrics(t.Context(), set, cfg, metricSink)
	require.NoError(t, err)
	require.NoError(t, logs.Start(t.Context(), componenttest.NewNopHost()))
	require.NoError(t, metrics.Start(t.Context(), componenttest.NewNopHost()))

	in := pmetric.NewMetrics()
	in.ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty().Metrics().AppendEmpty().SetName("jvm.gc.duration")
	require.NoError(t, metrics.ConsumeMetrics(t.Context(), in))
	require.Len(t, metricSink.AllMetrics(), 1)
	assert.Equal(t, "jvm.gc.duration", metricSink.AllMetrics()[0].ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).Name())

	now := time.Now().UnixNano()
	ws := windowLogs(t, proc, win(safepoint, now-t0-int64(time.Second), 2*ms, 0), win(gilWait, now-t0-int64(time.Second)+ms, 2*ms, 3))
	require.NoError(t, logs.ConsumeLogs(t.Context(), ws))
	require.NoError(t, metrics.Shutdown(context.Background()))
	require.NoError(t, logs.Shutdown(context.Background()))
	require.Len(t, metricSink.AllMetrics(), 2, "the final emission at shutdown")
	got := points(metricSink.AllMetrics()[1])
	require.Len(t, got, 2)
	assert.Equal(t, 1.0, got[0].value)
	assert.Equal(t, 1e-3, got[1].value)
}
