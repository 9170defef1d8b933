package runtimecorrelationprocessor

import (
	"reflect"
	"testing"

	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/processor/processorhelper"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"

	"github.com/otelcol-ai/otelcol-ai/internal/window"
	"github.com/otelcol-ai/otelcol-ai/processor/runtimecorrelationprocessor/internal/metadatatest"
)

var errSkip = processorhelper.ErrSkipProcessingData

const (
	safepoint = window.KindJVMSafepoint
	gcPause   = window.KindJVMGCPause
	gilWait   = window.KindPythonGILWait
	gilFree   = window.KindPythonGILReleased
	pyGC      = window.KindPythonGCPause
)

// overlapAttrs is the record expected for first overlapping second in
// process proc, over [t0+start, t0+start+dur).
func overlapAttrs(first, second window.Window, start, dur int64) map[string]any {
	m := map[string]any{
		"runtime.overlap.duration":           dur,
		"runtime.overlap.scope":              "process",
		"runtime.overlap.first.kind":         string(first.Kind),
		"runtime.overlap.first.start":        first.Start,
		"runtime.overlap.first.duration":     int64(first.Duration),
		"runtime.overlap.second.kind":        string(second.Kind),
		"runtime.overlap.second.start":       second.Start,
		"runtime.overlap.second.duration":    int64(second.Duration),
		"runtime.overlap.first.process.pid":  proc.pid,
		"runtime.overlap.second.process.pid": proc.pid,
		"resource":                           map[string]any{"host.name": proc.host, "process.pid": proc.pid},
		"timestamp":                          t0 + start,
	}
	if first.ThreadID != 0 {
		m["runtime.overlap.first.thread.id"] = first.ThreadID
	}
	if second.ThreadID != 0 {
		m["runtime.overlap.second.thread.id"] = second.ThreadID
	}
	return m
}

func TestOverlapsAreComputedExactly(t *testing.T) {
	sp := win(safepoint, 100*us, 100*us, 0)            // [100, 200) µs
	wait := win(gilWait, 150*us, 150*us, 7)            // [150, 300)
	gc := win(gcPause, 0, 1*ms, 0)                     // [0, 1000)
	inside := win(gilWait, 400*us, 10*us, 9)           // [400, 410)
	touching := win(gilWait, 200*us, 50*us, 7)         // [200, 250): touches sp's end
	empty := win(gilWait, 150*us, 0, 8)                // zero length
	pygc := win(pyGC, 120*us, 10*us, 7)                // [120, 130)
	free := win(gilFree, 50*us, 100*us, 11)            // [50, 150)
	sp2 := win(safepoint, 5*ms, 100*us, 0)             // far away
	waitOther := win(gilWait, 5*ms+50*us, 100*us, 12)  // overlaps sp2 by 50 µs
	waitOther2 := win(gilWait, 5*ms+60*us, 10*us, 13)  // inside sp2
	waitOther3 := win(gilWait, 5*ms+90*us, 100*us, 14) // overlaps sp2 by 10 µs

	tests := []struct {
		name    string
		batches [][]window.Window
		pairs   [][]window.Kind
		want    []map[string]any
	}{
		{
			name:    "safepoint then GIL wait",
			batches: [][]window.Window{{sp}, {wait}},
			want:    []map[string]any{overlapAttrs(sp, wait, 150*us, 50*us)},
		},
		{
			name:    "GIL wait first: the JVM window is still first",
			batches: [][]window.Window{{wait}, {sp}},
			want:    []map[string]any{overlapAttrs(sp, wait, 150*us, 50*us)},
		},
		{
			name:    "both in one batch",
			batches: [][]window.Window{{wait, sp}},
			want:    []map[string]any{overlapAttrs(sp, wait, 150*us, 50*us)},
		},
		{
			name:    "contained window overlaps for its whole length",
			batches: [][]window.Window{{gc}, {inside}},
			want:    []map[string]any{overlapAttrs(gc, inside, 400*us, 10*us)},
		},
		{
			name:    "touching windows do not overlap",
			batches: [][]window.Window{{sp, touching}},
		},
		{
			name:    "a zero-length window overlaps nothing",
			batches: [][]window.Window{{sp}, {empty}},
		},
		{
			name:    "JVM with JVM and Python with Python are not paired by default",
			batches: [][]window.Window{{gc, sp}, {wait, pygc}},
			want: []map[string]any{
				overlapAttrs(gc, wait, 150*us, 150*us),
				overlapAttrs(sp, wait, 150*us, 50*us),
				overlapAttrs(gc, pygc, 120*us, 10*us),
				overlapAttrs(sp, pygc, 120*us, 10*us),
			},
		},
		{
			name:    "one safepoint, three threads waiting",
			batches: [][]window.Window{{waitOther, waitOther2, waitOther3}, {sp2}},
			want: []map[string]any{
				overlapAttrs(sp2, waitOther, 5*ms+50*us, 50*us),
				overlapAttrs(sp2, waitOther2, 5*ms+60*us, 10*us),
				overlapAttrs(sp2, waitOther3, 5*ms+90*us, 10*us),
			},
		},
		{
			name:    "configured pairs only, in their order",
			pairs:   [][]window.Kind{{pyGC, safepoint}, {gilFree, gilWait}},
			batches: [][]window.Window{{sp, wait}, {pygc, free}},
			want: []map[string]any{
				overlapAttrs(pygc, sp, 120*us, 10*us),
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, func(cfg *Config) {
				if tt.pairs != nil {
					cfg.OverlapPairs = tt.pairs
				}
			})
			var got []map[string]any
			for _, b := range tt.batches {
				got = append(got, overlapRecords(h.sendWindows(proc, b...))...)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("overlap records: got %v, want %v", got, tt.want)
			}
			want := make([]metricdata.DataPoint[int64], 0, 1)
			if len(tt.want) > 0 {
				want = append(want, metricdata.DataPoint[int64]{Value: int64(len(tt.want))})
				metadatatest.AssertEqualProcessorRuntimecorrelationOverlaps(t, h.tel, want, metricdatatest.IgnoreTimestamp())
			}
		})
	}
}

func TestOverlapRecordIsReadable(t *testing.T) {
	h := newHarness(t, nil)
	h.sendWindows(proc, win(safepoint, 0, 2*ms, 0))
	out := h.sendWindows(proc, win(gilWait, 500*us, 3*ms, 31))
	// The window passes first, the overlap follows in a resource of its own.
	if got := out.ResourceLogs().Len(); got != 2 {
		t.Fatalf("out.ResourceLogs().Len(): got %v, want %v", got, 2)
	}
	lr := out.ResourceLogs().At(1).ScopeLogs().At(0).LogRecords().At(0)
	if got := lr.EventName(); got != "runtime.overlap" {
		t.Errorf("lr.EventName(): got %q, want %q", got, "runtime.overlap")
	}
	if got := lr.Body().Str(); got != "jvm.safepoint overlapped python.gil.wait for 1.5ms" {
		t.Errorf("lr.Body().Str(): got %q, want %q", got, "jvm.safepoint overlapped python.gil.wait for 1.5ms")
	}
	if got := out.ResourceLogs().At(1).ScopeLogs().At(0).Scope().Name(); got != "github.com/otelcol-ai/otelcol-ai/processor/runtimecorrelationprocessor" {
		t.Errorf("out.ResourceLogs().At(1).ScopeLogs().At(0).Scope().Name(): got %q, want %q", got, "github.com/otelcol-ai/otelcol-ai/processor/runtimecorrelationprocessor")
	}
	if got := int64(lr.ObservedTimestamp()); got != h.clock.Now().UnixNano() {
		t.Errorf("int64(lr.ObservedTimestamp()): got %v, want %v", got, h.clock.Now().UnixNano())
	}
	// Overlap records are not windows: sending them again changes nothing.
	again := plog.NewLogs()
	out.ResourceLogs().At(1).CopyTo(again.ResourceLogs().AppendEmpty())
	if err := h.logs.ConsumeLogs(measured(t.Context()), again); err != nil {
		t.Fatalf("h.logs.ConsumeLogs: %v", err)
	}
	if got := h.logSink.AllLogs()[2].LogRecordCount(); got != 1 {
		t.Errorf("the overlap record passes unchanged: got %v, want %v", got, 1)
	}
	if got := h.c.windows.Len(); got != 2 {
		t.Errorf("only the two windows are indexed: got %v, want %v", got, 2)
	}
}

// The overlap record of a process carries the names processors ahead of
// this one put on its windows (k8s_attributes in a pod), and only its own.
func TestOverlapRecordCarriesTheWindowsNames(t *testing.T) {
	h := newHarness(t, nil)
	named := windowLogs(t, proc, win(safepoint, 0, 2*ms, 0))
	attrs := named.ResourceLogs().At(0).Resource().Attributes()
	attrs.PutStr("k8s.namespace.name", "tenants")
	attrs.PutStr("k8s.pod.name", "java-service-6f4")
	attrs.PutStr("k8s.deployment.name", "java-service")
	attrs.PutInt("k8s.container.name", 7) // not a string: not a name
	attrs.PutStr("tenant.secret", "x")    // not a naming key
	if err := h.logs.ConsumeLogs(measured(t.Context()), named); err != nil {
		t.Fatal(err)
	}
	// A later batch without names: the names stay the process's.
	out := h.sendWindows(proc, win(gilWait, 500*us, 3*ms, 31))
	if got := out.ResourceLogs().Len(); got != 2 {
		t.Fatalf("out.ResourceLogs().Len(): got %v, want %v", got, 2)
	}
	got := out.ResourceLogs().At(1).Resource().Attributes().AsRaw()
	want := map[string]any{"host.name": proc.host, "process.pid": proc.pid,
		"k8s.namespace.name": "tenants", "k8s.pod.name": "java-service-6f4", "k8s.deployment.name": "java-service"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("overlap resource: got %v, want %v", got, want)
	}
}
