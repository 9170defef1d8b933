package onnxinferenceextension // import "github.com/otelcol-ai/otelcol-ai/extension/onnxinferenceextension"

import (
	"context"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/extension"

	"github.com/otelcol-ai/otelcol-ai/extension/onnxinferenceextension/internal/metadata"
)

const (
	defaultPollInterval  = 10 * time.Second
	defaultSettleTime    = 2 * time.Second
	defaultMaxModelBytes = 256 << 20
)

// NewFactory returns the onnxinference extension's factory.
func NewFactory() extension.Factory {
	return extension.NewFactory(metadata.Type, createDefaultConfig, create, metadata.ExtensionStability)
}

func createDefaultConfig() component.Config {
	return &Config{
		PollInterval:  defaultPollInterval,
		SettleTime:    defaultSettleTime,
		MaxModelBytes: defaultMaxModelBytes,
		Session: SessionConfig{
			IntraOpThreads:         1,
			InterOpThreads:         1,
			GraphOptimizationLevel: "all",
			ExecutionProvider:      ProviderCPU,
		},
	}
}

func create(_ context.Context, set extension.Settings, cfg component.Config) (extension.Extension, error) {
	return newExtension(set, cfg.(*Config))
}
