package pythongilreceiver

import (
	"context"
	"sync"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/receiver"

	"github.com/otelcol-ai/otelcol-ai/internal/procresource"
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
	f := &factory{receivers: map[component.ID]*gilReceiver{}}
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
		GC:                 true,
		CollectionInterval: defaultCollectionInterval,
		FlushInterval:      defaultFlushInterval,
		MaxBatchSize:       defaultMaxBatchSize,
		RetryInterval:      defaultRetryInterval,
		Overhead: OverheadConfig{
			Budget:     defaultBudget,
			Period:     defaultBudgetPeriod,
			CostPerHit: defaultCostPerHit,
		},
	}
}

// factory shares one receiver, so one set of probes, between the logs and
// metrics pipelines of a component ID.
type factory struct {
	mu        sync.Mutex
	receivers map[component.ID]*gilReceiver
}

func (f *factory) get(set receiver.Settings, cfg *Config) *gilReceiver {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r, ok := f.receivers[set.ID]; ok {
		return r
	}
	r := newReceiver(set, cfg)
	r.onLastShutdown = func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.receivers[set.ID] == r {
			delete(f.receivers, set.ID)
		}
	}
	f.receivers[set.ID] = r
	return r
}

func (f *factory) createLogs(_ context.Context, set receiver.Settings, cfg component.Config, next consumer.Logs) (receiver.Logs, error) {
	r := f.get(set, cfg.(*Config))
	return &face{core: r, open: func() { r.logs.Open(next) }, final: r.flush, close: r.logs.Close}, nil
}

func (f *factory) createMetrics(_ context.Context, set receiver.Settings, cfg component.Config, next consumer.Metrics) (receiver.Metrics, error) {
	r := f.get(set, cfg.(*Config))
	return &face{core: r, open: func() { r.metrics.Open(next) }, final: r.collect, close: r.metrics.Close}, nil
}

// face is one pipeline's handle on the shared receiver; Start and Shutdown
// are counted so that the probes live while any pipeline uses them.
type face struct {
	core *gilReceiver
	// open connects the face's pipeline, final sends its last data when
	// other pipelines keep the receiver running, close disconnects it (all
	// optional: a face without a pipeline only counts).
	open    func()
	final   func(context.Context)
	close   func()
	mu      sync.Mutex
	started bool
}

func (f *face) Start(ctx context.Context, host component.Host) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.started {
		return nil
	}
	f.started = true
	if f.open != nil {
		f.open()
	}
	return f.core.start(ctx, host)
}

func (f *face) Shutdown(ctx context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.started {
		return nil
	}
	f.started = false
	last, err := f.core.shutdown(ctx)
	if !last && f.final != nil {
		f.final(ctx)
	}
	if f.close != nil {
		f.close()
	}
	return err
}
