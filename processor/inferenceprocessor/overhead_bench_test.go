package inferenceprocessor

import (
	"context"
	"fmt"
	"testing"

	"go.opentelemetry.io/collector/component"

	"github.com/otelcol-ai/otelcol-ai/pkg/modelrunner"
)

// fixedProvider serves a model that fits cfg, whose outputs are made ahead,
// so that a benchmark on it measures the processor alone. Outputs are
// float32 but for dominant_cause, an int64 as in runtime_overlap.
type fixedProvider struct {
	component.StartFunc
	component.ShutdownFunc
	sig  modelrunner.Signature
	outs map[int64][]modelrunner.Tensor // by rows
}

func newFixedProvider(cfg *Config, maxRows int) *fixedProvider {
	p := &fixedProvider{
		sig: modelrunner.Signature{
			Model: cfg.Model, Version: 1,
			Inputs: []modelrunner.ValueInfo{{Name: "features", Kind: modelrunner.KindTensor, Type: modelrunner.TypeFloat32,
				Shape: []int64{-1, int64(len(cfg.Features))}}},
		},
		outs: map[int64][]modelrunner.Tensor{},
	}
	for _, o := range cfg.Outputs {
		typ := modelrunner.TypeFloat32
		if o.Output == "dominant_cause" {
			typ = modelrunner.TypeInt64
		}
		p.sig.Outputs = append(p.sig.Outputs, modelrunner.ValueInfo{Name: o.Output, Kind: modelrunner.KindTensor, Type: typ, Shape: []int64{-1}})
	}
	for n := int64(1); n <= int64(maxRows); n++ {
		for _, o := range p.sig.Outputs {
			t := modelrunner.Tensor{Name: o.Name, Type: o.Type, Shape: []int64{n}}
			if o.Type == modelrunner.TypeInt64 {
				data := make([]int64, n)
				for i := range data {
					data[i] = int64(i % 4)
				}
				t.Data = data
			} else {
				data := make([]float32, n)
				for i := range data {
					data[i] = float32(i) / 8
				}
				t.Data = data
			}
			p.outs[n] = append(p.outs[n], t)
		}
	}
	return p
}

func (p *fixedProvider) Signature(string, int64) (modelrunner.Signature, error) { return p.sig, nil }

func (p *fixedProvider) Run(_ context.Context, model string, req modelrunner.Request) (modelrunner.Result, error) {
	return modelrunner.Result{Model: model, Version: p.sig.Version, Outputs: p.outs[req.Inputs[0].Shape[0]]}, nil
}

func (p *fixedProvider) Watch(_ string, check func(modelrunner.Signature) error) (func(), error) {
	return func() {}, check(p.sig)
}

// BenchmarkOverhead measures the processor's own work per call (feature
// extraction, batching, attribute writes) on a provider that answers at
// once, without ONNX Runtime:
//
//	go test -run '^$' -bench Overhead -benchmem -cpu 1 ./processor/inferenceprocessor/
func BenchmarkOverhead(b *testing.B) {
	for _, n := range benchBatches {
		b.Run(fmt.Sprintf("batch=%d", n), func(b *testing.B) {
			cfg := defaultConfig()
			cfg.Batch.MaxSize = n
			p := startOn(b, newFixedProvider(cfg, n), cfg, false)
			pool := newSpanPool(b, newBenchWorkload(b, n).spans, max(1, 512/n))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				td, _ := pool.get(b)
				if _, err := p.processTraces(context.Background(), td); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n)/float64(b.N), "ns/span")
		})
	}
}

// BenchmarkWritesOnly is the floor under BenchmarkOverhead: on the same
// fresh spans, only the attribute writes every judged span gets with the
// default config (model name and version, four outputs), with constant
// values and no feature extraction, batching or model: what any processor
// adding these attributes through pdata pays.
//
//	go test -run '^$' -bench 'Overhead|WritesOnly' -benchmem -cpu 1 ./processor/inferenceprocessor/
func BenchmarkWritesOnly(b *testing.B) {
	cfg := defaultConfig()
	for _, n := range benchBatches {
		b.Run(fmt.Sprintf("batch=%d", n), func(b *testing.B) {
			pool := newSpanPool(b, newBenchWorkload(b, n).spans, max(1, 512/n))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				td, _ := pool.get(b)
				spans := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans()
				for k := 0; k < spans.Len(); k++ {
					attrs := spans.At(k).Attributes()
					attrs.EnsureCapacity(attrs.Len() + 2 + len(cfg.Outputs))
					attrs.PutStr(AttributeModelName, defaultModel)
					attrs.PutInt(AttributeModelVersion, 2)
					for _, o := range cfg.Outputs {
						if o.Output == "dominant_cause" {
							attrs.PutInt(o.Attribute, int64(k%4))
						} else {
							attrs.PutDouble(o.Attribute, float64(k)/8)
						}
					}
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n)/float64(b.N), "ns/span")
		})
	}
}
