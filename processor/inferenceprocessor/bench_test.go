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
// attribute writes. Each call gets a fresh copy of its spans, made outside
// the timer shortly before it (512 spans at a time, so that stopping the
// timer costs small batches little), as warm in the caches as spans a
// receiver has just decoded and the processors before this one have just
// read. Compare
// with BenchmarkRawRun at the same batch sizes (bench/inference/inference.sh
// does, as a table):
//
//	go test -run '^$' -bench 'Processor$|RawRun$' -cpu 1 ./processor/inferenceprocessor/
func BenchmarkProcessor(b *testing.B) {
	benchmarkProcessor(b, func(n int) int { return max(1, 512/n) })
}

// BenchmarkProcessorColdSpans is BenchmarkProcessor on spans copied ahead,
// 16384 at a time, so that most have left the caches when their call comes:
// the cost of first touching a span's attributes is the processor's here.
func BenchmarkProcessorColdSpans(b *testing.B) {
	benchmarkProcessor(b, func(n int) int { return max(1, 16384/n) })
}

func benchmarkProcessor(b *testing.B, poolSize func(batch int) int) {
	repo := b.TempDir()
	place(b, repo, "runtime_overlap", 1, defaultModelFile)
	h := startExtension(b, repo, 0)
	for _, n := range benchBatches {
		b.Run(fmt.Sprintf("batch=%d", n), func(b *testing.B) {
			cfg := defaultConfig()
			cfg.Batch.MaxSize = n
			p, _ := startTraces(b, h, cfg, settings())
			pool := newSpanPool(traces(benchSpans(n)...), poolSize(n))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := p.ConsumeTraces(context.Background(), pool.get(b)); err != nil {
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
	session, outputs := rawSession(b)
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

// BenchmarkProcessorVsRaw takes both measurements in one loop: each
// iteration times one raw Run (as BenchmarkRawRun) and one processor call on
// fresh spans of the same rows (as BenchmarkProcessor), so that a machine
// whose speed drifts during the run (shared cores, frequency) slows both
// alike. It reports each one's spans/s and the ratio. The raw Runs here also
// follow the processor's work, not only each other, as they would in a
// collector.
//
//	go test -run '^$' -bench 'ProcessorVsRaw' -cpu 1 ./processor/inferenceprocessor/
func BenchmarkProcessorVsRaw(b *testing.B) {
	repo := b.TempDir()
	place(b, repo, "runtime_overlap", 1, defaultModelFile)
	h := startExtension(b, repo, 0)
	session, outputs := rawSession(b)
	for _, n := range benchBatches {
		b.Run(fmt.Sprintf("batch=%d", n), func(b *testing.B) {
			cfg := defaultConfig()
			cfg.Batch.MaxSize = n
			p, _ := startTraces(b, h, cfg, settings())
			specs := benchSpans(n)
			data := make([]float32, 0, n*5)
			for _, s := range specs {
				data = append(data, float32(s.duration)/float32(ms),
					float32(s.attrs["runtime.overlap.jvm.safepoint.duration"].(int64))/float32(ms), 0,
					float32(s.attrs["runtime.overlap.python.gil.wait.duration"].(int64))/float32(ms), 0)
			}
			in, err := ort.NewTensor(ort.NewShape(int64(n), 5), data)
			if err != nil {
				b.Fatal(err)
			}
			defer func() { _ = in.Destroy() }()
			pool := newSpanPool(traces(specs...), max(1, 512/n))
			var raw, proc time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				td := pool.get(b)
				start := time.Now()
				out := make([]ort.Value, len(outputs))
				if err := session.Run([]ort.Value{in}, out); err != nil {
					b.Fatal(err)
				}
				for _, v := range out {
					_ = v.Destroy()
				}
				mid := time.Now()
				if err := p.ConsumeTraces(context.Background(), td); err != nil {
					b.Fatal(err)
				}
				raw, proc = raw+mid.Sub(start), proc+time.Since(mid)
			}
			spans := float64(n) * float64(b.N)
			b.ReportMetric(spans/proc.Seconds(), "processor-spans/s")
			b.ReportMetric(spans/raw.Seconds(), "raw-spans/s")
			b.ReportMetric(100*raw.Seconds()/proc.Seconds(), "%-of-raw")
		})
	}
}

// rawSession opens the default model in onnxruntime_go directly, with the
// extension's default session options (one thread each, all graph
// optimisations), and returns it with the outputs to ask for.
func rawSession(b *testing.B) (*ort.DynamicAdvancedSession, []string) {
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
	b.Cleanup(func() { _ = session.Destroy() })
	return session, outputs
}

// spanPool hands out fresh copies of one batch of spans, made a pool at a
// time with the benchmark's timer stopped.
type spanPool struct {
	fresh ptrace.Traces
	pool  []ptrace.Traces
	next  int
}

func newSpanPool(fresh ptrace.Traces, size int) *spanPool {
	s := &spanPool{fresh: fresh, pool: make([]ptrace.Traces, size)}
	for i := range s.pool {
		s.pool[i] = ptrace.NewTraces()
		fresh.CopyTo(s.pool[i])
	}
	return s
}

// get returns the next fresh copy, refilling the pool when it is used up.
func (s *spanPool) get(b *testing.B) ptrace.Traces {
	if s.next == len(s.pool) {
		b.StopTimer()
		for _, td := range s.pool {
			s.fresh.CopyTo(td)
		}
		b.StartTimer()
		s.next = 0
	}
	s.next++
	return s.pool[s.next-1]
}
