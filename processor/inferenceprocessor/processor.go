package inferenceprocessor // import "github.com/otelcol-ai/otelcol-ai/processor/inferenceprocessor"

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/otelcol-ai/otelcol-ai/internal/recoverable"
	"github.com/otelcol-ai/otelcol-ai/pkg/modelrunner"
	"github.com/otelcol-ai/otelcol-ai/processor/inferenceprocessor/internal/batcher"
	"github.com/otelcol-ai/otelcol-ai/processor/inferenceprocessor/internal/features"
	"github.com/otelcol-ai/otelcol-ai/processor/inferenceprocessor/internal/metadata"
)

// Reasons an item was not judged (the reason attribute of
// processor_inference_items_not_judged).
const (
	reasonMissingFeature = "missing_feature"
	reasonRunFailed      = "run_failed"
	reasonBadOutput      = "bad_output"
)

// reasonAttrs label the count of items not judged, as the options of Add so
// that a call passes them without allocating.
var reasonAttrs = map[string][]metric.AddOption{
	reasonMissingFeature: {metric.WithAttributeSet(attribute.NewSet(attribute.String("reason", reasonMissingFeature)))},
	reasonRunFailed:      {metric.WithAttributeSet(attribute.NewSet(attribute.String("reason", reasonRunFailed)))},
	reasonBadOutput:      {metric.WithAttributeSet(attribute.NewSet(attribute.String("reason", reasonBadOutput)))},
}

// ErrModelMismatch says that the model's signature does not fit the
// processor's features or outputs.
var ErrModelMismatch = errors.New("model does not fit the processor's configuration")

type inferenceProcessor struct {
	cfg       *Config
	logger    *zap.Logger
	tel       *metadata.TelemetryBuilder
	extractor *features.Extractor
	// badFeatures is why the features cannot be read from this signal.
	badFeatures error
	selector    selector
	// outputs are the model outputs the run asks for: those mapped, once
	// each.
	outputs []string

	mu         sync.Mutex
	provider   modelrunner.Provider
	batcher    *batcher.Batcher
	unregister func()
	// status reports items that went unjudged for a failed run or a bad
	// output, and StatusOK at the next good batch.
	status recoverable.Status

	// scratch holds *scratch buffers reused across calls; concurrent calls
	// each take their own, so that they can share a batch.
	scratch sync.Pool
}

// scratch is one call's working memory.
type scratch struct {
	rows     []float32
	items    []item
	resource features.Resource
	writers  []writer
}

func newInferenceProcessor(set processor.Settings, cfg *Config, forLogs bool) (*inferenceProcessor, error) {
	columns := make([]features.Column, len(cfg.Features))
	for i, f := range cfg.Features {
		c := features.Column{Key: f.Attribute, Scale: f.Scale, Offset: f.Offset}
		switch {
		case f.Attribute != "":
			c.Source = features.SourceAttribute
		case f.ResourceAttribute != "":
			c.Source, c.Key = features.SourceResourceAttribute, f.ResourceAttribute
		case f.Field == FieldDuration:
			c.Source = features.SourceDuration
		case f.Field == FieldStatus:
			c.Source = features.SourceStatus
		case f.Field == FieldKind:
			c.Source = features.SourceKind
		case f.Field == FieldSeverityNumber:
			c.Source = features.SourceSeverityNumber
		}
		if f.Default != nil {
			c.HasDefault, c.Default = true, float32(*f.Default)
		}
		columns[i] = c
	}
	// A feature the signal lacks (a span field in a logs pipeline) fails
	// Start, which is where a pipeline's config errors surface.
	extractor, badFeatures := features.New(columns, forLogs)
	sel, err := newSelector(cfg, set.TelemetrySettings, forLogs)
	if err != nil {
		return nil, fmt.Errorf("inference: %w", err)
	}
	tel, err := metadata.NewTelemetryBuilder(set.TelemetrySettings)
	if err != nil {
		return nil, fmt.Errorf("inference: telemetry: %w", err)
	}
	var outputs []string
	for _, o := range cfg.Outputs {
		if !slices.Contains(outputs, o.Output) {
			outputs = append(outputs, o.Output)
		}
	}
	return &inferenceProcessor{
		cfg: cfg, logger: set.Logger, tel: tel, extractor: extractor, badFeatures: badFeatures,
		selector: sel, outputs: outputs,
	}, nil
}

// start finds the model provider and checks that the model fits: its input
// takes float32 rows of len(features) columns and every output mapped
// exists as a tensor with a batch dimension. The provider keeps checking new
// versions against the same rules and refuses those that do not fit.
func (p *inferenceProcessor) start(_ context.Context, host component.Host) error {
	if p.badFeatures != nil {
		return fmt.Errorf("inference: %w", p.badFeatures)
	}
	provider, err := modelrunner.Lookup(host, p.cfg.Extension)
	if err != nil {
		return fmt.Errorf("inference: extension: %w", err)
	}
	unregister, err := provider.Watch(p.cfg.Model, func(sig modelrunner.Signature) error {
		_, err := p.fits(sig)
		return err
	})
	if err != nil {
		return fmt.Errorf("inference: %w", err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.provider, p.unregister = provider, unregister
	p.status.Attach(host)
	p.batcher = batcher.New(p.run, p.extractor.Width(), p.cfg.Batch.MaxSize, p.cfg.Batch.MaxWait)
	return nil
}

func (p *inferenceProcessor) shutdown(context.Context) error {
	p.mu.Lock()
	b, unregister := p.batcher, p.unregister
	p.batcher, p.unregister, p.provider = nil, nil, nil
	p.mu.Unlock()
	if b != nil {
		b.Stop()
	}
	if unregister != nil {
		unregister()
	}
	p.tel.Shutdown()
	return nil
}

// fits returns the input the features feed in sig, or why the model does not
// fit, naming the configuration field.
func (p *inferenceProcessor) fits(sig modelrunner.Signature) (string, error) {
	mismatch := func(field, format string, args ...any) error {
		return fmt.Errorf("%w: model %q version %d: %s: %s", ErrModelMismatch, sig.Model, sig.Version, field, fmt.Sprintf(format, args...))
	}
	var in modelrunner.ValueInfo
	switch {
	case p.cfg.Input != "":
		var ok bool
		if in, ok = sig.Input(p.cfg.Input); !ok {
			return "", mismatch("input", "the model has no input %q (it declares %v)", p.cfg.Input, names(sig.Inputs))
		}
	case len(sig.Inputs) == 1:
		in = sig.Inputs[0]
	default:
		return "", mismatch("input", "the model has %d inputs %v: name the one the features feed", len(sig.Inputs), names(sig.Inputs))
	}
	if len(sig.Inputs) != 1 {
		return "", mismatch("input", "the model has %d inputs %v; the processor feeds one", len(sig.Inputs), names(sig.Inputs))
	}
	width := int64(p.extractor.Width())
	if in.Kind != modelrunner.KindTensor || in.Type != modelrunner.TypeFloat32 || len(in.Shape) != 2 {
		return "", mismatch("input", "input %s is not a float32 matrix [batch, features]", in)
	}
	if in.Shape[1] >= 0 && in.Shape[1] != width {
		return "", mismatch("features", "%d features configured, input %s takes %d", width, in, in.Shape[1])
	}
	if in.Shape[0] >= 0 && in.Shape[0] != 1 && int64(p.cfg.Batch.MaxSize) > 1 {
		return "", mismatch("batch::max_size", "input %s has a fixed batch of %d", in, in.Shape[0])
	}
	for i, o := range p.cfg.Outputs {
		out, ok := sig.Output(o.Output)
		if !ok {
			return "", mismatch(fmt.Sprintf("outputs[%d]::output", i), "the model has no output %q (it declares %v)", o.Output, names(sig.Outputs))
		}
		if out.Kind == modelrunner.KindSequence {
			continue // a sequence of maps, one per item: checked on each run
		}
		if out.Kind != modelrunner.KindTensor {
			return "", mismatch(fmt.Sprintf("outputs[%d]::output", i), "output %s is a %s, not a tensor: %v", out, out.Kind, modelrunner.ErrUnsupportedOutput)
		}
		if len(out.Shape) == 0 {
			return "", mismatch(fmt.Sprintf("outputs[%d]::output", i), "output %s has no batch dimension", out)
		}
		perRow := int64(1)
		for _, d := range out.Shape[1:] {
			perRow *= d
		}
		if perRow >= 0 && int64(o.Index) >= perRow {
			return "", mismatch(fmt.Sprintf("outputs[%d]::index", i), "index %d is past the %d values per item of output %s", o.Index, perRow, out)
		}
	}
	return in.Name, nil
}

func names(infos []modelrunner.ValueInfo) []string {
	out := make([]string, len(infos))
	for i, v := range infos {
		out[i] = v.Name
	}
	return out
}

// run is the batcher's RunFunc: one model run on n rows.
func (p *inferenceProcessor) run(ctx context.Context, rows []float32, n int) (modelrunner.Result, error) {
	p.mu.Lock()
	provider := p.provider
	p.mu.Unlock()
	if provider == nil {
		return modelrunner.Result{}, modelrunner.ErrClosed
	}
	input := p.cfg.Input
	if input == "" {
		// The model's only input (fits checked there is one), read from
		// the provider's cache: a new version may name it differently.
		sig, err := provider.Signature(p.cfg.Model, p.cfg.ModelVersion)
		if err != nil {
			return modelrunner.Result{}, err
		}
		if len(sig.Inputs) != 1 {
			return modelrunner.Result{}, fmt.Errorf("%w: model %q version %d has %d inputs", ErrModelMismatch, sig.Model, sig.Version, len(sig.Inputs))
		}
		input = sig.Inputs[0].Name
	}
	// The input and its shape in one allocation.
	in := &struct {
		tensor [1]modelrunner.Tensor
		shape  [2]int64
	}{shape: [2]int64{int64(n), int64(p.extractor.Width())}}
	in.tensor[0] = modelrunner.Tensor{Name: input, Type: modelrunner.TypeFloat32, Shape: in.shape[:], Data: rows}
	return provider.Run(ctx, p.cfg.Model, modelrunner.Request{
		Version: p.cfg.ModelVersion,
		Inputs:  in.tensor[:],
		Outputs: p.outputs,
	})
}

// item is a selected span's or log record's attributes.
type item = pcommon.Map

func (p *inferenceProcessor) processTraces(ctx context.Context, td ptrace.Traces) (ptrace.Traces, error) {
	buf := p.getScratch()
	defer p.scratch.Put(buf)
	rows, items := buf.rows[:0], buf.items[:0]
	width := p.extractor.Width()
	missing := 0
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		rs := rss.At(i)
		p.extractor.ReadResource(rs.Resource(), &buf.resource)
		sss := rs.ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			ss := sss.At(j)
			spans := ss.Spans()
			for k := 0; k < spans.Len(); k++ {
				span := spans.At(k)
				if !p.selector.span(ctx, rs, ss, span) {
					continue
				}
				// The row is read in place, and dropped when incomplete.
				n := len(rows)
				rows = slices.Grow(rows, width)[:n+width]
				if _, ok := p.extractor.Span(&buf.resource, span, rows[n:]); !ok {
					rows = rows[:n]
					missing++
					continue
				}
				items = append(items, span.Attributes())
			}
		}
	}
	p.judge(ctx, buf, items, rows, missing)
	clear(items) // drop references to this call's data before pooling
	buf.rows, buf.items = rows, items[:0]
	return td, nil
}

func (p *inferenceProcessor) processLogs(ctx context.Context, ld plog.Logs) (plog.Logs, error) {
	buf := p.getScratch()
	defer p.scratch.Put(buf)
	rows, items := buf.rows[:0], buf.items[:0]
	width := p.extractor.Width()
	missing := 0
	rls := ld.ResourceLogs()
	for i := 0; i < rls.Len(); i++ {
		rl := rls.At(i)
		p.extractor.ReadResource(rl.Resource(), &buf.resource)
		sls := rl.ScopeLogs()
		for j := 0; j < sls.Len(); j++ {
			sl := sls.At(j)
			records := sl.LogRecords()
			for k := 0; k < records.Len(); k++ {
				record := records.At(k)
				if !p.selector.log(ctx, rl, sl, record) {
					continue
				}
				n := len(rows)
				rows = slices.Grow(rows, width)[:n+width]
				if _, ok := p.extractor.Log(&buf.resource, record, rows[n:]); !ok {
					rows = rows[:n]
					missing++
					continue
				}
				items = append(items, record.Attributes())
			}
		}
	}
	p.judge(ctx, buf, items, rows, missing)
	clear(items) // drop references to this call's data before pooling
	buf.rows, buf.items = rows, items[:0]
	return ld, nil
}

func (p *inferenceProcessor) getScratch() *scratch {
	if buf, ok := p.scratch.Get().(*scratch); ok {
		return buf
	}
	return &scratch{}
}

// judge runs the model on the rows and writes the outputs onto items; items
// whose run failed are left unchanged and counted.
func (p *inferenceProcessor) judge(ctx context.Context, buf *scratch, items []item, rows []float32, missing int) {
	if missing > 0 {
		p.tel.ProcessorInferenceItemsNotJudged.Add(ctx, int64(missing), reasonAttrs[reasonMissingFeature]...)
	}
	if len(items) == 0 {
		return
	}
	p.mu.Lock()
	b := p.batcher
	p.mu.Unlock()
	var segments []batcher.Segment
	if b == nil {
		segments = []batcher.Segment{{Rows: len(items), Err: modelrunner.ErrClosed}}
	} else {
		segments = b.Do(ctx, rows, len(items))
	}
	judged := 0
	for _, s := range segments {
		err := s.Err
		if err == nil {
			err = p.write(buf, items[s.First:s.First+s.Rows], s)
		}
		if err != nil {
			reason := reasonRunFailed
			if errors.Is(err, errBadOutput) {
				reason = reasonBadOutput
			}
			p.tel.ProcessorInferenceItemsNotJudged.Add(ctx, int64(s.Rows), reasonAttrs[reason]...)
			p.report(err)
			continue
		}
		judged += s.Rows
	}
	if judged > 0 {
		p.tel.ProcessorInferenceItemsJudged.Add(ctx, int64(judged))
		p.status.Succeeded()
	}
}

var errBadOutput = errors.New("model output does not cover the batch")

// write puts the segment's outputs onto its items. It checks every output
// first, so that an item is either fully annotated or untouched.
func (p *inferenceProcessor) write(buf *scratch, items []item, s batcher.Segment) error {
	res := s.Result
	writers := buf.writers[:0]
	defer func() {
		clear(writers) // drop references to the result before pooling
		buf.writers = writers[:0]
	}()
	for _, o := range p.cfg.Outputs {
		t, ok := res.Output(o.Output)
		if !ok {
			return fmt.Errorf("%w: model %q version %d returned no output %q", errBadOutput, res.Model, res.Version, o.Output)
		}
		n := int(t.Len())
		if len(t.Shape) == 0 || t.Shape[0] != int64(s.RunRows) || n%s.RunRows != 0 {
			return fmt.Errorf("%w: model %q version %d: output %q has shape %s for %d items",
				errBadOutput, res.Model, res.Version, o.Output, modelrunner.ShapeString(t.Shape), s.RunRows)
		}
		perRow := n / s.RunRows
		if o.Index >= perRow {
			return fmt.Errorf("%w: model %q version %d: output %q has %d values per item, index %d asked",
				errBadOutput, res.Model, res.Version, o.Output, perRow, o.Index)
		}
		writers = append(writers, writer{key: o.Attribute, tensor: t, stride: perRow, first: s.Offset*perRow + o.Index})
	}
	capacity := 2 + len(writers)
	for r, attrs := range items {
		attrs.EnsureCapacity(attrs.Len() + capacity)
		attrs.PutStr(AttributeModelName, res.Model)
		attrs.PutInt(AttributeModelVersion, res.Version)
		for i := range writers {
			writers[i].put(attrs, r)
		}
	}
	return nil
}

// writer puts one output's value for each item of a segment: for item r,
// element first + r*stride of the tensor.
type writer struct {
	key           string
	tensor        modelrunner.Tensor
	stride, first int
}

// put writes the value for item r: integers as int attributes, bools as
// bool, floats as double.
func (w *writer) put(attrs pcommon.Map, r int) {
	i := w.first + r*w.stride
	switch d := w.tensor.Data.(type) {
	case []float32:
		attrs.PutDouble(w.key, float64(d[i]))
	case []float64:
		attrs.PutDouble(w.key, d[i])
	case []int64:
		attrs.PutInt(w.key, d[i])
	case []int32:
		attrs.PutInt(w.key, int64(d[i]))
	case []bool:
		attrs.PutBool(w.key, d[i])
	default:
		if v, ok := w.tensor.Float64At(i); ok {
			attrs.PutDouble(w.key, v)
		}
	}
}

func (p *inferenceProcessor) report(err error) {
	p.logger.Warn("items forwarded without inference", zap.String("model", p.cfg.Model), zap.Error(err))
	p.status.Failed(fmt.Errorf("inference: model %q: %w", p.cfg.Model, err))
}
