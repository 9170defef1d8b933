package onnxinferenceextension // import "github.com/otelcol-ai/otelcol-ai/extension/onnxinferenceextension"

import (
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/collector/component"

	"github.com/otelcol-ai/otelcol-ai/extension/onnxinferenceextension/internal/repository"
)

// Config is the onnxinference extension's configuration.
type Config struct {
	// LibraryPath is the ONNX Runtime shared library. Empty: the
	// environment variable OTELCOL_AI_ONNXRUNTIME_LIB, then
	// libonnxruntime.so.1 next to the collector's executable.
	LibraryPath string `mapstructure:"library_path"`
	// Repository is the model repository's root:
	// <repository>/<model>/<version>/model.onnx. Empty: the environment
	// variable OTELCOL_AI_MODEL_REPOSITORY, then models/ next to the
	// collector's executable.
	Repository string `mapstructure:"repository"`
	// Models selects the models served and their version policies. Empty:
	// every model in the repository, each with the policy of its own
	// config.yaml, or the newest version.
	Models map[string]ModelConfig `mapstructure:"models"`
	// PollInterval is how often the repository is scanned for new, changed
	// and removed versions; 0 disables hot reload.
	PollInterval time.Duration `mapstructure:"poll_interval"`
	// SettleTime is how long a model file must have gone unmodified before
	// it is loaded, so that a file being copied in is never read half-written.
	SettleTime time.Duration `mapstructure:"settle_time"`
	// MaxModelBytes bounds the size of a model file; larger ones are refused.
	MaxModelBytes int64 `mapstructure:"max_model_bytes"`
	// Session holds ONNX Runtime's session options, for every model.
	Session SessionConfig `mapstructure:"session"`
	// prevent unkeyed literal initialization
	_ struct{}
}

// ModelConfig configures one model, here or in <repository>/<model>/config.yaml
// (this one wins).
type ModelConfig struct {
	// VersionPolicy: {latest: N} (default {latest: 1}), {all: true} or
	// {specific: [1, 3]}.
	VersionPolicy repository.Policy `mapstructure:"version_policy"`
}

// SessionConfig holds ONNX Runtime session options.
type SessionConfig struct {
	// IntraOpThreads bounds the threads one operator uses; 0: ONNX
	// Runtime's default (one per core).
	IntraOpThreads int `mapstructure:"intra_op_threads"`
	// InterOpThreads bounds the threads running operators in parallel;
	// 0: ONNX Runtime's default.
	InterOpThreads int `mapstructure:"inter_op_threads"`
	// GraphOptimizationLevel: disabled, basic, extended or all.
	GraphOptimizationLevel string `mapstructure:"graph_optimization_level"`
	// ExecutionProvider: cpu or cuda. cuda falls back to cpu, with a
	// warning, when the CUDA provider cannot be used.
	ExecutionProvider string `mapstructure:"execution_provider"`
	// DeviceID is the CUDA device for the cuda provider.
	DeviceID int `mapstructure:"device_id"`
}

var _ component.Config = (*Config)(nil)

// Execution providers.
const (
	ProviderCPU  = "cpu"
	ProviderCUDA = "cuda"
)

var optimizationLevels = []string{"disabled", "basic", "extended", "all"}

// Validate checks the configuration, naming the field (and model) at fault.
func (cfg *Config) Validate() error {
	var errs []error
	if cfg.PollInterval < 0 {
		errs = append(errs, fmt.Errorf("poll_interval: must not be negative, got %s", cfg.PollInterval))
	}
	if cfg.SettleTime < 0 {
		errs = append(errs, fmt.Errorf("settle_time: must not be negative, got %s", cfg.SettleTime))
	}
	if cfg.MaxModelBytes <= 0 {
		errs = append(errs, fmt.Errorf("max_model_bytes: must be positive, got %d", cfg.MaxModelBytes))
	}
	for name, m := range cfg.Models {
		if err := repository.CheckName(name); err != nil {
			errs = append(errs, fmt.Errorf("models::%s: %w", name, err))
		}
		if err := m.VersionPolicy.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("models::%s::version_policy: %w", name, err))
		}
	}
	s := cfg.Session
	if s.IntraOpThreads < 0 {
		errs = append(errs, fmt.Errorf("session::intra_op_threads: must not be negative, got %d", s.IntraOpThreads))
	}
	if s.InterOpThreads < 0 {
		errs = append(errs, fmt.Errorf("session::inter_op_threads: must not be negative, got %d", s.InterOpThreads))
	}
	if !contains(optimizationLevels, s.GraphOptimizationLevel) {
		errs = append(errs, fmt.Errorf("session::graph_optimization_level: %q is not one of %v", s.GraphOptimizationLevel, optimizationLevels))
	}
	if s.ExecutionProvider != ProviderCPU && s.ExecutionProvider != ProviderCUDA {
		errs = append(errs, fmt.Errorf("session::execution_provider: %q is not %q or %q", s.ExecutionProvider, ProviderCPU, ProviderCUDA))
	}
	if s.DeviceID < 0 {
		errs = append(errs, fmt.Errorf("session::device_id: must not be negative, got %d", s.DeviceID))
	}
	return errors.Join(errs...)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
