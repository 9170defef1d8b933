package pythongilreceiver

import (
	"math"
	"reflect"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/receiver/receivertest"

	"go.uber.org/zap"

	"github.com/otelcol-ai/otelcol-ai/internal/window"
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
		if !ok {
			t.Fatalf("findMetric: ok is false")
		}
		waitTime, ok := findMetric(md, metricWaitTime)
		if !ok {
			t.Fatalf("findMetric: ok is false")
		}
		return hist.Histogram().DataPoints().At(0), waitTime.Sum().DataPoints().At(0).DoubleValue()
	}

	// 10 short waits (5 µs each) counted in the kernel at ratio 1.
	aggKey := gil.AggregateKey{PID: 7, Kind: gil.KindWait}
	dp, waitTime := collect(map[gil.AggregateKey]gil.Aggregate{aggKey: {Count: 10, Sum: 50 * time.Microsecond}})
	if got := dp.BucketCounts().AsRaw()[:5]; !reflect.DeepEqual(got, []uint64{10, 1, 0, 0, 4}) {
		t.Fatalf("dp.BucketCounts().AsRaw()[:5]: got %v, want %v", got, []uint64{10, 1, 0, 0, 4})
	}
	if got := dp.Count(); got != uint64(15) {
		t.Errorf("dp.Count(): got %v, want %v", got, uint64(15))
	}
	if got := dp.Sum(); !(math.Abs(50e-6+200e-6+4*2e-3-got) <= 1e-12) {
		t.Errorf("dp.Sum(): got %v, want %v ± %v", got, 50e-6+200e-6+4*2e-3, 1e-12)
	}
	if !(math.Abs(50e-6+200e-6+2e-3-waitTime) <= 1e-12) {
		t.Errorf("counter from raw sums at ratio 1: got %v, want %v ± %v", waitTime, 50e-6+200e-6+2e-3, 1e-12)
	}

	// 10 more at ratio 0.5 stand for 20.
	st.sampling = 0.5
	dp, waitTime = collect(map[gil.AggregateKey]gil.Aggregate{aggKey: {Count: 20, Sum: 100 * time.Microsecond}})
	if got := dp.BucketCounts().At(0); got != uint64(30) {
		t.Errorf("dp.BucketCounts().At(0): got %v, want %v", got, uint64(30))
	}
	if got := dp.Count(); got != uint64(35) {
		t.Errorf("dp.Count(): got %v, want %v", got, uint64(35))
	}
	if got := dp.Sum(); !(math.Abs(150e-6+200e-6+4*2e-3-got) <= 1e-12) {
		t.Errorf("dp.Sum(): got %v, want %v ± %v", got, 150e-6+200e-6+4*2e-3, 1e-12)
	}
	if !(math.Abs(50e-6+200e-6+2e-3+2*50e-6-waitTime) <= 1e-12) {
		t.Errorf("the counter's growth scaled once: got %v, want %v ± %v", waitTime, 50e-6+200e-6+2e-3+2*50e-6, 1e-12)
	}
}

// TestFutexTotalsNotScaled: with wait_source futex the tracepoints stay
// attached while the duty cycle detaches the uprobes, so the kernel's wait
// time and forced-switch counts are whole: at a sampling ratio of 0.25
// they are reported as counted, while held time and the short released
// windows, which only the uprobes see, stand for four times what grew.
func TestFutexTotalsNotScaled(t *testing.T) {
	st := newTestRunState(t, createDefaultConfig().(*Config))
	if st.cfg.WaitSource != waitSourceFutex {
		t.Fatalf("st.cfg.WaitSource: got %q, want %q", st.cfg.WaitSource, waitSourceFutex)
	}
	st.sampling = 0.25
	p := newTestProcess(11)
	collect := func(aggs map[gil.AggregateKey]gil.Aggregate) (map[string]float64, map[string]pmetric.HistogramDataPoint) {
		md := pmetric.NewMetrics()
		st.processMetrics(md, p, aggs, pcommon.NewTimestampFromTime(time.Now()))
		sums := map[string]float64{}
		for _, name := range []string{metricWaitTime, "python.gil.held.time", "python.gil.switches"} {
			m, ok := findMetric(md, name)
			if !ok {
				t.Fatalf("%v (ok is false)", name)
			}
			dp := m.Sum().DataPoints().At(0)
			sums[name] = dp.DoubleValue() + float64(dp.IntValue())
		}
		hists := map[string]pmetric.HistogramDataPoint{}
		for _, name := range []string{metricWaitDuration, metricReleasedDuration} {
			m, ok := findMetric(md, name)
			if !ok {
				t.Fatalf("%v (ok is false)", name)
			}
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
	if got := sums[metricWaitTime]; !(math.Abs(30*10e-6-got) <= 1e-12) {
		t.Errorf("wait time as counted: got %v, want %v ± %v", got, 30*10e-6, 1e-12)
	}
	if got := sums["python.gil.switches"]; !(math.Abs(float64(30)-got) <= 1e-9) {
		t.Errorf("switches as counted: got %v, want %v ± %v", got, 30, 1e-9)
	}
	if got := sums["python.gil.held.time"]; !(math.Abs(4*30*100e-6-got) <= 1e-12) {
		t.Errorf("held time scaled by 1/0.25: got %v, want %v ± %v", got, 4*30*100e-6, 1e-12)
	}
	if got := hists[metricWaitDuration].Count(); got != uint64(30) {
		t.Errorf("short waits as counted: got %v, want %v", got, uint64(30))
	}
	if got := hists[metricWaitDuration].Sum(); !(math.Abs(30*10e-6-got) <= 1e-12) {
		t.Errorf("hists[metricWaitDuration].Sum(): got %v, want %v ± %v", got, 30*10e-6, 1e-12)
	}
	if got := hists[metricReleasedDuration].Count(); got != uint64(4*30) {
		t.Errorf("short releases scaled by 1/0.25: got %v, want %v", got, uint64(4*30))
	}
	if got := hists[metricReleasedDuration].Sum(); !(math.Abs(4*30*20e-6-got) <= 1e-12) {
		t.Errorf("hists[metricReleasedDuration].Sum(): got %v, want %v ± %v", got, 4*30*20e-6, 1e-12)
	}
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
	if !ok {
		t.Fatalf("findMetric: ok is false")
	}
	if !m.Sum().IsMonotonic() {
		t.Errorf("m.Sum().IsMonotonic() is false")
	}
	got := map[int64]int64{}
	for _, dp := range m.Sum().DataPoints().All() {
		gen, ok := dp.Attributes().Get("cpython.gc.generation")
		if !ok {
			t.Fatalf("dp.Attributes().Get: ok is false")
		}
		got[gen.Int()] = dp.IntValue()
	}
	if got, want := got, map[int64]int64{0: 3 + 40, 1: 2 + 5, 2: 2}; !reflect.DeepEqual(got, want) {
		t.Errorf("got: got %v, want %v", got, want)
	}

	pauses, ok := findMetric(md, metricGCDuration)
	if !ok {
		t.Fatalf("findMetric: ok is false")
	}
	var total uint64
	for _, dp := range pauses.Histogram().DataPoints().All() {
		total += dp.Count()
	}
	if total != uint64(3+2+2+40+5+7) {
		t.Errorf("the pause histogram counts every collection: got %v, want %v", total, uint64(3+2+2+40+5+7))
	}
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
	if ok {
		t.Errorf("findMetric: ok is true")
	}
	_, ok = findMetric(md, metricWaitDuration)
	if ok {
		t.Errorf("findMetric: ok is true")
	}
	_, ok = findMetric(md, metricReleasedDuration)
	if !ok {
		t.Errorf("findMetric: ok is false")
	}
	_, ok = md.ResourceMetrics().At(0).Resource().Attributes().Get("process.executable.name")
	if ok {
		t.Errorf("md.ResourceMetrics().At(0).Resource().Attributes().Get: ok is true")
	}
	pid, _ := md.ResourceMetrics().At(0).Resource().Attributes().Get("process.pid")
	if got := pid.Int(); got != int64(11) {
		t.Errorf("pid.Int(): got %v, want %v", got, int64(11))
	}
}

// TestWaitContinuationJoined: a wait the kernel sent in two parts (the
// thread woke with the GIL free, another took it first) is one window and
// one histogram count, of the whole length; a continuation that does not
// start where the thread's pending wait ends, or of another thread, is a
// window of its own.
func TestWaitContinuationJoined(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	st := newTestRunState(t, cfg)
	st.clock = window.NewFixedClock(1_700_000_000_000_000_000)
	st.logger = zap.NewNop()
	p := newTestProcess(7)
	p.threadNames = map[uint32]string{1: "", 2: ""}
	st.processes[7] = p
	st.resetPending()
	first := gil.Event{Kind: gil.KindWait, Cause: gil.CauseRestore, PID: 7, TID: 1, Start: 1_000_000, Duration: 300 * time.Microsecond}
	st.add(first)
	st.add(gil.Event{Kind: gil.KindWait, PID: 7, TID: 1, Start: first.Start + int64(first.Duration), Duration: 2 * time.Millisecond, Continues: true})
	// Another thread's continuation, and one with a gap: their own windows.
	st.add(gil.Event{Kind: gil.KindWait, PID: 7, TID: 2, Start: first.Start + int64(first.Duration), Duration: time.Millisecond, Continues: true})
	st.add(gil.Event{Kind: gil.KindWait, PID: 7, TID: 1, Start: 9_000_000, Duration: time.Millisecond, Continues: true})
	logs, n := st.takeLogs()
	if n != 3 {
		t.Fatalf("takeLogs: got %d windows, want 3", n)
	}
	var durations []int64
	for _, rl := range logs.ResourceLogs().All() {
		for _, sl := range rl.ScopeLogs().All() {
			for _, lr := range sl.LogRecords().All() {
				d, _ := lr.Attributes().Get(window.AttrDuration)
				durations = append(durations, d.Int())
			}
		}
	}
	if want := []int64{int64(2300 * time.Microsecond), int64(time.Millisecond), int64(time.Millisecond)}; !reflect.DeepEqual(durations, want) {
		t.Errorf("window durations: got %v, want %v", durations, want)
	}
	h := p.hists[histKey{kind: gil.KindWait, gen: -1}]
	counts, total := h.bucketCounts()
	if total != 3 || math.Abs(h.rawSum-0.0043) > 1e-12 {
		t.Errorf("wait histogram: %d waits summing to %gs (buckets %v), want 3 summing to 0.0043s", total, h.rawSum, counts)
	}
	// The first part was taken back from its bucket (≤ 500 µs).
	for i, b := range h.bounds {
		if b >= 300e-6 && b < 1e-3 && counts[i] != 0 {
			t.Errorf("wait histogram bucket ≤ %gs: got %d, want 0", b, counts[i])
		}
	}
}
