package features

import (
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// benchColumns and benchSpans are the default model's features and spans
// like those the processor's benchmarks make.
func benchInput() ([]Column, pcommon.Resource, []ptrace.Span) {
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
		out = append(out, span)
	}
	return columns, res, out
}

func BenchmarkSpan(b *testing.B) {
	columns, res, spans := benchInput()
	e, _ := New(columns, false)
	row := make([]float32, e.Width())
	b.Run("one pass", func(b *testing.B) {
		for b.Loop() {
			r := readResource(e, res)
			for _, span := range spans {
				e.Span(r, span, row)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(spans)), "ns/span")
	})
	b.Run("lookup per column", func(b *testing.B) {
		for b.Loop() {
			for _, span := range spans {
				referenceSpan(columns, res, span, row)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(spans)), "ns/span")
	})
}
