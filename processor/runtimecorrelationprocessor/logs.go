package runtimecorrelationprocessor // import "github.com/otelcol-ai/otelcol-ai/processor/runtimecorrelationprocessor"

import (
	"go.opentelemetry.io/collector/component"

	"context"

	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/otelcol-ai/otelcol-ai/internal/sharedcomponent"
)

// logsProcessor indexes the windows of a logs pipeline and appends the
// runtime.overlap records they complete to the same batch.
type logsProcessor struct {
	ref *sharedcomponent.Ref[*correlator]
}

func (p *logsProcessor) start(_ context.Context, host component.Host) error {
	return p.ref.Value().bind(host)
}

func (p *logsProcessor) processLogs(ctx context.Context, ld plog.Logs) (plog.Logs, error) {
	c := p.ref.Value()
	c.appendOverlaps(ld, c.ingestLogs(ctx, ld))
	return ld, nil
}

func (p *logsProcessor) shutdown(context.Context) error {
	p.ref.Release()
	return nil
}
