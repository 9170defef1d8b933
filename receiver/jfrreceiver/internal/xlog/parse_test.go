package xlog

import (
	"testing"
	"time"
)

// Lines as JDK 17 (G1, Parallel) and Temurin 25 (generational ZGC) wrote
// them on this machine.
const (
	g1Safepoint17 = `[2026-11-29T10:26:06.724+0000][2759442805832ns][655043291ns][13177][13184][info][safepoint   ] Safepoint "G1CollectForAllocation", Time since last: 605579759 ns, Reaching safepoint: 6559 ns, Cleanup: 66509 ns, At safepoint: 17116858 ns, Total: 17189926 ns`
	g1Pause17     = `[2026-11-29T10:26:06.723+0000][2759442773835ns][655011284ns][13177][13184][info][gc          ] GC(0) Pause Young (Normal) (G1 Evacuation Pause) 6M->2M(128M) 17.024ms`
	g1Start17     = `[2026-11-29T10:26:06.706+0000][2759425750966ns][637988435ns][13177][13184][info][gc,start    ] GC(0) Pause Young (Normal) (G1 Evacuation Pause)`
	zSafepoint25  = `[2026-11-29T10:38:47.468+0000][3520187052401ns][858765561ns][25666][25678][info][safepoint   ] Safepoint "ZMarkStartYoungAndOld", Time since last: 617461829 ns, Reaching safepoint: 112317 ns, At safepoint: 53980 ns, Leaving safepoint: 27421 ns, Total: 193718 ns, Threads: 2 runnable, 10 total`
	zPause25      = `[2026-11-29T10:38:47.468+0000][3520187000314ns][858713473ns][25666][25678][info][gc,phases   ] GC(0) Y: Pause Mark Start (Major) 0.020ms`
	parallel17    = `[1.446s][info][gc] GC(0) Pause Young (Allocation Failure) 16M->4M(61M) 10.858ms`
	parallelSP17  = `[1.446s][info][safepoint] Safepoint "ParallelGCFailedAllocation", Time since last: 1376632432 ns, Reaching safepoint: 11866979 ns, Cleanup: 158495 ns, At safepoint: 10965931 ns, Total: 22991405 ns`
)

func TestParseLineDecorators(t *testing.T) {
	epoch := time.Date(2026, 11, 29, 10, 26, 6, 724e6, time.UTC).UnixNano()
	tests := []struct {
		name string
		line string
		want Decorators
	}{
		{"time timenanos uptimenanos pid tid", g1Safepoint17, Decorators{Epoch: epoch, Monotonic: 2759442805832, Uptime: 655043291, UptimeSet: true, PID: 13177, Tags: "safepoint"}},
		{"uptime only", parallel17, Decorators{Uptime: 1446000000, UptimeSet: true, Tags: "gc"}},
		{"lone uptimenanos beside uptime", `[0.655s][655043291ns][info][gc] x`, Decorators{Uptime: 655043291, UptimeSet: true, Tags: "gc"}},
		{"lone timenanos", `[2759442805832ns][info][gc] x`, Decorators{Monotonic: 2759442805832, MonotonicGuessed: true, Tags: "gc"}},
		{"timemillis uptimemillis", `[1795948339152ms][655ms][gc] x`, Decorators{Epoch: 1795948339152e6, Uptime: 655e6, UptimeSet: true, Tags: "gc"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, ok := ParseLine(tt.line)
			if !ok || l.Decorators != tt.want {
				t.Errorf("ParseLine = %+v, %v; want %+v", l.Decorators, ok, tt.want)
			}
		})
	}
	if _, ok := ParseLine("buffers 4"); ok {
		t.Error("a line without decorators parsed")
	}
}

func TestParseSafepoint(t *testing.T) {
	tests := []struct {
		line string
		want Safepoint
	}{
		{g1Safepoint17, Safepoint{Operation: "G1CollectForAllocation", Total: 17189926, Reaching: 6559}},
		{zSafepoint25, Safepoint{Operation: "ZMarkStartYoungAndOld", Total: 193718, Reaching: 112317}},
		{parallelSP17, Safepoint{Operation: "ParallelGCFailedAllocation", Total: 22991405, Reaching: 11866979}},
		// JDK 21u adds Leaving safepoint to the 17 layout (no JDK 21 here:
		// the line follows the format in the project's notes).
		{`[3.001s][info][safepoint] Safepoint "G1CollectForAllocation", Time since last: 1000 ns, Reaching safepoint: 2000 ns, Cleanup: 300 ns, At safepoint: 40000 ns, Leaving safepoint: 500 ns, Total: 42800 ns`,
			Safepoint{Operation: "G1CollectForAllocation", Total: 42800, Reaching: 2000}},
	}
	for _, tt := range tests {
		l, _ := ParseLine(tt.line)
		got, ok := ParseSafepoint(l.Message)
		if !ok || got != tt.want {
			t.Errorf("ParseSafepoint(%q) = %+v, %v; want %+v", l.Message, got, ok, tt.want)
		}
	}
	for _, bad := range []string{`Safepoint "X", Total: lots`, `Safepoint "X"`, `Safepoint synchronization initiated`, ``} {
		if sp, ok := ParseSafepoint(bad); ok {
			t.Errorf("ParseSafepoint(%q) = %+v", bad, sp)
		}
	}
}

func TestParsePause(t *testing.T) {
	tests := []struct {
		line string
		want Pause
		ok   bool
	}{
		{g1Pause17, Pause{GCID: 0, Name: "Pause Young (Normal) (G1 Evacuation Pause)", Cause: "G1 Evacuation Pause", Duration: 17024 * time.Microsecond}, true},
		{zPause25, Pause{GCID: 0, Name: "Pause Mark Start (Major)", Duration: 20 * time.Microsecond, Generation: "Y"}, true},
		{parallel17, Pause{GCID: 0, Name: "Pause Young (Allocation Failure)", Cause: "Allocation Failure", Duration: 10858 * time.Microsecond}, true},
		{g1Start17, Pause{}, false},
		{`[0.1s][info][gc,phases] GC(3)   Pre Evacuate Collection Set: 0.1ms`, Pause{}, false},
	}
	for _, tt := range tests {
		l, _ := ParseLine(tt.line)
		got, ok := ParsePause(l.Message)
		if ok != tt.ok || got != tt.want {
			t.Errorf("ParsePause(%q) = %+v, %v; want %+v, %v", l.Message, got, ok, tt.want, tt.ok)
		}
	}
}

// TestResolveLoneNanos: a lone nanosecond decorator next to an absolute
// time is timenanos when the clock maps it there, else uptimenanos.
func TestResolveLoneNanos(t *testing.T) {
	const offset = 1_795_945_000_000_000_000
	toUnix := func(m int64) int64 { return m + offset }
	mono, _ := ParseLine(`[2026-11-29T10:26:06.724+0000][2759442805832ns][info][gc] x`)
	mono.Epoch = offset + 2759442805832 - 300_000 // the ms decorator lags
	mono.Resolve(toUnix)
	if mono.Monotonic != 2759442805832 || mono.UptimeSet {
		t.Errorf("timenanos read as %+v", mono.Decorators)
	}
	up, _ := ParseLine(`[2026-11-29T10:26:06.724+0000][655043291ns][info][gc] x`)
	up.Resolve(toUnix)
	if up.Monotonic != 0 || up.Uptime != 655043291 || !up.UptimeSet {
		t.Errorf("uptimenanos read as %+v", up.Decorators)
	}
}
