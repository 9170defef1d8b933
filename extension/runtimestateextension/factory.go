package runtimestateextension // import "github.com/otelcol-ai/otelcol-ai/extension/runtimestateextension"

import (
	"context"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/extension"

	"github.com/otelcol-ai/otelcol-ai/extension/runtimestateextension/internal/metadata"
	"github.com/otelcol-ai/otelcol-ai/internal/runtimestate"
)

// NewFactory returns the runtimestate extension's factory.
func NewFactory() extension.Factory {
	return extension.NewFactory(metadata.Type, createDefaultConfig, create, metadata.ExtensionStability)
}

func createDefaultConfig() component.Config {
	// 30 minutes: twice the leak detectors' default 15-minute window.
	// 4096 processes and 1024 readings an account: a reading every 10 s
	// for 30 minutes is 180.
	return &Config{Retention: 30 * time.Minute, MaxProcesses: 4096, MaxReadings: 1024}
}

func create(_ context.Context, _ extension.Settings, cfg component.Config) (extension.Extension, error) {
	c := cfg.(*Config)
	return &runtimeState{cfg: runtimestate.Config{Retention: c.Retention, MaxProcesses: c.MaxProcesses, MaxReadings: c.MaxReadings}}, nil
}
