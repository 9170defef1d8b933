package window // import "github.com/otelcol-ai/otelcol-ai/internal/window"

import (
	"context"

	"go.opentelemetry.io/collector/component"
)

// measuredKey is the context key of Measured: unexported, so that only
// code in this collector's process can set it. Nothing a sender puts on
// the wire (resource attributes, headers, gRPC metadata) reaches it.
type measuredKey struct{}

// Measured returns ctx marked as carrying windows that the receiver id of
// this collector measured itself. A receiver hands its windows to the
// pipeline with this context; the correlator indexes only windows so
// marked (or from a sender its operator trusts): a log record shaped like
// a window that a workload sent over OTLP is not a window.
func Measured(ctx context.Context, id component.ID) context.Context {
	return context.WithValue(ctx, measuredKey{}, id)
}

// MeasuredBy returns the receiver that marked ctx with Measured. The mark
// lives in the context the receiver passes down the pipeline, so it
// reaches processors that run in the receiver's call (memory_limiter,
// runtimecorrelation), not those after a batch processor, which starts
// a context of its own.
func MeasuredBy(ctx context.Context) (component.ID, bool) {
	id, ok := ctx.Value(measuredKey{}).(component.ID)
	return id, ok
}
