package jfrreceiver

import (
	"context"
	"math"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/otelcol-ai/otelcol-ai/pkg/jfr/jfrtest"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/jvmaccounts"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/leaktest"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/metadatatest"
)

// accountPoint is one value of a metric of one JVM.
type accountPoint struct {
	at    time.Time
	value int64
}

// accountPoints returns the points of a metric for pid, with the attribute
// key=value when key is set, in time order, each time once.
func accountPoints(mds []pmetric.Metrics, pid int, name, key, value string) []accountPoint {
	var out []accountPoint
	seen := map[int64]bool{}
	for _, md := range mds {
		for i := range md.ResourceMetrics().Len() {
			rm := md.ResourceMetrics().At(i)
			if pidOf(rm.Resource()) != int64(pid) {
				continue
			}
			ms := rm.ScopeMetrics().At(0).Metrics()
			for k := range ms.Len() {
				m := ms.At(k)
				if m.Name() != name || m.Type() != pmetric.MetricTypeSum {
					continue
				}
				for p := range m.Sum().DataPoints().Len() {
					dp := m.Sum().DataPoints().At(p)
					if key != "" {
						if v, ok := dp.Attributes().Get(key); !ok || v.Str() != value {
							continue
						}
					}
					if t := int64(dp.Timestamp()); !seen[t] {
						seen[t] = true
						out = append(out, accountPoint{dp.Timestamp().AsTime(), dp.IntValue()})
					}
				}
			}
		}
	}
	return out
}

// eachLeakRecord calls f with each jvm.memory.leak_suspected record of pid
// in sink, and its resource.
func eachLeakRecord(sink *consumertest.LogsSink, pid int, f func(res pcommon.Resource, lr plog.LogRecord)) {
	eachRecord(sink.AllLogs(), func(res pcommon.Resource, lr plog.LogRecord) {
		if pidOf(res) == int64(pid) && lr.EventName() == "jvm.memory.leak_suspected" {
			f(res, lr)
		}
	})
}

// leakRecords returns, per source, the attributes of the first
// jvm.memory.leak_suspected record of pid, with its resource's attributes
// under "resource:<key>".
func leakRecords(sink *consumertest.LogsSink, pid int) map[string]map[string]any {
	out := map[string]map[string]any{}
	eachLeakRecord(sink, pid, func(res pcommon.Resource, lr plog.LogRecord) {
		attrs := lr.Attributes().AsRaw()
		for k, v := range res.Attributes().AsRaw() {
			attrs["resource:"+k] = v
		}
		src, _ := attrs["jvm.memory.leak.source"].(string)
		if _, ok := out[src]; !ok {
			out[src] = attrs
		}
	})
	return out
}

// slopeOf is the least-squares slope of points, per second.
func slopeOf(ps []accountPoint) float64 {
	n := float64(len(ps))
	var st, sv float64
	for _, p := range ps {
		st += p.at.Sub(ps[0].at).Seconds()
		sv += float64(p.value)
	}
	mt, mv := st/n, sv/n
	var num, den float64
	for _, p := range ps {
		dt := p.at.Sub(ps[0].at).Seconds() - mt
		num += dt * (float64(p.value) - mv)
		den += dt * dt
	}
	return num / den
}

// TestAccountLeaks: three JDK 17 JVMs started without any JFR flag, each
// calling a JNI library the test compiles every 100 ms: one leaks 100 KiB
// of malloc'd, touched memory and 20 JNI global references a tick for
// 90 s, one leaks 100 KiB of direct buffers a tick, one does both's work
// and frees it; and a fourth that leaks as the first but records JFR
// itself. Within 100 s of each leak's start the receiver (attach on, as
// the embedded default has it; a 40 s leak window) names the first and
// fourth JVMs' jni_global_refs and native_unaccounted and the second's
// direct_buffers, with their process identity; the healthy JVM gets no
// record. Once the first JVM's leak has stopped, its JNI global reference
// count agrees with jcmd Thread.print's within 10%; while it leaked,
// jvm.native_memory.unaccounted grew at the rate the JVM says it leaked
// within 20%. The heap is committed and touched at start (-Xms=-Xmx,
// AlwaysPreTouch), so that the heap's term is exact and the estimate's
// error is the rest's. About 100 s.
func TestAccountLeaks(t *testing.T) {
	jdk := jfrtest.Find(t, 17)
	prog := leaktest.Build(t, jdk)
	const (
		bytesPerTick = 100 << 10
		refsPerTick  = 20
		leakTicks    = 900
	)
	opts := []string{"-Xms128m", "-Xmx128m", "-XX:+AlwaysPreTouch", "-XX:MaxDirectMemorySize=512m"}
	start := time.Now()
	native := leaktest.Start(t, jdk.Java(), prog, leaktest.Native, bytesPerTick, refsPerTick, leakTicks, opts)
	direct := leaktest.Start(t, jdk.Java(), prog, leaktest.Direct, bytesPerTick, refsPerTick, 0, opts)
	healthy := leaktest.Start(t, jdk.Java(), prog, leaktest.Healthy, bytesPerTick, refsPerTick, 0, opts)
	// One that records itself: its own recording is read, and its
	// accounts are the same.
	selfRecording := leaktest.Start(t, jdk.Java(), prog, leaktest.Native, bytesPerTick, refsPerTick, leakTicks,
		append([]string{"-XX:StartFlightRecording=disk=true,maxage=5m"}, opts...))
	ours := map[int]bool{native.PID: true, direct.PID: true, healthy.PID: true, selfRecording.PID: true}
	attachOnly = func(pid int) bool { return ours[pid] }
	defer func() { attachOnly = nil }()

	cfg := createDefaultConfig().(*Config)
	cfg.Repositories.Attach.Enabled = true // as distribution/config.yaml
	cfg.PollInterval = 200 * time.Millisecond
	cfg.Repositories.DiscoveryInterval = 200 * time.Millisecond
	cfg.CollectionInterval = 2 * time.Second
	cfg.Accounts.JNIReferences.Interval = 2 * time.Second
	cfg.Accounts.LeakDetection.Window = 40 * time.Second
	cfg.Accounts.LeakDetection.Bytes = LeakThresholds{MinGrowthRate: 256 << 10, MinGrowth: 8 << 20}
	cfg.Accounts.LeakDetection.References = LeakThresholds{MinGrowthRate: 50, MinGrowth: 400}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	tel := componenttest.NewTelemetry()
	defer tel.Shutdown(context.Background())
	set := metadatatest.NewSettings(tel)
	core, observed := observer.New(zap.InfoLevel)
	set.Logger = zap.New(core)
	logs, metrics, shutdown := startBoth(t, cfg, set, componenttest.NewNopHost())

	want := map[*leaktest.JVM][]string{
		native:        {"jni_global_refs", "native_unaccounted"},
		direct:        {"direct_buffers"},
		selfRecording: {"jni_global_refs", "native_unaccounted"},
	}
	named := map[*leaktest.JVM]map[string]time.Duration{native: {}, direct: {}, selfRecording: {}}
	var reports []leaktest.Leaked // the native JVM's, one a second
	for {
		reports = append(reports, native.Leaked())
		waiting := false
		for j, sources := range want {
			leakStart, ok := j.Started()
			if !ok {
				if time.Since(start) > time.Minute {
					t.Fatalf("pid %d did not start leaking in a minute:\n%s", j.PID, j.Output())
				}
				waiting = true
				continue
			}
			recs := leakRecords(logs, j.PID)
			for _, src := range sources {
				if _, ok := named[j][src]; !ok && recs[src] != nil {
					named[j][src] = time.Since(leakStart)
				}
				if _, ok := named[j][src]; !ok && time.Since(leakStart) < 100*time.Second {
					waiting = true
				}
			}
		}
		if !waiting {
			break
		}
		time.Sleep(time.Second)
	}
	for j, sources := range want {
		for _, src := range sources {
			if d, ok := named[j][src]; ok {
				t.Logf("pid %d: %s named %.0f s after its leak started", j.PID, src, d.Seconds())
			} else {
				t.Errorf("pid %d: no %s record within 100 s of its leak's start; records %v\nleak warnings %v\nJNI reads %v\nJVM statuses %v", j.PID, src,
					leakRecords(logs, j.PID), observed.FilterMessage("JVM memory leak suspected").All(), observed.FilterMessage("JNI reference count not read").All(),
					observed.FilterMessage("JVM status").All())
			}
		}
	}

	// The native JVM's leak stops after leakTicks; then its count holds
	// still and the JDK's own thread dump must say the same as the
	// receiver's next read.
	for native.Leaked().Refs < leakTicks*refsPerTick {
		if time.Since(start) > 3*time.Minute {
			t.Fatalf("the native JVM's leak did not end: %+v", native.Leaked())
		}
		reports = append(reports, native.Leaked())
		time.Sleep(time.Second)
	}
	stopped := native.Leaked().At
	globalRefs := func() []accountPoint {
		return accountPoints(metrics.AllMetrics(), native.PID, "jvm.jni.reference.count", "jvm.jni.reference.kind", "global")
	}
	for {
		refs := globalRefs()
		if len(refs) > 0 && refs[len(refs)-1].at.After(stopped.Add(time.Second)) {
			break
		}
		if time.Since(stopped) > 30*time.Second {
			t.Fatalf("no jvm.jni.reference.count read after the native JVM's leak stopped; %d before", len(refs))
		}
		time.Sleep(100 * time.Millisecond)
	}
	refs := globalRefs()
	last := refs[len(refs)-1]
	theirs, err := jvmaccounts.ParseJNIRefs(jcmd(t, jdk, native.PID, "Thread.print"))
	if err != nil {
		t.Fatal(err)
	}
	if diff := math.Abs(float64(last.value-theirs.Global)) / float64(theirs.Global); diff > 0.10 {
		t.Errorf("JNI global refs %d, jcmd Thread.print %d: %.1f%% apart", last.value, theirs.Global, 100*diff)
	} else {
		t.Logf("JNI global refs %d, jcmd Thread.print %d (%d leaked): %.2f%% apart", last.value, theirs.Global, leakTicks*refsPerTick, 100*diff)
	}

	// The unaccounted native memory's growth against the leak's, over the
	// leak's last 40 s.
	from, to := stopped.Add(-40*time.Second), stopped.Add(-time.Second)
	var tail, leaked []accountPoint
	for _, p := range accountPoints(metrics.AllMetrics(), native.PID, "jvm.native_memory.unaccounted", "", "") {
		if p.at.After(from) && p.at.Before(to) {
			tail = append(tail, p)
		}
	}
	for _, r := range reports {
		if r.Lines > 0 && r.At.After(from) && r.At.Before(to) {
			leaked = append(leaked, accountPoint{r.At, r.NativeBytes})
		}
	}
	if len(tail) < 10 || len(leaked) < 10 {
		t.Fatalf("%d unaccounted points and %d leak reports in the leak's last 40 s", len(tail), len(leaked))
	}
	got, rate := slopeOf(tail), slopeOf(leaked)
	if e := math.Abs(got-rate) / rate; e > 0.20 {
		t.Errorf("unaccounted native memory grows %.0f KiB/s, the JVM leaks %.0f KiB/s: %.0f%% apart\nunaccounted %v\nleaked %v", got/1024, rate/1024, 100*e, tail, leaked)
	} else {
		t.Logf("unaccounted native memory grows %.0f KiB/s, the JVM leaks %.0f KiB/s: %.1f%% apart", got/1024, rate/1024, 100*e)
	}

	// The records carry the process identity and the window.
	for j, sources := range want {
		recs := leakRecords(logs, j.PID)
		for _, src := range sources {
			a := recs[src]
			if a == nil {
				continue
			}
			pid := j.PID
			if a["resource:process.runtime.name"] != "java" || a["resource:host.name"] == nil || a["resource:process.vpid"] == nil {
				t.Errorf("pid %d %s: resource %v", pid, src, a)
			}
			if w, _ := a["jvm.memory.leak.window"].(float64); w < 20 || w > 40 {
				t.Errorf("pid %d %s: window %v s, want 20-40", pid, src, a["jvm.memory.leak.window"])
			}
			if r, _ := a["jvm.memory.leak.growth_rate"].(float64); r <= 0 {
				t.Errorf("pid %d %s: growth rate %v", pid, src, a["jvm.memory.leak.growth_rate"])
			}
		}
	}
	if recs := leakRecords(logs, healthy.PID); len(recs) > 0 {
		t.Errorf("the healthy JVM got leak records: %v", recs)
	}
	// jvm.memory.leak.suspected says the same: 1 for the named accounts
	// at their records, never 1 for the healthy JVM's.
	suspected := func(pid int, src string) (ones, points int) {
		for _, p := range accountPoints(metrics.AllMetrics(), pid, "jvm.memory.leak.suspected", "jvm.memory.leak.source", src) {
			points++
			if p.value == 1 {
				ones++
			}
		}
		return ones, points
	}
	if ones, _ := suspected(direct.PID, "direct_buffers"); ones == 0 {
		t.Errorf("jvm.memory.leak.suspected never 1 for the direct JVM's direct_buffers")
	}
	for _, src := range []string{"heap", "direct_buffers", "jni_global_refs", "native_unaccounted", "metaspace"} {
		if ones, points := suspected(healthy.PID, src); ones > 0 {
			t.Errorf("jvm.memory.leak.suspected 1 at %d of %d points for the healthy JVM's %s", ones, points, src)
		} else if points == 0 && src != "heap" && src != "metaspace" {
			t.Errorf("no jvm.memory.leak.suspected for the healthy JVM's %s", src)
		}
	}
	shutdown()

	// Every metric is as declared, and the resource is the JVM's.
	d := readDeclarations(t)
	for _, md := range metrics.AllMetrics() {
		for i := range md.ResourceMetrics().Len() {
			rm := md.ResourceMetrics().At(i)
			if !ours[int(pidOf(rm.Resource()))] {
				continue
			}
			ms := rm.ScopeMetrics().At(0).Metrics()
			for k := range ms.Len() {
				if accountsOnly[ms.At(k).Name()] {
					checkDeclared(t, d, ms.At(k))
				}
			}
		}
	}
}
