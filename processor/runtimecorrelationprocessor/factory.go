package runtimecorrelationprocessor // import "github.com/otelcol-ai/otelcol-ai/processor/runtimecorrelationprocessor"

import (
	"context"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/processorhelper"

	"github.com/otelcol-ai/otelcol-ai/internal/procresource"
	"github.com/otelcol-ai/otelcol-ai/internal/sharedcomponent"
	"github.com/otelcol-ai/otelcol-ai/processor/runtimecorrelationprocessor/internal/metadata"
)

// NewFactory returns the runtimecorrelation processor's factory.
func NewFactory() processor.Factory {
	return processor.NewFactory(
		metadata.Type,
		createDefaultConfig,
		processor.WithLogs(createLogs, metadata.LogsStability),
		processor.WithTraces(createTraces, metadata.TracesStability),
		processor.WithMetrics(createMetrics, metadata.MetricsStability),
	)
}

// createDefaultConfig matches within a process, pairs every JVM kind with
// every Python kind, keeps a minute of windows (at most 100k, a quarter of
// them for any one scope, so that one flooding sender leaves room for at
// least three others) and lets spans wait 2 s, room for JFR's
// once-a-second flush. Identities come from the host's /proc (hostPID),
// are reused for 2 s (a burst of batches from one sender costs one lookup,
// and a reused pid is noticed within that), and at most 16384 processes'
// identities are learned from windows (a node runs far fewer with windows,
// about 480 bytes each with their ids). The timeline page gets the newest
// 20000 spans within 6 MiB, whether or not anyone looks: about 210 bytes
// a span with a short name, so the count binds first for ordinary spans
// (20 s at 1000 spans/s; at the default retention's minute of windows,
// up to 330 spans/s), the bytes for long names and many scores.
func createDefaultConfig() component.Config {
	return &Config{
		MatchScope:   ScopeProcess,
		OverlapPairs: defaultOverlapPairs(),
		Windows: WindowsConfig{
			Retention:    time.Minute,
			MaxWindows:   100_000,
			MaxPerScope:  25_000,
			MaxClockSkew: 5 * time.Second,
		},
		Spans: SpansConfig{
			Delay:         2 * time.Second,
			MaxWaiting:    100_000,
			MaxPlacements: 32,
		},
		Metrics: MetricsConfig{Interval: 10 * time.Second, MetricsConfig: metadata.DefaultMetricsConfig()},
		Identity: IdentityConfig{
			ProcRoot:     procresource.DefaultProcRoot,
			Connection:   true,
			CacheTTL:     2 * time.Second,
			MaxProcesses: 16_384,
		},
		Timeline: TimelineConfig{MaxSpans: 20_000, MaxBytes: 6 << 20},
	}
}

// correlators holds the state each component ID shares among its pipelines.
var correlators sharedcomponent.Map[component.ID, *correlator]

func acquire(set processor.Settings, cfg *Config) (*sharedcomponent.Ref[*correlator], error) {
	return correlators.Acquire(set.ID,
		func() (*correlator, error) { return newCorrelator(set, cfg) },
		(*correlator).close)
}

var mutates = processorhelper.WithCapabilities(consumer.Capabilities{MutatesData: true})

func createLogs(ctx context.Context, set processor.Settings, cfg component.Config, next consumer.Logs) (processor.Logs, error) {
	ref, err := acquire(set, cfg.(*Config))
	if err != nil {
		return nil, err
	}
	p := &logsProcessor{ref: ref}
	return processorhelper.NewLogs(ctx, set, cfg, next, p.processLogs,
		processorhelper.WithStart(p.start), processorhelper.WithShutdown(p.shutdown), mutates)
}

func createTraces(ctx context.Context, set processor.Settings, cfg component.Config, next consumer.Traces) (processor.Traces, error) {
	ref, err := acquire(set, cfg.(*Config))
	if err != nil {
		return nil, err
	}
	p := newTracesProcessor(ref, next)
	return processorhelper.NewTraces(ctx, set, cfg, next, p.processTraces,
		processorhelper.WithStart(p.start), processorhelper.WithShutdown(p.shutdown), mutates)
}

func createMetrics(ctx context.Context, set processor.Settings, cfg component.Config, next consumer.Metrics) (processor.Metrics, error) {
	ref, err := acquire(set, cfg.(*Config))
	if err != nil {
		return nil, err
	}
	p := newMetricsProcessor(ref, next)
	return processorhelper.NewMetrics(ctx, set, cfg, next, p.processMetrics,
		processorhelper.WithStart(p.start), processorhelper.WithShutdown(p.shutdown), mutates)
}
