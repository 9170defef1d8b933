package pythongilreceiver

import (
	"context"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/receiver"

	"github.com/otelcol-ai/otelcol-ai/internal/procresource"
	"github.com/otelcol-ai/otelcol-ai/internal/sharedcomponent"
	"github.com/otelcol-ai/otelcol-ai/receiver/pythongilreceiver/internal/metadata"
)

// Defaults, as documented in README.md.
const (
	defaultDiscoveryInterval  = 5 * time.Second
	defaultMinDuration        = 100 * time.Microsecond
	defaultCollectionInterval = 10 * time.Second
	defaultFlushInterval      = time.Second
	defaultMaxBatchSize       = 1024
	defaultRetryInterval      = time.Minute
	defaultBudget             = 0.02
	defaultBudgetPeriod       = 10 * time.Second
	defaultCostPerHit         = time.Microsecond
)

// NewFactory returns the factory for the pythongil receiver.
func NewFactory() receiver.Factory {
	f := &factory{}
	return receiver.NewFactory(
		metadata.Type,
		createDefaultConfig,
		receiver.WithLogs(f.createLogs, metadata.LogsStability),
		receiver.WithMetrics(f.createMetrics, metadata.MetricsStability),
	)
}

func createDefaultConfig() component.Config {
	return &Config{
		ProcRoot:           procresource.DefaultProcRoot,
		DiscoveryInterval:  defaultDiscoveryInterval,
		MinDuration:        defaultMinDuration,
		SwitchProbes:       true,
		WaitSource:         waitSourceFutex,
		GC:                 true,
		CollectionInterval: defaultCollectionInterval,
		FlushInterval:      defaultFlushInterval,
		MaxBatchSize:       defaultMaxBatchSize,
		RetryInterval:      defaultRetryInterval,
		Overhead: OverheadConfig{
			Budget:     defaultBudget,
			Period:     defaultBudgetPeriod,
			CostPerHit: defaultCostPerHit,
			// The windows that overlap spans and JVM pauses are the ones
			// looked at; nothing marked, the budget is spent evenly.
			FollowAttention: true,
		},
		Metrics:            defaultMetricsConfig(),
		ResourceAttributes: metadata.DefaultResourceAttributesConfig(),
	}
}

// factory shares one receiver, so one set of probes, between the logs and
// metrics pipelines of a component ID.
type factory struct {
	receivers sharedcomponent.Cores[component.ID, *gilReceiver]
}

// lifecycle runs a shared receiver, so its probes, while any of its
// pipelines runs.
var lifecycle = sharedcomponent.Lifecycle[*gilReceiver]{Start: (*gilReceiver).start, Stop: (*gilReceiver).shutdown}

// newCore makes r the shared core of its faces.
func newCore(r *gilReceiver) *sharedcomponent.Core[*gilReceiver] { return lifecycle.Core(r) }

// createLogs's face, shut down while the metrics pipeline keeps the
// receiver running, flushes the pending windows first (its Final hook);
// createMetrics's sends the metrics collected so far.
func (f *factory) createLogs(_ context.Context, set receiver.Settings, cfg component.Config, next consumer.Logs) (receiver.Logs, error) {
	return f.receivers.Share(set.ID, func() (*gilReceiver, error) { return newReceiver(set, cfg.(*Config)), nil }, lifecycle, func(r *gilReceiver) sharedcomponent.Hooks {
		return sharedcomponent.Hooks{Open: func() { r.logs.Open(next) }, Final: r.flush, Close: r.logs.Close}
	})
}

func (f *factory) createMetrics(_ context.Context, set receiver.Settings, cfg component.Config, next consumer.Metrics) (receiver.Metrics, error) {
	return f.receivers.Share(set.ID, func() (*gilReceiver, error) { return newReceiver(set, cfg.(*Config)), nil }, lifecycle, func(r *gilReceiver) sharedcomponent.Hooks {
		return sharedcomponent.Hooks{Open: func() { r.metrics.Open(next) }, Final: r.collect, Close: r.metrics.Close}
	})
}
