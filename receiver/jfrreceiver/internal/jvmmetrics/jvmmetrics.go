// Package jvmmetrics accumulates the measurements of many JVMs and writes
// them as OTel metrics: cumulative histograms for GC and safepoint
// durations, the latest value for memory, buffers, native memory, threads,
// classes and CPU. Names follow the OTel semantic conventions where they
// exist (jvm.gc.duration, jvm.memory.*, jvm.buffer.*, jvm.thread.count,
// jvm.class.*, jvm.cpu.*) and the project's jvm.safepoint.* and
// jvm.native_memory.* namespace where they do not. Every metric but the
// histograms is declared in the receiver's metadata.yaml and written by
// the generated MetricsBuilder; the histograms, which mdatagen cannot
// generate, are declared here (Histograms) and written beside them.
package jvmmetrics // import "github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/jvmmetrics"

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/receiver"

	"github.com/otelcol-ai/otelcol-ai/internal/window"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/jvmevent"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/metadata"
)

// Metric names.
const (
	GCDuration               = "jvm.gc.duration"
	SafepointDuration        = "jvm.safepoint.duration"
	SafepointTimeToSafepoint = "jvm.safepoint.time_to_safepoint"
	SafepointCount           = "jvm.safepoint.count"
	MemoryUsed               = "jvm.memory.used"
	MemoryCommitted          = "jvm.memory.committed"
	MemoryLimit              = "jvm.memory.limit"
	MemoryUsedAfterLastGC    = "jvm.memory.used_after_last_gc"
	BufferMemoryUsed         = "jvm.buffer.memory.used"
	BufferMemoryLimit        = "jvm.buffer.memory.limit"
	BufferCount              = "jvm.buffer.count"
	NativeMemoryCommitted    = "jvm.native_memory.committed"
	NativeMemoryReserved     = "jvm.native_memory.reserved"
	ThreadCount              = "jvm.thread.count"
	ClassLoaded              = "jvm.class.loaded"
	ClassUnloaded            = "jvm.class.unloaded"
	ClassCount               = "jvm.class.count"
	CPUCount                 = "jvm.cpu.count"
	CPURecentUtilization     = "jvm.cpu.recent_utilization"
	CPUTime                  = "jvm.cpu.time"
)

// HistogramConfig switches one histogram on or off (metrics::<name>::enabled).
type HistogramConfig struct {
	Enabled bool `mapstructure:"enabled"`
}

// GCDurationConfig switches jvm.gc.duration and its opt-in attribute.
type GCDurationConfig struct {
	Enabled bool `mapstructure:"enabled"`
	// CaptureCause adds jvm.gc.cause, splitting every collector's series
	// by cause. Off by default: the semantic conventions make the
	// attribute opt-in and the OpenTelemetry Java agent leaves it out
	// (its otel.instrumentation.runtime-telemetry.capture-gc-cause), so
	// that the series are the agent's. Windows always carry the cause.
	CaptureCause bool `mapstructure:"capture_cause"`
}

// MetricsConfig is the receiver's metrics key: the generated switches of
// the metrics in metadata.yaml and those of the histograms.
type MetricsConfig struct {
	metadata.MetricsConfig      `mapstructure:",squash"`
	JvmGcDuration               GCDurationConfig `mapstructure:"jvm.gc.duration"`
	JvmSafepointDuration        HistogramConfig  `mapstructure:"jvm.safepoint.duration"`
	JvmSafepointTimeToSafepoint HistogramConfig  `mapstructure:"jvm.safepoint.time_to_safepoint"`
}

// DefaultMetricsConfig turns every metric on but those metadata.yaml
// turns off.
func DefaultMetricsConfig() MetricsConfig {
	on := HistogramConfig{Enabled: true}
	return MetricsConfig{MetricsConfig: metadata.DefaultMetricsConfig(), JvmGcDuration: GCDurationConfig{Enabled: true}, JvmSafepointDuration: on, JvmSafepointTimeToSafepoint: on}
}

// Config is what the aggregator emits.
type Config struct {
	Metrics            MetricsConfig
	ResourceAttributes metadata.ResourceAttributesConfig
	// CPUTime returns a JVM's cumulative CPU time (user + system) when it
	// can be read (a live process of the collector's proc root); nil, or
	// false, emits no jvm.cpu.time for it. Asked at every Emit.
	CPUTime func(jvmevent.JVM) (time.Duration, bool)
}

// Histogram declares one of the histograms this package builds, as
// metadata.yaml declares the other metrics.
type Histogram struct {
	Name, Description, Unit string
	Stability               string
	Attributes              []string
	Bounds                  []float64
}

// Histograms are the histograms the receiver emits.
var Histograms = []Histogram{
	{GCDuration, "Duration of JVM garbage collection actions.", "s", "stable", []string{AttrGCName, AttrGCAction, AttrGCCause}, GCBuckets},
	{SafepointDuration, "Duration of stop-the-world safepoints, from the start of synchronization to the end.", "s", "development", []string{AttrVMOperation}, SafepointBuckets},
	{SafepointTimeToSafepoint, "Time from a safepoint's start until every thread stopped (JFR: SafepointBegin's duration, which includes cleanup; -Xlog: Reaching safepoint).", "s", "development", []string{AttrVMOperation}, SafepointBuckets},
}

// Attribute names (those windows carry too come from package window).
const (
	AttrGCName               = window.AttrJVMGCName
	AttrGCAction             = "jvm.gc.action"
	AttrGCCause              = window.AttrJVMGCCause
	AttrVMOperation          = window.AttrJVMVMOperation
	AttrMemoryType           = "jvm.memory.type"
	AttrMemoryPool           = "jvm.memory.pool.name"
	AttrBufferPool           = "jvm.buffer.pool.name"
	AttrNativeMemoryCategory = "jvm.native_memory.category"
	AttrThreadDaemon         = "jvm.thread.daemon"
)

// GCBuckets are the semantic conventions' jvm.gc.duration boundaries (s).
var GCBuckets = []float64{0.01, 0.1, 1, 10}

// SafepointBuckets are finer: most safepoints last well under a millisecond.
var SafepointBuckets = []float64{0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5}

type histogram struct {
	counts []uint64
	count  uint64
	sum    float64
	// measured says min and max hold a measured value: counts without
	// durations (addUnmeasured) have none.
	measured bool
	min      float64
	max      float64
}

func (h *histogram) add(v float64, bounds []float64) {
	if h.counts == nil {
		h.counts = make([]uint64, len(bounds)+1)
	}
	if !h.measured {
		h.min, h.max, h.measured = v, v, true
	}
	i, _ := slices.BinarySearch(bounds, v)
	h.counts[i]++
	h.count++
	h.sum += v
	h.min, h.max = min(h.min, v), max(h.max, v)
}

// addUnmeasured counts n events whose durations are not known: in the
// first bucket, adding nothing to the sum.
func (h *histogram) addUnmeasured(n uint64, bounds []float64) {
	if h.counts == nil {
		h.counts = make([]uint64, len(bounds)+1)
	}
	h.counts[0] += n
	h.count += n
}

type gcKey struct{ name, action, cause string }

type memKey struct{ typ, pool string }

type sample struct {
	t     int64
	value int64
}

type jvmState struct {
	resource pcommon.Resource
	start    pcommon.Timestamp
	gc       map[gcKey]*histogram
	sp       map[string]*histogram
	ttsp     map[string]*histogram
	memUsed  map[memKey]sample
	memComm  map[memKey]sample
	memLimit map[memKey]sample
	memAfter map[memKey]sample
	bufUsed  map[string]sample
	bufLimit map[string]sample
	bufCount map[string]sample
	nmtComm  map[string]sample
	nmtRes   map[string]sample
	threads  map[bool]sample
	loaded   sample
	unloaded sample
	cpuUtil  fsample
	cpuCount sample
	// cpuTime is the process's CPU time read for this Emit, in seconds
	// (negative: none).
	cpuTime float64
	// The accounts the receiver reads beside JFR (accounts.go); t == 0:
	// none yet.
	jniGlobal, jniWeak, unaccounted sample
	suspected                       map[metadata.AttributeJvmMemoryLeakSource]sample
	ended                           bool
}

type fsample struct {
	t     int64
	value float64
}

// unset marks a sample not seen yet.
var unset = sample{t: -1}

// Aggregator holds the state of every JVM it has been told about. It is
// not safe for concurrent use.
type Aggregator struct {
	cfg     Config
	version string
	mb      *metadata.MetricsBuilder
	jvms    map[jvmevent.JVM]*jvmState
	order   []jvmevent.JVM
}

// New returns an empty aggregator that emits what cfg turns on.
func New(cfg Config, set receiver.Settings) *Aggregator {
	mb := metadata.NewMetricsBuilder(metadata.MetricsBuilderConfig{Metrics: cfg.Metrics.MetricsConfig, ResourceAttributes: cfg.ResourceAttributes}, set)
	return &Aggregator{cfg: cfg, version: set.BuildInfo.Version, mb: mb, jvms: map[jvmevent.JVM]*jvmState{}}
}

// Len returns the number of JVMs held.
func (a *Aggregator) Len() int { return len(a.jvms) }

// Add records a batch. res is the JVM's resource (copied: it may gain
// attributes over time, such as the runtime version); start is when the
// JVM's cumulative metrics begin, used the first time it is seen.
func (a *Aggregator) Add(b *jvmevent.Batch, res pcommon.Resource, start time.Time) {
	key := b.JVM
	s := a.jvms[key]
	if s == nil {
		s = &jvmState{
			resource: pcommon.NewResource(), start: pcommon.NewTimestampFromTime(start),
			gc: map[gcKey]*histogram{}, sp: map[string]*histogram{}, ttsp: map[string]*histogram{},
			memUsed: map[memKey]sample{}, memComm: map[memKey]sample{}, memLimit: map[memKey]sample{}, memAfter: map[memKey]sample{},
			bufUsed: map[string]sample{}, bufLimit: map[string]sample{}, bufCount: map[string]sample{},
			nmtComm: map[string]sample{}, nmtRes: map[string]sample{},
			threads: map[bool]sample{}, loaded: unset, unloaded: unset, cpuCount: unset, cpuUtil: fsample{t: -1},
		}
		a.jvms[key] = s
		a.order = append(a.order, key)
	}
	res.CopyTo(s.resource)
	for _, g := range b.GCs {
		k := gcKey{g.Name, g.Action, ""}
		if a.cfg.Metrics.JvmGcDuration.CaptureCause {
			k.cause = g.Cause
		}
		s.gcHistogram(k).add(g.Duration.Seconds(), GCBuckets)
	}
	for _, u := range b.UnrecordedGCs {
		if u.Count > 0 {
			s.gcHistogram(gcKey{u.Name, u.Action, ""}).addUnmeasured(uint64(u.Count), GCBuckets)
		}
	}
	for _, sp := range b.Safepoints {
		h := s.sp[sp.Operation]
		if h == nil {
			h = &histogram{}
			s.sp[sp.Operation] = h
		}
		h.add(sp.Duration.Seconds(), SafepointBuckets)
		if sp.TimeToSafepoint >= 0 {
			h := s.ttsp[sp.Operation]
			if h == nil {
				h = &histogram{}
				s.ttsp[sp.Operation] = h
			}
			h.add(sp.TimeToSafepoint.Seconds(), SafepointBuckets)
		}
	}
	for _, m := range b.Memory {
		k := memKey{m.Type, m.Pool}
		latest(s.memUsed, k, m.Time, m.Used)
		latest(s.memComm, k, m.Time, m.Committed)
		latest(s.memLimit, k, m.Time, m.Limit)
		latest(s.memAfter, k, m.Time, m.UsedAfterGC)
	}
	for _, bf := range b.Buffers {
		latest(s.bufUsed, bf.Pool, bf.Time, bf.Used)
		latest(s.bufLimit, bf.Pool, bf.Time, bf.Capacity)
		latest(s.bufCount, bf.Pool, bf.Time, bf.Count)
	}
	for _, n := range b.NativeMemory {
		latest(s.nmtComm, n.Category, n.Time, n.Committed)
		latest(s.nmtRes, n.Category, n.Time, n.Reserved)
	}
	for _, th := range b.Threads {
		latest(s.threads, true, th.Time, th.Daemon)
		latest(s.threads, false, th.Time, th.Active-th.Daemon)
	}
	for _, c := range b.Classes {
		newer(&s.loaded, c.Time, c.Loaded)
		newer(&s.unloaded, c.Time, c.Unloaded)
	}
	for _, c := range b.CPU {
		if c.Utilization >= 0 && c.Time >= s.cpuUtil.t {
			s.cpuUtil = fsample{t: c.Time, value: c.Utilization}
		}
		newer(&s.cpuCount, c.Time, c.Count)
	}
	if b.Ended {
		s.ended = true
	}
}

func (s *jvmState) gcHistogram(k gcKey) *histogram {
	h := s.gc[k]
	if h == nil {
		h = &histogram{}
		s.gc[k] = h
	}
	return h
}

// newer keeps v in s when it is known and not older than s.
func newer(s *sample, t, v int64) {
	if v >= 0 && t >= s.t {
		*s = sample{t: t, value: v}
	}
}

// Forget drops a JVM's state: its series are no longer emitted, and a later
// batch of it starts them afresh.
func (a *Aggregator) Forget(key jvmevent.JVM) {
	if _, ok := a.jvms[key]; !ok {
		return
	}
	delete(a.jvms, key)
	a.order = slices.DeleteFunc(a.order, func(k jvmevent.JVM) bool { return k == key })
}

// latest keeps the newest non-negative sample.
func latest[K comparable](m map[K]sample, k K, t, v int64) {
	if v < 0 {
		return
	}
	if old, ok := m[k]; ok && old.t > t {
		return
	}
	m[k] = sample{t: t, value: v}
}

// Emit writes every JVM's metrics, one ResourceMetrics per JVM, stamped
// now, and forgets JVMs that ended.
func (a *Aggregator) Emit(now time.Time) pmetric.Metrics {
	md := pmetric.NewMetrics()
	ts := pcommon.NewTimestampFromTime(now)
	kept := a.order[:0]
	for _, key := range a.order {
		s := a.jvms[key]
		s.cpuTime = -1
		if a.cfg.CPUTime != nil && !s.ended && a.cfg.Metrics.JvmCPUTime.Enabled {
			if d, ok := a.cfg.CPUTime(key); ok {
				s.cpuTime = d.Seconds()
			}
		}
		if !s.empty() {
			a.emitJVM(s, ts).ResourceMetrics().MoveAndAppendTo(md.ResourceMetrics())
		}
		if s.ended {
			delete(a.jvms, key)
			continue
		}
		kept = append(kept, key)
	}
	clear(a.order[len(kept):])
	a.order = kept
	return md
}

func (s *jvmState) empty() bool {
	return len(s.gc)+len(s.sp)+len(s.memUsed)+len(s.memComm)+len(s.memLimit)+len(s.memAfter)+
		len(s.bufUsed)+len(s.nmtComm)+len(s.threads) == 0 && s.loaded.t < 0 && s.cpuUtil.t < 0 && s.cpuCount.t < 0
}

// emitJVM writes one JVM's metrics: the generated builder's, under the
// resource attributes turned on, then the histograms in the same scope.
func (a *Aggregator) emitJVM(s *jvmState, now pcommon.Timestamp) pmetric.Metrics {
	s.record(a.mb, now)
	md := a.mb.Emit(metadata.WithResource(a.resource(s.resource)), metadata.WithStartTimeOverride(s.start))
	var sm pmetric.ScopeMetrics
	if md.ResourceMetrics().Len() == 0 {
		if !s.hasHistograms(a.cfg.Metrics) {
			return md
		}
		rm := md.ResourceMetrics().AppendEmpty()
		a.resource(s.resource).CopyTo(rm.Resource())
		sm = rm.ScopeMetrics().AppendEmpty()
		sm.Scope().SetName(metadata.ScopeName)
		sm.Scope().SetVersion(a.version)
	} else {
		sm = md.ResourceMetrics().At(0).ScopeMetrics().At(0)
	}
	s.writeHistograms(sm.Metrics(), a.cfg.Metrics, now)
	return md
}

// resource is the JVM's resource with the attributes metadata.yaml declares
// and resource_attributes turns on.
func (a *Aggregator) resource(res pcommon.Resource) pcommon.Resource {
	rb := a.mb.NewResourceBuilder()
	attrs := res.Attributes()
	str := func(key string, set func(string)) {
		if v, ok := attrs.Get(key); ok {
			set(v.AsString())
		}
	}
	num := func(key string, set func(int64)) {
		if v, ok := attrs.Get(key); ok && v.Type() == pcommon.ValueTypeInt {
			set(v.Int())
		}
	}
	str(window.ResourceContainerID, rb.SetContainerID)
	str(window.ResourceHostName, rb.SetHostName)
	str(window.ResourceNodeName, rb.SetK8sNodeName)
	str(window.ResourceK8sPodUID, rb.SetK8sPodUID)
	str(ResourceExecutableName, rb.SetProcessExecutableName)
	num(window.ResourcePID, rb.SetProcessPid)
	str(window.ResourceRuntimeName, rb.SetProcessRuntimeName)
	str(window.ResourceRuntimeVersion, rb.SetProcessRuntimeVersion)
	num(window.ResourceVPID, rb.SetProcessVpid)
	return rb.Emit()
}

// ResourceExecutableName is the resource attribute naming the JVM's
// executable.
const ResourceExecutableName = "process.executable.name"

// record hands the builder the latest value of every series; counters
// accumulated here are stamped now.
func (s *jvmState) record(mb *metadata.MetricsBuilder, now pcommon.Timestamp) {
	for _, op := range sortedKeys(s.sp) {
		var opts []metadata.MetricAttributeOption
		if op != "" {
			opts = append(opts, metadata.WithJvmVMOperationMetricAttribute(op))
		}
		mb.RecordJvmSafepointCountDataPoint(now, int64(s.sp[op].count), opts...)
	}
	memory := func(samples map[memKey]sample, rec func(pcommon.Timestamp, int64, string, ...metadata.MetricAttributeOption)) {
		for _, k := range sortedKeys(samples) {
			v := samples[k]
			var opts []metadata.MetricAttributeOption
			if k.pool != "" {
				opts = append(opts, metadata.WithJvmMemoryPoolNameMetricAttribute(k.pool))
			}
			rec(pcommon.Timestamp(v.t), v.value, k.typ, opts...)
		}
	}
	memory(s.memUsed, mb.RecordJvmMemoryUsedDataPoint)
	memory(s.memComm, mb.RecordJvmMemoryCommittedDataPoint)
	memory(s.memLimit, mb.RecordJvmMemoryLimitDataPoint)
	memory(s.memAfter, mb.RecordJvmMemoryUsedAfterLastGcDataPoint)
	byName := func(samples map[string]sample, rec func(pcommon.Timestamp, int64, string)) {
		for _, k := range sortedKeys(samples) {
			rec(pcommon.Timestamp(samples[k].t), samples[k].value, k)
		}
	}
	byName(s.bufUsed, mb.RecordJvmBufferMemoryUsedDataPoint)
	byName(s.bufLimit, mb.RecordJvmBufferMemoryLimitDataPoint)
	byName(s.bufCount, mb.RecordJvmBufferCountDataPoint)
	byName(s.nmtComm, mb.RecordJvmNativeMemoryCommittedDataPoint)
	byName(s.nmtRes, mb.RecordJvmNativeMemoryReservedDataPoint)
	for _, daemon := range []bool{false, true} {
		if v, ok := s.threads[daemon]; ok {
			mb.RecordJvmThreadCountDataPoint(pcommon.Timestamp(v.t), v.value, daemon)
		}
	}
	if s.loaded.t >= 0 {
		mb.RecordJvmClassLoadedDataPoint(pcommon.Timestamp(s.loaded.t), s.loaded.value)
		if s.unloaded.t >= 0 {
			mb.RecordJvmClassUnloadedDataPoint(pcommon.Timestamp(s.unloaded.t), s.unloaded.value)
			mb.RecordJvmClassCountDataPoint(pcommon.Timestamp(s.loaded.t), s.loaded.value-s.unloaded.value)
		}
	}
	if s.cpuCount.t >= 0 {
		mb.RecordJvmCPUCountDataPoint(pcommon.Timestamp(s.cpuCount.t), s.cpuCount.value)
	}
	if s.cpuUtil.t >= 0 {
		mb.RecordJvmCPURecentUtilizationDataPoint(pcommon.Timestamp(s.cpuUtil.t), s.cpuUtil.value)
	}
	if s.cpuTime >= 0 {
		mb.RecordJvmCPUTimeDataPoint(now, s.cpuTime)
	}
	s.recordAccounts(mb)
}

func (s *jvmState) hasHistograms(cfg MetricsConfig) bool {
	return (cfg.JvmGcDuration.Enabled && len(s.gc) > 0) || ((cfg.JvmSafepointDuration.Enabled || cfg.JvmSafepointTimeToSafepoint.Enabled) && len(s.sp) > 0)
}

// writeHistograms appends the histograms cfg turns on.
func (s *jvmState) writeHistograms(ms pmetric.MetricSlice, cfg MetricsConfig, now pcommon.Timestamp) {
	if cfg.JvmGcDuration.Enabled {
		histograms(ms, Histograms[0], s.start, now, s.gc, func(k gcKey, attrs pcommon.Map) {
			attrs.PutStr(AttrGCName, k.name)
			attrs.PutStr(AttrGCAction, k.action)
			if k.cause != "" {
				attrs.PutStr(AttrGCCause, k.cause)
			}
		})
	}
	opAttr := func(op string, attrs pcommon.Map) {
		if op != "" {
			attrs.PutStr(AttrVMOperation, op)
		}
	}
	if cfg.JvmSafepointDuration.Enabled {
		histograms(ms, Histograms[1], s.start, now, s.sp, opAttr)
	}
	if cfg.JvmSafepointTimeToSafepoint.Enabled {
		histograms(ms, Histograms[2], s.start, now, s.ttsp, opAttr)
	}
}

func histograms[K comparable](ms pmetric.MetricSlice, decl Histogram, start, now pcommon.Timestamp, hs map[K]*histogram, attrs func(K, pcommon.Map)) {
	if len(hs) == 0 {
		return
	}
	bounds := decl.Bounds
	m := ms.AppendEmpty()
	m.SetName(decl.Name)
	m.SetDescription(decl.Description)
	m.SetUnit(decl.Unit)
	h := m.SetEmptyHistogram()
	h.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	for _, k := range sortedKeys(hs) {
		v := hs[k]
		dp := h.DataPoints().AppendEmpty()
		dp.SetStartTimestamp(start)
		dp.SetTimestamp(now)
		dp.SetCount(v.count)
		dp.SetSum(v.sum)
		if v.measured {
			dp.SetMin(v.min)
			dp.SetMax(v.max)
		}
		dp.ExplicitBounds().FromRaw(bounds)
		dp.BucketCounts().FromRaw(v.counts)
		attrs(k, dp.Attributes())
	}
}

// sortedKeys orders map keys by their printed form so output is stable.
func sortedKeys[K comparable, V any](m map[K]V) []K {
	keys := make([]K, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b K) int { return cmp.Compare(fmt.Sprint(a), fmt.Sprint(b)) })
	return keys
}
