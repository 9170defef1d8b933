package nvmlreceiver

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/scraper/scraperhelper"

	"github.com/otelcol-ai/otelcol-ai/internal/leak"
	"github.com/otelcol-ai/otelcol-ai/receiver/nvmlreceiver/internal/metadata"
)

// Config configures the nvml receiver. Every key and its default is listed
// in README.md.
type Config struct {
	scraperhelper.ControllerConfig `mapstructure:",squash"`
	metadata.MetricsBuilderConfig  `mapstructure:",squash"`

	// Events turns each log event on or off.
	Events metadata.EventsConfig `mapstructure:"events"`

	// LibraryPath is the NVML shared library to load; empty means
	// libnvidia-ml.so.1 from the dynamic loader's search path.
	LibraryPath string `mapstructure:"library_path"`

	// InitRetryInterval is how often the receiver retries NVML while the
	// library or driver is missing.
	InitRetryInterval time.Duration `mapstructure:"init_retry_interval"`

	// Processes configures per-process GPU memory and attribution.
	Processes ProcessesConfig `mapstructure:"processes"`

	// PodResources configures pod attribution from the kubelet.
	PodResources PodResourcesConfig `mapstructure:"pod_resources"`

	// LeakDetection configures GPU-memory leak suspicion.
	LeakDetection LeakDetectionConfig `mapstructure:"leak_detection"`
}

// ProcessesConfig configures per-process reporting.
type ProcessesConfig struct {
	// Enabled turns per-process memory (and so attribution and leak
	// detection) on.
	Enabled bool `mapstructure:"enabled"`
	// ProcRoot is the proc filesystem to read process details from, e.g.
	// /hostfs/proc when the host's root is mounted at /hostfs.
	ProcRoot string `mapstructure:"proc_root"`
	// CommandLineMaxLength is how many bytes of a command line are kept.
	CommandLineMaxLength int `mapstructure:"command_line_max_length"`
}

// PodResourcesConfig configures the kubelet pod-resources client.
type PodResourcesConfig struct {
	// Endpoint is the kubelet's pod-resources socket, unix://… . Empty
	// turns pod attribution off. When the socket does not exist (not a
	// Kubernetes node, or not mounted) attribution is skipped quietly.
	Endpoint string `mapstructure:"endpoint"`
	// ResourcePrefix selects the device-plugin resources that are GPUs.
	ResourcePrefix string `mapstructure:"resource_prefix"`
}

// LeakDetectionConfig holds the leak-suspicion thresholds (see
// internal/leak for the rule).
type LeakDetectionConfig struct {
	// Enabled turns leak detection on.
	Enabled bool `mapstructure:"enabled"`
	// Window is the sliding window assessed.
	Window time.Duration `mapstructure:"window"`
	// MinGrowthRate is the least-squares growth, bytes per second, at or
	// above which memory counts as growing.
	MinGrowthRate float64 `mapstructure:"min_growth_rate"`
	// MinGrowth is the rise of the memory floor over the window, bytes.
	MinGrowth int64 `mapstructure:"min_growth"`
	// MinSamples is the fewest readings in a window before it is assessed.
	MinSamples int `mapstructure:"min_samples"`
	// RuntimeState, when set, is the runtimestate extension the jfr
	// receiver shares the JVMs' memory accounts through: a leak record then
	// names the accounts of the process that grew with its GPU memory. Each
	// process's GPU memory is shared there too (leak detection on or off),
	// for the timeline page.
	RuntimeState *component.ID `mapstructure:"runtime_state"`
	// JoinMinCorrelation is the least Pearson correlation between GPU
	// memory and an account, over the window, for the account to count as
	// growing with it (the account must grow too).
	JoinMinCorrelation float64 `mapstructure:"join_min_correlation"`
}

var _ component.Config = (*Config)(nil)

// Validate checks every key and names the one that is wrong.
func (cfg *Config) Validate() error {
	var errs []error
	if cfg.CollectionInterval <= 0 {
		errs = append(errs, fmt.Errorf("collection_interval must be positive, got %s", cfg.CollectionInterval))
	}
	if cfg.Timeout < 0 {
		errs = append(errs, fmt.Errorf("timeout must not be negative, got %s", cfg.Timeout))
	}
	if cfg.InitRetryInterval <= 0 {
		errs = append(errs, fmt.Errorf("init_retry_interval must be positive, got %s", cfg.InitRetryInterval))
	}
	if cfg.Processes.CommandLineMaxLength < 0 {
		errs = append(errs, fmt.Errorf("processes.command_line_max_length must not be negative, got %d", cfg.Processes.CommandLineMaxLength))
	}
	if cfg.Processes.Enabled && cfg.Processes.ProcRoot == "" {
		errs = append(errs, errors.New("processes.proc_root must not be empty when processes.enabled is true"))
	}
	if ep := cfg.PodResources.Endpoint; ep != "" && !strings.HasPrefix(ep, "unix://") {
		errs = append(errs, fmt.Errorf("pod_resources.endpoint must be a unix:// socket (or empty to turn attribution off), got %q", ep))
	}
	if cfg.LeakDetection.Enabled {
		if err := cfg.LeakDetection.thresholds().Validate(); err != nil {
			errs = append(errs, fmt.Errorf("leak_detection: %w", err))
		}
		if c := cfg.LeakDetection.JoinMinCorrelation; !(c > 0 && c <= 1) {
			errs = append(errs, fmt.Errorf("leak_detection.join_min_correlation must be in (0, 1], got %v", c))
		}
	}
	return errors.Join(errs...)
}

func (c LeakDetectionConfig) thresholds() leak.Config {
	return leak.Config{
		Window:        c.Window,
		MinGrowthRate: c.MinGrowthRate,
		MinGrowth:     c.MinGrowth,
		MinSamples:    c.MinSamples,
	}
}
