package nvmlreceiver

import (
	"context"
	"sync"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/receiver"
	"go.opentelemetry.io/collector/scraper"
	"go.opentelemetry.io/collector/scraper/scraperhelper"

	"github.com/otelcol-ai/otelcol-ai/internal/procresource"
	"github.com/otelcol-ai/otelcol-ai/receiver/nvmlreceiver/internal/metadata"
	"github.com/otelcol-ai/otelcol-ai/receiver/nvmlreceiver/internal/podresources"
)

// Defaults, as documented in README.md.
const (
	defaultCollectionInterval = 10 * time.Second
	defaultInitRetryInterval  = time.Minute
	defaultResourcePrefix     = "nvidia.com/"
	defaultLeakWindow         = 15 * time.Minute
	defaultLeakMinGrowthRate  = 16 * 1024 // bytes/s
	defaultLeakMinGrowth      = 32 << 20  // bytes
	defaultLeakMinSamples     = 10
)

// NewFactory returns the factory for the nvml receiver.
func NewFactory() receiver.Factory {
	return newFactory(openSystemLibrary)
}

// newFactory lets tests substitute the NVML binding.
func newFactory(open openLibrary) receiver.Factory {
	f := &factory{open: open, shared: newSharedReceivers()}
	return receiver.NewFactory(
		metadata.Type,
		createDefaultConfig,
		receiver.WithMetrics(f.createMetrics, metadata.MetricsStability),
		receiver.WithLogs(f.createLogs, metadata.LogsStability),
	)
}

func createDefaultConfig() component.Config {
	cc := scraperhelper.NewDefaultControllerConfig()
	cc.CollectionInterval = defaultCollectionInterval
	return &Config{
		ControllerConfig:     cc,
		MetricsBuilderConfig: metadata.NewDefaultMetricsBuilderConfig(),
		Events:               metadata.DefaultEventsConfig(),
		InitRetryInterval:    defaultInitRetryInterval,
		Processes: ProcessesConfig{
			Enabled:              true,
			ProcRoot:             procresource.DefaultProcRoot,
			CommandLineMaxLength: procresource.DefaultMaxCommandLine,
		},
		PodResources: PodResourcesConfig{
			Endpoint:       podresources.DefaultEndpoint,
			ResourcePrefix: defaultResourcePrefix,
		},
		LeakDetection: LeakDetectionConfig{
			Enabled:       true,
			Window:        defaultLeakWindow,
			MinGrowthRate: defaultLeakMinGrowthRate,
			MinGrowth:     defaultLeakMinGrowth,
			MinSamples:    defaultLeakMinSamples,
		},
	}
}

type factory struct {
	open   openLibrary
	shared *sharedReceivers
}

func (f *factory) createMetrics(_ context.Context, set receiver.Settings, cfg component.Config, next consumer.Metrics) (receiver.Metrics, error) {
	oCfg := cfg.(*Config)
	r, err := f.shared.get(set, oCfg, f.open)
	if err != nil {
		return nil, err
	}
	s, err := scraper.NewMetrics(r.scrape, scraper.WithStart(r.start), scraper.WithShutdown(r.shutdown))
	if err != nil {
		return nil, err
	}
	ctrl, err := scraperhelper.NewMetricsController(&oCfg.ControllerConfig, set, next, scraperhelper.AddMetricsScraper(metadata.Type, s))
	if err != nil {
		return nil, err
	}
	return &metricsReceiver{Metrics: ctrl}, nil
}

// metricsReceiver makes the scraper controller's Shutdown idempotent, as the
// collector's lifecycle contract asks.
type metricsReceiver struct {
	receiver.Metrics
	once sync.Once
	err  error
}

// Shutdown stops the scraper controller once; later calls return the same result.
func (m *metricsReceiver) Shutdown(ctx context.Context) error {
	m.once.Do(func() { m.err = m.Metrics.Shutdown(ctx) })
	return m.err
}

func (f *factory) createLogs(_ context.Context, set receiver.Settings, cfg component.Config, next consumer.Logs) (receiver.Logs, error) {
	r, err := f.shared.get(set, cfg.(*Config), f.open)
	if err != nil {
		return nil, err
	}
	// Connected now, so that whichever face starts first knows there is a
	// logs pipeline to watch events for.
	r.setLogsConsumer(next)
	return &logsReceiver{core: r, next: next}, nil
}

// logsReceiver is the logs face of the shared receiver: XID/ECC events and
// leak records.
type logsReceiver struct {
	core *nvmlReceiver
	next consumer.Logs
}

// Start starts the shared receiver (first caller) and its event loop.
func (l *logsReceiver) Start(ctx context.Context, host component.Host) error {
	l.core.setLogsConsumer(l.next)
	return l.core.start(ctx, host)
}

// Shutdown stops the shared receiver when its last face stops.
func (l *logsReceiver) Shutdown(ctx context.Context) error {
	err := l.core.shutdown(ctx)
	l.core.logs.Close()
	return err
}
