package nvmlreceiver

import (
	"context"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh100"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/receiver/receivertest"

	"github.com/otelcol-ai/otelcol-ai/extension/runtimestateextension/runtimestatetest"
	"github.com/otelcol-ai/otelcol-ai/internal/runtimestate"
	"github.com/otelcol-ai/otelcol-ai/receiver/nvmlreceiver/internal/metadata"
)

// TestLeakJoinsJVMAccounts: a GPU leak record names the process's JVM
// accounts that grew with its GPU memory over the window (shared through
// a real runtimestate extension, found by its ID): a JVM whose JNI global
// references grow with its GPU memory, and that the jfr receiver suspects,
// is joined to them (its flat heap, sawtooth direct buffers and a metaspace
// not yet assessed are not); one whose accounts are not suspected while its
// GPU memory grows is "none", even where one correlates; a process without
// accounts, and one whose pid has accounts under another start time (a
// reused pid), are "no_accounts".
func TestLeakJoinsJVMAccounts(t *testing.T) {
	state, store := runtimestatetest.Start(t)
	extID := runtimestatetest.ID
	host := &statusHost{exts: state.Extensions}

	srv := dgxh100.New()
	node := newFakeNode(t, srv)
	tr := newTestReceiverOn(t, node, host, func(c *Config) {
		c.LeakDetection.Window = 5 * time.Minute
		c.LeakDetection.MinSamples = 5
		c.LeakDetection.RuntimeState = &extID
	})
	clock := &fakeClock{t: time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC), step: 10 * time.Second}
	tr.now = clock.now
	const (
		joined, flat, python, reused = 4242, 4343, 4444, 4545
	)
	for _, pid := range []int{joined, flat, reused} {
		writeProc(t, tr.cfg.Processes.ProcRoot, fakeProc{pid: pid, exe: "/usr/bin/java"})
	}
	writeProc(t, tr.cfg.Processes.ProcRoot, fakeProc{pid: python, exe: "/usr/bin/python3"})
	proc := func(pid int) runtimestate.Process {
		return runtimestate.Process{PID: pid, StartTicks: uint64(1000 + pid)}
	} // fakeProc's stat

	for i := range 40 {
		// The accounts are read between scrapes, as the jfr receiver's
		// collections fall between the nvml receiver's.
		at := clock.t.Add(5 * time.Second)
		// The jfr receiver's own leak verdicts: the growing references
		// suspected, the rest assessed and not; the flat JVM's unaccounted
		// memory rises a little (an allocator warming up) and correlates,
		// and is not suspected.
		store.Record(proc(joined), "jni_global_refs", at, int64(1000+200*i))
		store.Assess(proc(joined), "jni_global_refs", true)
		store.Record(proc(joined), "heap", at, 64<<20)
		store.Assess(proc(joined), "heap", false)
		store.Record(proc(joined), "direct_buffers", at, int64(1+i%4)<<20)
		store.Assess(proc(joined), "direct_buffers", false)
		store.Record(proc(joined), "metaspace", at, int64(20<<20+i))
		store.Record(proc(flat), "jni_global_refs", at, 1000)
		store.Assess(proc(flat), "jni_global_refs", false)
		store.Record(proc(flat), "native_unaccounted", at, int64(200<<20+i<<10))
		store.Assess(proc(flat), "native_unaccounted", false)
		store.Record(runtimestate.Process{PID: reused, StartTicks: 1}, "jni_global_refs", at, int64(1000+200*i))
		store.Assess(runtimestate.Process{PID: reused, StartTicks: 1}, "jni_global_refs", true)
		for dev, pid := range []int{joined, flat, python, reused} {
			node.setProcess(dev, uint32(pid), uint64(1024+8*i)*mib)
		}
		tr.scrapeOnce(t)
	}

	first := map[int64]plog.LogRecord{}
	for _, ld := range tr.logs.AllLogs() {
		for _, rl := range ld.ResourceLogs().All() {
			pid, _ := rl.Resource().Attributes().Get("process.pid")
			for _, lr := range rl.ScopeLogs().At(0).LogRecords().All() {
				if _, ok := first[pid.Int()]; !ok {
					first[pid.Int()] = lr
				}
			}
		}
	}
	for pid, want := range map[int64]struct {
		join     string
		accounts []any
		corr     []string
	}{
		joined: {"joined", []any{"jni_global_refs"}, []string{"direct_buffers", "jni_global_refs"}},
		flat:   {"none", []any{}, []string{"native_unaccounted"}},
		python: {"no_accounts", []any{}, nil},
		reused: {"no_accounts", []any{}, nil},
	} {
		lr, ok := first[pid]
		if !ok {
			t.Errorf("pid %d: no leak record", pid)
			continue
		}
		attrs := lr.Attributes().AsRaw()
		if got := attrs["gpu.memory.leak.jvm_join"]; got != want.join {
			t.Errorf("pid %d: jvm_join %v, want %s", pid, got, want.join)
		}
		if got := attrs["gpu.memory.leak.jvm_accounts"]; !reflect.DeepEqual(got, want.accounts) {
			t.Errorf("pid %d: jvm_accounts %v, want %v", pid, got, want.accounts)
		}
		corr, _ := attrs["gpu.memory.leak.jvm_correlations"].(map[string]any)
		var names []string
		for name := range corr {
			names = append(names, name)
		}
		slices.Sort(names)
		if strings.Join(names, ",") != strings.Join(want.corr, ",") {
			t.Errorf("pid %d: correlations %v, want accounts %v", pid, corr, want.corr)
		}
		if pid == joined {
			if r, _ := corr["jni_global_refs"].(float64); r < 0.99 {
				t.Errorf("JNI references' correlation %v, want about 1", corr["jni_global_refs"])
			}
		}
	}
}

// TestRuntimeStateMustBeFound: a runtime_state that names no started
// runtimestate extension fails the receiver's start with what to fix.
func TestRuntimeStateMustBeFound(t *testing.T) {
	node := newFakeNode(t, dgxh100.New())
	cfg := createDefaultConfig().(*Config)
	cfg.LibraryPath = "mock://" + t.Name()
	id := component.MustNewID("runtimestate")
	cfg.LeakDetection.RuntimeState = &id
	r, err := newNVMLReceiver(receivertest.NewNopSettings(metadata.Type), cfg, node.open)
	if err != nil {
		t.Fatal(err)
	}
	err = r.start(context.Background(), &statusHost{})
	if err == nil || !strings.Contains(err.Error(), "leak_detection::runtime_state: runtimestate: extension not found: runtimestate is not among the service's extensions") {
		t.Errorf("start: %v", err)
	}
}
