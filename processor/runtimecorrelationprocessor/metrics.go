package runtimecorrelationprocessor // import "github.com/otelcol-ai/otelcol-ai/processor/runtimecorrelationprocessor"

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.uber.org/zap"

	"github.com/otelcol-ai/otelcol-ai/internal/sharedcomponent"
	"github.com/otelcol-ai/otelcol-ai/processor/runtimecorrelationprocessor/internal/metadata"
)

// metricsProcessor passes a metrics pipeline's data on unchanged (the
// timeline's GPU memory and JVM accounts come from the runtimestate
// extension, not from this pipeline) and adds,
// every metrics::interval and at shutdown, the cumulative overlap counts
// and durations per scope and kind pair.
type metricsProcessor struct {
	ref  *sharedcomponent.Ref[*correlator]
	c    *correlator
	next consumer.Metrics

	loop         loop
	shutdownOnce sync.Once
}

func newMetricsProcessor(ref *sharedcomponent.Ref[*correlator], next consumer.Metrics) *metricsProcessor {
	return &metricsProcessor{ref: ref, c: ref.Value(), next: next}
}

func (p *metricsProcessor) processMetrics(_ context.Context, md pmetric.Metrics) (pmetric.Metrics, error) {
	return md, nil
}

func (p *metricsProcessor) start(_ context.Context, host component.Host) error {
	if err := p.ref.Value().bind(host); err != nil {
		return err
	}
	p.loop.start(p.run)
	return nil
}

// run sends the totals every metrics::interval, until stop.
func (p *metricsProcessor) run(stop <-chan struct{}) {
	ticker := time.NewTicker(p.c.cfg.Metrics.Interval)
	defer ticker.Stop()
	for {
		select {
		case <-stop:
			return
		case <-ticker.C:
			p.emit(context.Background())
		}
	}
}

// emit sends the current totals, if there are any.
func (p *metricsProcessor) emit(ctx context.Context) {
	md := p.c.overlapMetrics()
	if md.ResourceMetrics().Len() == 0 {
		return
	}
	if err := p.next.ConsumeMetrics(ctx, md); err != nil {
		p.c.logger.Warn("runtimecorrelation: sending overlap metrics failed", zap.Error(err))
	}
}

// shutdown stops the ticker and, when it ran, sends the totals one last
// time.
func (p *metricsProcessor) shutdown(ctx context.Context) error {
	p.shutdownOnce.Do(func() {
		if p.loop.end() {
			p.emit(ctx)
		}
		p.ref.Release()
	})
	return nil
}

// overlapMetrics returns the cumulative overlap totals, one resource per
// scope, and forgets the series of scopes that no longer hold any window
// (a process gone for longer than the retention).
func (c *correlator) overlapMetrics() pmetric.Metrics {
	now := pcommon.NewTimestampFromTime(c.now())
	c.mu.Lock()
	keys := make([]pairKey, 0, len(c.totals))
	for k := range c.totals {
		if !c.windows.Has(k.scope) {
			delete(c.totals, k)
			continue
		}
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b pairKey) int {
		return cmp.Or(cmp.Compare(a.scope.host, b.scope.host), cmp.Compare(a.scope.pod, b.scope.pod),
			cmp.Compare(a.scope.pid, b.scope.pid), cmp.Compare(a.scope.gen, b.scope.gen), cmp.Compare(a.first, b.first), cmp.Compare(a.second, b.second))
	})
	totals := make([]pairTotal, len(keys))
	for i, k := range keys {
		totals[i] = *c.totals[k]
	}
	c.mu.Unlock()

	// A builder per emission: each metrics pipeline's processor emits on
	// its own ticker.
	mb := metadata.NewMetricsBuilder(metadata.MetricsBuilderConfig{Metrics: c.cfg.Metrics.MetricsConfig}, c.settings)
	scope := string(c.cfg.MatchScope)
	first := 0 // the scope's first series, whose process names the resource
	for i, k := range keys {
		t := totals[i]
		start := pcommon.NewTimestampFromTime(t.start)
		a, b := string(kinds[k.first]), string(kinds[k.second])
		mb.RecordRuntimeOverlapCountSince(start, now, t.count, a, b, scope)
		mb.RecordRuntimeOverlapDurationSince(start, now, time.Duration(t.duration).Seconds(), a, b, scope)
		if i+1 == len(keys) || keys[i+1].scope != k.scope {
			res := pcommon.NewResource()
			c.putScope(res.Attributes(), k.scope, totals[first].proc)
			mb.EmitForResource(metadata.WithResource(res))
			first = i + 1
		}
	}
	return mb.Emit()
}
