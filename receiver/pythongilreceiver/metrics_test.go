package pythongilreceiver

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/otelcol-ai/otelcol-ai/receiver/pythongilreceiver/internal/gil"
)

// TestHistogramsScaledBySampling: a window seen while the probes were
// attached a quarter of the time stands for four, in the histogram's
// buckets, count and sum; the kernel's short-window aggregates are scaled
// by what they grew since the last collection; the wait-time counter is
// scaled once, not twice.
func TestHistogramsScaledBySampling(t *testing.T) {
	st := &runState{cfg: createDefaultConfig().(*Config), sampling: 1}
	p := &process{pid: 7, hists: map[histKey]*histogram{}, estimates: map[counterKey]float64{}, raw: map[counterKey]float64{},
		aggEst: map[histKey]aggEstimate{}, aggRaw: map[histKey]gil.Aggregate{}}
	wait := histKey{kind: gil.KindWait, gen: -1}
	h := newHistogram(st.cfg.MinDuration)
	p.hists[wait] = h
	h.record(200*time.Microsecond, 1)  // ≤ 250 µs
	h.record(2*time.Millisecond, 0.25) // ≤ 2.5 ms, weighs 4

	collect := func(aggs map[gil.AggregateKey]gil.Aggregate) (pmetric.HistogramDataPoint, float64) {
		md := pmetric.NewMetrics()
		st.processMetrics(md, p, aggs, pcommon.NewTimestampFromTime(time.Now()))
		var hist pmetric.HistogramDataPoint
		var waitTime float64
		ms := md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics()
		for i := range ms.Len() {
			switch m := ms.At(i); m.Name() {
			case metricWaitDuration:
				hist = m.Histogram().DataPoints().At(0)
			case metricWaitTime:
				waitTime = m.Sum().DataPoints().At(0).DoubleValue()
			}
		}
		return hist, waitTime
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
