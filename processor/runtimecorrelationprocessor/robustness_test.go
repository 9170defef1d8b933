package runtimecorrelationprocessor

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
	require.NoError(t, window.Encode(win(safepoint, 0, time.Hour.Nanoseconds(), 0), pidStr.ScopeLogs().AppendEmpty().LogRecords().AppendEmpty()))
	records := ld.LogRecordCount()
	require.NoError(t, h.logs.ConsumeLogs(t.Context(), ld))
	out := h.logSink.AllLogs()[0]
	assert.GreaterOrEqual(t, out.LogRecordCount(), records, "every record passes on")

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
	assert.GreaterOrEqual(t, h.traceSink.SpanCount(), 5)
	assert.LessOrEqual(t, h.c.windows.Len(), h.cfg.Windows.MaxWindows)
}
