package inferenceprocessor // import "github.com/otelcol-ai/otelcol-ai/processor/inferenceprocessor"

import (
	"context"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// selector decides which items the processor judges.
type selector struct {
	present []string
}

func newSelector(cfg *Config, _ component.TelemetrySettings, _ bool) (selector, error) {
	return selector{present: cfg.AttributesPresent}, nil
}

func (s selector) span(_ context.Context, _ ptrace.ResourceSpans, _ ptrace.ScopeSpans, span ptrace.Span) bool {
	for _, key := range s.present {
		if _, ok := span.Attributes().Get(key); !ok {
			return false
		}
	}
	return true
}

func (s selector) log(_ context.Context, _ plog.ResourceLogs, _ plog.ScopeLogs, record plog.LogRecord) bool {
	for _, key := range s.present {
		if _, ok := record.Attributes().Get(key); !ok {
			return false
		}
	}
	return true
}
