package onnxinferenceextension

import (
	"context"
	"testing"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"

	"github.com/otelcol-ai/otelcol-ai/extension/onnxinferenceextension/internal/metadatatest"
	"github.com/otelcol-ai/otelcol-ai/internal/modelrepotest"
	"github.com/otelcol-ai/otelcol-ai/pkg/modelrunner"
)

func TestBitset(t *testing.T) {
	for _, n := range []int{1, 64, 128, 129, 300} {
		var b bitset
		if n > 64*len(b.small) {
			b.large = make([]bool, n)
		}
		for i := 0; i < n; i += 3 {
			b.set(i)
		}
		for i := range n {
			if got, want := b.has(i), i%3 == 0; got != want {
				t.Fatalf("n %d: has(%d) = %v, want %v", n, i, got, want)
			}
		}
	}
}

// TestRunMetricsNameTheModel checks that Run's measurements carry the
// model's attribute, and that the runs in flight go back to zero.
func TestRunMetricsNameTheModel(t *testing.T) {
	modelrepotest.RequireLibrary(t)
	repo := t.TempDir()
	place(t, repo, "sum", 1, modelDynamicAxes)
	tel := componenttest.NewTelemetry()
	t.Cleanup(func() { _ = tel.Shutdown(context.Background()) })
	e, err := newExtension(metadatatest.NewSettings(tel), testConfig(repo))
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Start(context.Background(), nopHost()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Shutdown(context.Background()) })
	for _, n := range []int{2, 3} {
		res, err := e.Run(context.Background(), "sum", modelrunner.Request{
			Inputs: []modelrunner.Tensor{named("input_vectors", rows(n, 10, func(r, _ int) float32 { return float32(r) }))},
		})
		if err != nil {
			t.Fatal(err)
		}
		if got := res.Outputs[0].Float32s(); len(got) != n || got[n-1] != float32(10*(n-1)) {
			t.Fatalf("outputs %v", got)
		}
	}
	model := attribute.NewSet(attribute.String("model", "sum"))
	metadatatest.AssertEqualOnnxinferenceRunsInFlight(t, tel, []metricdata.DataPoint[int64]{{Attributes: model, Value: 0}},
		metricdatatest.IgnoreTimestamp())
	got, err := tel.GetMetric("otelcol_onnxinference_run_batch_size")
	if err != nil {
		t.Fatal(err)
	}
	dps := got.Data.(metricdata.Histogram[int64]).DataPoints
	if len(dps) != 1 || !dps[0].Attributes.Equals(&model) || dps[0].Count != 2 || dps[0].Sum != 5 {
		t.Fatalf("batch size points %+v, want one for model sum: 2 runs, 5 rows", dps)
	}
	got, err = tel.GetMetric("otelcol_onnxinference_run_duration")
	if err != nil {
		t.Fatal(err)
	}
	if d := got.Data.(metricdata.Histogram[float64]).DataPoints; len(d) != 1 || !d[0].Attributes.Equals(&model) || d[0].Count != 2 {
		t.Fatalf("duration points %+v, want one for model sum with 2 runs", d)
	}
}
