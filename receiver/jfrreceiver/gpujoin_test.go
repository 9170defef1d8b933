package jfrreceiver

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/receiver/receivertest"

	"github.com/otelcol-ai/otelcol-ai/extension/runtimestateextension/runtimestatetest"
	"github.com/otelcol-ai/otelcol-ai/pkg/jfr/jfrtest"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/leaktest"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/metadata"
	"github.com/otelcol-ai/otelcol-ai/receiver/nvmlreceiver"
	"github.com/otelcol-ai/otelcol-ai/receiver/nvmlreceiver/nvmlstubtest"
)

// TestGPULeakJoinedWithJNIReferences: the incident #29 was filed for, with
// real parts. Two real JDK 17 JVMs run the leak workload (a gcc-compiled
// JNI library): one pins JNI global references without ever deleting them,
// the other does the same work and frees it. The stub libnvidia-ml (the
// nvml receiver's real dlopen and cgo path) reports both on GPU 0 with
// growing memory: the first's grows with its JNI references (64 KiB a
// reference, from the count the workload reports), the second's grows
// alone at the same rate. The jfr receiver shares the JVMs' accounts
// through a runtimestate extension; the nvml receiver's leak records must
// join the first to jni_global_refs and say "none" for the second.
func TestGPULeakJoinedWithJNIReferences(t *testing.T) {
	jdk := jfrtest.Find(t, 17)
	stub := nvmlstubtest.Build(t)
	prog := leaktest.Build(t, jdk)
	opts := []string{"-Xms128m", "-Xmx128m", "-XX:+AlwaysPreTouch"}
	const bytesPerTick, refsPerTick = 16 << 10, 20
	leaking := leaktest.Start(t, jdk.Java(), prog, leaktest.Native, bytesPerTick, refsPerTick, 0, opts)
	healthy := leaktest.Start(t, jdk.Java(), prog, leaktest.Healthy, bytesPerTick, refsPerTick, 0, opts)
	ours := map[int]bool{leaking.PID: true, healthy.PID: true}
	attachOnly = func(pid int) bool { return ours[pid] }
	defer func() { attachOnly = nil }()

	// GPU memory, as the stub reports it, rewritten every 500 ms (by
	// rename: the stub never reads half a file).
	procs := filepath.Join(t.TempDir(), "processes")
	t.Setenv("NVML_STUB_PROCESSES", procs)
	// GPU memory grows from growFrom on (its leak, as JVM account leaks,
	// judged over 40 s windows; the JVMs' own warm-up is over by then).
	begin := time.Now()
	const perRef, base, growFrom = 64 << 10, 1 << 30, 25 * time.Second
	refsAt := int64(-1)
	write := func() {
		refs, grown := int64(0), int64(0)
		if since := time.Since(begin); since > growFrom {
			if refsAt < 0 {
				refsAt = leaking.Leaked().Refs
			}
			refs = leaking.Leaked().Refs - refsAt
			grown = int64((since - growFrom).Seconds() * refsPerTick * 10 * perRef) // the same rate, alone
		}
		tmp := procs + ".tmp"
		data := fmt.Sprintf("%d %d\n%d %d\n", leaking.PID, base+refs*perRef, healthy.PID, base+grown)
		if err := os.WriteFile(tmp, []byte(data), 0o644); err != nil {
			t.Error(err)
			return
		}
		if err := os.Rename(tmp, procs); err != nil {
			t.Error(err)
		}
	}
	write()
	stop := make(chan struct{})
	feeding := make(chan struct{})
	go func() {
		defer close(feeding)
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				write()
			}
		}
	}()
	defer func() { close(stop); <-feeding }()

	ctx := context.Background()
	host, _ := runtimestatetest.Start(t)
	extID := runtimestatetest.ID

	const window = 40 * time.Second
	cfg := createDefaultConfig().(*Config)
	cfg.Repositories.Attach.Enabled = true // as distribution/config.yaml
	cfg.PollInterval = 200 * time.Millisecond
	cfg.Repositories.DiscoveryInterval = 200 * time.Millisecond
	cfg.CollectionInterval = 2 * time.Second
	cfg.Accounts.JNIReferences.Interval = 2 * time.Second
	cfg.Accounts.LeakDetection.Window = window
	cfg.Accounts.RuntimeState = &extID
	startBoth(t, cfg, receivertest.NewNopSettings(metadata.Type), host)

	nf := nvmlreceiver.NewFactory()
	ncfg := nf.CreateDefaultConfig().(*nvmlreceiver.Config)
	ncfg.LibraryPath = stub
	ncfg.CollectionInterval = 2 * time.Second
	ncfg.PodResources.Endpoint = ""
	ncfg.LeakDetection.Window = window
	ncfg.LeakDetection.MinSamples = 5
	ncfg.LeakDetection.RuntimeState = &extID
	if err := ncfg.Validate(); err != nil {
		t.Fatal(err)
	}
	nset := receivertest.NewNopSettings(nf.Type())
	records := new(consumertest.LogsSink)
	nl, err := nf.CreateLogs(ctx, nset, ncfg, records)
	if err != nil {
		t.Fatal(err)
	}
	nm, err := nf.CreateMetrics(ctx, nset, ncfg, consumertest.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	comps := []component.Component{nl, nm}
	for _, c := range comps {
		if err := c.Start(ctx, host); err != nil {
			t.Fatal(err)
		}
	}
	defer func() {
		for _, c := range slices.Backward(comps) {
			_ = c.Shutdown(ctx)
		}
	}()

	// The first leak record of each JVM that its accounts were set
	// against (one at the suspicion's onset may come before the jfr
	// receiver has assessed them: no_accounts; the next, a window later,
	// has them).
	type verdict struct {
		join     string
		accounts []any
		corr     map[string]any
	}
	verdicts := func() map[int64]verdict {
		out := map[int64]verdict{}
		for _, ld := range records.AllLogs() {
			for _, rl := range ld.ResourceLogs().All() {
				pid, _ := rl.Resource().Attributes().Get("process.pid")
				for _, lr := range rl.ScopeLogs().At(0).LogRecords().All() {
					a := lr.Attributes().AsRaw()
					if _, seen := out[pid.Int()]; seen || lr.EventName() != "gpu.memory.leak_suspected" || a["gpu.memory.leak.jvm_join"] == "no_accounts" {
						continue
					}
					acc, _ := a["gpu.memory.leak.jvm_accounts"].([]any)
					corr, _ := a["gpu.memory.leak.jvm_correlations"].(map[string]any)
					out[pid.Int()] = verdict{fmt.Sprint(a["gpu.memory.leak.jvm_join"]), acc, corr}
				}
			}
		}
		return out
	}
	var got map[int64]verdict
	for deadline := time.Now().Add(180 * time.Second); ; time.Sleep(time.Second) {
		got = verdicts()
		if len(got) == 2 || time.Now().After(deadline) {
			break
		}
	}
	l, h := got[int64(leaking.PID)], got[int64(healthy.PID)]
	t.Logf("after %s: leaking JVM %+v; healthy JVM %+v", time.Since(begin).Round(time.Second), l, h)
	if l.join != "joined" || !slices.Contains(l.accounts, any("jni_global_refs")) {
		t.Errorf("the JVM whose GPU memory grows with its JNI references: %+v, want joined with jni_global_refs", l)
	}
	if h.join != "none" || len(h.accounts) != 0 {
		t.Errorf("the JVM whose GPU memory grows alone: %+v, want none", h)
	}
}
