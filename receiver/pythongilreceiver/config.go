package pythongilreceiver

import (
	"errors"
	"fmt"
	"regexp"
	"time"

	"go.opentelemetry.io/collector/component"

	"github.com/otelcol-ai/otelcol-ai/receiver/pythongilreceiver/internal/metadata"
)

// Config configures the pythongil receiver. Every key and its default is
// listed in README.md.
type Config struct {
	// ProcRoot is the proc filesystem to discover processes in, e.g.
	// /hostfs/proc when the host's root is mounted at /hostfs.
	ProcRoot string `mapstructure:"proc_root"`
	// DiscoveryInterval is how often /proc is scanned for interpreters
	// that started or exited.
	DiscoveryInterval time.Duration `mapstructure:"discovery_interval"`
	// Include selects processes; empty selects every CPython process.
	Include IncludeConfig `mapstructure:"include"`
	// MinDuration: windows shorter than this are counted and summed in the
	// kernel instead of being emitted one by one.
	MinDuration time.Duration `mapstructure:"min_duration"`
	// SwitchProbes probes take_gil/drop_gil where the symbol table has them.
	SwitchProbes bool `mapstructure:"switch_probes"`
	// WaitSource is where waits come from: waitSourceFutex (the futex
	// syscalls of threads blocked on the GIL) or waitSourceUprobes
	// (take_gil's or PyEval_RestoreThread's return).
	WaitSource string `mapstructure:"wait_source"`
	// GC emits python.gc.pause windows from gc_collect_main (collect on 3.9)
	// or, where the symbol table has neither, the gc__start/gc__done USDT
	// probes.
	GC bool `mapstructure:"gc"`
	// CollectionInterval is how often metrics are emitted.
	CollectionInterval time.Duration `mapstructure:"collection_interval"`
	// FlushInterval is the longest a window waits before it is sent.
	FlushInterval time.Duration `mapstructure:"flush_interval"`
	// MaxBatchSize sends the windows as soon as this many are pending.
	MaxBatchSize int `mapstructure:"max_batch_size"`
	// PerThread adds thread.id to metrics (cardinality: one series per
	// thread).
	PerThread bool `mapstructure:"per_thread"`
	// RetryInterval is how often loading the probes is retried while eBPF
	// is unavailable.
	RetryInterval time.Duration `mapstructure:"retry_interval"`
	// Overhead bounds what probing costs the probed processes.
	Overhead OverheadConfig `mapstructure:"overhead"`
	// Metrics turns each metric on or off (metrics::<name>::enabled).
	Metrics MetricsConfig `mapstructure:"metrics"`
	// ResourceAttributes turns each resource attribute of the metrics on
	// or off (the windows' resource always carries the whole identity:
	// the correlator matches on it).
	ResourceAttributes metadata.ResourceAttributesConfig `mapstructure:"resource_attributes"`
}

// IncludeConfig selects processes by name, command line or pid; a process
// matching any entry is probed.
type IncludeConfig struct {
	// Executables are regular expressions on the executable's base name.
	Executables []string `mapstructure:"executables"`
	// CommandLines are regular expressions on the command line.
	CommandLines []string `mapstructure:"command_lines"`
	// PIDs are process ids.
	PIDs []int `mapstructure:"pids"`
}

// OverheadConfig is the overhead budget.
type OverheadConfig struct {
	// Budget is the share of one CPU that probes may cost, averaged over
	// the probed processes (0.02 = 2%). 0 turns duty cycling off.
	Budget float64 `mapstructure:"budget"`
	// Period is the duty cycle's period.
	Period time.Duration `mapstructure:"period"`
	// CostPerHit is what one probe hit costs, for the estimate.
	CostPerHit time.Duration `mapstructure:"cost_per_hit"`
	// FollowAttention spends the budget first on the libraries whose
	// processes recently had spans or JVM pauses (as the runtimecorrelation
	// processor marks them); the others get the minimum ratio.
	FollowAttention bool `mapstructure:"follow_attention"`
	// RuntimeState is the runtimestate extension whose attention marks are
	// followed (the runtimecorrelation processor's runtime_state names the
	// same one); nil: no marks, every file alike.
	RuntimeState *component.ID `mapstructure:"runtime_state"`
}

// Values of wait_source.
const (
	waitSourceFutex   = "futex"
	waitSourceUprobes = "uprobes"
)

var _ component.Config = (*Config)(nil)

// Validate checks every key and names the one that is wrong.
func (cfg *Config) Validate() error {
	var errs []error
	positive := func(key string, d time.Duration) {
		if d <= 0 {
			errs = append(errs, fmt.Errorf("%s must be positive, got %s", key, d))
		}
	}
	if cfg.ProcRoot == "" {
		errs = append(errs, errors.New("proc_root must not be empty"))
	}
	positive("discovery_interval", cfg.DiscoveryInterval)
	positive("collection_interval", cfg.CollectionInterval)
	positive("flush_interval", cfg.FlushInterval)
	positive("retry_interval", cfg.RetryInterval)
	if cfg.MinDuration < 0 {
		errs = append(errs, fmt.Errorf("min_duration must not be negative, got %s", cfg.MinDuration))
	}
	if cfg.WaitSource != waitSourceFutex && cfg.WaitSource != waitSourceUprobes {
		errs = append(errs, fmt.Errorf("wait_source must be %q or %q, got %q", waitSourceFutex, waitSourceUprobes, cfg.WaitSource))
	}
	if cfg.MaxBatchSize <= 0 {
		errs = append(errs, fmt.Errorf("max_batch_size must be positive, got %d", cfg.MaxBatchSize))
	}
	for i, p := range cfg.Include.PIDs {
		if p <= 0 {
			errs = append(errs, fmt.Errorf("include.pids[%d] must be a positive pid, got %d", i, p))
		}
	}
	for i, s := range cfg.Include.Executables {
		if _, err := regexp.Compile(s); err != nil {
			errs = append(errs, fmt.Errorf("include.executables[%d]: %w", i, err))
		}
	}
	for i, s := range cfg.Include.CommandLines {
		if _, err := regexp.Compile(s); err != nil {
			errs = append(errs, fmt.Errorf("include.command_lines[%d]: %w", i, err))
		}
	}
	if b := cfg.Overhead.Budget; b < 0 || b > 1 {
		errs = append(errs, fmt.Errorf("overhead.budget must be between 0 and 1, got %g", b))
	}
	if cfg.Overhead.Budget > 0 {
		positive("overhead.period", cfg.Overhead.Period)
		positive("overhead.cost_per_hit", cfg.Overhead.CostPerHit)
	}
	return errors.Join(errs...)
}
