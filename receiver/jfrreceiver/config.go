package jfrreceiver // import "github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver"

import (
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"go.opentelemetry.io/collector/component"

	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/jvmmetrics"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/metadata"
)

// Config configures the jfr receiver. Every key and its default is listed
// in README.md.
type Config struct {
	// PollInterval is how often every source reads what its JVMs wrote
	// since the last poll (JVMs flush JFR about once a second).
	PollInterval time.Duration `mapstructure:"poll_interval"`
	// CollectionInterval is how often metrics are emitted.
	CollectionInterval time.Duration `mapstructure:"collection_interval"`
	// ProcRoot is the proc filesystem JVMs are discovered and resolved in,
	// e.g. /hostfs/proc when the host's root is mounted at /hostfs.
	ProcRoot string `mapstructure:"proc_root"`
	// Repositories configures the live JFR repository source.
	Repositories RepositoriesConfig `mapstructure:"repositories"`
	// XLog configures the -Xlog file source.
	XLog XLogConfig `mapstructure:"xlog"`
	// Recordings configures the finished-recording-files source.
	Recordings RecordingsConfig `mapstructure:"recordings"`
	// Storage is the storage extension that keeps every source's progress
	// (live repositories' chunks, -Xlog offsets, finished recordings
	// unless recordings::storage names another) across restarts; nil
	// keeps it in memory, so a restart repeats and misses some.
	Storage *component.ID `mapstructure:"storage"`
	// Metrics switches each metric (metrics::<name>::enabled), as
	// metadata.yaml and the histograms' declarations list them.
	Metrics jvmmetrics.MetricsConfig `mapstructure:"metrics"`
	// ResourceAttributes switches each resource attribute of the metrics
	// (resource_attributes::<name>::enabled).
	ResourceAttributes metadata.ResourceAttributesConfig `mapstructure:"resource_attributes"`
	// Accounts configures the accounts read beside JFR and the leak
	// detection over every account (accounts.go).
	Accounts AccountsConfig `mapstructure:"accounts"`
	// Events switches each log event (events::<name>::enabled):
	// jvm.memory.leak_suspected.
	Events metadata.EventsConfig `mapstructure:"events"`
}

// RecordingsConfig configures reading finished .jfr files.
type RecordingsConfig struct {
	// Include are glob patterns of recording files; empty turns the
	// source off.
	Include []string `mapstructure:"include"`
	// Storage is the storage extension that keeps which files (and
	// chunks) were read across restarts; nil keeps it in memory.
	Storage *component.ID `mapstructure:"storage"`
	// DiscoveryInterval is how often the patterns are matched again.
	DiscoveryInterval time.Duration `mapstructure:"discovery_interval"`
}

// RepositoriesConfig configures following the JFR disk repositories of
// running JVMs.
type RepositoriesConfig struct {
	// Enabled turns the source on.
	Enabled bool `mapstructure:"enabled"`
	// Discover finds local JVMs through proc_root and follows their
	// repositories.
	Discover bool `mapstructure:"discover"`
	// Include are glob patterns of repository folders to follow besides
	// the discovered ones.
	Include []string `mapstructure:"include"`
	// DiscoveryInterval is how often new JVMs and repositories are looked for.
	DiscoveryInterval time.Duration `mapstructure:"discovery_interval"`
	// Attach starts a recording in discovered JVMs that run none.
	Attach AttachConfig `mapstructure:"attach"`
	// MaxChunkSizeMiB bounds the memory held for one chunk: a chunk whose
	// header claims more is skipped (a hostile or sparse file may claim
	// up to 2 GiB).
	MaxChunkSizeMiB int64 `mapstructure:"max_chunk_size_mib"`
	// MaxMemoryMiB bounds the chunk memory held by all followed
	// repositories together; a chunk that would pass it is skipped.
	MaxMemoryMiB int64 `mapstructure:"max_memory_mib"`
}

// AttachConfig configures starting recordings through the HotSpot attach
// protocol (off by default).
type AttachConfig struct {
	// Enabled turns it on.
	Enabled bool `mapstructure:"enabled"`
	// Settings is a .jfc file (a path the collector reads) to record with;
	// empty uses the project's settings.
	Settings string `mapstructure:"settings"`
	// Timeout bounds one attach exchange with a JVM.
	Timeout time.Duration `mapstructure:"timeout"`
	// SafepointLog adds, at run time, a unified-logging output of its
	// safepoints (jcmd VM.log) to a JVM that records JFR itself with
	// settings that leave short safepoints out (JFR's default settings),
	// and reads it; the JVM's own recording is not changed. It acts only
	// with Enabled.
	SafepointLog bool `mapstructure:"safepoint_log"`
	// KubernetesAuth is how the Kubernetes API is reached for the pod and
	// namespace opt-outs: "serviceAccount" (in a pod; off a cluster the
	// check is skipped), "kubeConfig" ($KUBECONFIG, else ~/.kube/config)
	// or "none" (not checked).
	KubernetesAuth string `mapstructure:"kubernetes_auth"`
}

// XLogConfig configures tailing JVM unified-logging files.
type XLogConfig struct {
	// Include are glob patterns of -Xlog output files.
	Include []string `mapstructure:"include"`
	// Discover tails the -Xlog files of discovered JVMs that have no JFR
	// repository.
	Discover bool `mapstructure:"discover"`
	// StartAt is where a file found at start is read from: "end" or
	// "beginning". Files that appear later are read from the beginning.
	StartAt string `mapstructure:"start_at"`
	// DiscoveryInterval is how often the patterns are matched again.
	DiscoveryInterval time.Duration `mapstructure:"discovery_interval"`
	// PreferJFR drops the windows and safepoints of an -Xlog file while
	// the receiver reads the JFR repository of the JVM that writes it, so
	// that each pause is reported once (JFR's). False reports both.
	PreferJFR bool `mapstructure:"prefer_jfr"`
}

var _ component.Config = (*Config)(nil)

// maxChunkSizeMiB is the largest repositories::max_chunk_size_mib: package
// jfr addresses chunks of up to 2 GiB - 1 bytes.
const maxChunkSizeMiB = 2047

// Validate checks every key and names the one that is wrong.
func (cfg *Config) Validate() error {
	var errs []error
	positive := func(key string, d time.Duration) {
		if d <= 0 {
			errs = append(errs, fmt.Errorf("%s must be positive, got %s", key, d))
		}
	}
	globs := func(key string, patterns []string) {
		for i, p := range patterns {
			if _, err := filepath.Match(p, ""); err != nil {
				errs = append(errs, fmt.Errorf("%s[%d] %q: %w", key, i, p, err))
			}
		}
	}
	positive("poll_interval", cfg.PollInterval)
	positive("collection_interval", cfg.CollectionInterval)
	if cfg.ProcRoot == "" {
		errs = append(errs, errors.New("proc_root must not be empty"))
	}
	positive("repositories::discovery_interval", cfg.Repositories.DiscoveryInterval)
	globs("repositories::include", cfg.Repositories.Include)
	if n := cfg.Repositories.MaxChunkSizeMiB; n <= 0 || n > maxChunkSizeMiB {
		errs = append(errs, fmt.Errorf("repositories::max_chunk_size_mib must be between 1 and %d, got %d", maxChunkSizeMiB, n))
	}
	if m := cfg.Repositories.MaxMemoryMiB; m < cfg.Repositories.MaxChunkSizeMiB {
		errs = append(errs, fmt.Errorf("repositories::max_memory_mib must be at least repositories::max_chunk_size_mib (%d), got %d", cfg.Repositories.MaxChunkSizeMiB, m))
	}
	if a := cfg.Repositories.Attach; a.Enabled {
		positive("repositories::attach::timeout", a.Timeout)
		switch a.KubernetesAuth {
		case kubernetesAuthServiceAccount, kubernetesAuthKubeConfig, kubernetesAuthNone:
		default:
			errs = append(errs, fmt.Errorf("repositories::attach::kubernetes_auth must be %q, %q or %q, got %q",
				kubernetesAuthServiceAccount, kubernetesAuthKubeConfig, kubernetesAuthNone, a.KubernetesAuth))
		}
		if !cfg.Repositories.Discover {
			errs = append(errs, errors.New("repositories::attach::enabled needs repositories::discover"))
		}
	}
	positive("xlog::discovery_interval", cfg.XLog.DiscoveryInterval)
	globs("xlog::include", cfg.XLog.Include)
	if cfg.XLog.StartAt != "end" && cfg.XLog.StartAt != "beginning" {
		errs = append(errs, fmt.Errorf(`xlog::start_at must be "end" or "beginning", got %q`, cfg.XLog.StartAt))
	}
	positive("recordings::discovery_interval", cfg.Recordings.DiscoveryInterval)
	globs("recordings::include", cfg.Recordings.Include)
	errs = append(errs, cfg.Accounts.validate()...)
	if !cfg.Repositories.Enabled && len(cfg.XLog.Include) == 0 && !cfg.XLog.Discover && len(cfg.Recordings.Include) == 0 {
		errs = append(errs, errors.New("nothing to read: repositories::enabled and xlog::discover are false, xlog::include and recordings::include are empty"))
	}
	return errors.Join(errs...)
}
