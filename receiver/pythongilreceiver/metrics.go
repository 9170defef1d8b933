package pythongilreceiver

import (
	"math"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/receiver"

	"github.com/otelcol-ai/otelcol-ai/internal/procresource"
	"github.com/otelcol-ai/otelcol-ai/internal/window"
	"github.com/otelcol-ai/otelcol-ai/receiver/pythongilreceiver/internal/gil"
	"github.com/otelcol-ai/otelcol-ai/receiver/pythongilreceiver/internal/metadata"
)

// Histograms: mdatagen (v0.159) generates sums and gauges, not histograms
// (its builder would set a number on a histogram point), so these three
// are built here; metadata.yaml declares every other metric and the
// resource attributes. Each has its switch under metrics:, as the
// generated ones do, and README.md documents them with the others.
const (
	metricReleasedDuration = "python.gil.released.duration"
	metricWaitDuration     = "python.gil.wait.duration"
	metricGCDuration       = "python.gc.pause.duration"
)

// Names of generated metrics that tests and the duty cycle's checks look up.
const (
	metricSamplingRatio = "python.gil.probe.sampling_ratio"
	metricWaitTime      = "python.gil.wait.time"
	metricGCCollections = "cpython.gc.collections"
)

// scaledNote ends the histograms' descriptions.
const scaledNote = "; while the probes are duty-cycled, counts and sum are estimates, scaled by the inverse of the sampling ratio."

// histogramMetric is one hand-built histogram: its name, description and
// whether the configuration turns it on.
type histogramMetric struct {
	name, description string
	enabled           func(MetricsConfig) bool
}

// histogramMetrics are the histograms by the kind of window they measure.
var histogramMetrics = map[gil.Kind]histogramMetric{
	gil.KindReleased: {metricReleasedDuration, "How long Python threads ran without the GIL (PyEval_SaveThread to PyEval_RestoreThread)" + scaledNote,
		func(c MetricsConfig) bool { return c.PythonGilReleasedDuration.Enabled }},
	gil.KindWait: {metricWaitDuration, "How long Python threads waited to take the GIL" + scaledNote,
		func(c MetricsConfig) bool { return c.PythonGilWaitDuration.Enabled }},
	gil.KindGC: {metricGCDuration, "How long CPython's cyclic garbage collector ran, by cpython.gc.generation (pauses shorter than min_duration under theirs too)" + scaledNote,
		func(c MetricsConfig) bool { return c.PythonGcPauseDuration.Enabled }},
}

// MetricsConfig is metrics::<name>::enabled for every metric: the
// generated ones and the histograms.
type MetricsConfig struct {
	metadata.MetricsConfig `mapstructure:",squash"`

	PythonGilReleasedDuration HistogramConfig `mapstructure:"python.gil.released.duration"`
	PythonGilWaitDuration     HistogramConfig `mapstructure:"python.gil.wait.duration"`
	PythonGcPauseDuration     HistogramConfig `mapstructure:"python.gc.pause.duration"`
}

// HistogramConfig turns one histogram on or off.
type HistogramConfig struct {
	Enabled bool `mapstructure:"enabled"`
}

func defaultMetricsConfig() MetricsConfig {
	return MetricsConfig{
		MetricsConfig:             metadata.DefaultMetricsConfig(),
		PythonGilReleasedDuration: HistogramConfig{Enabled: true},
		PythonGilWaitDuration:     HistogramConfig{Enabled: true},
		PythonGcPauseDuration:     HistogramConfig{Enabled: true},
	}
}

// newMetricsBuilder makes the generated builder for cfg's switches.
func newMetricsBuilder(cfg *Config, set receiver.Settings) *metadata.MetricsBuilder {
	return metadata.NewMetricsBuilder(metadata.MetricsBuilderConfig{Metrics: cfg.Metrics.MetricsConfig, ResourceAttributes: cfg.ResourceAttributes}, set)
}

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

func (h *histogram) record(d time.Duration, sampling float64) { h.add(d, sampling, 1) }

// unrecord takes back a window recorded with the same sampling ratio (a
// wait that a continuation lengthened, see runState.add).
func (h *histogram) unrecord(d time.Duration, sampling float64) { h.add(d, sampling, -1) }

func (h *histogram) add(d time.Duration, sampling, sign float64) {
	s := d.Seconds()
	i := 0
	for i < len(h.bounds) && s > h.bounds[i] {
		i++
	}
	w := sign / max(min(sampling, 1), minScaleRatio)
	h.counts[i] += w
	h.sum += s * w
	h.rawSum += sign * s
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

// aggEstimate is the scaled count and sum of a kernel aggregate.
type aggEstimate struct {
	count, sum float64
}

// metrics builds every process's metrics (histograms of its windows plus
// the kernel's aggregates of the short ones, scaled time, switch and
// collection counters) and the probes' own health.
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
	byPID := st.aggregatesByPID(aggs)
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

// aggregatesByPID groups the kernel's aggregates by process, merging
// threads when metrics are not per thread.
func (st *runState) aggregatesByPID(aggs map[gil.AggregateKey]gil.Aggregate) map[uint32]map[gil.AggregateKey]gil.Aggregate {
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
	return byPID
}

// ratio is the share of kind's windows and totals kept since the last
// collection (keptRatio: with wait_source futex, waits and forced switches
// are all kept while the uprobes are duty-cycled), which scales what grew,
// bounded so that one window never weighs more than 1/minScaleRatio.
func (st *runState) ratio(p *process, kind gil.Kind) float64 {
	return max(min(keptRatio(st.cfg, kind, st.samplingOf(p)), 1), minScaleRatio)
}

// processMetrics records one process's metrics on its own resource.
func (st *runState) processMetrics(md pmetric.Metrics, p *process, aggs map[gil.AggregateKey]gil.Aggregate, now pcommon.Timestamp) {
	if len(p.hists) == 0 && len(aggs) == 0 {
		return
	}
	hists := st.mergeHistograms(p, aggs)
	st.updateEstimates(p, aggs)
	st.recordCounters(p, hists, now)
	st.emit(md, st.metricsResource(p), func(ms pmetric.MetricSlice) {
		appendHistograms(ms, st.cfg.Metrics, hists, p.startTime, now)
	}, metadata.WithStartTimeOverride(p.startTime))
}

// mergeHistograms returns the process's histograms of the windows that
// came as events plus, in the first bucket, the kernel's short windows of
// the same kind and thread. The kernel's aggregates are raw cumulative
// totals: what they grew by since the last collection is scaled by the
// kind's kept ratio, as the windows that came one by one were.
func (st *runState) mergeHistograms(p *process, aggs map[gil.AggregateKey]gil.Aggregate) map[histKey]*histogram {
	merged := make(map[histKey]*histogram, len(p.hists))
	for k, h := range p.hists {
		c := *h
		c.counts = append([]float64(nil), h.counts...)
		merged[k] = &c
	}
	for k, a := range aggs {
		if _, ok := histogramMetrics[k.Kind]; !ok {
			continue
		}
		// The kernel keeps short GC pauses per generation (or without
		// one, NoGeneration, outside CPython's three).
		hk := histKey{kind: k.Kind, tid: k.TID, gen: -1}
		if k.Kind == gil.KindGC && k.Generation >= 0 {
			hk.gen = k.Generation
		}
		prev := p.aggRaw[hk]
		if a.Count > prev.Count {
			ratio := st.ratio(p, k.Kind)
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
	return merged
}

// updateEstimates brings the time and switch counters up to date: the
// raw totals now, scaled by each kind's kept ratio since the last
// collection, accumulated.
func (st *runState) updateEstimates(p *process, aggs map[gil.AggregateKey]gil.Aggregate) {
	raw := map[counterKey]float64{}
	for k, h := range p.hists {
		if k.kind == gil.KindWait {
			raw[counterKey{kind: gil.KindWait, tid: k.tid}] += h.rawSum
		}
	}
	for k, a := range aggs {
		switch k.Kind {
		case gil.KindWait, gil.KindHeld:
			raw[counterKey{kind: k.Kind, tid: k.TID}] += a.Sum.Seconds()
		case gil.KindSwitch:
			raw[counterKey{kind: gil.KindSwitch, tid: k.TID}] += float64(a.Count)
		}
	}
	for k, v := range raw {
		if d := v - p.raw[k]; d > 0 {
			p.estimates[k] += d / st.ratio(p, k.kind)
		}
		p.raw[k] = v
	}
}

// recordCounters records the process's counters in the generated builder:
// held and wait time, switches, and collections per GC generation (the
// scaled counts of the GC pauses of each generation in hists, the
// process's merged histograms: those that came one by one and the short
// ones the kernel summed).
func (st *runState) recordCounters(p *process, hists map[histKey]*histogram, now pcommon.Timestamp) {
	for k, v := range p.estimates {
		opts := threadOption(k.tid)
		switch k.kind {
		case gil.KindHeld:
			st.mb.RecordPythonGilHeldTimeDataPoint(now, v, opts...)
		case gil.KindWait:
			st.mb.RecordPythonGilWaitTimeDataPoint(now, v, opts...)
		case gil.KindSwitch:
			st.mb.RecordPythonGilSwitchesDataPoint(now, v, opts...)
		}
	}
	for k, h := range hists {
		if k.kind != gil.KindGC || k.gen < 0 {
			continue
		}
		_, total := h.bucketCounts()
		st.mb.RecordCpythonGcCollectionsDataPoint(now, int64(total), int64(k.gen), threadOption(k.tid)...)
	}
}

// threadOption adds thread.id to a point of a per-thread series.
func threadOption(tid uint32) []metadata.MetricAttributeOption {
	if tid == 0 {
		return nil
	}
	return []metadata.MetricAttributeOption{metadata.WithThreadIDMetricAttribute(int64(tid))}
}

// appendHistograms adds the enabled histograms, one metric per kind and a
// point per thread (and GC generation).
func appendHistograms(ms pmetric.MetricSlice, cfg MetricsConfig, hists map[histKey]*histogram, start, now pcommon.Timestamp) {
	dpsByKind := map[gil.Kind]pmetric.HistogramDataPointSlice{}
	for k, h := range hists {
		def, ok := histogramMetrics[k.kind]
		if !ok || !def.enabled(cfg) {
			continue
		}
		dps, ok := dpsByKind[k.kind]
		if !ok {
			m := ms.AppendEmpty()
			m.SetName(def.name)
			m.SetDescription(def.description)
			m.SetUnit("s")
			hist := m.SetEmptyHistogram()
			hist.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
			dps = hist.DataPoints()
			dpsByKind[k.kind] = dps
		}
		dp := dps.AppendEmpty()
		dp.SetStartTimestamp(start)
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
			dp.Attributes().PutInt(attrCPythonGCGeneration, int64(k.gen))
		}
	}
}

// attrCPythonGCGeneration is the conventions' name of the GC generation on
// metrics (the windows keep internal/window's python.gc.generation).
const attrCPythonGCGeneration = "cpython.gc.generation"

// metricsResource is a process's resource on metrics: its identity
// (procresource.SetIdentity), runtime and executable, each attribute with
// its resource_attributes switch.
func (st *runState) metricsResource(p *process) pcommon.Resource {
	rb := st.mb.NewResourceBuilder()
	id := p.res.Identity()
	id.PID = int(p.pid)
	procresource.SetIdentity(rb, id, st.node)
	rb.SetProcessRuntimeName(window.RuntimeCPython)
	if p.version != "" {
		rb.SetProcessRuntimeVersion(p.version)
	}
	if p.res.ExecutableName != "" {
		rb.SetProcessExecutableName(p.res.ExecutableName)
	}
	return rb.Emit()
}

// emit moves what the builder recorded onto one resource, adds the
// hand-built metrics, and appends the resource to md unless it has none.
func (st *runState) emit(md pmetric.Metrics, res pcommon.Resource, add func(pmetric.MetricSlice), opts ...metadata.ResourceMetricsOption) {
	got := st.mb.Emit(append([]metadata.ResourceMetricsOption{metadata.WithResource(res)}, opts...)...)
	if got.ResourceMetrics().Len() == 0 {
		rm := got.ResourceMetrics().AppendEmpty()
		res.CopyTo(rm.Resource())
		rm.ScopeMetrics().AppendEmpty().Scope().SetName(metadata.ScopeName)
	}
	rm := got.ResourceMetrics().At(0)
	add(rm.ScopeMetrics().At(0).Metrics())
	if rm.ScopeMetrics().At(0).Metrics().Len() == 0 {
		return
	}
	got.ResourceMetrics().MoveAndAppendTo(md.ResourceMetrics())
}

// probeMetrics reports the probes' own state on a resource that names only
// the host.
func (st *runState) probeMetrics(md pmetric.Metrics, c gil.Counters, now pcommon.Timestamp) {
	st.mb.RecordPythonGilProbeSamplingRatioDataPoint(now, st.sampling)
	if st.cfg.Overhead.Budget > 0 {
		st.mb.RecordPythonGilProbeCostDataPoint(now, st.probeCost)
	}
	st.mb.RecordPythonGilProbeDroppedDataPoint(now, int64(c.RingBufferFull), metadata.AttributeDropReasonRingBufferFull)
	st.mb.RecordPythonGilProbeDroppedDataPoint(now, int64(c.AggregateMapFull), metadata.AttributeDropReasonAggregateMapFull)
	st.mb.RecordPythonGilProbeDroppedDataPoint(now, int64(c.Stale), metadata.AttributeDropReasonStale)
	st.mb.RecordPythonGilProbeHitsDataPoint(now, int64(c.Hits))
	rb := st.mb.NewResourceBuilder()
	procresource.SetIdentity(rb, procresource.Identity{}, st.node)
	st.emit(md, rb.Emit(), func(pmetric.MetricSlice) {})
}
