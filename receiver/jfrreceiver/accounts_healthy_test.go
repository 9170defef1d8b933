package jfrreceiver

import (
	"flag"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/receiver/receivertest"

	"github.com/otelcol-ai/otelcol-ai/pkg/jfr/jfrtest"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/leaktest"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/metadata"
)

var healthyFor = flag.Duration("accounts.healthy", 0, "how long TestAccountsHealthy runs (0 skips it)")

// TestAccountsHealthy counts false leak records: for -accounts.healthy (at
// least the 15 min default window to mean anything for the slow tier; the
// fast tier assesses from 30 s of readings on), JDK 17 JVMs that do the
// leak workload's work and free it (one of them with 200 more idle
// threads, one after a start-up burst: StartupBurst's 64 MiB malloc'd
// once, 200 threads and 3000 classes over 20 s on a 384 MiB heap), read
// by the receiver on its default accounts configuration (both tiers; attach
// on, as the embedded default), must get no jvm.memory.leak_suspected
// record and no jvm.memory.leak.suspected of 1. It logs how many
// assessments were made.
//
//	go test -run TestAccountsHealthy -timeout 40m ./receiver/jfrreceiver/ -accounts.healthy=30m
func TestAccountsHealthy(t *testing.T) {
	if *healthyFor <= 0 {
		t.Skip("-accounts.healthy not set")
	}
	jdk := jfrtest.Find(t, 17)
	prog := leaktest.Build(t, jdk)
	opts := []string{"-Xmx128m", "-XX:MaxDirectMemorySize=512m"}
	pids := []int{
		leaktest.Start(t, jdk.Java(), prog, leaktest.Healthy, 100<<10, 20, 0, opts).PID,
		leaktest.Start(t, jdk.Java(), prog, leaktest.Healthy, 10<<10, 200, 0, opts).PID,
		leaktest.Start(t, jdk.Java(), prog, leaktest.Threads, 0, 0, 0, opts, "200").PID,
		startBurst(t, jdk.Java(), buildBurst(t, jdk, prog, 3000), 64<<20, 200, 3000, 20*time.Second, []string{"-Xms384m", "-Xmx512m"}).PID,
	}
	ours := map[int]bool{}
	for _, pid := range pids {
		ours[pid] = true
	}
	attachOnly = func(pid int) bool { return ours[pid] }
	defer func() { attachOnly = nil }()
	cfg := createDefaultConfig().(*Config)
	cfg.Repositories.Attach.Enabled = true
	set := receivertest.NewNopSettings(metadata.Type)
	logs, metrics, shutdown := startBoth(t, cfg, set, componenttest.NewNopHost())
	time.Sleep(*healthyFor)
	shutdown()
	for _, pid := range pids {
		if recs := leakRecords(logs, pid); len(recs) > 0 {
			t.Errorf("pid %d: leak records %v", pid, recs)
		}
		assessed, suspected := 0, 0
		for _, src := range []string{"heap", "direct_buffers", "jni_global_refs", "native_unaccounted", "metaspace"} {
			for _, p := range accountPoints(metrics.AllMetrics(), pid, "jvm.memory.leak.suspected", "jvm.memory.leak.source", src) {
				assessed++
				if p.value == 1 {
					suspected++
					t.Errorf("pid %d: %s suspected at %s", pid, src, p.at)
				}
			}
		}
		t.Logf("pid %d: %d assessments over %s, %d suspected", pid, assessed, *healthyFor, suspected)
	}
}
