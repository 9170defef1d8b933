package runtimecorrelationprocessor

import (
	"math"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otelcol-ai/otelcol-ai/internal/window"
)

// TestExtremeInputIsPassedOnAndCounted sends windows and spans at the edges
// of the clock: nothing panics, everything passes on, the index stays sane.
func TestExtremeInputIsPassedOnAndCounted(t *testing.T) {
	h := newHarness(t, func(cfg *Config) { cfg.Spans.Events, cfg.Spans.ChildSpans = true, true })
	ld := plog.NewLogs()
	rl := ld.ResourceLogs().AppendEmpty()
	proc.put(rl.Resource().Attributes())
	lrs := rl.ScopeLogs().AppendEmpty().LogRecords()
	for _, w := range []struct {
		start uint64
		dur   int64
	}{
		{math.MaxInt64 - 1, math.MaxInt64}, // end overflows
		{math.MaxUint64, 10},               // start beyond int64
		{1, math.MaxInt64 - 1},             // one window over all time
		{uint64(t0), 0},
		{uint64(t0), 1},
	} {
		lr := lrs.AppendEmpty()
		lr.SetEventName(string(gilWait))
		lr.SetTimestamp(pcommon.Timestamp(w.start))
		lr.Attributes().PutInt(window.AttrDuration, w.dur)
	}
	pidStr := ld.ResourceLogs().AppendEmpty()
	pidStr.Resource().Attributes().PutStr(window.ResourcePID, "4242")
	pidStr.Resource().Attributes().PutStr(window.ResourceHostName, proc.host)
	if err := window.Encode(win(safepoint, 0, time.Hour.Nanoseconds(), 0), pidStr.ScopeLogs().AppendEmpty().LogRecords().AppendEmpty()); err != nil {
		t.Fatalf("window.Encode: %v", err)
	}
	records := ld.LogRecordCount()
	if err := h.logs.ConsumeLogs(measured(t.Context()), ld); err != nil {
		t.Fatalf("h.logs.ConsumeLogs: %v", err)
	}
	out := h.logSink.AllLogs()[0]
	if got := out.LogRecordCount(); got < records {
		t.Errorf("every record passes on: got %v, want >= %v", got, records)
	}

	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	proc.put(rs.Resource().Attributes())
	spans := rs.ScopeSpans().AppendEmpty().Spans()
	for _, s := range [][2]uint64{{0, 0}, {10, 5}, {0, math.MaxUint64}, {math.MaxUint64 - 1, math.MaxUint64}, {uint64(t0), uint64(t0 + ms)}} {
		span := spans.AppendEmpty()
		span.SetStartTimestamp(pcommon.Timestamp(s[0]))
		span.SetEndTimestamp(pcommon.Timestamp(s[1]))
	}
	h.sendSpans(td)
	if got := h.traceSink.SpanCount(); got < 5 {
		t.Errorf("h.traceSink.SpanCount(): got %v, want >= %v", got, 5)
	}
	if got := h.c.windows.Len(); got > h.cfg.Windows.MaxWindows {
		t.Errorf("h.c.windows.Len(): got %v, want <= %v", got, h.cfg.Windows.MaxWindows)
	}
}
