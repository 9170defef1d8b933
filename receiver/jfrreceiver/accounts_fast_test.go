package jfrreceiver

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/otelcol-ai/otelcol-ai/extension/runtimestateextension/runtimestatetest"
	"github.com/otelcol-ai/otelcol-ai/pkg/jfr/jfrtest"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/leaktest"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/metadatatest"
)

// leakRecordCounts returns how many jvm.memory.leak_suspected records pid
// got, per source and tier ("direct_buffers/fast").
func leakRecordCounts(sink *consumertest.LogsSink, pid int) map[string]int {
	out := map[string]int{}
	eachLeakRecord(sink, pid, func(_ pcommon.Resource, lr plog.LogRecord) {
		src, _ := lr.Attributes().Get("jvm.memory.leak.source")
		tier, _ := lr.Attributes().Get("jvm.memory.leak.tier")
		out[src.Str()+"/"+tier.Str()]++
	})
	return out
}

// TestAccountFastLeaksNamedStartupNot: the test on the receiver's
// default configuration (attach on and a runtimestate extension, as the
// embedded default has them; nothing else set). Four JDK 17 JVMs, started
// without any JFR flag: the leak workload (a JNI library the test
// compiles) leaking 800 KiB of malloc'd, touched memory (and 20 JNI global
// references) every 100 ms, the same leaking 800 KiB of direct buffers,
// the same doing both's work and freeing it, and a start-up burst
// (StartupBurst: 64 MiB malloc'd once, 200 threads, 3000 generated
// classes loaded and run over 20 s on a 384 MiB heap committed up front,
// then the healthy work). Within 100 s of its leak's start each leak is
// named, by the fast tier, with its source, once; the healthy and burst
// JVMs get no record in their first 100 s, while the fast tier assesses
// their native and direct accounts (jvm.memory.leak.suspected 0, at least
// three times each). The time from each leak's start to its record is
// logged. About 110 s.
func TestAccountFastLeaksNamedStartupNot(t *testing.T) {
	jdk := jfrtest.Find(t, 17)
	prog := leaktest.Build(t, jdk)
	burstProg := buildBurst(t, jdk, prog, 3000)
	const (
		bytesPerTick = 800 << 10 // 8 MiB/s, twice the fast tier's rate
		refsPerTick  = 20
		leakTicks    = 1200 // 2 minutes, at most 960 MiB a JVM
	)
	opts := []string{"-Xmx256m", "-XX:MaxDirectMemorySize=2g"}
	native := leaktest.Start(t, jdk.Java(), prog, leaktest.Native, bytesPerTick, refsPerTick, leakTicks, opts)
	direct := leaktest.Start(t, jdk.Java(), prog, leaktest.Direct, bytesPerTick, refsPerTick, leakTicks, opts)
	healthy := leaktest.Start(t, jdk.Java(), prog, leaktest.Healthy, bytesPerTick, refsPerTick, 0, opts)
	burst := startBurst(t, jdk.Java(), burstProg, 64<<20, 200, 3000, 20*time.Second, []string{"-Xms384m", "-Xmx512m"})
	ours := map[int]bool{native.PID: true, direct.PID: true, healthy.PID: true, burst.PID: true}
	attachOnly = func(pid int) bool { return ours[pid] }
	defer func() { attachOnly = nil }()

	host, _ := runtimestatetest.Start(t)
	id := runtimestatetest.ID
	cfg := createDefaultConfig().(*Config)
	cfg.Repositories.Attach.Enabled = true // as distribution/config.yaml
	cfg.Accounts.RuntimeState = &id        // likewise
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	tel := componenttest.NewTelemetry()
	defer tel.Shutdown(context.Background())
	set := metadatatest.NewSettings(tel)
	core, observed := observer.New(zap.InfoLevel)
	set.Logger = zap.New(core)
	logs, metrics, shutdown := startBoth(t, cfg, set, host)

	leaks := map[*leaktest.JVM]string{native: "native_unaccounted", direct: "direct_buffers"}
	named := map[*leaktest.JVM]time.Duration{}
	quiet := map[string]int{"healthy": healthy.PID, "burst": burst.PID}
	// assessed is how often the fast tier assessed a quiet JVM's account
	// (the slow tier assesses none before 7.5 minutes).
	assessed := func(pid int, src string) (points, ones int) {
		for _, p := range accountPoints(metrics.AllMetrics(), pid, "jvm.memory.leak.suspected", "jvm.memory.leak.source", src) {
			points++
			if p.value == 1 {
				ones++
			}
		}
		return points, ones
	}
	start := time.Now()
	for {
		waiting := false
		for j, src := range leaks {
			leakStart, ok := j.Started()
			if !ok {
				if time.Since(start) > time.Minute {
					t.Fatalf("pid %d did not start leaking in a minute:\n%s", j.PID, j.Output())
				}
				waiting = true
				continue
			}
			if _, ok := named[j]; !ok && leakRecords(logs, j.PID)[src] != nil {
				named[j] = time.Since(leakStart)
			}
			if _, ok := named[j]; !ok && time.Since(leakStart) < 100*time.Second {
				waiting = true
			}
		}
		for _, pid := range quiet {
			for _, src := range []string{"native_unaccounted", "direct_buffers"} {
				if n, _ := assessed(pid, src); n < 3 {
					waiting = true
				}
			}
		}
		// The quiet JVMs' first 100 s, their start-ups included.
		if _, done := burst.phase("classes"); !done || time.Since(start) < 100*time.Second {
			waiting = true
		}
		if !waiting {
			break
		}
		if time.Since(start) > 3*time.Minute {
			t.Fatalf("the quiet JVMs' accounts were not assessed three times each in 3 minutes; the burst JVM wrote:\n%s", burst.output())
		}
		time.Sleep(time.Second)
	}
	shutdown()

	// series is pid's account (s from origin:MiB), as the metrics carried it.
	series := func(pid int, name string, origin time.Time) string {
		var b strings.Builder
		key, value := "", ""
		if name == "jvm.buffer.memory.used" {
			key, value = "jvm.buffer.pool.name", "direct"
		}
		for _, p := range accountPoints(metrics.AllMetrics(), pid, name, key, value) {
			fmt.Fprintf(&b, " %.0f:%.1f", p.at.Sub(origin).Seconds(), float64(p.value)/(1<<20))
		}
		return b.String()
	}
	accountOf := map[string]string{"native_unaccounted": "jvm.native_memory.unaccounted", "direct_buffers": "jvm.buffer.memory.used"}
	for j, src := range leaks {
		d, ok := named[j]
		leakStart, _ := j.Started()
		if !ok {
			t.Errorf("pid %d: no %s record within 100 s of its leak's start; records %v\nleak warnings %v\nits %s since the leak started (s:MiB):%s", j.PID, src,
				leakRecordCounts(logs, j.PID), observed.FilterMessage("JVM memory leak suspected").All(), accountOf[src], series(j.PID, accountOf[src], leakStart))
			continue
		}
		t.Logf("pid %d: %s named %.0f s after its leak started; its %s (s:MiB):%s", j.PID, src, d.Seconds(), accountOf[src], series(j.PID, accountOf[src], leakStart))
		a := leakRecords(logs, j.PID)[src]
		if a["jvm.memory.leak.tier"] != "fast" {
			t.Errorf("pid %d %s: tier %v, want fast", j.PID, src, a["jvm.memory.leak.tier"])
		}
		if w, _ := a["jvm.memory.leak.window"].(float64); w < 30 || w > 60 {
			t.Errorf("pid %d %s: window %v s, want 30-60", j.PID, src, a["jvm.memory.leak.window"])
		}
		if r, _ := a["jvm.memory.leak.growth_rate"].(float64); r < 4<<20 {
			t.Errorf("pid %d %s: growth rate %v, want at least the fast tier's 4 MiB/s", j.PID, src, a["jvm.memory.leak.growth_rate"])
		}
		if a["resource:process.runtime.name"] != "java" || a["resource:process.vpid"] == nil {
			t.Errorf("pid %d %s: resource %v", j.PID, src, a)
		}
		for key, n := range leakRecordCounts(logs, j.PID) {
			if n != 1 || !strings.HasPrefix(key, src+"/") {
				t.Errorf("pid %d: %d %s records, want one, of %s", j.PID, n, key, src)
			}
		}
	}
	for name, pid := range quiet {
		if recs := leakRecordCounts(logs, pid); len(recs) > 0 {
			t.Errorf("the %s JVM (pid %d) got leak records: %v\n%v", name, pid, recs, leakRecords(logs, pid))
		}
		t.Logf("the %s JVM's unaccounted native memory (s:MiB):%s", name, series(pid, "jvm.native_memory.unaccounted", start))
		for _, src := range []string{"native_unaccounted", "direct_buffers"} {
			points, ones := assessed(pid, src)
			if ones > 0 {
				t.Errorf("the %s JVM's %s suspected at %d of %d assessments", name, src, ones, points)
			} else {
				t.Logf("the %s JVM (pid %d) %s: %d assessments, none suspected", name, pid, src, points)
			}
		}
	}
	if d, ok := burst.phase("classes"); ok {
		t.Logf("the burst JVM loaded its classes in %.1f s", d.Seconds())
	}
}

// TestAccountFastTierConfig: the fast tier's keys are validated with the
// receiver's config, each error naming its key, every one at once; a
// disabled fast tier (or leak detection) is not checked.
func TestAccountFastTierConfig(t *testing.T) {
	tests := []struct {
		name string
		set  func(*AccountLeakConfig)
		want []string
	}{
		{"defaults", func(*AccountLeakConfig) {}, nil},
		{"window", func(l *AccountLeakConfig) { l.Fast.Window = 0 }, []string{"accounts::leak_detection::fast: window must be positive"}},
		{"min_samples", func(l *AccountLeakConfig) { l.Fast.MinSamples = 2 }, []string{"accounts::leak_detection::fast: min_samples must be at least 3"}},
		{"rate", func(l *AccountLeakConfig) { l.Fast.Bytes.MinGrowthRate = 0 }, []string{"accounts::leak_detection::fast: min_growth_rate must be positive"}},
		{"growth", func(l *AccountLeakConfig) { l.Fast.Bytes.MinGrowth = -1 }, []string{"accounts::leak_detection::fast: min_growth must be positive"}},
		{"with the slow tier's errors", func(l *AccountLeakConfig) { l.Fast.Bytes.MinGrowth, l.Bytes.MinGrowthRate = 0, 0 },
			[]string{"accounts::leak_detection::fast: min_growth must be positive", "accounts::leak_detection (bytes): min_growth_rate must be positive"}},
		{"a fast window as long as the slow one: allowed", func(l *AccountLeakConfig) { l.Fast.Window = l.Window }, nil},
		{"fast tier off: not checked", func(l *AccountLeakConfig) { l.Fast.Enabled, l.Fast.Window = false, 0 }, nil},
		{"leak detection off: not checked", func(l *AccountLeakConfig) { l.Enabled, l.Fast.Window = false, 0 }, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := createDefaultConfig().(*Config)
			tt.set(&cfg.Accounts.LeakDetection)
			err := cfg.Validate()
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate: no error, want %q", tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Validate: %v; want it to say %q", err, w)
				}
			}
		})
	}
}
