package pythongilreceiver

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/otelcol-ai/otelcol-ai/internal/procroot"
	"github.com/otelcol-ai/otelcol-ai/receiver/pythongilreceiver/internal/discovery"
	"github.com/otelcol-ai/otelcol-ai/receiver/pythongilreceiver/internal/gil"
	"github.com/otelcol-ai/otelcol-ai/receiver/pythongilreceiver/internal/metadata"
)

// Reasons a source is refused, the values of the reason attribute of
// otelcol_receiver_pythongil_sources_refused (README.md documents each).
const (
	reasonNotRegular   = "not_regular"
	reasonMismatch     = "mismatch"
	reasonTooLarge     = "too_large"
	reasonMalformed    = "malformed"
	reasonMapsTooLarge = "maps_too_large"
	reasonPanic        = "panic"
	reasonStalled      = "stalled"
)

// refusalReason tells whether err refuses a source as unsafe to read, and
// why; other errors (a process gone, a file without the GIL symbols) are
// not refusals.
func refusalReason(err error) (string, bool) {
	switch {
	case errors.Is(err, discovery.ErrPanic):
		return reasonPanic, true
	case errors.Is(err, discovery.ErrStalled):
		return reasonStalled, true
	case errors.Is(err, procroot.ErrNotRegular):
		return reasonNotRegular, true
	case errors.Is(err, discovery.ErrMismatch):
		return reasonMismatch, true
	case errors.Is(err, procroot.ErrTooLarge):
		return reasonMapsTooLarge, true
	case errors.Is(err, gil.ErrLimit):
		return reasonTooLarge, true
	case errors.Is(err, gil.ErrMalformed):
		return reasonMalformed, true
	}
	return "", false
}

// refusals counts, logs and reports the sources refused. Callers remember
// each refused source, so that it is refused (and logged) once.
type refusals struct {
	tel    *metadata.TelemetryBuilder
	logger *zap.Logger
	// report sets the component's status: a panic is a bug to look at,
	// even though the rest keeps working.
	report func(error)
}

// refuse counts err when it is a refusal, and reports whether it was.
func (r *refusals) refuse(err error, fields ...zap.Field) bool {
	reason, ok := refusalReason(err)
	if !ok {
		return false
	}
	r.tel.ReceiverPythongilSourcesRefused.Add(context.Background(), 1, metric.WithAttributeSet(attribute.NewSet(attribute.String("reason", reason))))
	fields = append(fields, zap.String("reason", reason), zap.Error(err))
	if reason == reasonPanic {
		r.logger.Error("decoding a Python process's files panicked; that source is skipped, the others are probed", fields...)
		r.report(err)
		return true
	}
	r.logger.Warn("refusing to read a Python process's file; that source is skipped, the others are probed", fields...)
	return true
}
