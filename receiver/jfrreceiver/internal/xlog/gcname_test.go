package xlog

import (
	"strconv"
	"testing"
)

func TestPauseBean(t *testing.T) {
	for _, tc := range []struct {
		using, line string
		major       zgcKind
		want        string
	}{
		{"G1", "GC(3) Pause Young (Normal) (G1 Evacuation Pause) 24M->2M(256M) 3.456ms", zgcUnknown, "G1 Young Generation"},
		{"G1", "GC(4) Pause Young (Concurrent Start) (G1 Humongous Allocation) 24M->2M(256M) 1.000ms", zgcUnknown, "G1 Young Generation"},
		{"G1", "GC(5) Pause Remark 30M->30M(256M) 1.200ms", zgcUnknown, "G1 Concurrent GC"},
		{"G1", "GC(5) Pause Cleanup 30M->30M(256M) 0.100ms", zgcUnknown, "G1 Concurrent GC"},
		{"G1", "GC(6) Pause Full (System.gc()) 20M->3M(256M) 12.345ms", zgcUnknown, "G1 Old Generation"},
		{"Parallel", "GC(1) Pause Young (Allocation Failure) 40M->5M(245M) 2.000ms", zgcUnknown, "PS Scavenge"},
		{"Parallel", "GC(2) Pause Full (Ergonomics) 40M->5M(245M) 20.000ms", zgcUnknown, "PS MarkSweep"},
		{"Serial", "GC(1) Pause Young (Allocation Failure) 40M->5M(245M) 2.000ms", zgcUnknown, "Copy"},
		{"Serial", "GC(2) Pause Full (System.gc()) 40M->5M(245M) 20.000ms", zgcUnknown, "MarkSweepCompact"},
		{"The Z Garbage Collector", "GC(0) Pause Mark Start 0.010ms", zgcUnknown, "ZGC Pauses"},
		{"The Z Garbage Collector", "GC(3) Y: Pause Mark Start 0.010ms", zgcMajor, "ZGC Major Pauses"},
		{"The Z Garbage Collector", "GC(3) O: Pause Mark End 0.010ms", zgcMajor, "ZGC Major Pauses"},
		{"The Z Garbage Collector", "GC(4) Y: Pause Mark Start 0.010ms", zgcMinor, "ZGC Minor Pauses"},
		{"The Z Garbage Collector", "GC(4) Y: Pause Mark Start 0.010ms", zgcUnknown, "ZGC Minor Pauses"},
		{"The Z Garbage Collector", "GC(4) O: Pause Mark Start 0.010ms", zgcUnknown, "ZGC Major Pauses"},
		{"The Z Garbage Collector", "GC(0) Y: Pause Mark Start (Major) 0.020ms", zgcUnknown, "ZGC Major Pauses"},
		{"Shenandoah", "GC(2) Pause Init Mark (unload classes) 0.200ms", zgcUnknown, "Shenandoah Pauses"},
		{"Epsilon", "GC(1) Pause Young 1.000ms", zgcUnknown, "Epsilon"},
	} {
		p, ok := ParsePause(tc.line)
		if !ok {
			t.Fatalf("%q does not parse", tc.line)
		}
		if got := PauseBean(tc.using, p, tc.major); got != tc.want {
			t.Errorf("%s %q (%v): %q, want %q", tc.using, tc.line, tc.major, got, tc.want)
		}
	}
}

func TestZGCKinds(t *testing.T) {
	var z zgcKinds
	z.note("GC(3) Major Collection (Warmup)")
	z.note("GC(4) Minor Collection (Allocation Rate)")
	z.note("GC(4) Minor Collection (Allocation Rate) 66M(26%)->20M(8%) 0.005s")
	z.note("GC(5) Pause Young (Normal) 1.000ms")
	if z.major(3) != zgcMajor || z.major(4) != zgcMinor || z.major(5) != zgcUnknown {
		t.Errorf("kinds %v", z.kinds)
	}
	for i := range int64(1000) {
		z.note("GC(" + itoa(i) + ") Minor Collection (Allocation Rate)")
	}
	if len(z.kinds) > maxZGCKinds || len(z.order) > maxZGCKinds || z.major(999) != zgcMinor || z.major(3) != zgcUnknown {
		t.Errorf("%d kinds kept, %d ordered", len(z.kinds), len(z.order))
	}
}

func itoa(i int64) string { return strconv.FormatInt(i, 10) }
