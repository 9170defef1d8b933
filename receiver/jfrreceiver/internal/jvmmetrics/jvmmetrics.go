// Package jvmmetrics accumulates the measurements of many JVMs and writes
// them as OTel metrics: cumulative histograms for GC and safepoint
// durations, the latest value for memory, buffers and native memory. Names
// follow the OTel semantic conventions where they exist (jvm.gc.duration,
// jvm.memory.*, jvm.buffer.*) and the project's jvm.safepoint.* and
// jvm.native_memory.* namespace where they do not.
package jvmmetrics // import "github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/jvmmetrics"

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/otelcol-ai/otelcol-ai/internal/window"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/jvmevent"
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
)

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
)

// GCBuckets are the semantic conventions' jvm.gc.duration boundaries (s).
var GCBuckets = []float64{0.01, 0.1, 1, 10}

// SafepointBuckets are finer: most safepoints last well under a millisecond.
var SafepointBuckets = []float64{0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5}

type histogram struct {
	counts []uint64
	count  uint64
	sum    float64
	min    float64
	max    float64
}

func (h *histogram) add(v float64, bounds []float64) {
	if h.counts == nil {
		h.counts = make([]uint64, len(bounds)+1)
		h.min, h.max = v, v
	}
	i, _ := slices.BinarySearch(bounds, v)
	h.counts[i]++
	h.count++
	h.sum += v
	h.min, h.max = min(h.min, v), max(h.max, v)
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
	ended    bool
}

// Aggregator holds the state of every JVM it has been told about. It is
// not safe for concurrent use.
type Aggregator struct {
	jvms  map[jvmevent.JVM]*jvmState
	order []jvmevent.JVM
}

// New returns an empty aggregator.
func New() *Aggregator { return &Aggregator{jvms: map[jvmevent.JVM]*jvmState{}} }

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
		}
		a.jvms[key] = s
		a.order = append(a.order, key)
	}
	res.CopyTo(s.resource)
	for _, g := range b.GCs {
		k := gcKey{g.Name, g.Action, g.Cause}
		h := s.gc[k]
		if h == nil {
			h = &histogram{}
			s.gc[k] = h
		}
		h.add(g.Duration.Seconds(), GCBuckets)
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
	if b.Ended {
		s.ended = true
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
func (a *Aggregator) Emit(now time.Time, scope string, version string) pmetric.Metrics {
	md := pmetric.NewMetrics()
	ts := pcommon.NewTimestampFromTime(now)
	kept := a.order[:0]
	for _, key := range a.order {
		s := a.jvms[key]
		if !s.empty() {
			rm := md.ResourceMetrics().AppendEmpty()
			s.resource.CopyTo(rm.Resource())
			sm := rm.ScopeMetrics().AppendEmpty()
			sm.Scope().SetName(scope)
			sm.Scope().SetVersion(version)
			s.write(sm.Metrics(), ts)
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
		len(s.bufUsed)+len(s.nmtComm) == 0
}

func (s *jvmState) write(ms pmetric.MetricSlice, now pcommon.Timestamp) {
	histograms(ms, GCDuration, "Duration of JVM garbage collection actions.", GCBuckets, s.start, now, s.gc,
		func(k gcKey, attrs pcommon.Map) {
			attrs.PutStr(AttrGCName, k.name)
			attrs.PutStr(AttrGCAction, k.action)
			if k.cause != "" {
				attrs.PutStr(AttrGCCause, k.cause)
			}
		})
	opAttr := func(op string, attrs pcommon.Map) {
		if op != "" {
			attrs.PutStr(AttrVMOperation, op)
		}
	}
	histograms(ms, SafepointDuration, "Duration of stop-the-world safepoints, from the start of synchronization to the end.", SafepointBuckets, s.start, now, s.sp, opAttr)
	histograms(ms, SafepointTimeToSafepoint, "Time from a safepoint's start until every thread stopped (JFR: SafepointBegin's duration, which includes cleanup; -Xlog: Reaching safepoint).", SafepointBuckets, s.start, now, s.ttsp, opAttr)
	if len(s.sp) > 0 {
		m := ms.AppendEmpty()
		m.SetName(SafepointCount)
		m.SetDescription("Number of stop-the-world safepoints.")
		m.SetUnit("{safepoint}")
		sum := m.SetEmptySum()
		sum.SetIsMonotonic(true)
		sum.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
		for _, op := range sortedKeys(s.sp) {
			dp := sum.DataPoints().AppendEmpty()
			dp.SetStartTimestamp(s.start)
			dp.SetTimestamp(now)
			dp.SetIntValue(int64(s.sp[op].count))
			opAttr(op, dp.Attributes())
		}
	}
	memAttrs := func(k memKey, attrs pcommon.Map) {
		attrs.PutStr(AttrMemoryType, k.typ)
		if k.pool != "" {
			attrs.PutStr(AttrMemoryPool, k.pool)
		}
	}
	gauges(ms, MemoryUsed, "Measure of memory used.", "By", s.memUsed, memAttrs)
	gauges(ms, MemoryCommitted, "Measure of memory committed.", "By", s.memComm, memAttrs)
	gauges(ms, MemoryLimit, "Measure of max obtainable memory.", "By", s.memLimit, memAttrs)
	gauges(ms, MemoryUsedAfterLastGC, "Measure of memory used, as measured after the most recent garbage collection event on this pool.", "By", s.memAfter, memAttrs)
	poolAttr := func(p string, attrs pcommon.Map) { attrs.PutStr(AttrBufferPool, p) }
	gauges(ms, BufferMemoryUsed, "Measure of memory used by buffers.", "By", s.bufUsed, poolAttr)
	gauges(ms, BufferMemoryLimit, "Measure of total memory capacity of buffers.", "By", s.bufLimit, poolAttr)
	gauges(ms, BufferCount, "Number of buffers in the pool.", "{buffer}", s.bufCount, poolAttr)
	catAttr := func(c string, attrs pcommon.Map) { attrs.PutStr(AttrNativeMemoryCategory, c) }
	gauges(ms, NativeMemoryCommitted, "Native memory committed, by Native Memory Tracking category.", "By", s.nmtComm, catAttr)
	gauges(ms, NativeMemoryReserved, "Native memory reserved, by Native Memory Tracking category.", "By", s.nmtRes, catAttr)
}

func histograms[K comparable](ms pmetric.MetricSlice, name, desc string, bounds []float64, start, now pcommon.Timestamp, hs map[K]*histogram, attrs func(K, pcommon.Map)) {
	if len(hs) == 0 {
		return
	}
	m := ms.AppendEmpty()
	m.SetName(name)
	m.SetDescription(desc)
	m.SetUnit("s")
	h := m.SetEmptyHistogram()
	h.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	for _, k := range sortedKeys(hs) {
		v := hs[k]
		dp := h.DataPoints().AppendEmpty()
		dp.SetStartTimestamp(start)
		dp.SetTimestamp(now)
		dp.SetCount(v.count)
		dp.SetSum(v.sum)
		dp.SetMin(v.min)
		dp.SetMax(v.max)
		dp.ExplicitBounds().FromRaw(bounds)
		dp.BucketCounts().FromRaw(v.counts)
		attrs(k, dp.Attributes())
	}
}

// gauges writes the latest samples as a non-monotonic cumulative sum, as
// the semantic conventions' UpDownCounters are written.
func gauges[K comparable](ms pmetric.MetricSlice, name, desc, unit string, samples map[K]sample, attrs func(K, pcommon.Map)) {
	if len(samples) == 0 {
		return
	}
	m := ms.AppendEmpty()
	m.SetName(name)
	m.SetDescription(desc)
	m.SetUnit(unit)
	sum := m.SetEmptySum()
	sum.SetIsMonotonic(false)
	sum.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	for _, k := range sortedKeys(samples) {
		v := samples[k]
		dp := sum.DataPoints().AppendEmpty()
		dp.SetTimestamp(pcommon.Timestamp(v.t))
		dp.SetIntValue(v.value)
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
