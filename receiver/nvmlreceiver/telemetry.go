package nvmlreceiver

import (
	"context"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/otelcol-ai/otelcol-ai/receiver/nvmlreceiver/internal/metadata"
)

// callTimer records how long each NVML call took, by function name. The
// attribute sets are built once per name, so recording does not allocate
// after the first call of each kind.
type callTimer struct {
	hist metric.Float64Histogram
	opts sync.Map // function name → metric.RecordOption
}

func newCallTimer(tb *metadata.TelemetryBuilder) *callTimer {
	return &callTimer{hist: tb.ReceiverNvmlCallDuration}
}

// observe records the time since start for the NVML function fn.
func (t *callTimer) observe(fn string, start time.Time) {
	if t == nil {
		return
	}
	opt, ok := t.opts.Load(fn)
	if !ok {
		opt, _ = t.opts.LoadOrStore(fn, metric.WithAttributeSet(attribute.NewSet(attribute.String("nvml.function", fn))))
	}
	t.hist.Record(context.Background(), time.Since(start).Seconds(), opt.(metric.RecordOption))
}
