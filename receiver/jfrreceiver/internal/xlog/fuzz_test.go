package xlog

import (
	"testing"

	"github.com/otelcol-ai/otelcol-ai/internal/window"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/jvmevent"
)

// FuzzLine: no log line, however malformed, panics the parser or the
// tailer, and every window it yields has a non-negative duration.
func FuzzLine(f *testing.F) {
	for _, s := range []string{g1Safepoint17, g1Pause17, g1Start17, zSafepoint25, zPause25, parallel17, parallelSP17,
		"[", "[]", "[ns]", "[-1ns][x] Safepoint \"", "[0.1s][gc] GC(99999999999999999999) Pause Young 1.5ms"} {
		f.Add(s)
	}
	clock := window.NewFixedClock(1e18)
	f.Fuzz(func(t *testing.T, s string) {
		tl := &tail{}
		var b jvmevent.Batch
		tl.line(s, clock, &b)
		for _, w := range b.Windows {
			if w.Duration < 0 {
				t.Fatalf("negative duration from %q: %+v", s, w)
			}
		}
	})
}
