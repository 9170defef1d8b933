package jvmmetrics

import (
	"slices"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/receiver"
	"go.opentelemetry.io/collector/receiver/receivertest"

	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/jvmevent"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/metadata"
)

func defaultConfig() Config {
	return Config{Metrics: DefaultMetricsConfig(), ResourceAttributes: metadata.DefaultResourceAttributesConfig()}
}

func settings() receiver.Settings { return receivertest.NewNopSettings(metadata.Type) }

func has(md pmetric.Metrics, rm int, name string) bool {
	ms := md.ResourceMetrics().At(rm).ScopeMetrics().At(0).Metrics()
	for i := range ms.Len() {
		if ms.At(i).Name() == name {
			return true
		}
	}
	return false
}

// TestRuntimeSamples: threads by daemon, classes loaded/unloaded/count and
// the CPU's count and utilization keep their newest samples; the
// container's CPU count is not replaced by an older host one.
func TestRuntimeSamples(t *testing.T) {
	a := New(defaultConfig(), settings())
	res := pcommon.NewResource()
	res.Attributes().PutInt("process.pid", 42)
	jvm := jvmevent.JVM{PID: 42}
	a.Add(&jvmevent.Batch{JVM: jvm,
		Threads: []jvmevent.Threads{{Time: 10, Active: 12, Daemon: 9}, {Time: 5, Active: 100, Daemon: 1}},
		Classes: []jvmevent.Classes{{Time: 10, Loaded: 1500, Unloaded: 20}},
		CPU:     []jvmevent.CPU{{Time: 10, Utilization: 0.25, Count: -1}, {Time: 11, Utilization: -1, Count: 4}, {Time: 3, Utilization: -1, Count: 64}},
	}, res, time.Unix(1, 0))
	md := a.Emit(time.Unix(2, 0))
	threads := map[bool]int64{}
	dps := find(t, md, 0, ThreadCount).Sum().DataPoints()
	for i := range dps.Len() {
		v, _ := dps.At(i).Attributes().Get(AttrThreadDaemon)
		threads[v.Bool()] = dps.At(i).IntValue()
	}
	if threads[true] != 9 || threads[false] != 3 || dps.Len() != 2 {
		t.Errorf("threads %v", threads)
	}
	for name, want := range map[string]int64{ClassLoaded: 1500, ClassUnloaded: 20, ClassCount: 1480, CPUCount: 4} {
		if got := find(t, md, 0, name).Sum().DataPoints().At(0).IntValue(); got != want {
			t.Errorf("%s = %d, want %d", name, got, want)
		}
	}
	if got := find(t, md, 0, CPURecentUtilization).Gauge().DataPoints().At(0).DoubleValue(); got != 0.25 {
		t.Errorf("utilization %v", got)
	}
	if m := find(t, md, 0, ClassLoaded); !m.Sum().IsMonotonic() || m.Sum().DataPoints().At(0).StartTimestamp() != pcommon.NewTimestampFromTime(time.Unix(1, 0)) {
		t.Errorf("jvm.class.loaded monotonic %v from %v", m.Sum().IsMonotonic(), m.Sum().DataPoints().At(0).StartTimestamp())
	}
}

// TestSwitches: a metric, a histogram and a resource attribute turned off
// are not emitted; the others are.
func TestSwitches(t *testing.T) {
	cfg := defaultConfig()
	cfg.Metrics.JvmGcDuration.Enabled = false
	cfg.Metrics.JvmMemoryUsed.Enabled = false
	cfg.ResourceAttributes.ProcessPid.Enabled = false
	a := New(cfg, settings())
	res := pcommon.NewResource()
	res.Attributes().PutInt("process.pid", 42)
	res.Attributes().PutStr("process.runtime.name", "java")
	a.Add(&jvmevent.Batch{JVM: jvmevent.JVM{PID: 42},
		GCs:        []jvmevent.GC{{Name: "PS Scavenge", Action: "end of minor GC", Duration: time.Millisecond}},
		Safepoints: []jvmevent.Safepoint{{Operation: "ParallelGCFailedAllocation", Duration: time.Millisecond, TimeToSafepoint: -1}},
		Memory:     []jvmevent.Memory{{Time: 1, Type: jvmevent.MemoryHeap, Used: 1, Committed: 2, Limit: 3, UsedAfterGC: -1}},
	}, res, time.Unix(1, 0))
	md := a.Emit(time.Unix(2, 0))
	if has(md, 0, GCDuration) || has(md, 0, MemoryUsed) {
		t.Error("a metric turned off was emitted")
	}
	if !has(md, 0, SafepointDuration) || !has(md, 0, MemoryCommitted) {
		t.Error("a metric turned on was not emitted")
	}
	attrs := md.ResourceMetrics().At(0).Resource().Attributes()
	if _, ok := attrs.Get("process.pid"); ok {
		t.Error("process.pid turned off but emitted")
	}
	if v, _ := attrs.Get("process.runtime.name"); v.Str() != "java" {
		t.Errorf("process.runtime.name %q", v.Str())
	}
	if sc := md.ResourceMetrics().At(0).ScopeMetrics().At(0).Scope(); sc.Name() != metadata.ScopeName {
		t.Errorf("scope %q", sc.Name())
	}
}

func find(t *testing.T, md pmetric.Metrics, rm int, name string) pmetric.Metric {
	t.Helper()
	ms := md.ResourceMetrics().At(rm).ScopeMetrics().At(0).Metrics()
	for i := range ms.Len() {
		if ms.At(i).Name() == name {
			return ms.At(i)
		}
	}
	t.Fatalf("no metric %s", name)
	return pmetric.Metric{}
}

// TestAggregatorValues: histograms accumulate across batches in the
// semantic conventions' buckets, gauges keep the newest sample even when
// an older one arrives later, and a JVM that ended is emitted once more,
// then forgotten.
func TestAggregatorValues(t *testing.T) {
	a := New(defaultConfig(), settings())
	res := pcommon.NewResource()
	res.Attributes().PutInt("process.pid", 42)
	jvm := jvmevent.JVM{PID: 42, Source: "test"}
	start := time.Unix(1000, 0)
	a.Add(&jvmevent.Batch{JVM: jvm,
		GCs: []jvmevent.GC{
			{Name: "G1 Young Generation", Action: "end of minor GC", Cause: "G1 Evacuation Pause", Duration: 5 * time.Millisecond},
			{Name: "G1 Young Generation", Action: "end of minor GC", Cause: "G1 Evacuation Pause", Duration: 50 * time.Millisecond},
		},
		Safepoints: []jvmevent.Safepoint{{Operation: "G1CollectForAllocation", Duration: 300 * time.Microsecond, TimeToSafepoint: 20 * time.Microsecond}},
		Memory:     []jvmevent.Memory{{Time: 200, Type: jvmevent.MemoryHeap, Used: 100, Committed: 256, Limit: 512, UsedAfterGC: -1}},
		Buffers:    []jvmevent.Buffers{{Time: 200, Pool: "direct", Count: 3, Used: 24576, Capacity: 24576}},
	}, res, start)
	a.Add(&jvmevent.Batch{JVM: jvm,
		GCs:    []jvmevent.GC{{Name: "G1 Young Generation", Action: "end of minor GC", Cause: "G1 Evacuation Pause", Duration: 2 * time.Second}},
		Memory: []jvmevent.Memory{{Time: 100, Type: jvmevent.MemoryHeap, Used: 7, Committed: 7, Limit: 7, UsedAfterGC: 7}},
	}, res, start)

	md := a.Emit(time.Unix(2000, 0))
	if md.ResourceMetrics().Len() != 1 {
		t.Fatalf("%d resources", md.ResourceMetrics().Len())
	}
	h := find(t, md, 0, GCDuration).Histogram()
	dp := h.DataPoints().At(0)
	if h.AggregationTemporality() != pmetric.AggregationTemporalityCumulative || dp.Count() != 3 ||
		dp.StartTimestamp() != pcommon.NewTimestampFromTime(start) {
		t.Errorf("gc histogram: count %d, start %v", dp.Count(), dp.StartTimestamp())
	}
	if got, want := dp.BucketCounts().AsRaw(), []uint64{1, 1, 0, 1, 0}; !equal(got, want) {
		t.Errorf("gc buckets %v, want %v", got, want)
	}
	if got := dp.Sum(); got < 2.0549 || got > 2.0551 {
		t.Errorf("gc sum %v", got)
	}
	if v, ok := dp.Attributes().Get(AttrGCCause); ok {
		t.Errorf("gc cause %q on by default", v.Str())
	}
	used := find(t, md, 0, MemoryUsed).Sum().DataPoints().At(0)
	if used.IntValue() != 100 || used.Timestamp() != 200 {
		t.Errorf("heap used %d at %d: an older sample replaced a newer one", used.IntValue(), used.Timestamp())
	}
	if after := find(t, md, 0, MemoryUsedAfterLastGC).Sum().DataPoints().At(0); after.IntValue() != 7 {
		t.Errorf("used after GC %d", after.IntValue())
	}
	if c := find(t, md, 0, BufferCount).Sum().DataPoints().At(0); c.IntValue() != 3 {
		t.Errorf("buffer count %d", c.IntValue())
	}
	if n := find(t, md, 0, SafepointCount).Sum().DataPoints().At(0); n.IntValue() != 1 {
		t.Errorf("safepoint count %d", n.IntValue())
	}

	a.Add(&jvmevent.Batch{JVM: jvm, Ended: true}, res, start)
	if md := a.Emit(time.Unix(3000, 0)); md.ResourceMetrics().Len() != 1 {
		t.Fatalf("an ended JVM's last metrics were not emitted")
	}
	if a.Len() != 0 {
		t.Fatalf("an ended JVM is still held")
	}
	if md := a.Emit(time.Unix(4000, 0)); md.ResourceMetrics().Len() != 0 {
		t.Fatalf("an ended JVM emitted again")
	}
}

// TestGCCauseIsOptIn: jvm.gc.duration splits by jvm.gc.cause only with
// metrics::jvm.gc.duration::capture_cause, as the Java agent's
// capture-gc-cause; by default one series per collector and action.
func TestGCCauseIsOptIn(t *testing.T) {
	gcs := []jvmevent.GC{
		{Name: "G1 Young Generation", Action: "end of minor GC", Cause: "G1 Evacuation Pause", Duration: 5 * time.Millisecond},
		{Name: "G1 Young Generation", Action: "end of minor GC", Cause: "System.gc()", Duration: 7 * time.Millisecond},
	}
	for _, capture := range []bool{false, true} {
		cfg := defaultConfig()
		cfg.Metrics.JvmGcDuration.CaptureCause = capture
		a := New(cfg, settings())
		a.Add(&jvmevent.Batch{JVM: jvmevent.JVM{PID: 1}, GCs: gcs}, pcommon.NewResource(), time.Unix(1, 0))
		dps := find(t, a.Emit(time.Unix(2, 0)), 0, GCDuration).Histogram().DataPoints()
		var causes []string
		for i := range dps.Len() {
			if v, ok := dps.At(i).Attributes().Get(AttrGCCause); ok {
				causes = append(causes, v.Str())
			}
		}
		series, want := 1, []string(nil)
		if capture {
			series, want = 2, []string{"G1 Evacuation Pause", "System.gc()"}
		}
		if dps.Len() != series || !slices.Equal(causes, want) {
			t.Errorf("capture_cause %v: %d series, causes %v; want %d, %v", capture, dps.Len(), causes, series, want)
		}
		if !capture && dps.At(0).Count() != 2 {
			t.Errorf("one series counts %d collections, want 2", dps.At(0).Count())
		}
	}
}

// TestUnrecordedGCsCountWithoutDurations: collections before the
// recording add to the count and the first bucket, not to the sum, min or
// max; a series with nothing else has no min and max.
func TestUnrecordedGCsCountWithoutDurations(t *testing.T) {
	a := New(defaultConfig(), settings())
	a.Add(&jvmevent.Batch{JVM: jvmevent.JVM{PID: 1},
		UnrecordedGCs: []jvmevent.UnrecordedGCs{{Name: "G1 Young Generation", Action: "end of minor GC", Count: 7}, {Name: "PS Scavenge", Action: "end of minor GC", Count: 2}},
		GCs:           []jvmevent.GC{{Name: "G1 Young Generation", Action: "end of minor GC", Duration: 20 * time.Millisecond}},
	}, pcommon.NewResource(), time.Unix(1, 0))
	dps := find(t, a.Emit(time.Unix(2, 0)), 0, GCDuration).Histogram().DataPoints()
	if dps.Len() != 2 {
		t.Fatalf("%d series, want 2", dps.Len())
	}
	for i := range dps.Len() {
		dp := dps.At(i)
		name, _ := dp.Attributes().Get(AttrGCName)
		switch name.Str() {
		case "G1 Young Generation":
			if dp.Count() != 8 || dp.Sum() != 0.02 || !dp.HasMin() || dp.Min() != 0.02 || dp.Max() != 0.02 || !equal(dp.BucketCounts().AsRaw(), []uint64{7, 1, 0, 0, 0}) {
				t.Errorf("G1: count %d sum %v min %v max %v buckets %v", dp.Count(), dp.Sum(), dp.Min(), dp.Max(), dp.BucketCounts().AsRaw())
			}
		case "PS Scavenge":
			if dp.Count() != 2 || dp.Sum() != 0 || dp.HasMin() || dp.HasMax() || !equal(dp.BucketCounts().AsRaw(), []uint64{2, 0, 0, 0, 0}) {
				t.Errorf("PS: count %d sum %v min %v max %v buckets %v", dp.Count(), dp.Sum(), dp.HasMin(), dp.HasMax(), dp.BucketCounts().AsRaw())
			}
		default:
			t.Errorf("series %q", name.Str())
		}
	}
}

func equal(a, b []uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestForget: a forgotten JVM's series are no longer emitted, other JVMs'
// are, and a later batch of it starts its series afresh.
func TestForget(t *testing.T) {
	a := New(defaultConfig(), settings())
	res := pcommon.NewResource()
	res.Attributes().PutInt("process.pid", 42)
	log := jvmevent.JVM{PID: 42, Source: "/var/log/gc.log"}
	repo := jvmevent.JVM{PID: 42, Source: "/tmp/2026_01_01_00_00_00_42"}
	sp := []jvmevent.Safepoint{{Operation: "G1CollectForAllocation", Duration: time.Millisecond, TimeToSafepoint: -1}}
	a.Add(&jvmevent.Batch{JVM: log, Safepoints: sp}, res, time.Unix(1000, 0))
	a.Add(&jvmevent.Batch{JVM: repo, Safepoints: append(sp, sp...)}, res, time.Unix(1000, 0))
	a.Forget(log)
	a.Forget(jvmevent.JVM{PID: 7}) // unknown: nothing happens
	md := a.Emit(time.Unix(2000, 0))
	if md.ResourceMetrics().Len() != 1 || a.Len() != 1 {
		t.Fatalf("%d resources emitted, %d JVMs held, want 1 and 1", md.ResourceMetrics().Len(), a.Len())
	}
	if n := find(t, md, 0, SafepointDuration).Histogram().DataPoints().At(0).Count(); n != 2 {
		t.Errorf("the remaining series counts %d safepoints, want the repository's 2", n)
	}
	a.Add(&jvmevent.Batch{JVM: log, Safepoints: sp}, res, time.Unix(3000, 0))
	md = a.Emit(time.Unix(4000, 0))
	if md.ResourceMetrics().Len() != 2 {
		t.Fatalf("%d resources after the log came back, want 2", md.ResourceMetrics().Len())
	}
	dp := find(t, md, 1, SafepointDuration).Histogram().DataPoints().At(0)
	if dp.Count() != 1 || dp.StartTimestamp() != pcommon.NewTimestampFromTime(time.Unix(3000, 0)) {
		t.Errorf("the log's new series: count %d from %v, want 1 from its new start", dp.Count(), dp.StartTimestamp())
	}
}

// TestCPUTime: jvm.cpu.time is what the CPUTime hook reads at each Emit,
// stamped then, for the JVMs it knows; none for one it cannot read, none
// when switched off.
func TestCPUTime(t *testing.T) {
	cfg := defaultConfig()
	reads := 0
	cfg.CPUTime = func(j jvmevent.JVM) (time.Duration, bool) {
		reads++
		return time.Duration(j.PID) * 1500 * time.Millisecond, j.PID == 1
	}
	a := New(cfg, settings())
	for _, pid := range []int{1, 2} {
		res := pcommon.NewResource()
		res.Attributes().PutInt("process.pid", int64(pid))
		a.Add(&jvmevent.Batch{JVM: jvmevent.JVM{PID: pid}, Classes: []jvmevent.Classes{{Time: 10, Loaded: 1, Unloaded: 0}}}, res, time.Unix(1, 0))
	}
	md := a.Emit(time.Unix(2, 0))
	dp := find(t, md, 0, CPUTime).Sum().DataPoints().At(0)
	if dp.DoubleValue() != 1.5 || dp.Timestamp() != pcommon.NewTimestampFromTime(time.Unix(2, 0)) || dp.StartTimestamp() != pcommon.NewTimestampFromTime(time.Unix(1, 0)) {
		t.Errorf("jvm.cpu.time %v at %v from %v", dp.DoubleValue(), dp.Timestamp(), dp.StartTimestamp())
	}
	if has(md, 1, CPUTime) || reads != 2 {
		t.Errorf("jvm.cpu.time for the unreadable JVM, or %d reads", reads)
	}
	cfg.Metrics.JvmCPUTime.Enabled = false
	off := New(cfg, settings())
	off.Add(&jvmevent.Batch{JVM: jvmevent.JVM{PID: 1}, Classes: []jvmevent.Classes{{Time: 10, Loaded: 1}}}, pcommon.NewResource(), time.Unix(1, 0))
	if md := off.Emit(time.Unix(2, 0)); has(md, 0, CPUTime) || reads != 2 {
		t.Errorf("jvm.cpu.time switched off but emitted, or read (%d)", reads)
	}
}
