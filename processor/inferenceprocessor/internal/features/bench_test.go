package features

import (
	"fmt"
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// benchInput returns the default model's features and spans like those the
// processor's benchmarks make, with extra attributes more.
func benchInput(extra int) ([]Column, pcommon.Resource, []ptrace.Span) {
	overlap := func(kind string) Column {
		return Column{Source: SourceAttribute, Key: "runtime.overlap." + kind + ".duration", HasDefault: true, Scale: 1e-6}
	}
	columns := []Column{
		{Source: SourceDuration, Scale: 1e-6},
		overlap("jvm.safepoint"), overlap("jvm.gc.pause"), overlap("python.gil.wait"), overlap("python.gc.pause"),
	}
	res := pcommon.NewResource()
	res.Attributes().PutStr("service.name", "inference-api")
	spans := ptrace.NewSpanSlice()
	var out []ptrace.Span
	for i := range 512 {
		span := spans.AppendEmpty()
		span.SetEndTimestamp(pcommon.Timestamp(1_000_000 * (10 + i%90)))
		span.Attributes().PutInt("runtime.overlap.jvm.safepoint.duration", int64(i%7)*1_000_000)
		span.Attributes().PutInt("runtime.overlap.python.gil.wait.duration", int64(i%5)*1_000_000)
		span.Attributes().PutStr("http.route", "/v1/predict")
		for j := range extra {
			span.Attributes().PutStr(fmt.Sprintf("app.attribute.%d", j), "value")
		}
		out = append(out, span)
	}
	return columns, res, out
}

// BenchmarkSpan compares Span with one Map.Get per column, on spans with
// the 3 attributes of the processor's benchmarks and with 20 more.
func BenchmarkSpan(b *testing.B) {
	for _, extra := range []int{0, 20} {
		columns, res, spans := benchInput(extra)
		e, _ := New(columns, false)
		row := make([]float32, e.Width())
		b.Run(fmt.Sprintf("attributes=%d/one_pass", 3+extra), func(b *testing.B) {
			for b.Loop() {
				r := readResource(e, res)
				for _, span := range spans {
					e.Span(r, span, row)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(spans)), "ns/span")
		})
		b.Run(fmt.Sprintf("attributes=%d/lookup_per_column", 3+extra), func(b *testing.B) {
			for b.Loop() {
				for _, span := range spans {
					referenceSpan(columns, res, span, row)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(spans)), "ns/span")
		})
	}
}
