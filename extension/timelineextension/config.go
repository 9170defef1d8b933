package timelineextension // import "github.com/otelcol-ai/otelcol-ai/extension/timelineextension"

import (
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/confighttp"

	"github.com/otelcol-ai/otelcol-ai/pkg/timeline"
)

// Config is the timeline extension's configuration.
type Config struct {
	// ServerConfig is where the page is served (endpoint, TLS, auth, …).
	confighttp.ServerConfig `mapstructure:",squash"`
	// RuntimeState is the runtimestate extension runtimecorrelation
	// processors register their state in (their runtime_state); nil draws
	// nothing (the API says so).
	RuntimeState *component.ID `mapstructure:"runtime_state"`
	// Source is the component ID of the runtimecorrelation processor whose
	// state is drawn; empty means the only one registered.
	Source string `mapstructure:"source"`
	// PollInterval is how often a visible page asks for a new snapshot.
	PollInterval time.Duration `mapstructure:"poll_interval"`
	// Range is the time range a page opens with.
	Range time.Duration `mapstructure:"range"`
	// MaxWindows is the most windows one snapshot returns one by one;
	// beyond it the page gets a summary (windows per time bucket).
	MaxWindows int `mapstructure:"max_windows"`
	// MaxSpans is the most spans one snapshot returns, the newest first.
	MaxSpans int `mapstructure:"max_spans"`

	_ struct{}
}

// Validate reports every error at once, each with its key.
func (cfg *Config) Validate() error {
	var errs []error
	if cfg.NetAddr.Endpoint == "" {
		errs = append(errs, errors.New("endpoint: must be set (e.g. 127.0.0.1:55690)"))
	}
	if cfg.Source != "" {
		var id component.ID
		if err := id.UnmarshalText([]byte(cfg.Source)); err != nil {
			errs = append(errs, fmt.Errorf("source: %q is not a component ID: %w", cfg.Source, err))
		}
	}
	if cfg.PollInterval < 100*time.Millisecond {
		errs = append(errs, fmt.Errorf("poll_interval: %s is below 100ms", cfg.PollInterval))
	}
	if cfg.Range <= 0 || cfg.Range > timeline.MaxQueryRange {
		errs = append(errs, fmt.Errorf("range: %s is outside (0, %s]", cfg.Range, timeline.MaxQueryRange))
	}
	if cfg.MaxWindows < 1 || cfg.MaxWindows > timeline.MaxQueryWindows {
		errs = append(errs, fmt.Errorf("max_windows: %d is outside [1, %d]", cfg.MaxWindows, timeline.MaxQueryWindows))
	}
	if cfg.MaxSpans < 1 || cfg.MaxSpans > timeline.MaxQuerySpans {
		errs = append(errs, fmt.Errorf("max_spans: %d is outside [1, %d]", cfg.MaxSpans, timeline.MaxQuerySpans))
	}
	return errors.Join(errs...)
}
