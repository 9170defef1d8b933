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
	"github.com/otelcol-ai/otelcol-ai/internal/sharedcomponent"
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
	f := &factory{open: open}
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
			// Two series that rise together over a window correlate near 1;
			// a flat or sawtooth account near 0.
			JoinMinCorrelation: 0.8,
		},
	}
}

// factory shares one receiver between the metrics and logs pipelines of a
// component ID, so NVML is initialised once and leak records come from the
// same series as the metrics.
type factory struct {
	open      openLibrary
	receivers sharedcomponent.Cores[component.ID, *nvmlReceiver]
}

// lifecycle runs a shared receiver while any of its pipelines runs.
var lifecycle = sharedcomponent.Lifecycle[*nvmlReceiver]{Start: (*nvmlReceiver).start, Stop: (*nvmlReceiver).shutdown}

// create returns the function that makes set.ID's receiver from cfg.
func (f *factory) create(set receiver.Settings, cfg *Config) func() (*nvmlReceiver, error) {
	return func() (*nvmlReceiver, error) { return newNVMLReceiver(set, cfg, f.open) }
}

// createMetrics returns a scraper controller whose scraper is the metrics
// face of the shared receiver: the controller's Start and Shutdown start
// and stop the face.
func (f *factory) createMetrics(ctx context.Context, set receiver.Settings, cfg component.Config, next consumer.Metrics) (receiver.Metrics, error) {
	oCfg := cfg.(*Config)
	face, err := f.receivers.Share(set.ID, f.create(set, oCfg), lifecycle, nil)
	if err != nil {
		return nil, err
	}
	s, err := scraper.NewMetrics(face.Value().scrape, scraper.WithStart(face.Start), scraper.WithShutdown(face.Shutdown))
	if err != nil {
		_ = face.Shutdown(ctx)
		return nil, err
	}
	ctrl, err := scraperhelper.NewMetricsController(&oCfg.ControllerConfig, set, next, scraperhelper.AddMetricsScraper(metadata.Type, s))
	if err != nil {
		_ = face.Shutdown(ctx)
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

// createLogs returns the logs face of the shared receiver: XID/ECC events
// and leak records.
func (f *factory) createLogs(_ context.Context, set receiver.Settings, cfg component.Config, next consumer.Logs) (receiver.Logs, error) {
	face, err := f.receivers.Share(set.ID, f.create(set, cfg.(*Config)), lifecycle, func(r *nvmlReceiver) sharedcomponent.Hooks {
		return sharedcomponent.Hooks{Open: func() { r.setLogsConsumer(next) }, Close: r.logs.Close}
	})
	if err != nil {
		return nil, err
	}
	// Connected now, so that whichever face starts first knows there is a
	// logs pipeline to watch events for.
	face.Value().setLogsConsumer(next)
	return face, nil
}
