package peerportextension // import "github.com/otelcol-ai/otelcol-ai/extension/peerportextension"

import (
	"context"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/extension"

	"github.com/otelcol-ai/otelcol-ai/extension/peerportextension/internal/metadata"
)

// NewFactory returns the peerport extension's factory.
func NewFactory() extension.Factory {
	return extension.NewFactory(metadata.Type, createDefaultConfig, create, metadata.ExtensionStability)
}

func createDefaultConfig() component.Config { return &Config{} }

func create(context.Context, extension.Settings, component.Config) (extension.Extension, error) {
	return peerPort{}, nil
}
