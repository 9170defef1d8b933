package runtimecorrelationprocessor

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/otelcol-ai/otelcol-ai/internal/procresource"
	"github.com/otelcol-ai/otelcol-ai/internal/window"
	"github.com/otelcol-ai/otelcol-ai/processor/runtimecorrelationprocessor/internal/metadata"
	"github.com/otelcol-ai/otelcol-ai/processor/runtimecorrelationprocessor/internal/windowindex"
)

const benchBatch = 1000

// benchCorrelator is a correlator with the default configuration, a cap
// large enough for the benchmark and a clock at the far end of its data.
func benchCorrelator(b *testing.B, maxWindows int) *correlator {
	cfg := createDefaultConfig().(*Config)
	cfg.Windows.MaxWindows = maxWindows
	cfg.Windows.MaxPerScope = maxWindows
	cfg.Windows.Retention = 1 << 62
	c, err := newCorrelator(processortest.NewNopSettings(metadata.Type), cfg)
	if err != nil {
		b.Fatal(err)
	}
	c.now = func() time.Time { return time.Unix(0, 1<<62) }
	b.Cleanup(c.close)
	return c
}

// windowBatch is benchBatch windows of 4 processes from start on, 100 µs
// apart, kinds and threads mixed as a JVM embedding CPython produces them.
func windowBatch(start int64, rng *rand.Rand) plog.Logs {
	ld := plog.NewLogs()
	var lrs [4]plog.LogRecordSlice
	for p := range lrs {
		rl := ld.ResourceLogs().AppendEmpty()
		rl.Resource().Attributes().PutStr(window.ResourceHostName, "node-1")
		rl.Resource().Attributes().PutInt(window.ResourcePID, int64(1000+p))
		lrs[p] = rl.ScopeLogs().AppendEmpty().LogRecords()
	}
	for i := range benchBatch {
		lr := lrs[i%4].AppendEmpty()
		lr.SetEventName(string(kinds[rng.IntN(len(kinds))]))
		lr.SetTimestamp(pcommon.Timestamp(start + int64(i)*100_000))
		lr.Attributes().PutInt(window.AttrDuration, 20_000+rng.Int64N(500_000))
		lr.Attributes().PutInt(window.AttrThreadID, int64(rng.IntN(16)+1))
	}
	return ld
}

// BenchmarkIngestWindows measures the logs path without the pipeline:
// decoding window records, indexing them, finding their overlaps.
func BenchmarkIngestWindows(b *testing.B) {
	c := benchCorrelator(b, 100_000)
	rng := rand.New(rand.NewPCG(1, 1))
	ctx := context.Background()
	overlaps := 0
	b.ResetTimer()
	for i := 0; i < b.N; i += benchBatch {
		b.StopTimer()
		ld := windowBatch(t0+int64(i)*100_000, rng)
		b.StartTimer()
		overlaps += len(c.ingestLogs(ctx, ld))
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "windows/s")
	b.ReportMetric(float64(overlaps)/float64(b.N), "overlaps/window")
}

// BenchmarkAnnotateSpans measures annotating 20 ms spans against 100k
// indexed windows (25k in each of the 4 processes).
func BenchmarkAnnotateSpans(b *testing.B) {
	const windows = 100_000
	c := benchCorrelator(b, windows)
	rng := rand.New(rand.NewPCG(2, 2))
	for i := 0; i < windows; i += benchBatch {
		c.ingestLogs(measured(context.Background()), windowBatch(t0+int64(i)*100_000, rng))
	}
	if c.windows.Len() != windows {
		b.Fatalf("%d windows indexed", c.windows.Len())
	}
	span := int64(windows) * 100_000
	p := &tracesProcessor{c: c}
	annotated := 0
	b.ResetTimer()
	for i := 0; i < b.N; i += benchBatch {
		b.StopTimer()
		td := ptrace.NewTraces()
		for pid := range 4 {
			rs := td.ResourceSpans().AppendEmpty()
			rs.Resource().Attributes().PutStr(window.ResourceHostName, "node-1")
			rs.Resource().Attributes().PutInt(window.ResourcePID, int64(1000+pid))
			spans := rs.ScopeSpans().AppendEmpty().Spans()
			for range benchBatch / 4 {
				s := spans.AppendEmpty()
				start := t0 + rng.Int64N(span)
				s.SetStartTimestamp(pcommon.Timestamp(start))
				s.SetEndTimestamp(pcommon.Timestamp(start + 20_000_000))
			}
		}
		ids := p.resolve(context.Background(), td)
		b.StartTimer()
		p.annotate(context.Background(), td, ids, false)
		b.StopTimer()
		annotated += spanAttrCount(td)
		b.StartTimer()
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "spans/s")
	b.ReportMetric(float64(annotated)/float64(b.N), "attrs/span")
}

func spanAttrCount(td ptrace.Traces) int {
	n := 0
	for i := 0; i < td.ResourceSpans().Len(); i++ {
		spans := td.ResourceSpans().At(i).ScopeSpans().At(0).Spans()
		for j := 0; j < spans.Len(); j++ {
			n += spans.At(j).Attributes().Len()
		}
	}
	return n
}

// BenchmarkIndex100k indexes 100k windows of 4 processes, 100 µs apart,
// into a fresh correlator with the default configuration, under its lock
// as the logs path does, in batches of benchBatch, in each arrival order.
func BenchmarkIndex100k(b *testing.B) {
	const n = 100_000
	for _, order := range []string{"in-order", "reverse"} {
		b.Run(order, func(b *testing.B) {
			rng := rand.New(rand.NewPCG(3, 3))
			windows := make([]pending, n)
			for i := range windows {
				s := t0 + int64(i)*100_000
				windows[i] = pending{
					scope: scopeKey{host: "node-1", pid: int64(1000 + i%4)},
					src:   i % 4,
					entry: windowindex.Entry{Start: s, End: s + 20_000 + rng.Int64N(500_000), ThreadID: int64(i % 16), Kind: uint8(rng.IntN(len(kinds)))},
				}
			}
			if order == "reverse" {
				slices.Reverse(windows)
			}
			sources := make([]source, 4)
			for i := range sources {
				sources[i] = source{node: "node-1", proc: procresource.Identity{PID: 1000 + i}, hasPID: true, maxStart: t0}
			}
			ctx := context.Background()
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				c, err := newCorrelator(processortest.NewNopSettings(metadata.Type), createDefaultConfig().(*Config))
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				for i := 0; i < n; i += benchBatch {
					c.index(ctx, windows[i:i+benchBatch], sources)
				}
				b.StopTimer()
				if c.windows.Len() != n {
					b.Fatalf("%d windows indexed, want %d", c.windows.Len(), n)
				}
				c.close()
				b.StartTimer()
			}
			b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/100k")
		})
	}
}
