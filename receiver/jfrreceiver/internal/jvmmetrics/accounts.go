package jvmmetrics

import (
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/jfrstream"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/jvmaccounts"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/jvmevent"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/metadata"
)

// Reading is one value of an account with when it was measured (Unix
// epoch ns); T < 0: none yet.
type Reading struct {
	T     int64
	Value int64
}

// Accounts is what a JVM's JFR events say of its memory accounts: the
// terms the unaccounted native memory subtracts, and the series the leak
// detection follows.
type Accounts struct {
	Accounted jvmaccounts.Accounted
	// HeapAfterGC is the heap used after the newest collection (the sum of
	// the pools it reported).
	HeapAfterGC Reading
	// DirectBuffers is the memory direct buffers use.
	DirectBuffers Reading
	// Metaspace is metaspace used, class space included.
	Metaspace Reading
	// NMTCommitted is Native Memory Tracking's committed total (T < 0:
	// NMT is off).
	NMTCommitted Reading
}

// Accounts returns a JVM's accounts; false when it is not held.
func (a *Aggregator) Accounts(jvm jvmevent.JVM) (Accounts, bool) {
	s := a.jvms[jvm]
	if s == nil {
		return Accounts{}, false
	}
	out := Accounts{
		Accounted:     jvmaccounts.Accounted{HeapCommitted: -1, Metaspace: -1, CodeCache: -1, DirectBuffers: -1, NMTCommitted: -1},
		HeapAfterGC:   Reading{T: -1},
		DirectBuffers: Reading{T: -1},
		Metaspace:     Reading{T: -1},
		NMTCommitted:  Reading{T: -1},
	}
	for k, v := range s.memComm {
		switch {
		case k.typ == jvmevent.MemoryHeap:
			out.Accounted.HeapCommitted = max(out.Accounted.HeapCommitted, 0) + v.value
		case k.pool == jfrstream.PoolMetaspace:
			out.Accounted.Metaspace = v.value
		}
	}
	for k, v := range s.memUsed {
		switch {
		case k.typ == jvmevent.MemoryHeap:
		case k.pool == jfrstream.PoolMetaspace:
			out.Metaspace = Reading{T: v.t, Value: v.value}
		case k.pool != jfrstream.PoolCompressedClasses:
			// Code heaps: JFR gives their used and reserved sizes only.
			out.Accounted.CodeCache = max(out.Accounted.CodeCache, 0) + v.value
		}
	}
	// The pools one collection reported share its time: the newest.
	for k, v := range s.memAfter {
		if k.typ != jvmevent.MemoryHeap {
			continue
		}
		switch {
		case v.t > out.HeapAfterGC.T:
			out.HeapAfterGC = Reading{T: v.t, Value: v.value}
		case v.t == out.HeapAfterGC.T:
			out.HeapAfterGC.Value += v.value
		}
	}
	if v, ok := s.bufUsed[jfrstream.PoolDirect]; ok {
		out.DirectBuffers = Reading{T: v.t, Value: v.value}
		out.Accounted.DirectBuffers = v.value
	}
	if v, ok := s.nmtComm["Total"]; ok {
		out.Accounted.NMTCommitted = v.value
		out.NMTCommitted = Reading{T: v.t, Value: v.value}
	}
	return out, true
}

// SetJNIRefs records a JVM's JNI reference counts, read at at, for
// jvm.jni.reference.count.
func (a *Aggregator) SetJNIRefs(jvm jvmevent.JVM, at time.Time, refs jvmaccounts.JNIRefs) {
	if s := a.jvms[jvm]; s != nil {
		t := at.UnixNano()
		s.jniGlobal, s.jniWeak = sample{t: t, value: refs.Global}, sample{t: t, value: refs.Weak}
	}
}

// SetUnaccounted records a JVM's unaccounted native memory, measured at
// at, for jvm.native_memory.unaccounted.
func (a *Aggregator) SetUnaccounted(jvm jvmevent.JVM, at time.Time, bytes int64) {
	if s := a.jvms[jvm]; s != nil {
		s.unaccounted = sample{t: at.UnixNano(), value: bytes}
	}
}

// SetLeakSuspected records whether an account of a JVM is suspected of
// leaking, as assessed at at, for jvm.memory.leak.suspected.
func (a *Aggregator) SetLeakSuspected(jvm jvmevent.JVM, source metadata.AttributeJvmMemoryLeakSource, at time.Time, suspected bool) {
	s := a.jvms[jvm]
	if s == nil {
		return
	}
	if s.suspected == nil {
		s.suspected = map[metadata.AttributeJvmMemoryLeakSource]sample{}
	}
	v := int64(0)
	if suspected {
		v = 1
	}
	s.suspected[source] = sample{t: at.UnixNano(), value: v}
}

// recordAccounts hands the builder the accounts' latest values.
func (s *jvmState) recordAccounts(mb *metadata.MetricsBuilder) {
	for _, src := range sortedKeys(s.suspected) {
		mb.RecordJvmMemoryLeakSuspectedDataPoint(pcommon.Timestamp(s.suspected[src].t), s.suspected[src].value, src)
	}
	if s.jniGlobal.t > 0 {
		mb.RecordJvmJniReferenceCountDataPoint(pcommon.Timestamp(s.jniGlobal.t), s.jniGlobal.value, metadata.AttributeJvmJniReferenceKindGlobal)
		mb.RecordJvmJniReferenceCountDataPoint(pcommon.Timestamp(s.jniWeak.t), s.jniWeak.value, metadata.AttributeJvmJniReferenceKindWeakGlobal)
	}
	if s.unaccounted.t > 0 {
		mb.RecordJvmNativeMemoryUnaccountedDataPoint(pcommon.Timestamp(s.unaccounted.t), s.unaccounted.value)
	}
}
