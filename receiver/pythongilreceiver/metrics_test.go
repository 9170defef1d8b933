package pythongilreceiver

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/receiver/receivertest"

	"github.com/otelcol-ai/otelcol-ai/receiver/pythongilreceiver/internal/gil"
	"github.com/otelcol-ai/otelcol-ai/receiver/pythongilreceiver/internal/metadata"
)

// newTestRunState is a run state without probes, for the metric-building
// phases.
func newTestRunState(t testing.TB, cfg *Config) *runState {
	t.Helper()
	return &runState{cfg: cfg, sampling: 1, processes: map[uint32]*process{},
		mb: newMetricsBuilder(cfg, receivertest.NewNopSettings(metadata.Type))}
}

func newTestProcess(pid uint32) *process {
	return &process{pid: pid, hists: map[histKey]*histogram{}, estimates: map[counterKey]float64{}, raw: map[counterKey]float64{},
		aggEst: map[histKey]aggEstimate{}, aggRaw: map[histKey]gil.Aggregate{}}
}

// findMetric returns the metric called name in md's first resource.
func findMetric(md pmetric.Metrics, name string) (pmetric.Metric, bool) {
	if md.ResourceMetrics().Len() == 0 {
		return pmetric.Metric{}, false
	}
	for _, sm := range md.ResourceMetrics().At(0).ScopeMetrics().All() {
		for _, m := range sm.Metrics().All() {
			if m.Name() == name {
				return m, true
			}
		}
	}
	return pmetric.Metric{}, false
}

// TestHistogramsScaledBySampling: a window seen while the probes were
// attached a quarter of the time stands for four, in the histogram's
// buckets, count and sum; the kernel's short-window aggregates are scaled
// by what they grew since the last collection; the wait-time counter is
// scaled once, not twice. (With waits from the uprobes, which the duty
// cycle detaches, so that waits are sampled.)
func TestHistogramsScaledBySampling(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	cfg.WaitSource = waitSourceUprobes
	st := newTestRunState(t, cfg)
	p := newTestProcess(7)
	wait := histKey{kind: gil.KindWait, gen: -1}
	h := newHistogram(st.cfg.MinDuration)
	p.hists[wait] = h
	h.record(200*time.Microsecond, 1)  // ≤ 250 µs
	h.record(2*time.Millisecond, 0.25) // ≤ 2.5 ms, weighs 4

	collect := func(aggs map[gil.AggregateKey]gil.Aggregate) (pmetric.HistogramDataPoint, float64) {
		md := pmetric.NewMetrics()
		st.processMetrics(md, p, aggs, pcommon.NewTimestampFromTime(time.Now()))
		hist, ok := findMetric(md, metricWaitDuration)
		require.True(t, ok)
		waitTime, ok := findMetric(md, metricWaitTime)
		require.True(t, ok)
		return hist.Histogram().DataPoints().At(0), waitTime.Sum().DataPoints().At(0).DoubleValue()
	}

	// 10 short waits (5 µs each) counted in the kernel at ratio 1.
	aggKey := gil.AggregateKey{PID: 7, Kind: gil.KindWait}
	dp, waitTime := collect(map[gil.AggregateKey]gil.Aggregate{aggKey: {Count: 10, Sum: 50 * time.Microsecond}})
	require.Equal(t, []uint64{10, 1, 0, 0, 4}, dp.BucketCounts().AsRaw()[:5])
	assert.Equal(t, uint64(15), dp.Count())
	assert.InDelta(t, 50e-6+200e-6+4*2e-3, dp.Sum(), 1e-12)
	assert.InDelta(t, 50e-6+200e-6+2e-3, waitTime, 1e-12, "counter from raw sums at ratio 1")

	// 10 more at ratio 0.5 stand for 20.
	st.sampling = 0.5
	dp, waitTime = collect(map[gil.AggregateKey]gil.Aggregate{aggKey: {Count: 20, Sum: 100 * time.Microsecond}})
	assert.Equal(t, uint64(30), dp.BucketCounts().At(0))
	assert.Equal(t, uint64(35), dp.Count())
	assert.InDelta(t, 150e-6+200e-6+4*2e-3, dp.Sum(), 1e-12)
	assert.InDelta(t, 50e-6+200e-6+2e-3+2*50e-6, waitTime, 1e-12, "the counter's growth scaled once")
}

// TestFutexTotalsNotScaled: with wait_source futex the tracepoints stay
// attached while the duty cycle detaches the uprobes, so the kernel's wait
// time and forced-switch counts are whole: at a sampling ratio of 0.25
// they are reported as counted, while held time and the short released
// windows, which only the uprobes see, stand for four times what grew.
func TestFutexTotalsNotScaled(t *testing.T) {
	st := newTestRunState(t, createDefaultConfig().(*Config))
	require.Equal(t, waitSourceFutex, st.cfg.WaitSource)
	st.sampling = 0.25
	p := newTestProcess(11)
	collect := func(aggs map[gil.AggregateKey]gil.Aggregate) (map[string]float64, map[string]pmetric.HistogramDataPoint) {
		md := pmetric.NewMetrics()
		st.processMetrics(md, p, aggs, pcommon.NewTimestampFromTime(time.Now()))
		sums := map[string]float64{}
		for _, name := range []string{metricWaitTime, "python.gil.held.time", "python.gil.switches"} {
			m, ok := findMetric(md, name)
			require.True(t, ok, name)
			dp := m.Sum().DataPoints().At(0)
			sums[name] = dp.DoubleValue() + float64(dp.IntValue())
		}
		hists := map[string]pmetric.HistogramDataPoint{}
		for _, name := range []string{metricWaitDuration, metricReleasedDuration} {
			m, ok := findMetric(md, name)
			require.True(t, ok, name)
			hists[name] = m.Histogram().DataPoints().At(0)
		}
		return sums, hists
	}
	aggs := func(n uint64) map[gil.AggregateKey]gil.Aggregate {
		return map[gil.AggregateKey]gil.Aggregate{
			{PID: 11, Kind: gil.KindWait}:     {Count: n, Sum: time.Duration(n) * 10 * time.Microsecond},
			{PID: 11, Kind: gil.KindSwitch}:   {Count: n},
			{PID: 11, Kind: gil.KindHeld}:     {Count: n, Sum: time.Duration(n) * 100 * time.Microsecond},
			{PID: 11, Kind: gil.KindReleased}: {Count: n, Sum: time.Duration(n) * 20 * time.Microsecond},
		}
	}
	collect(aggs(10))
	sums, hists := collect(aggs(30)) // 20 more of each
	assert.InDelta(t, 30*10e-6, sums[metricWaitTime], 1e-12, "wait time as counted")
	assert.InDelta(t, 30, sums["python.gil.switches"], 1e-9, "switches as counted")
	assert.InDelta(t, 4*30*100e-6, sums["python.gil.held.time"], 1e-12, "held time scaled by 1/0.25")
	assert.Equal(t, uint64(30), hists[metricWaitDuration].Count(), "short waits as counted")
	assert.InDelta(t, 30*10e-6, hists[metricWaitDuration].Sum(), 1e-12)
	assert.Equal(t, uint64(4*30), hists[metricReleasedDuration].Count(), "short releases scaled by 1/0.25")
	assert.InDelta(t, 4*30*20e-6, hists[metricReleasedDuration].Sum(), 1e-12)
}

// TestGCCollectionsPerGeneration: cpython.gc.collections counts, per
// generation, the pauses that came one by one (scaled like the histograms)
// and the kernel's short pauses of that generation; short pauses without a
// generation are counted in the pause histogram only.
func TestGCCollectionsPerGeneration(t *testing.T) {
	st := newTestRunState(t, createDefaultConfig().(*Config))
	p := newTestProcess(9)
	for gen, n := range map[int]int{0: 3, 2: 2} {
		h := newHistogram(st.cfg.MinDuration)
		for range n {
			h.record(time.Millisecond, 1)
		}
		p.hists[histKey{kind: gil.KindGC, gen: gen}] = h
	}
	p.hists[histKey{kind: gil.KindGC, gen: 1}] = newHistogram(st.cfg.MinDuration)
	p.hists[histKey{kind: gil.KindGC, gen: 1}].record(time.Millisecond, 0.5) // stands for 2
	md := pmetric.NewMetrics()
	short := map[gil.AggregateKey]gil.Aggregate{
		{PID: 9, Kind: gil.KindGC, Generation: 0}:                {Count: 40, Sum: 2 * time.Millisecond},
		{PID: 9, Kind: gil.KindGC, Generation: 1}:                {Count: 5, Sum: time.Millisecond},
		{PID: 9, Kind: gil.KindGC, Generation: gil.NoGeneration}: {Count: 7, Sum: time.Millisecond},
	}
	st.processMetrics(md, p, short, pcommon.NewTimestampFromTime(time.Now()))

	m, ok := findMetric(md, metricGCCollections)
	require.True(t, ok)
	assert.True(t, m.Sum().IsMonotonic())
	got := map[int64]int64{}
	for _, dp := range m.Sum().DataPoints().All() {
		gen, ok := dp.Attributes().Get("cpython.gc.generation")
		require.True(t, ok)
		got[gen.Int()] = dp.IntValue()
	}
	assert.Equal(t, map[int64]int64{0: 3 + 40, 1: 2 + 5, 2: 2}, got)

	pauses, ok := findMetric(md, metricGCDuration)
	require.True(t, ok)
	var total uint64
	for _, dp := range pauses.Histogram().DataPoints().All() {
		total += dp.Count()
	}
	assert.Equal(t, uint64(3+2+2+40+5+7), total, "the pause histogram counts every collection")
}

// TestMetricSwitches: metrics::<name>::enabled turns a generated metric and
// a histogram off; resource_attributes::<name>::enabled drops an attribute
// from the metrics' resource.
func TestMetricSwitches(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	cfg.Metrics.PythonGilWaitTime.Enabled = false
	cfg.Metrics.PythonGilWaitDuration.Enabled = false
	cfg.ResourceAttributes.ProcessExecutableName.Enabled = false
	st := newTestRunState(t, cfg)
	p := newTestProcess(11)
	p.res.ExecutableName = "python3.12"
	h := newHistogram(cfg.MinDuration)
	h.record(time.Millisecond, 1)
	p.hists[histKey{kind: gil.KindWait, gen: -1}] = h
	p.hists[histKey{kind: gil.KindReleased, gen: -1}] = h
	md := pmetric.NewMetrics()
	st.processMetrics(md, p, nil, pcommon.NewTimestampFromTime(time.Now()))

	_, ok := findMetric(md, metricWaitTime)
	assert.False(t, ok)
	_, ok = findMetric(md, metricWaitDuration)
	assert.False(t, ok)
	_, ok = findMetric(md, metricReleasedDuration)
	assert.True(t, ok)
	_, ok = md.ResourceMetrics().At(0).Resource().Attributes().Get("process.executable.name")
	assert.False(t, ok)
	pid, _ := md.ResourceMetrics().At(0).Resource().Attributes().Get("process.pid")
	assert.Equal(t, int64(11), pid.Int())
}
