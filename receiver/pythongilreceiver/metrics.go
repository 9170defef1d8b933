package pythongilreceiver

import (
	"math"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/otelcol-ai/otelcol-ai/internal/procresource"
	"github.com/otelcol-ai/otelcol-ai/internal/window"
	"github.com/otelcol-ai/otelcol-ai/receiver/pythongilreceiver/internal/gil"
	"github.com/otelcol-ai/otelcol-ai/receiver/pythongilreceiver/internal/metadata"
)

// Metric names (README.md documents each).
const (
	metricReleasedDuration = "python.gil.released.duration"
	metricWaitDuration     = "python.gil.wait.duration"
	metricGCDuration       = "python.gc.pause.duration"
	metricHeldTime         = "python.gil.held.time"
	metricWaitTime         = "python.gil.wait.time"
	metricSwitches         = "python.gil.switches"
	metricSamplingRatio    = "python.gil.probe.sampling_ratio"
	metricDropped          = "python.gil.probe.dropped"
	metricHits             = "python.gil.probe.hits"
)

// histogramBounds are the explicit bucket bounds in seconds above the first
// one, which is the configured min_duration: windows shorter than it are
// summed in the kernel and all land in the first bucket.
var histogramBounds = []float64{250e-6, 500e-6, 1e-3, 2.5e-3, 5e-3, 10e-3, 25e-3, 50e-3, 100e-3, 250e-3, 500e-3, 1, 2.5, 5, 10}

// histogram accumulates window durations, cumulatively. While the probes
// are duty-cycled each window weighs the inverse of the sampling ratio in
// effect, so that counts and sum are estimates of what ran, like the
// counters; rawSum keeps what was observed.
type histogram struct {
	bounds []float64
	counts []float64
	sum    float64
	rawSum float64
}

func newHistogram(minDuration time.Duration) *histogram {
	bounds := []float64{minDuration.Seconds()}
	for _, b := range histogramBounds {
		if b > bounds[0] {
			bounds = append(bounds, b)
		}
	}
	return &histogram{bounds: bounds, counts: make([]float64, len(bounds)+1)}
}

// minScaleRatio bounds the weight of one window.
const minScaleRatio = 1e-3

func (h *histogram) record(d time.Duration, sampling float64) {
	s := d.Seconds()
	i := 0
	for i < len(h.bounds) && s > h.bounds[i] {
		i++
	}
	w := 1 / max(min(sampling, 1), minScaleRatio)
	h.counts[i] += w
	h.sum += s * w
	h.rawSum += s
}

// bucketCounts returns the (estimated) counts rounded, and their total.
func (h *histogram) bucketCounts() ([]uint64, uint64) {
	out := make([]uint64, len(h.counts))
	var total uint64
	for i, c := range h.counts {
		out[i] = uint64(math.Round(c))
		total += out[i]
	}
	return out, total
}

// scaledNote ends the histograms' descriptions.
const scaledNote = "; while the probes are duty-cycled, counts and sum are estimates, scaled by the inverse of the sampling ratio."

// aggEstimate is the scaled count and sum of a kernel aggregate.
type aggEstimate struct {
	count, sum float64
}

// metrics builds every process's metrics: histograms of the windows that
// came as events plus the kernel's aggregates of the short ones, scaled time
// and switch counters, and the probe's own health.
func (st *runState) metrics(now pcommon.Timestamp) (pmetric.Metrics, error) {
	md := pmetric.NewMetrics()
	aggs, err := st.probe.Aggregates()
	if err != nil {
		return md, err
	}
	counters, err := st.probe.Counters()
	if err != nil {
		return md, err
	}
	byPID := map[uint32]map[gil.AggregateKey]gil.Aggregate{}
	for k, v := range aggs {
		m, ok := byPID[k.PID]
		if !ok {
			m = map[gil.AggregateKey]gil.Aggregate{}
			byPID[k.PID] = m
		}
		if !st.cfg.PerThread {
			k.TID = 0
		}
		prev := m[k]
		m[k] = gil.Aggregate{Count: prev.Count + v.Count, Sum: prev.Sum + v.Sum}
	}
	for pid := range byPID {
		st.process(pid)
	}
	for pid, p := range st.processes {
		st.processMetrics(md, p, byPID[pid], now)
		if p.exited {
			// Reported one last time; now forget it, here and in the kernel.
			delete(st.processes, pid)
			if err := st.probe.Forget(pid); err != nil {
				st.logger.Debug("forgetting an exited process")
			}
		}
	}
	st.probeMetrics(md, counters, now)
	return md, nil
}

func (st *runState) processMetrics(md pmetric.Metrics, p *process, aggs map[gil.AggregateKey]gil.Aggregate, now pcommon.Timestamp) {
	if len(p.hists) == 0 && len(aggs) == 0 {
		return
	}
	rm := md.ResourceMetrics().AppendEmpty()
	st.putResource(rm.Resource(), p)
	sm := rm.ScopeMetrics().AppendEmpty()
	sm.Scope().SetName(metadata.ScopeName)
	ms := sm.Metrics()

	// Histograms: events plus, in the first bucket, the kernel's short
	// windows of the same kind and thread.
	// The kernel's aggregates are raw cumulative totals: what they grew by
	// since the last collection is scaled by the sampling ratio, as the
	// windows that came one by one were.
	ratio := max(min(st.sampling, 1), minScaleRatio)
	merged := map[histKey]*histogram{}
	for k, h := range p.hists {
		c := *h
		c.counts = append([]float64(nil), h.counts...)
		merged[k] = &c
	}
	for k, a := range aggs {
		if k.Kind != gil.KindReleased && k.Kind != gil.KindWait && k.Kind != gil.KindGC {
			continue
		}
		// The kernel does not keep the GC generation of short pauses.
		hk := histKey{kind: k.Kind, tid: k.TID, gen: -1}
		prev := p.aggRaw[hk]
		if a.Count > prev.Count {
			e := p.aggEst[hk]
			e.count += float64(a.Count-prev.Count) / ratio
			e.sum += (a.Sum - prev.Sum).Seconds() / ratio
			p.aggEst[hk] = e
		}
		p.aggRaw[hk] = a
	}
	for hk, e := range p.aggEst {
		h, ok := merged[hk]
		if !ok {
			h = newHistogram(st.cfg.MinDuration)
			merged[hk] = h
		}
		h.counts[0] += e.count
		h.sum += e.sum
	}
	hists := map[gil.Kind]pmetric.HistogramDataPointSlice{}
	for k, h := range merged {
		dps, ok := hists[k.kind]
		if !ok {
			m := ms.AppendEmpty()
			switch k.kind {
			case gil.KindReleased:
				m.SetName(metricReleasedDuration)
				m.SetDescription("How long Python threads ran without the GIL (PyEval_SaveThread to PyEval_RestoreThread)" + scaledNote)
			case gil.KindWait:
				m.SetName(metricWaitDuration)
				m.SetDescription("How long Python threads waited to take the GIL" + scaledNote)
			case gil.KindGC:
				m.SetName(metricGCDuration)
				m.SetDescription("How long CPython's cyclic garbage collector ran" + scaledNote)
			}
			m.SetUnit("s")
			hist := m.SetEmptyHistogram()
			hist.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
			dps = hist.DataPoints()
			hists[k.kind] = dps
		}
		dp := dps.AppendEmpty()
		dp.SetStartTimestamp(p.startTime)
		dp.SetTimestamp(now)
		counts, total := h.bucketCounts()
		dp.SetCount(total)
		dp.SetSum(h.sum)
		dp.ExplicitBounds().FromRaw(h.bounds)
		dp.BucketCounts().FromRaw(counts)
		if k.tid != 0 {
			dp.Attributes().PutInt(window.AttrThreadID, int64(k.tid))
		}
		if k.gen >= 0 {
			dp.Attributes().PutInt(window.AttrPythonGCGeneration, int64(k.gen))
		}
	}

	// Counters: raw totals now, scaled by the sampling ratio since the last
	// collection, accumulated.
	raw := map[counterKey]float64{}
	for k, h := range p.hists {
		if k.kind == gil.KindWait {
			raw[counterKey{kind: gil.KindWait, tid: k.tid}] += h.rawSum
		}
	}
	for k, a := range aggs {
		switch k.Kind {
		case gil.KindWait:
			raw[counterKey{kind: gil.KindWait, tid: k.TID}] += a.Sum.Seconds()
		case gil.KindHeld:
			raw[counterKey{kind: gil.KindHeld, tid: k.TID}] += a.Sum.Seconds()
		case gil.KindSwitch:
			raw[counterKey{kind: gil.KindSwitch, tid: k.TID}] += float64(a.Count)
		}
	}
	for k, v := range raw {
		if d := v - p.raw[k]; d > 0 {
			p.estimates[k] += d / ratio
		}
		p.raw[k] = v
	}
	sums := map[gil.Kind]pmetric.NumberDataPointSlice{}
	for k, v := range p.estimates {
		dps, ok := sums[k.kind]
		if !ok {
			m := ms.AppendEmpty()
			switch k.kind {
			case gil.KindHeld:
				m.SetName(metricHeldTime)
				m.SetDescription("Time Python threads held the GIL (take_gil to drop_gil; needs those symbols), scaled by the sampling ratio.")
				m.SetUnit("s")
			case gil.KindWait:
				m.SetName(metricWaitTime)
				m.SetDescription("Time Python threads waited for the GIL, scaled by the sampling ratio.")
				m.SetUnit("s")
			case gil.KindSwitch:
				m.SetName(metricSwitches)
				m.SetDescription("Times the switch interval forced a thread to drop the GIL (needs take_gil/drop_gil), scaled by the sampling ratio.")
				m.SetUnit("{switch}")
			}
			sum := m.SetEmptySum()
			sum.SetIsMonotonic(true)
			sum.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
			dps = sum.DataPoints()
			sums[k.kind] = dps
		}
		dp := dps.AppendEmpty()
		dp.SetStartTimestamp(p.startTime)
		dp.SetTimestamp(now)
		dp.SetDoubleValue(v)
		if k.tid != 0 {
			dp.Attributes().PutInt(window.AttrThreadID, int64(k.tid))
		}
	}
}

// probeMetrics reports the probes' own state on a resource that names only
// the host.
func (st *runState) probeMetrics(md pmetric.Metrics, c gil.Counters, now pcommon.Timestamp) {
	rm := md.ResourceMetrics().AppendEmpty()
	procresource.PutIdentity(rm.Resource().Attributes(), procresource.Identity{}, st.node)
	sm := rm.ScopeMetrics().AppendEmpty()
	sm.Scope().SetName(metadata.ScopeName)
	ms := sm.Metrics()

	m := ms.AppendEmpty()
	m.SetName(metricSamplingRatio)
	m.SetDescription("Fraction of time the probes are attached under the overhead budget; counters are scaled by its inverse and so are estimates when it is below 1.")
	m.SetUnit("1")
	dp := m.SetEmptyGauge().DataPoints().AppendEmpty()
	dp.SetTimestamp(now)
	dp.SetDoubleValue(st.sampling)

	m = ms.AppendEmpty()
	m.SetName(metricDropped)
	m.SetDescription("Windows the kernel side could not send one by one (ring buffer full: summed instead) or lost (aggregate map full), or discarded as stale after a detached period.")
	m.SetUnit("{window}")
	sum := m.SetEmptySum()
	sum.SetIsMonotonic(true)
	sum.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	for _, r := range []struct {
		reason string
		v      uint64
	}{{"ring_buffer_full", c.RingBufferFull}, {"aggregate_map_full", c.AggregateMapFull}, {"stale", c.Stale}} {
		dp := sum.DataPoints().AppendEmpty()
		dp.SetTimestamp(now)
		dp.SetIntValue(int64(r.v))
		dp.Attributes().PutStr("reason", r.reason)
	}

	m = ms.AppendEmpty()
	m.SetName(metricHits)
	m.SetDescription("Probe hits, the basis of the overhead estimate.")
	m.SetUnit("{hit}")
	sum = m.SetEmptySum()
	sum.SetIsMonotonic(true)
	sum.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	dp = sum.DataPoints().AppendEmpty()
	dp.SetTimestamp(now)
	dp.SetIntValue(int64(c.Hits))
}
