package runtimecorrelationprocessor

import (
	"context"
	"math/rand/v2"
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otelcol-ai/otelcol-ai/internal/window"
)

// BenchmarkAnnotatePlacements measures what the distribution's default
// (spans::events: true, distribution/config.yaml) costs over annotating with
// totals only, and what child spans would: 20 ms spans against 100k indexed
// windows, as BenchmarkAnnotateSpans. Compare the sub-benchmarks' ns/op:
//
//	go test -run '^$' -bench BenchmarkAnnotatePlacements -benchmem ./processor/runtimecorrelationprocessor/
func BenchmarkAnnotatePlacements(b *testing.B) {
	for _, mode := range []struct {
		name           string
		events, childs bool
	}{{"totals", false, false}, {"events", true, false}, {"child_spans", false, true}} {
		b.Run(mode.name, func(b *testing.B) {
			const windows = 100_000
			c := benchCorrelator(b, windows)
			c.cfg.Spans.Events, c.cfg.Spans.ChildSpans = mode.events, mode.childs
			rng := rand.New(rand.NewPCG(2, 2))
			for i := 0; i < windows; i += benchBatch {
				c.ingestLogs(measured(context.Background()), windowBatch(t0+int64(i)*100_000, rng))
			}
			span := int64(windows) * 100_000
			p := &tracesProcessor{c: c}
			placed := 0
			b.ReportAllocs()
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
				for r := 0; r < td.ResourceSpans().Len(); r++ {
					ss := td.ResourceSpans().At(r).ScopeSpans()
					for k := 0; k < ss.Len(); k++ {
						for j := 0; j < ss.At(k).Spans().Len(); j++ {
							placed += ss.At(k).Spans().At(j).Events().Len()
						}
						if k > 0 {
							placed += ss.At(k).Spans().Len()
						}
					}
				}
				b.StartTimer()
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "spans/s")
			b.ReportMetric(float64(placed)/float64(b.N), "placements/span")
		})
	}
}
