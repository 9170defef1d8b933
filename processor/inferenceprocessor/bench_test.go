package inferenceprocessor

import (
	"context"
	"fmt"
	"testing"
	"time"

	ort "github.com/yalue/onnxruntime_go"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// Batch sizes the benchmarks compare at.
var benchBatches = []int{1, 64, 512}

func benchSpans(n int) []spanSpec {
	specs := make([]spanSpec, n)
	for i := range specs {
		specs[i] = spanSpec{duration: time.Duration(10+i%90) * ms, attrs: map[string]any{
			"runtime.overlap.jvm.safepoint.duration":   int64(i%7) * int64(ms),
			"runtime.overlap.python.gil.wait.duration": int64(i%5) * int64(ms),
			"http.route": "/v1/predict",
		}}
	}
	return specs
}

// BenchmarkProcessor measures the processor's spans/s with the default
// model: feature extraction, the model run through the extension, and the
// attribute writes. Compare with BenchmarkRawRun at the same batch sizes:
//
//	go test -run '^$' -bench 'Processor|RawRun' -cpu 1 ./processor/inferenceprocessor/
func BenchmarkProcessor(b *testing.B) {
	repo := b.TempDir()
	place(b, repo, "runtime_overlap", 1, defaultModelFile)
	h := startExtension(b, repo, 0)
	for _, n := range benchBatches {
		b.Run(fmt.Sprintf("batch=%d", n), func(b *testing.B) {
			cfg := defaultConfig()
			cfg.Batch.MaxSize = n
			p, _ := startTraces(b, h, cfg, settings())
			// Fresh spans each call, as they arrive: copies made ahead, a
			// pool at a time, outside the timer.
			fresh := traces(benchSpans(n)...)
			pool := make([]ptrace.Traces, max(1, 16384/n))
			for i := range pool {
				pool[i] = ptrace.NewTraces()
			}
			refill := func() {
				for _, td := range pool {
					fresh.CopyTo(td)
				}
			}
			refill()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if i > 0 && i%len(pool) == 0 {
					b.StopTimer()
					refill()
					b.StartTimer()
				}
				if err := p.ConsumeTraces(context.Background(), pool[i%len(pool)]); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "spans/s")
		})
	}
}

// BenchmarkRawRun is the ceiling: onnxruntime_go's Run on the same model,
// the same session options and ready-made tensors of the same rows.
func BenchmarkRawRun(b *testing.B) {
	repo := b.TempDir()
	place(b, repo, "runtime_overlap", 1, defaultModelFile)
	startExtension(b, repo, 0) // holds the ONNX Runtime environment
	opts, err := ort.NewSessionOptions()
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = opts.Destroy() }()
	_ = opts.SetIntraOpNumThreads(1)
	_ = opts.SetInterOpNumThreads(1)
	_ = opts.SetGraphOptimizationLevel(ort.GraphOptimizationLevelEnableAll)
	outputs := []string{"explained_fraction", "unexplained_ms", "dominant_cause", "anomaly_score"}
	session, err := ort.NewDynamicAdvancedSession(defaultModelFile, []string{"features"}, outputs, opts)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = session.Destroy() }()
	for _, n := range benchBatches {
		b.Run(fmt.Sprintf("batch=%d", n), func(b *testing.B) {
			data := make([]float32, n*5)
			for i := 0; i < n; i++ {
				data[i*5] = float32(10 + i%90)
				data[i*5+1] = float32(i % 7)
				data[i*5+3] = float32(i % 5)
			}
			in, err := ort.NewTensor(ort.NewShape(int64(n), 5), data)
			if err != nil {
				b.Fatal(err)
			}
			defer func() { _ = in.Destroy() }()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				out := make([]ort.Value, len(outputs))
				if err := session.Run([]ort.Value{in}, out); err != nil {
					b.Fatal(err)
				}
				for _, v := range out {
					_ = v.Destroy()
				}
			}
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "spans/s")
		})
	}
}
