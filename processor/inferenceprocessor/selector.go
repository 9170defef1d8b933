package inferenceprocessor // import "github.com/otelcol-ai/otelcol-ai/processor/inferenceprocessor"

import (
	"context"
	"fmt"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/ottl"
	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/ottl/contexts/ottllog"
	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/ottl/contexts/ottlspan"
	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/ottl/ottlfuncs"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// selector decides which items the processor judges: those carrying every
// attribute in present and, when there are conditions, matching one of them.
// A condition that fails to evaluate on an item (a type error, say) is
// logged and counts as false.
type selector struct {
	present []string
	spans   *ottl.ConditionSequence[*ottlspan.TransformContext]
	logs    *ottl.ConditionSequence[*ottllog.TransformContext]
}

func newSelector(cfg *Config, set component.TelemetrySettings, forLogs bool) (selector, error) {
	s := selector{present: cfg.AttributesPresent}
	if len(cfg.Conditions) == 0 {
		return s, nil
	}
	if forLogs {
		parser, err := ottllog.NewParser(ottlfuncs.StandardConverters[*ottllog.TransformContext](), set)
		if err != nil {
			return s, fmt.Errorf("conditions: %w", err)
		}
		conditions, err := parseEach(parser.ParseCondition, cfg.Conditions)
		if err != nil {
			return s, err
		}
		seq := ottllog.NewConditionSequence(conditions, set, ottllog.WithConditionSequenceErrorMode(ottl.IgnoreError))
		s.logs = &seq
		return s, nil
	}
	parser, err := ottlspan.NewParser(ottlfuncs.StandardConverters[*ottlspan.TransformContext](), set)
	if err != nil {
		return s, fmt.Errorf("conditions: %w", err)
	}
	conditions, err := parseEach(parser.ParseCondition, cfg.Conditions)
	if err != nil {
		return s, err
	}
	seq := ottlspan.NewConditionSequence(conditions, set, ottlspan.WithConditionSequenceErrorMode(ottl.IgnoreError))
	s.spans = &seq
	return s, nil
}

func parseEach[C any](parse func(string) (C, error), conditions []string) ([]C, error) {
	out := make([]C, len(conditions))
	for i, text := range conditions {
		c, err := parse(text)
		if err != nil {
			return nil, fmt.Errorf("conditions[%d]: %q: %w", i, text, err)
		}
		out[i] = c
	}
	return out, nil
}

func (s selector) span(ctx context.Context, rs ptrace.ResourceSpans, ss ptrace.ScopeSpans, span ptrace.Span) bool {
	for _, key := range s.present {
		if _, ok := span.Attributes().Get(key); !ok {
			return false
		}
	}
	if s.spans == nil {
		return true
	}
	tCtx := ottlspan.NewTransformContextPtr(rs, ss, span)
	defer tCtx.Close()
	match, err := s.spans.Eval(ctx, tCtx)
	return err == nil && match
}

func (s selector) log(ctx context.Context, rl plog.ResourceLogs, sl plog.ScopeLogs, record plog.LogRecord) bool {
	for _, key := range s.present {
		if _, ok := record.Attributes().Get(key); !ok {
			return false
		}
	}
	if s.logs == nil {
		return true
	}
	tCtx := ottllog.NewTransformContextPtr(rl, sl, record)
	defer tCtx.Close()
	match, err := s.logs.Eval(ctx, tCtx)
	return err == nil && match
}
