package runtimestateextension // import "github.com/otelcol-ai/otelcol-ai/extension/runtimestateextension"

import (
	"errors"
	"time"

	"go.opentelemetry.io/collector/component"
)

// Config bounds what the extension holds. Every key and its default is in
// README.md.
type Config struct {
	// Retention is how long a process's account readings are kept; the
	// longest leak-detection window that reads them should fit.
	Retention time.Duration `mapstructure:"retention"`
	// MaxProcesses bounds the processes held.
	MaxProcesses int `mapstructure:"max_processes"`
	// MaxReadings bounds the readings held per account of a process.
	MaxReadings int `mapstructure:"max_readings"`
}

var _ component.Config = (*Config)(nil)

// Validate checks the bounds.
func (c *Config) Validate() error {
	var errs []error
	if c.Retention <= 0 {
		errs = append(errs, errors.New("retention must be positive"))
	}
	if c.MaxProcesses <= 0 {
		errs = append(errs, errors.New("max_processes must be positive"))
	}
	if c.MaxReadings < 4 {
		errs = append(errs, errors.New("max_readings must be at least 4"))
	}
	return errors.Join(errs...)
}
