package jvmmetrics

import (
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/jfrstream"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/jvmaccounts"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/jvmevent"
)

// TestAccounts: the accounted terms and the leak series from a G1 JVM's
// samples - the heap's pools summed (committed; used after the newest
// collection), metaspace (class space within it, not added again), the
// code heaps' used sizes, direct buffers - and the two metrics written
// from what the receiver sets.
func TestAccounts(t *testing.T) {
	const mib = 1 << 20
	a := New(defaultConfig(), settings())
	jvm := jvmevent.JVM{PID: 42, StartTicks: 7}
	heap := func(pool string, t, used, committed, after int64) jvmevent.Memory {
		return jvmevent.Memory{Time: t, Type: jvmevent.MemoryHeap, Pool: pool, Used: used, Committed: committed, Limit: -1, UsedAfterGC: after}
	}
	b := jvmevent.Batch{JVM: jvm, Memory: []jvmevent.Memory{
		heap(jfrstream.PoolG1Eden, 100, 10*mib, 40*mib, -1),
		heap(jfrstream.PoolG1Old, 100, 30*mib, 80*mib, -1),
		// A collection: the After GC summary of every pool.
		heap(jfrstream.PoolG1Eden, 200, 0, 40*mib, 0),
		heap(jfrstream.PoolG1Survivor, 200, 2*mib, 8*mib, 2*mib),
		heap(jfrstream.PoolG1Old, 200, 31*mib, 80*mib, 31*mib),
		{Time: 200, Type: jvmevent.MemoryNonHeap, Pool: jfrstream.PoolMetaspace, Used: 9 * mib, Committed: 10 * mib, Limit: -1, UsedAfterGC: 9 * mib},
		{Time: 200, Type: jvmevent.MemoryNonHeap, Pool: jfrstream.PoolCompressedClasses, Used: 1 * mib, Committed: 2 * mib, Limit: 1024 * mib, UsedAfterGC: 1 * mib},
		{Time: 150, Type: jvmevent.MemoryNonHeap, Pool: "CodeHeap 'non-nmethods'", Used: 1 * mib, Committed: -1, Limit: 5 * mib, UsedAfterGC: -1},
		{Time: 150, Type: jvmevent.MemoryNonHeap, Pool: "CodeHeap 'profiled nmethods'", Used: 3 * mib, Committed: -1, Limit: 120 * mib, UsedAfterGC: -1},
	}, Buffers: []jvmevent.Buffers{{Time: 180, Pool: jfrstream.PoolDirect, Count: 3, Used: 5 * mib, Capacity: 5 * mib}}}
	a.Add(&b, pcommon.NewResource(), time.Unix(0, 0))
	got, ok := a.Accounts(jvm)
	if !ok {
		t.Fatal("no accounts")
	}
	want := Accounts{
		Accounted:     jvmaccounts.Accounted{HeapCommitted: 128 * mib, Metaspace: 10 * mib, CodeCache: 4 * mib, DirectBuffers: 5 * mib, NMTCommitted: -1},
		HeapAfterGC:   Reading{T: 200, Value: 33 * mib},
		DirectBuffers: Reading{T: 180, Value: 5 * mib},
		Metaspace:     Reading{T: 200, Value: 9 * mib},
		NMTCommitted:  Reading{T: -1},
	}
	if got != want {
		t.Errorf("Accounts:\ngot  %+v\nwant %+v", got, want)
	}
	if _, ok := a.Accounts(jvmevent.JVM{PID: 43}); ok {
		t.Error("accounts of a JVM never added")
	}

	at := time.Unix(1000, 0)
	a.SetJNIRefs(jvm, at, jvmaccounts.JNIRefs{Global: 1500, Weak: 3})
	a.SetUnaccounted(jvm, at, -12*mib)
	md := a.Emit(at)
	values := map[string]int64{}
	ms := md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics()
	for i := range ms.Len() {
		m := ms.At(i)
		if m.Type() != pmetric.MetricTypeSum {
			continue
		}
		for p := range m.Sum().DataPoints().Len() {
			dp := m.Sum().DataPoints().At(p)
			key := m.Name()
			if k, ok := dp.Attributes().Get("jvm.jni.reference.kind"); ok {
				key += "/" + k.Str()
			}
			if dp.Timestamp().AsTime().Equal(at) {
				values[key] = dp.IntValue()
			}
		}
	}
	for key, v := range map[string]int64{"jvm.jni.reference.count/global": 1500, "jvm.jni.reference.count/weak_global": 3, "jvm.native_memory.unaccounted": -12 * mib} {
		if values[key] != v {
			t.Errorf("%s: got %d, want %d", key, values[key], v)
		}
	}
}
