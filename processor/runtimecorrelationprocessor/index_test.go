package runtimecorrelationprocessor

import (
	"reflect"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"

	"github.com/otelcol-ai/otelcol-ai/internal/window"
	"github.com/otelcol-ai/otelcol-ai/processor/runtimecorrelationprocessor/internal/metadatatest"
)

func reasonPoint(reason string, n int64) metricdata.DataPoint[int64] {
	return metricdata.DataPoint[int64]{Value: n, Attributes: attribute.NewSet(attribute.String("reason", reason))}
}

func TestScopeMatching(t *testing.T) {
	jvm := win(safepoint, 0, 1*ms, 0)
	py := win(gilWait, 500*us, 1*ms, 3)
	tests := []struct {
		name        string
		scope       MatchScope
		jvmRes      resource
		pyRes       resource
		wantOverlap bool
		wantRes     map[string]any
		unscoped    int64
	}{
		{
			name: "process: same pid", scope: ScopeProcess,
			jvmRes: proc, pyRes: proc, wantOverlap: true,
			wantRes: map[string]any{"host.name": "node-1", "process.pid": int64(4242)},
		},
		{name: "process: another pid", scope: ScopeProcess, jvmRes: proc, pyRes: resource{host: "node-1", pid: 17}},
		{name: "process: same pid on another host", scope: ScopeProcess, jvmRes: proc, pyRes: resource{host: "node-2", pid: 4242}},
		{name: "process: no pid is unscoped", scope: ScopeProcess, jvmRes: proc, pyRes: resource{host: "node-1"}, unscoped: 1},
		{
			name: "pod: two processes of one pod", scope: ScopePod,
			jvmRes: resource{host: "node-1", pid: 1, pod: "uid-a"}, pyRes: resource{host: "node-1", pid: 2, pod: "uid-a"},
			wantOverlap: true, wantRes: map[string]any{"k8s.pod.uid": "uid-a"},
		},
		{
			name: "pod: two pods", scope: ScopePod,
			jvmRes: resource{pid: 1, pod: "uid-a"}, pyRes: resource{pid: 2, pod: "uid-b"},
		},
		{name: "pod: no pod uid is unscoped", scope: ScopePod, jvmRes: resource{pod: "uid-a"}, pyRes: resource{pid: 2}, unscoped: 1},
		{
			name: "host: two processes side by side", scope: ScopeHost,
			jvmRes: resource{host: "node-1", pid: 1}, pyRes: resource{host: "node-1", pid: 2},
			wantOverlap: true, wantRes: map[string]any{"host.name": "node-1"},
		},
		{name: "host: two hosts", scope: ScopeHost, jvmRes: resource{host: "node-1", pid: 1}, pyRes: resource{host: "node-2", pid: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, func(cfg *Config) { cfg.MatchScope = tt.scope })
			h.sendWindows(tt.jvmRes, jvm)
			got := overlapRecords(h.sendWindows(tt.pyRes, py))
			if !tt.wantOverlap {
				if len(got) != 0 {
					t.Errorf("overlapRecords: got %v, want empty", got)
				}
			} else {
				if got2 := len(got); got2 != 1 {
					t.Fatalf("len(overlapRecords): got %d, want %d", got2, 1)
				}
				if got2 := got[0]["resource"]; !reflect.DeepEqual(got2, tt.wantRes) {
					t.Errorf("got[0][\"resource\"]: got %v, want %v", got2, tt.wantRes)
				}
				if got2 := got[0]["runtime.overlap.scope"]; !reflect.DeepEqual(got2, string(tt.scope)) {
					t.Errorf("got[0][\"runtime.overlap.scope\"]: got %v, want %q", got2, string(tt.scope))
				}
				if got2 := got[0]["runtime.overlap.duration"]; !reflect.DeepEqual(got2, 500*us) {
					t.Errorf("got[0][\"runtime.overlap.duration\"]: got %v, want %v", got2, 500*us)
				}
				// Each window keeps its own process.
				if got2 := got[0]["runtime.overlap.first.process.pid"]; !reflect.DeepEqual(got2, tt.jvmRes.pid) {
					t.Errorf("got[0][\"runtime.overlap.first.process.pid\"]: got %v, want %v", got2, tt.jvmRes.pid)
				}
				if got2 := got[0]["runtime.overlap.second.process.pid"]; !reflect.DeepEqual(got2, tt.pyRes.pid) {
					t.Errorf("got[0][\"runtime.overlap.second.process.pid\"]: got %v, want %v", got2, tt.pyRes.pid)
				}
			}
			if tt.unscoped > 0 {
				metadatatest.AssertEqualProcessorRuntimecorrelationWindowsDropped(t, h.tel,
					[]metricdata.DataPoint[int64]{reasonPoint(reasonUnscoped, tt.unscoped)}, metricdatatest.IgnoreTimestamp())
			}
		})
	}
}

func TestWindowsAndOtherRecordsPassUnchanged(t *testing.T) {
	h := newHarness(t, nil)
	ld := windowLogs(t, proc, win(safepoint, 0, 1*ms, 0), win(gilWait, 100*us, 1*ms, 5))
	lrs := ld.ResourceLogs().At(0).ScopeLogs().At(0).LogRecords()
	plain := lrs.AppendEmpty()
	plain.Body().SetStr("an ordinary log line")
	future := lrs.AppendEmpty() // a kind from a newer producer
	future.SetEventName("jvm.deoptimization")
	future.SetTimestamp(1)
	future.Attributes().PutInt(window.AttrDuration, 5)
	bad := lrs.AppendEmpty()
	bad.SetEventName(string(gilWait))
	bad.SetTimestamp(1)
	bad.Attributes().PutStr(window.AttrDuration, "5ms")
	want := plog.NewLogs()
	ld.CopyTo(want)

	if err := h.logs.ConsumeLogs(measured(t.Context()), ld); err != nil {
		t.Fatalf("h.logs.ConsumeLogs: %v", err)
	}
	out := h.logSink.AllLogs()[0]
	if got := out.ResourceLogs().Len(); got != 2 {
		t.Fatalf("the input resource and one of overlaps: got %v, want %v", got, 2)
	}
	gotIn := plog.NewLogs()
	out.ResourceLogs().At(0).CopyTo(gotIn.ResourceLogs().AppendEmpty())
	if !reflect.DeepEqual(gotIn, want) {
		t.Errorf("records pass in order, unchanged: got %v, want %v", gotIn, want)
	}
	if got := len(overlapRecords(out)); got != 1 {
		t.Errorf("len(overlapRecords(out)): got %d, want %d", got, 1)
	}
	metadatatest.AssertEqualProcessorRuntimecorrelationWindowsIndexed(t, h.tel,
		[]metricdata.DataPoint[int64]{{Value: 2}}, metricdatatest.IgnoreTimestamp())
	metadatatest.AssertEqualProcessorRuntimecorrelationWindowsDropped(t, h.tel,
		[]metricdata.DataPoint[int64]{reasonPoint(reasonMalformed, 1)}, metricdatatest.IgnoreTimestamp())
}

func TestDuplicateAndOutOfOrderWindows(t *testing.T) {
	h := newHarness(t, nil)
	late := win(safepoint, 0, 1*ms, 0)
	early := win(gilWait, 500*us, 1*ms, 5)
	later := win(gilWait, 3*ms, 1*ms, 5)
	if got := overlapRecords(h.sendWindows(proc, later)); len(got) != 0 {
		t.Errorf("overlapRecords(h.sendWindows(proc, later)): got %v, want empty", got)
	}
	if got := len(overlapRecords(h.sendWindows(proc, early))); got != 0 {
		t.Errorf("a GIL wait alone: got %d, want %d", got, 0)
	}
	// The safepoint arrives after windows that began later than it.
	if got := len(overlapRecords(h.sendWindows(proc, late))); got != 1 {
		t.Errorf("len(overlapRecords(h.sendWindows(proc, late))): got %d, want %d", got, 1)
	}
	// A resent batch (an exporter retry) yields nothing new.
	if got := overlapRecords(h.sendWindows(proc, late, early)); len(got) != 0 {
		t.Errorf("overlapRecords(h.sendWindows(proc, late, early)): got %v, want empty", got)
	}
	metadatatest.AssertEqualProcessorRuntimecorrelationWindowsDropped(t, h.tel,
		[]metricdata.DataPoint[int64]{reasonPoint(reasonDuplicate, 2)}, metricdatatest.IgnoreTimestamp())
	metadatatest.AssertEqualProcessorRuntimecorrelationOverlaps(t, h.tel,
		[]metricdata.DataPoint[int64]{{Value: 1}}, metricdatatest.IgnoreTimestamp())
	if got := h.c.windows.Len(); got != 3 {
		t.Errorf("h.c.windows.Len(): got %v, want %v", got, 3)
	}
}

func TestEvictionUnderTheCap(t *testing.T) {
	h := newHarness(t, func(cfg *Config) { cfg.Windows.MaxWindows = 3 })
	var burst []window.Window
	for i := range int64(10) {
		burst = append(burst, win(safepoint, i*ms, 500*us, 0))
	}
	h.sendWindows(proc, burst...)
	if got := h.c.windows.Len(); got != 3 {
		t.Errorf("h.c.windows.Len(): got %v, want %v", got, 3)
	}
	metadatatest.AssertEqualProcessorRuntimecorrelationWindowsEvicted(t, h.tel,
		[]metricdata.DataPoint[int64]{reasonPoint(reasonCap, 7)}, metricdatatest.IgnoreTimestamp())
	metadatatest.AssertEqualProcessorRuntimecorrelationWindows(t, h.tel,
		[]metricdata.DataPoint[int64]{{Value: 3}}, metricdatatest.IgnoreTimestamp())
	// Only the newest safepoints remain to be overlapped. The GIL wait,
	// older than all of them, still meets them on arrival, then is the
	// one evicted.
	got := overlapRecords(h.sendWindows(proc, win(gilWait, 0, 10*ms, 2)))
	if got2 := len(got); got2 != 3 {
		t.Fatalf("len(overlapRecords): got %d, want %d", got2, 3)
	}
	for i, g := range got {
		if got := g["runtime.overlap.first.start"]; !reflect.DeepEqual(got, t0+int64(7+i)*ms) {
			t.Errorf("g[\"runtime.overlap.first.start\"]: got %v, want %v", got, t0+int64(7+i)*ms)
		}
	}
	if got := h.c.windows.Len(); got != 3 {
		t.Errorf("h.c.windows.Len(): got %v, want %v", got, 3)
	}
	metadatatest.AssertEqualProcessorRuntimecorrelationWindowsEvicted(t, h.tel,
		[]metricdata.DataPoint[int64]{reasonPoint(reasonCap, 8)}, metricdatatest.IgnoreTimestamp())
}

func TestRetentionAndClockSkew(t *testing.T) {
	h := newHarness(t, func(cfg *Config) {
		cfg.Windows.Retention = 10 * time.Second
		cfg.Windows.MaxClockSkew = time.Second
	})
	// The clock reads t0 + 1 s.
	h.sendWindows(proc, win(safepoint, 0, 1*ms, 0))
	// Within the skew: indexed, and the first window is still kept.
	h.sendWindows(proc, win(safepoint, 1900*ms, 1*ms, 0))
	// Beyond it: refused, so it cannot move the horizon and evict the rest.
	h.sendWindows(proc, win(safepoint, 3600*1000*ms, 1*ms, 0))
	if got := h.c.windows.Len(); got != 2 {
		t.Errorf("h.c.windows.Len(): got %v, want %v", got, 2)
	}

	h.clock.Advance(time.Minute)
	h.sendWindows(proc, win(safepoint, 12*1000*ms, 1*ms, 0)) // horizon t0+2 s
	if got := h.c.windows.Len(); got != 1 {
		t.Errorf("h.c.windows.Len(): got %v, want %v", got, 1)
	}
	h.sendWindows(proc, win(gilWait, 1500*ms, 1*ms, 0)) // before the horizon
	metadatatest.AssertEqualProcessorRuntimecorrelationWindowsEvicted(t, h.tel,
		[]metricdata.DataPoint[int64]{reasonPoint(reasonRetention, 2)}, metricdatatest.IgnoreTimestamp())
	metadatatest.AssertEqualProcessorRuntimecorrelationWindowsDropped(t, h.tel, []metricdata.DataPoint[int64]{
		reasonPoint(reasonFuture, 1), reasonPoint(reasonTooOld, 1),
	}, metricdatatest.IgnoreTimestamp())
}

func TestOneFloodingProcessEvictsOnlyItsOwnWindows(t *testing.T) {
	h := newHarness(t, func(cfg *Config) {
		cfg.Windows.MaxWindows = 100
		cfg.Windows.MaxPerScope = 20
	})
	quiet := resource{host: "node-1", pid: 17}
	var old []window.Window
	for i := range int64(10) {
		old = append(old, win(safepoint, i*ms, 100*us, 0))
	}
	h.sendWindows(quiet, old...)
	// Ten times the scope's cap, all newer than the quiet process's windows.
	var flood []window.Window
	for i := range int64(200) {
		flood = append(flood, win(gilWait, 20*ms+i*ms, 100*us, 1))
	}
	h.sendWindows(proc, flood...)
	c := h.c
	if got := c.windows.ScopeLen(scopeKey{host: "node-1", pid: 17}); got != 10 {
		t.Errorf("the quiet process keeps every window: got %v, want %v", got, 10)
	}
	if got := c.windows.ScopeLen(scopeKey{host: "node-1", pid: 4242}); got != 20 {
		t.Errorf("the flood keeps its cap: got %v, want %v", got, 20)
	}
	metadatatest.AssertEqualProcessorRuntimecorrelationWindowsEvicted(t, h.tel,
		[]metricdata.DataPoint[int64]{reasonPoint(reasonScopeCap, 180)}, metricdatatest.IgnoreTimestamp())
	metadatatest.AssertEqualProcessorRuntimecorrelationWindows(t, h.tel,
		[]metricdata.DataPoint[int64]{{Value: 30}}, metricdatatest.IgnoreTimestamp())
}

func TestWindowLongerThanTheRetentionIsClipped(t *testing.T) {
	const sec = int64(time.Second)
	h := newHarness(t, func(cfg *Config) { cfg.Windows.Retention = 2 * time.Second })
	h.sendWindows(proc, win(safepoint, 0, 5*sec, 0))
	metadatatest.AssertEqualProcessorRuntimecorrelationWindowsClipped(t, h.tel,
		[]metricdata.DataPoint[int64]{{Value: 1}}, metricdatatest.IgnoreTimestamp())
	// It overlaps only what falls within the retention of its start, and
	// reports the length it was indexed with.
	got := overlapRecords(h.sendWindows(proc, win(gilWait, 1500*ms, sec, 3)))
	if got2 := len(got); got2 != 1 {
		t.Fatalf("len(overlapRecords): got %d, want %d", got2, 1)
	}
	if got2 := got[0]["runtime.overlap.duration"]; !reflect.DeepEqual(got2, 500*ms) {
		t.Errorf("got[0][\"runtime.overlap.duration\"]: got %v, want %v", got2, 500*ms)
	}
	if got2 := got[0]["runtime.overlap.first.duration"]; !reflect.DeepEqual(got2, 2*sec) {
		t.Errorf("got[0][\"runtime.overlap.first.duration\"]: got %v, want %v", got2, 2*sec)
	}
}
