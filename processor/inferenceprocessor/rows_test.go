package inferenceprocessor

import (
	"context"
	"slices"
	"sync"
	"testing"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otelcol-ai/otelcol-ai/pkg/modelrunner"
)

// recordingProvider is a fixedProvider that keeps the rows of each run.
type recordingProvider struct {
	*fixedProvider
	mu   sync.Mutex
	rows [][]float32
}

func (p *recordingProvider) Run(ctx context.Context, model string, req modelrunner.Request) (modelrunner.Result, error) {
	p.mu.Lock()
	p.rows = append(p.rows, slices.Clone(req.Inputs[0].Data.([]float32)))
	p.mu.Unlock()
	return p.fixedProvider.Run(ctx, model, req)
}

// rowsConfig reads a resource attribute (scaled, no default), a span
// attribute (with a default) and the duration.
func rowsConfig() *Config {
	cfg := defaultConfig()
	cfg.Features = []FeatureConfig{
		{ResourceAttribute: "host.cpu.count", Scale: 0.5},
		{Attribute: "queue.depth", Default: ptr(-1), Offset: 1},
		{Field: FieldDuration, Scale: nsToMs},
	}
	cfg.Outputs = cfg.Outputs[:1]
	cfg.Batch.MaxSize = 16
	return cfg
}

func startRecording(t *testing.T, cfg *Config, forLogs bool) (*inferenceProcessor, *recordingProvider) {
	t.Helper()
	provider := &recordingProvider{fixedProvider: newFixedProvider(cfg, cfg.Batch.MaxSize)}
	return startOn(t, provider, cfg, forLogs), provider
}

// startOn starts a processor with cfg whose extension is provider.
func startOn(t testing.TB, provider component.Component, cfg *Config, forLogs bool) *inferenceProcessor {
	t.Helper()
	h := &host{Host: componenttest.NewNopHost(), extensions: map[component.ID]component.Component{extensionID: provider}}
	p, err := newInferenceProcessor(settings(), cfg, forLogs)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.start(context.Background(), h); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.shutdown(context.Background()) })
	return p
}

// TestRowsOfSeveralResources checks that each item's row holds its own
// resource's features, read once per resource, and that the items of a
// resource missing a feature are left untouched.
func TestRowsOfSeveralResources(t *testing.T) {
	p, provider := startRecording(t, rowsConfig(), false)
	td := ptrace.NewTraces()
	for _, cpus := range []int64{8, 0, 2} { // 0: no attribute
		rs := td.ResourceSpans().AppendEmpty()
		if cpus > 0 {
			rs.Resource().Attributes().PutInt("host.cpu.count", cpus)
		}
		spans := rs.ScopeSpans().AppendEmpty().Spans()
		for i := range 2 {
			span := spans.AppendEmpty()
			span.SetEndTimestamp(3_000_000) // 3 ms, from 0
			if i == 1 {
				span.Attributes().PutInt("queue.depth", cpus*10)
			}
		}
	}
	if _, err := p.processTraces(context.Background(), td); err != nil {
		t.Fatal(err)
	}
	want := [][]float32{{
		4, -1, 3, // resource 8: default, then 80+1
		4, 81, 3,
		1, -1, 3, // resource 2 (the resource without it has no rows)
		1, 21, 3,
	}}
	if !slices.EqualFunc(provider.rows, want, slices.Equal) {
		t.Fatalf("rows %v, want %v", provider.rows, want)
	}
	for i, judged := range []bool{true, false, true} {
		spans := td.ResourceSpans().At(i).ScopeSpans().At(0).Spans()
		for j := range spans.Len() {
			_, ok := spans.At(j).Attributes().Get(AttributeModelName)
			if ok != judged {
				t.Errorf("resource %d span %d judged %v, want %v", i, j, ok, judged)
			}
		}
	}
}

// TestWritesValuesByRow checks the value each item gets: its own row's
// element of each output, typed as the output is, across model runs.
func TestWritesValuesByRow(t *testing.T) {
	cfg := defaultConfig()
	cfg.Batch.MaxSize = 3 // 7 spans: runs of 3, 3 and 1
	p, _ := startRecording(t, cfg, false)
	td := traces(benchSpans(t, 7)...)
	if _, err := p.processTraces(context.Background(), td); err != nil {
		t.Fatal(err)
	}
	spans := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans()
	for i := range spans.Len() {
		span := spans.At(i)
		r := i % 3 // the row within its run
		if got := attr(t, span, AttributeModelName).Str(); got != defaultModel {
			t.Errorf("span %d: model %q", i, got)
		}
		if got := attr(t, span, AttributeModelVersion).Int(); got != 1 {
			t.Errorf("span %d: version %d", i, got)
		}
		for _, o := range cfg.Outputs {
			v := attr(t, span, o.Attribute)
			if o.Output == "dominant_cause" {
				if v.Int() != int64(r%4) {
					t.Errorf("span %d: %s = %v, want int %d", i, o.Attribute, v.AsRaw(), r%4)
				}
			} else if v.Double() != float64(r)/8 {
				t.Errorf("span %d: %s = %v, want double %v", i, o.Attribute, v.AsRaw(), float64(r)/8)
			}
		}
	}
}

func TestLogRowsOfSeveralResources(t *testing.T) {
	cfg := rowsConfig()
	cfg.Features[2] = FeatureConfig{Field: FieldSeverityNumber}
	p, provider := startRecording(t, cfg, true)
	ld := plog.NewLogs()
	for _, cpus := range []int64{4, 6} {
		rl := ld.ResourceLogs().AppendEmpty()
		rl.Resource().Attributes().PutInt("host.cpu.count", cpus)
		rec := rl.ScopeLogs().AppendEmpty().LogRecords().AppendEmpty()
		rec.SetSeverityNumber(plog.SeverityNumberWarn)
		rec.Attributes().PutStr("queue.depth", "2.5")
	}
	if _, err := p.processLogs(context.Background(), ld); err != nil {
		t.Fatal(err)
	}
	want := [][]float32{{2, 3.5, 13, 3, 3.5, 13}}
	if !slices.EqualFunc(provider.rows, want, slices.Equal) {
		t.Fatalf("rows %v, want %v", provider.rows, want)
	}
}
