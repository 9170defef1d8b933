package inferenceprocessor

import (
	"context"
	"errors"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"

	"github.com/otelcol-ai/otelcol-ai/internal/modelrepotest"
	"github.com/otelcol-ai/otelcol-ai/pkg/modelrunner"
	"github.com/otelcol-ai/otelcol-ai/processor/inferenceprocessor/internal/metadatatest"
)

const ms = time.Millisecond

func defaultConfig() *Config { return createDefaultConfig().(*Config) }

// The default model discriminates: spans whose latency runtime windows
// explain score high, the others low, and the dominant kind is named; spans
// deep in GC pauses are anomalous, spans without overlaps ordinary.
func TestDefaultModelJudgesRuntimeOverlap(t *testing.T) {
	repo := t.TempDir()
	modelrepotest.Place(t, repo, "runtime_overlap", 1, defaultModelFile)
	h := startExtension(t, repo, 0)
	p, sink := startTraces(t, h, defaultConfig(), settings())

	tests := []struct {
		name      string
		span      spanSpec
		fraction  float64
		unexplain float64
		dominant  int64
		// anomalous: +1 wants anomaly_score above 0.6, -1 below 0.5.
		anomalous int
	}{
		{"no overlap", spanSpec{duration: 100 * ms}, 0, 100, -1, -1},
		{"half a GC pause", spanSpec{duration: 100 * ms, attrs: map[string]any{"runtime.overlap.jvm.gc.pause.duration": int64(50 * ms)}}, 0.5, 50, 1, +1},
		{"safepoint and GIL wait", spanSpec{duration: 80 * ms, attrs: map[string]any{
			"runtime.overlap.jvm.safepoint.duration":   int64(10 * ms),
			"runtime.overlap.python.gil.wait.duration": int64(30 * ms),
		}}, 0.5, 40, 2, 0},
		{"all of it a Python GC", spanSpec{duration: 20 * ms, attrs: map[string]any{"runtime.overlap.python.gc.pause.duration": int64(20 * ms)}}, 1, 0, 3, +1},
		{"overlaps double counted: clipped", spanSpec{duration: 10 * ms, attrs: map[string]any{
			"runtime.overlap.jvm.safepoint.duration": int64(10 * ms),
			"runtime.overlap.jvm.gc.pause.duration":  int64(9 * ms),
		}}, 1, 0, 0, +1},
		{"a little GIL wait, as healthy spans have", spanSpec{duration: 40 * ms, attrs: map[string]any{
			"runtime.overlap.python.gil.wait.duration": int64(8 * ms),
		}}, 0.2, 32, 2, -1},
	}
	specs := make([]spanSpec, len(tests))
	for i, tt := range tests {
		specs[i] = tt.span
	}
	if err := p.ConsumeTraces(context.Background(), traces(specs...)); err != nil {
		t.Fatal(err)
	}
	got := spans(sink)
	if len(got) != len(tests) {
		t.Fatalf("%d spans out, want %d", len(got), len(tests))
	}
	distinct := map[float64]bool{}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := got[i]
			if v := attr(t, s, AttributeModelName).Str(); v != "runtime_overlap" {
				t.Errorf("model name %q", v)
			}
			if v := attr(t, s, AttributeModelVersion).Int(); v != 1 {
				t.Errorf("model version %d", v)
			}
			f := attr(t, s, "inference.runtime_overlap.explained_fraction").Double()
			if math.Abs(f-tt.fraction) > 1e-5 {
				t.Errorf("explained_fraction %v, want %v", f, tt.fraction)
			}
			if u := attr(t, s, "inference.runtime_overlap.unexplained_ms").Double(); math.Abs(u-tt.unexplain) > 1e-3 {
				t.Errorf("unexplained_ms %v, want %v", u, tt.unexplain)
			}
			if d := attr(t, s, "inference.runtime_overlap.dominant_cause").Int(); d != tt.dominant {
				t.Errorf("dominant_cause %d, want %d", d, tt.dominant)
			}
			score := attr(t, s, "inference.runtime_overlap.anomaly_score").Double()
			if score <= 0 || score >= 1 || (tt.anomalous > 0 && score <= 0.6) || (tt.anomalous < 0 && score >= 0.5) {
				t.Errorf("anomaly_score %.3f (want +1 above 0.6, -1 below 0.5: %+d)", score, tt.anomalous)
			}
			distinct[f] = true
		})
	}
	if len(distinct) < 3 {
		t.Fatalf("the model gave only %d distinct scores for %d different spans", len(distinct), len(tests))
	}
}

// Third-party models run through the repository and the processor.
func TestThirdPartyModels(t *testing.T) {
	repo := t.TempDir()
	modelrepotest.Place(t, repo, "forest", 2, randomForestFile)
	modelrepotest.Place(t, repo, "isolation", 1, isolationFile)
	modelrepotest.Place(t, repo, "sum", 1, dynamicAxesFile)
	h := startExtension(t, repo, 0)

	t.Run("skl2onnx IsolationForest tells odd spans from normal ones", func(t *testing.T) {
		cfg := defaultConfig()
		cfg.Model = "isolation"
		cfg.Features = []FeatureConfig{
			{Field: FieldDuration, Scale: 1e-6},
			{Field: FieldStatus, Scale: 0.5}, // error (2) -> 1
			{Attribute: "runtime.overlap.jvm.safepoint.duration", Default: ptr(0), Scale: 1e-6},
			{Attribute: "runtime.overlap.python.gil.wait.duration", Default: ptr(0), Scale: 1e-6},
		}
		cfg.Outputs = []OutputConfig{
			{Output: "scores", Attribute: "anomaly.score"},
			{Output: "label", Attribute: "anomaly.label"},
		}
		p, sink := startTraces(t, h, cfg, settings())
		normal := spanSpec{duration: 20 * ms, attrs: map[string]any{"runtime.overlap.python.gil.wait.duration": int64(300_000)}}
		odd := spanSpec{duration: 400 * ms, status: ptrace.StatusCodeError, attrs: map[string]any{
			"runtime.overlap.jvm.safepoint.duration":   int64(30 * ms),
			"runtime.overlap.python.gil.wait.duration": int64(50 * ms),
		}}
		if err := p.ConsumeTraces(context.Background(), traces(normal, odd)); err != nil {
			t.Fatal(err)
		}
		got := spans(sink)
		ns, os := attr(t, got[0], "anomaly.score").Double(), attr(t, got[1], "anomaly.score").Double()
		nl, ol := attr(t, got[0], "anomaly.label").Int(), attr(t, got[1], "anomaly.label").Int()
		// The same rows through the ONNX reference evaluator (onnx 1.23.2): 0.2208 and -0.1823.
		if math.Abs(ns-0.2208) > 1e-3 || math.Abs(os+0.1823) > 1e-3 || nl != 1 || ol != -1 {
			t.Fatalf("normal span %v/%d, odd span %v/%d; want 0.2208/1 and -0.1823/-1", ns, nl, os, ol)
		}
	})

	t.Run("scikit-learn random forest: label tensor", func(t *testing.T) {
		cfg := defaultConfig()
		cfg.Model = "forest"
		cfg.Features = []FeatureConfig{{Attribute: "a"}, {Attribute: "b"}, {Attribute: "c"}, {Attribute: "d"}}
		cfg.Outputs = []OutputConfig{{Output: "output_label", Attribute: "forest.label"}}
		p, sink := startTraces(t, h, cfg, settings())
		in := map[string]any{"a": 1.0, "b": 2.0, "c": 3.0, "d": 4.0}
		if err := p.ConsumeTraces(context.Background(), traces(spanSpec{duration: ms, attrs: in})); err != nil {
			t.Fatal(err)
		}
		s := spans(sink)[0]
		if l := attr(t, s, "forest.label").Int(); l != 0 && l != 1 {
			t.Fatalf("label %d", l)
		}
		if v := attr(t, s, AttributeModelVersion).Int(); v != 2 {
			t.Fatalf("version %d, want 2", v)
		}
	})

	t.Run("random forest's ZipMap probabilities, one attribute per class", func(t *testing.T) {
		cfg := defaultConfig()
		cfg.Model = "forest"
		cfg.Features = []FeatureConfig{{Attribute: "sepal.length"}, {Attribute: "sepal.width"}, {Attribute: "petal.length"}, {Attribute: "petal.width"}}
		cfg.Outputs = []OutputConfig{
			{Output: "output_label", Attribute: "iris.class"},
			{Output: "output_probability", Index: 0, Attribute: "iris.p.setosa"},
			{Output: "output_probability", Index: 2, Attribute: "iris.p.virginica"},
		}
		p, sink := startTraces(t, h, cfg, settings())
		setosa := map[string]any{"sepal.length": 5.1, "sepal.width": 3.5, "petal.length": 1.4, "petal.width": 0.2}
		virginica := map[string]any{"sepal.length": 6.7, "sepal.width": 3.0, "petal.length": 5.2, "petal.width": 2.3}
		if err := p.ConsumeTraces(context.Background(), traces(spanSpec{duration: ms, attrs: setosa}, spanSpec{duration: ms, attrs: virginica})); err != nil {
			t.Fatal(err)
		}
		got := spans(sink)
		if c := attr(t, got[0], "iris.class").Int(); c != 0 || attr(t, got[0], "iris.p.setosa").Double() < 0.8 {
			t.Fatalf("setosa judged class %d, p(setosa) %v", c, attr(t, got[0], "iris.p.setosa").Double())
		}
		if c := attr(t, got[1], "iris.class").Int(); c != 2 || attr(t, got[1], "iris.p.virginica").Double() < 0.6 {
			t.Fatalf("virginica judged class %d, p(virginica) %v", c, attr(t, got[1], "iris.p.virginica").Double())
		}
		if p := attr(t, got[1], "iris.p.setosa").Double(); p > 0.1 {
			t.Fatalf("virginica: p(setosa) %v", p)
		}
	})

	t.Run("an index past the classes leaves the items unjudged", func(t *testing.T) {
		tel := componenttest.NewTelemetry()
		t.Cleanup(func() { _ = tel.Shutdown(context.Background()) })
		cfg := defaultConfig()
		cfg.Model = "forest"
		cfg.Features = []FeatureConfig{{Attribute: "a", Default: ptr(1)}, {Attribute: "b", Default: ptr(1)}, {Attribute: "c", Default: ptr(1)}, {Attribute: "d", Default: ptr(1)}}
		cfg.Outputs = []OutputConfig{{Output: "output_probability", Index: 3, Attribute: "p3"}}
		p, sink := startTraces(t, h, cfg, metadatatest.NewSettings(tel))
		if err := p.ConsumeTraces(context.Background(), traces(spanSpec{duration: ms}, spanSpec{duration: ms})); err != nil {
			t.Fatal(err)
		}
		for _, s := range spans(sink) {
			if _, ok := s.Attributes().Get(AttributeModelName); ok {
				t.Fatalf("span judged: %v", s.Attributes().AsRaw())
			}
		}
		metadatatest.AssertEqualProcessorInferenceItemsNotJudged(t, tel, []metricdata.DataPoint[int64]{
			{Value: 2, Attributes: attribute.NewSet(attribute.String("reason", reasonBadOutput))},
		}, metricdatatest.IgnoreTimestamp())
	})

	t.Run("dynamic axes: ten features summed", func(t *testing.T) {
		cfg := defaultConfig()
		cfg.Model = "sum"
		cfg.Features = nil
		attrs := map[string]any{}
		for i := 0; i < 10; i++ {
			key := "f" + string(rune('0'+i))
			cfg.Features = append(cfg.Features, FeatureConfig{Attribute: key})
			attrs[key] = int64(i)
		}
		cfg.Outputs = []OutputConfig{{Output: "output_scalars", Attribute: "sum"}}
		p, sink := startTraces(t, h, cfg, settings())
		if err := p.ConsumeTraces(context.Background(), traces(spanSpec{duration: ms, attrs: attrs})); err != nil {
			t.Fatal(err)
		}
		if v := attr(t, spans(sink)[0], "sum").Double(); v != 45 {
			t.Fatalf("sum %v, want 45", v)
		}
	})
}

func TestStartRefusesWhatCannotWork(t *testing.T) {
	repo := t.TempDir()
	modelrepotest.Place(t, repo, "runtime_overlap", 1, defaultModelFile)
	h := startExtension(t, repo, 0)
	tests := []struct {
		name   string
		host   component.Host
		change func(*Config)
		want   []string
	}{
		{"extension missing", componenttest.NewNopHost(), func(*Config) {}, []string{"extension", `"onnxinference"`, "not found"}},
		{"model not served", h, func(c *Config) { c.Model = "nope" }, []string{`model "nope"`, modelrunner.ErrUnknownModel.Error()}},
		{"too few features", h, func(c *Config) { c.Features = c.Features[:4] }, []string{"features", "4 features configured"}},
		{"output not in the model", h, func(c *Config) { c.Outputs[1].Output = "nope" }, []string{"outputs[1]::output", `"nope"`}},
		{"index past the row", h, func(c *Config) { c.Outputs[0].Index = 1 }, []string{"outputs[0]::index"}},
		{"input not in the model", h, func(c *Config) { c.Input = "x" }, []string{"input", `"x"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := defaultConfig()
			tt.change(cfg)
			p, err := NewFactory().CreateTraces(context.Background(), settings(), cfg, consumertest.NewNop())
			if err != nil {
				t.Fatal(err)
			}
			err = p.Start(context.Background(), tt.host)
			if err == nil {
				t.Fatal("Start succeeded")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if err := p.Shutdown(context.Background()); err != nil {
				t.Fatal(err)
			}
		})
	}
	var lookup *modelrunner.LookupError
	p, _ := NewFactory().CreateTraces(context.Background(), settings(), defaultConfig(), consumertest.NewNop())
	if err := p.Start(context.Background(), componenttest.NewNopHost()); !errors.As(err, &lookup) || !lookup.Missing {
		t.Fatalf("missing extension: %v, want a *modelrunner.LookupError", err)
	}
	_ = p.Shutdown(context.Background())
}

// Items the model cannot judge pass unchanged and are counted; the others in
// the same batch are judged.
func TestUnjudgedItemsPassUnchanged(t *testing.T) {
	repo := t.TempDir()
	modelrepotest.Place(t, repo, "runtime_overlap", 1, defaultModelFile)
	h := startExtension(t, repo, 0)
	tel := componenttest.NewTelemetry()
	t.Cleanup(func() { _ = tel.Shutdown(context.Background()) })
	cfg := defaultConfig()
	cfg.Features[1].Default = nil // the safepoint overlap is now required
	p, sink := startTraces(t, h, cfg, metadatatest.NewSettings(tel))
	with := spanSpec{duration: 10 * ms, attrs: map[string]any{"runtime.overlap.jvm.safepoint.duration": int64(ms)}}
	without := spanSpec{duration: 10 * ms, attrs: map[string]any{"keep": "me"}}
	notNumber := spanSpec{duration: 10 * ms, attrs: map[string]any{"runtime.overlap.jvm.safepoint.duration": "soon"}}
	if err := p.ConsumeTraces(context.Background(), traces(with, without, notNumber)); err != nil {
		t.Fatal(err)
	}
	got := spans(sink)
	if len(got) != 3 {
		t.Fatalf("%d spans out, want all 3", len(got))
	}
	if v := attr(t, got[0], "inference.runtime_overlap.explained_fraction").Double(); math.Abs(v-0.1) > 1e-6 {
		t.Fatalf("judged span: %v, want 0.1", v)
	}
	for _, s := range got[1:] {
		if _, ok := s.Attributes().Get(AttributeModelName); ok {
			t.Fatalf("span without the feature was annotated: %v", s.Attributes().AsRaw())
		}
	}
	if raw := got[1].Attributes().AsRaw(); len(raw) != 1 || raw["keep"] != "me" {
		t.Fatalf("unjudged span changed: %v", raw)
	}
	metadatatest.AssertEqualProcessorInferenceItemsJudged(t, tel, []metricdata.DataPoint[int64]{{Value: 1}}, metricdatatest.IgnoreTimestamp())
	metadatatest.AssertEqualProcessorInferenceItemsNotJudged(t, tel, []metricdata.DataPoint[int64]{
		{Value: 2, Attributes: attribute.NewSet(attribute.String("reason", reasonMissingFeature))},
	}, metricdatatest.IgnoreTimestamp())
}

func TestAttributesPresentSelectsItems(t *testing.T) {
	repo := t.TempDir()
	modelrepotest.Place(t, repo, "runtime_overlap", 1, defaultModelFile)
	h := startExtension(t, repo, 0)
	cfg := defaultConfig()
	cfg.AttributesPresent = []string{"gen_ai.request.model"}
	p, sink := startTraces(t, h, cfg, settings())
	err := p.ConsumeTraces(context.Background(), traces(
		spanSpec{duration: ms, attrs: map[string]any{"gen_ai.request.model": "llama"}},
		spanSpec{duration: ms},
	))
	if err != nil {
		t.Fatal(err)
	}
	got := spans(sink)
	if _, ok := got[0].Attributes().Get(AttributeModelName); !ok {
		t.Fatal("selected span not judged")
	}
	if _, ok := got[1].Attributes().Get(AttributeModelName); ok {
		t.Fatal("unselected span judged")
	}
}

// A new version in the repository changes the label without a restart; one
// whose input the processor cannot feed is refused and the old one stays.
func TestNewVersionsWhileRunning(t *testing.T) {
	repo := t.TempDir()
	modelrepotest.Place(t, repo, "runtime_overlap", 1, defaultModelFile)
	h := startExtension(t, repo, 20*ms)
	p, sink := startTraces(t, h, defaultConfig(), settings())
	versionNow := func() int64 {
		sink.Reset()
		if err := p.ConsumeTraces(context.Background(), traces(spanSpec{duration: ms})); err != nil {
			t.Fatal(err)
		}
		return attr(t, spans(sink)[0], AttributeModelVersion).Int()
	}
	waitFor := func(want int64) {
		t.Helper()
		for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(10 * ms) {
			if versionNow() == want {
				return
			}
		}
		t.Fatalf("version label never became %d", want)
	}
	if v := versionNow(); v != 1 {
		t.Fatalf("label %d, want 1", v)
	}
	modelrepotest.Place(t, repo, "runtime_overlap", 2, defaultModelFile)
	waitFor(2)

	// A version with four inputs columns does not fit five features.
	modelrepotest.Place(t, repo, "runtime_overlap", 3, randomForestFile)
	for deadline := time.Now().Add(20 * time.Second); len(h.errors()) == 0; time.Sleep(10 * ms) {
		if time.Now().After(deadline) {
			t.Fatal("the unfit version 3 was never reported")
		}
	}
	if err := h.errors()[0]; !strings.Contains(err.Error(), "version 3") || !strings.Contains(err.Error(), "features") {
		t.Fatalf("report %q should name version 3 and features", err)
	}
	if v := versionNow(); v != 2 {
		t.Fatalf("after an unfit version 3: label %d, want 2", v)
	}
}

func TestLogs(t *testing.T) {
	repo := t.TempDir()
	modelrepotest.Place(t, repo, "sum", 1, dynamicAxesFile)
	h := startExtension(t, repo, 0)
	cfg := defaultConfig()
	cfg.Model = "sum"
	cfg.Features = nil
	for i := 0; i < 9; i++ {
		cfg.Features = append(cfg.Features, FeatureConfig{Attribute: "x", Scale: float64(i + 1)})
	}
	cfg.Features = append(cfg.Features, FeatureConfig{Field: FieldSeverityNumber})
	cfg.Outputs = []OutputConfig{{Output: "output_scalars", Attribute: "sum"}}
	sink := new(consumertest.LogsSink)
	p, err := NewFactory().CreateLogs(context.Background(), settings(), cfg, sink)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(context.Background(), h); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = p.Shutdown(context.Background()) }()
	ld := plog.NewLogs()
	rec := ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords().AppendEmpty()
	rec.Attributes().PutDouble("x", 1)
	rec.SetSeverityNumber(plog.SeverityNumberWarn) // 13
	if err := p.ConsumeLogs(context.Background(), ld); err != nil {
		t.Fatal(err)
	}
	got, _ := sink.AllLogs()[0].ResourceLogs().At(0).ScopeLogs().At(0).LogRecords().At(0).Attributes().Get("sum")
	if got.Double() != 45+13 {
		t.Fatalf("sum %v, want 58", got.Double())
	}
	// Span fields are refused for logs, at start.
	cfg.Features[9] = FeatureConfig{Field: FieldDuration}
	bad, err := NewFactory().CreateLogs(context.Background(), settings(), cfg, sink)
	if err != nil {
		t.Fatal(err)
	}
	if err := bad.Start(context.Background(), h); err == nil || !strings.Contains(err.Error(), "features[9]") {
		t.Fatalf("duration for logs: %v, want an error naming features[9]", err)
	}
	_ = bad.Shutdown(context.Background())
}

func TestBatching(t *testing.T) {
	repo := t.TempDir()
	modelrepotest.Place(t, repo, "runtime_overlap", 1, defaultModelFile)
	h := startExtension(t, repo, 0)
	specs := make([]spanSpec, 7)
	for i := range specs {
		specs[i] = spanSpec{duration: 100 * ms, attrs: map[string]any{"runtime.overlap.jvm.gc.pause.duration": int64(i) * int64(10*ms)}}
	}
	check := func(t *testing.T, got []ptrace.Span) {
		t.Helper()
		for i, s := range got {
			if f := attr(t, s, "inference.runtime_overlap.explained_fraction").Double(); math.Abs(f-float64(i)/10) > 1e-6 {
				t.Fatalf("span %d: %v, want %v (rows mixed up across batches?)", i, f, float64(i)/10)
			}
		}
	}
	t.Run("split into runs of max_size", func(t *testing.T) {
		cfg := defaultConfig()
		cfg.Batch.MaxSize = 3
		p, sink := startTraces(t, h, cfg, settings())
		if err := p.ConsumeTraces(context.Background(), traces(specs...)); err != nil {
			t.Fatal(err)
		}
		check(t, spans(sink))
	})
	t.Run("concurrent calls coalesced within max_wait", func(t *testing.T) {
		cfg := defaultConfig()
		cfg.Batch.MaxSize, cfg.Batch.MaxWait = 64, 20*ms
		p, err := NewFactory().CreateTraces(context.Background(), settings(), cfg, consumertest.NewNop())
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Start(context.Background(), h); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = p.Shutdown(context.Background()) }()
		var wg sync.WaitGroup
		results := make([]ptrace.Traces, 4)
		for c := range results {
			results[c] = traces(specs...)
			wg.Add(1)
			go func() {
				defer wg.Done()
				_ = p.ConsumeTraces(context.Background(), results[c])
			}()
		}
		wg.Wait()
		for _, td := range results {
			sink := new(consumertest.TracesSink)
			_ = sink.ConsumeTraces(context.Background(), td)
			check(t, spans(sink))
		}
	})
}

func TestLifecycleTwice(t *testing.T) {
	repo := t.TempDir()
	modelrepotest.Place(t, repo, "runtime_overlap", 1, defaultModelFile)
	h := startExtension(t, repo, 0)
	for i := 0; i < 2; i++ {
		for _, create := range []func() (component.Component, error){
			func() (component.Component, error) {
				return NewFactory().CreateTraces(context.Background(), settings(), defaultConfig(), consumertest.NewNop())
			},
			func() (component.Component, error) {
				return NewFactory().CreateLogs(context.Background(), settings(), logsConfig(), consumertest.NewNop())
			},
		} {
			c, err := create()
			if err != nil {
				t.Fatal(err)
			}
			if err := c.Start(context.Background(), h); err != nil {
				t.Fatal(err)
			}
			if err := c.Shutdown(context.Background()); err != nil {
				t.Fatal(err)
			}
			if err := c.Shutdown(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// logsConfig feeds the default model from log attributes.
func logsConfig() *Config {
	cfg := defaultConfig()
	cfg.Features[0] = FeatureConfig{Attribute: "duration_ns", Scale: 1e-6}
	return cfg
}

func TestConditionsSelectItems(t *testing.T) {
	repo := t.TempDir()
	modelrepotest.Place(t, repo, "runtime_overlap", 1, defaultModelFile)
	h := startExtension(t, repo, 0)
	cfg := defaultConfig()
	cfg.Conditions = []string{
		`attributes["gen_ai.request.model"] == "llama"`,
		`status.code == STATUS_CODE_ERROR and resource.attributes["service.name"] == "inference-api"`,
	}
	p, sink := startTraces(t, h, cfg, settings())
	err := p.ConsumeTraces(context.Background(), traces(
		spanSpec{duration: ms, attrs: map[string]any{"gen_ai.request.model": "llama"}},
		spanSpec{duration: ms, attrs: map[string]any{"gen_ai.request.model": "mistral"}},
		spanSpec{duration: ms, status: ptrace.StatusCodeError},
		spanSpec{duration: ms, attrs: map[string]any{"gen_ai.request.model": 7}}, // compares false, not an error
	))
	if err != nil {
		t.Fatal(err)
	}
	want := []bool{true, false, true, false}
	for i, s := range spans(sink) {
		if _, judged := s.Attributes().Get(AttributeModelName); judged != want[i] {
			t.Errorf("span %d judged %v, want %v", i, judged, want[i])
		}
	}

	cfg.Conditions = []string{`attributes["x"] == `}
	_, err = NewFactory().CreateTraces(context.Background(), settings(), cfg, consumertest.NewNop())
	if err == nil || !strings.Contains(err.Error(), "conditions[0]") {
		t.Fatalf("a condition that does not parse: %v, want an error naming conditions[0]", err)
	}
}
