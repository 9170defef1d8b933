package inferenceprocessor

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componentstatus"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/extension/extensiontest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/otelcol-ai/otelcol-ai/extension/onnxinferenceextension"
	"github.com/otelcol-ai/otelcol-ai/internal/modelrepotest"
)

// Models the tests load: the distribution's default model, and third-party
// ones (onnxruntime_go's test_data; an IsolationForest from skl2onnx made by
// cmd/genmodel/isolation_forest.py).
var (
	defaultModelFile = filepath.Join("..", "..", "models", "runtime_overlap", "2", "model.onnx")
	randomForestFile = filepath.Join("testdata", "models", "sklearn_randomforest.onnx")
	dynamicAxesFile  = filepath.Join("testdata", "models", "example_dynamic_axes.onnx")
	isolationFile    = filepath.Join("testdata", "models", "isolation_forest.onnx")
)

// host serves one onnxinference extension and records status reports.
type host struct {
	component.Host
	extensions map[component.ID]component.Component
	mu         sync.Mutex
	reports    []error
}

func (h *host) GetExtensions() map[component.ID]component.Component { return h.extensions }

func (h *host) Report(ev *componentstatus.Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if ev.Err() != nil {
		h.reports = append(h.reports, ev.Err())
	}
}

func (h *host) errors() []error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]error(nil), h.reports...)
}

var extensionID = component.MustNewID("onnxinference")

// startExtension starts an onnxinference extension on repo; poll 0 turns
// polling off.
func startExtension(t testing.TB, repo string, poll time.Duration) *host {
	t.Helper()
	modelrepotest.RequireLibrary(t)
	f := onnxinferenceextension.NewFactory()
	cfg := f.CreateDefaultConfig().(*onnxinferenceextension.Config)
	cfg.Repository, cfg.PollInterval, cfg.SettleTime = repo, poll, 0
	ext, err := f.Create(context.Background(), extensiontest.NewNopSettings(f.Type()), cfg)
	if err != nil {
		t.Fatal(err)
	}
	h := &host{Host: componenttest.NewNopHost(), extensions: map[component.ID]component.Component{extensionID: ext}}
	if err := ext.Start(context.Background(), h); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := ext.Shutdown(context.Background()); err != nil {
			t.Error(err)
		}
	})
	return h
}

// startTraces starts a traces processor with cfg on h, feeding sink.
func startTraces(t testing.TB, h component.Host, cfg *Config, set processor.Settings) (processor.Traces, *consumertest.TracesSink) {
	t.Helper()
	sink := new(consumertest.TracesSink)
	return startTracesTo(t, h, cfg, set, sink), sink
}

// startTracesTo starts a traces processor with cfg on h, feeding next.
func startTracesTo(t testing.TB, h component.Host, cfg *Config, set processor.Settings, next consumer.Traces) processor.Traces {
	t.Helper()
	p, err := NewFactory().CreateTraces(context.Background(), set, cfg, next)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(context.Background(), h); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		if err := p.Shutdown(context.Background()); err != nil {
			t.Error(err)
		}
	})
	return p
}

func settings() processor.Settings { return processortest.NewNopSettings(NewFactory().Type()) }

// spanSpec is a span to build: duration and attributes.
type spanSpec struct {
	duration time.Duration
	status   ptrace.StatusCode
	attrs    map[string]any
}

func traces(specs ...spanSpec) ptrace.Traces {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "inference-api")
	ss := rs.ScopeSpans().AppendEmpty()
	start := time.Unix(1_800_000_000, 0)
	for i, s := range specs {
		span := ss.Spans().AppendEmpty()
		span.SetName("predict")
		span.SetSpanID([8]byte{byte(i + 1)})
		span.SetTraceID([16]byte{1})
		span.SetStartTimestamp(pcommon.NewTimestampFromTime(start))
		span.SetEndTimestamp(pcommon.NewTimestampFromTime(start.Add(s.duration)))
		span.Status().SetCode(s.status)
		if err := span.Attributes().FromRaw(s.attrs); err != nil {
			panic(err)
		}
	}
	return td
}

// spans returns the spans the sink received, in order.
func spans(sink *consumertest.TracesSink) []ptrace.Span {
	var out []ptrace.Span
	for _, td := range sink.AllTraces() {
		rss := td.ResourceSpans()
		for i := 0; i < rss.Len(); i++ {
			sss := rss.At(i).ScopeSpans()
			for j := 0; j < sss.Len(); j++ {
				for k := 0; k < sss.At(j).Spans().Len(); k++ {
					out = append(out, sss.At(j).Spans().At(k))
				}
			}
		}
	}
	return out
}

func attr(t testing.TB, span ptrace.Span, key string) pcommon.Value {
	t.Helper()
	v, ok := span.Attributes().Get(key)
	if !ok {
		t.Fatalf("span %s has no attribute %s (has %v)", span.SpanID(), key, span.Attributes().AsRaw())
	}
	return v
}

func ptr(f float64) *float64 { return &f }
