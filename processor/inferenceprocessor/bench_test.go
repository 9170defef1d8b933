package inferenceprocessor

import (
	"context"
	"encoding/csv"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	ort "github.com/yalue/onnxruntime_go"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otelcol-ai/otelcol-ai/internal/modelrepotest"
)

// Batch sizes the benchmarks compare at.
var benchBatches = []int{1, 64, 512}

// benchRowFiles hold the features of real spans: the hybrid example's spans
// from a healthy run the default model was not trained on, and from a run
// under allocation pressure (cmd/genmodel/data; capture.sh there made them).
var benchRowFiles = []string{"healthy-holdout.csv", "stressed.csv"}

// benchKinds are the overlap kinds of the rows' columns after the duration,
// in the order of the default config's features.
var benchKinds = []string{"jvm.safepoint", "jvm.gc.pause", "python.gil.wait", "python.gc.pause"}

var benchRowsOnce = sync.OnceValues(func() ([][5]float64, error) {
	var rows [][5]float64
	for _, name := range benchRowFiles {
		f, err := os.Open(filepath.Join("..", "..", "cmd", "genmodel", "data", name))
		if err != nil {
			return nil, err
		}
		records, err := csv.NewReader(f).ReadAll()
		_ = f.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		for i, rec := range records[1:] { // after the header
			if len(rec) != 5 {
				return nil, fmt.Errorf("%s:%d: %d fields", name, i+2, len(rec))
			}
			var row [5]float64
			for j, field := range rec {
				if row[j], err = strconv.ParseFloat(field, 64); err != nil {
					return nil, fmt.Errorf("%s:%d: %w", name, i+2, err)
				}
			}
			rows = append(rows, row)
		}
	}
	return rows, nil
})

// benchStream returns n rows of real span features (see benchRowFiles) in a
// fixed pseudo-random order: the rows reshuffled on every pass over them, as
// spans of both runs would arrive mixed.
func benchStream(tb testing.TB, n int) [][5]float64 {
	tb.Helper()
	rows, err := benchRowsOnce()
	if err != nil {
		tb.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	out := make([][5]float64, 0, n)
	for len(out) < n {
		pass := slices.Clone(rows)
		rng.Shuffle(len(pass), func(i, j int) { pass[i], pass[j] = pass[j], pass[i] })
		out = append(out, pass[:min(len(pass), n-len(out))]...)
	}
	return out
}

// benchSpec is the span of one row as it reaches the processor in the
// hybrid example: the service's attributes, and runtimecorrelation's total
// and count for each kind that overlapped it (absent when none did).
func benchSpec(i int, row [5]float64) spanSpec {
	attrs := map[string]any{
		"hybrid.request":              int64(i),
		"hybrid.mode":                 "embedded",
		"hybrid.postprocess.checksum": int64(i) * 7919,
	}
	for k, kind := range benchKinds {
		if row[k+1] > 0 {
			attrs["runtime.overlap."+kind+".duration"] = int64(row[k+1] * float64(ms))
			attrs["runtime.overlap."+kind+".count"] = int64(1)
		}
	}
	return spanSpec{duration: time.Duration(row[0] * float64(ms)), attrs: attrs}
}

// benchSpans returns the spans of the first n rows of benchStream.
func benchSpans(tb testing.TB, n int) []spanSpec {
	specs := make([]spanSpec, n)
	for i, row := range benchStream(tb, n) {
		specs[i] = benchSpec(i, row)
	}
	return specs
}

// benchWorkload is a benchmark's input at one batch size: distinct batches
// of real spans (consecutive rows of benchStream), each also as the feature
// tensor the processor builds from it, so that raw Run and the processor
// see the same rows. Replaying one batch would let the CPU learn the
// model's branches on those very rows, which no collector sees twice; with
// at least 8 batches, and every row in one at least once, neither side
// replays for thousands of rows.
type benchWorkload struct {
	spans [][]byte // the batches as OTLP protobuf
	rows  [][]float32
}

func newBenchWorkload(tb testing.TB, n int) *benchWorkload {
	tb.Helper()
	rows, err := benchRowsOnce()
	if err != nil {
		tb.Fatal(err)
	}
	k := max(8, (len(rows)+n-1)/n)
	stream := benchStream(tb, k*n)
	w := &benchWorkload{}
	for b := range k {
		specs := make([]spanSpec, n)
		data := make([]float32, 0, n*5)
		for i, row := range stream[b*n : (b+1)*n] {
			specs[i] = benchSpec(b*n+i, row)
			// As the processor reads them: whole ns, to ms.
			data = append(data, float32(specs[i].duration)/float32(ms))
			for _, kind := range benchKinds {
				v, _ := specs[i].attrs["runtime.overlap."+kind+".duration"].(int64)
				data = append(data, float32(v)/float32(ms))
			}
		}
		buf, err := (&ptrace.ProtoMarshaler{}).MarshalTraces(traces(specs...))
		if err != nil {
			tb.Fatal(err)
		}
		w.spans = append(w.spans, buf)
		w.rows = append(w.rows, data)
	}
	return w
}

// tensors returns the batches' rows as onnxruntime_go tensors, destroyed
// at the end of the benchmark.
func (w *benchWorkload) tensors(b *testing.B) []*ort.Tensor[float32] {
	out := make([]*ort.Tensor[float32], len(w.rows))
	for i, data := range w.rows {
		t, err := ort.NewTensor(ort.NewShape(int64(len(data)/5), 5), data)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = t.Destroy() })
		out[i] = t
	}
	return out
}

// BenchmarkProcessor measures the processor's spans/s with the default
// model: feature extraction, the model run through the extension, and the
// attribute writes, on the batches of newBenchWorkload in turn. Each call
// gets its spans freshly decoded, outside the timer shortly before it (512
// spans at a time, so that stopping the timer costs small batches little),
// as warm in the caches as spans a receiver has just decoded. Compare with
// BenchmarkRawRun at the same batch sizes (bench/inference/inference.sh
// does, as a table):
//
//	go test -run '^$' -bench 'Processor$|RawRun$' -cpu 1 ./processor/inferenceprocessor/
func BenchmarkProcessor(b *testing.B) {
	benchmarkProcessor(b, func(n int) int { return max(1, 512/n) })
}

// BenchmarkProcessorColdSpans is BenchmarkProcessor on spans decoded ahead,
// 16384 at a time, so that most have left the caches when their call comes:
// the cost of first touching a span's attributes is the processor's here.
func BenchmarkProcessorColdSpans(b *testing.B) {
	benchmarkProcessor(b, func(n int) int { return max(1, 16384/n) })
}

func benchmarkProcessor(b *testing.B, poolSize func(batch int) int) {
	repo := b.TempDir()
	modelrepotest.Place(b, repo, "runtime_overlap", 1, defaultModelFile)
	h := startExtension(b, repo, 0)
	for _, n := range benchBatches {
		b.Run(fmt.Sprintf("batch=%d", n), func(b *testing.B) {
			cfg := defaultConfig()
			cfg.Batch.MaxSize = n
			// A sink keeping every batch would grow the heap each
			// collection marks, run after run.
			p := startTracesTo(b, h, cfg, settings(), consumertest.NewNop())
			pool := newSpanPool(b, newBenchWorkload(b, n).spans, poolSize(n))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				td, _ := pool.get(b)
				if err := p.ConsumeTraces(context.Background(), td); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "spans/s")
		})
	}
}

// BenchmarkRawRun is the ceiling: onnxruntime_go's Run on the same model,
// the same session options and ready-made tensors of the same rows, the
// batches in the same turn as BenchmarkProcessor's. Its spans are decoded
// as BenchmarkProcessor's are, at the same times with the timer stopped,
// and left unread: the caches a Run finds are those a receiver leaves, in
// both benchmarks, and what the processor's own work costs the model run
// stays on the processor's side.
func BenchmarkRawRun(b *testing.B) {
	repo := b.TempDir()
	modelrepotest.Place(b, repo, "runtime_overlap", 1, defaultModelFile)
	startExtension(b, repo, 0) // holds the ONNX Runtime environment
	session, outputs := rawSession(b)
	for _, n := range benchBatches {
		b.Run(fmt.Sprintf("batch=%d", n), func(b *testing.B) {
			w := newBenchWorkload(b, n)
			ins := w.tensors(b)
			pool := newSpanPool(b, w.spans, max(1, 512/n))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				_, batch := pool.get(b)
				rawRun(b, session, ins[batch], len(outputs))
			}
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "spans/s")
		})
	}
}

// rawRun is one raw Run, its outputs made by ONNX Runtime and destroyed.
func rawRun(b *testing.B, session *ort.DynamicAdvancedSession, in ort.Value, outputs int) {
	var buf [8]ort.Value
	out := buf[:outputs]
	if err := session.Run([]ort.Value{in}, out); err != nil {
		b.Fatal(err)
	}
	for _, v := range out {
		_ = v.Destroy()
	}
}

// BenchmarkProcessorVsRaw takes both measurements in one loop: each
// iteration times one raw Run (as BenchmarkRawRun) and one processor call on
// fresh spans (as BenchmarkProcessor), so that a machine whose speed drifts
// during the run (shared cores, frequency) slows both alike. It reports
// each one's spans/s and the ratio. The raw Runs here also follow the
// processor's work, not only each other, as they would in a collector. The
// two take the workload's batches half a turn apart: a model run right after
// one on the same rows would find the CPU's branch predictors trained on
// them.
//
//	go test -run '^$' -bench 'ProcessorVsRaw' -cpu 1 ./processor/inferenceprocessor/
func BenchmarkProcessorVsRaw(b *testing.B) {
	repo := b.TempDir()
	modelrepotest.Place(b, repo, "runtime_overlap", 1, defaultModelFile)
	h := startExtension(b, repo, 0)
	session, outputs := rawSession(b)
	for _, n := range benchBatches {
		b.Run(fmt.Sprintf("batch=%d", n), func(b *testing.B) {
			cfg := defaultConfig()
			cfg.Batch.MaxSize = n
			// A sink keeping every batch would grow the heap each
			// collection marks, run after run.
			p := startTracesTo(b, h, cfg, settings(), consumertest.NewNop())
			w := newBenchWorkload(b, n)
			ins := w.tensors(b)
			pool := newSpanPool(b, w.spans, max(1, 512/n))
			var raw, proc time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				td, batch := pool.get(b)
				start := time.Now()
				rawRun(b, session, ins[(batch+len(ins)/2)%len(ins)], len(outputs))
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

// spanPool hands out fresh copies of a workload's batches in turn, decoded
// a pool at a time with the benchmark's timer stopped.
type spanPool struct {
	fresh [][]byte // the batches as OTLP protobuf
	pool  []ptrace.Traces
	base  int // the batch pool[0] is a copy of
	next  int
}

func newSpanPool(b *testing.B, batches [][]byte, size int) *spanPool {
	s := &spanPool{fresh: batches, pool: make([]ptrace.Traces, size)}
	s.fill(b)
	return s
}

// fill decodes the next batches into new spans, as the OTLP receiver hands
// them on: copying into the spans of the last turn would hand the processor
// attribute slices with room for its attributes already made. (The batches
// are kept encoded, so that a garbage collection has little to mark.)
func (s *spanPool) fill(b *testing.B) {
	var u ptrace.ProtoUnmarshaler
	for i := range s.pool {
		td, err := u.UnmarshalTraces(s.fresh[(s.base+i)%len(s.fresh)])
		if err != nil {
			b.Fatal(err)
		}
		s.pool[i] = td
	}
}

// get returns fresh spans of the next batch and the batch's index,
// refilling the pool when it is used up.
func (s *spanPool) get(b *testing.B) (ptrace.Traces, int) {
	if s.next == len(s.pool) {
		b.StopTimer()
		s.base += len(s.pool)
		s.fill(b)
		b.StartTimer()
		s.next = 0
	}
	s.next++
	return s.pool[s.next-1], (s.base + s.next - 1) % len(s.fresh)
}
