package timelineextension // import "github.com/otelcol-ai/otelcol-ai/extension/timelineextension"

import (
	"context"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/confighttp"
	"go.opentelemetry.io/collector/extension"

	"github.com/otelcol-ai/otelcol-ai/extension/timelineextension/internal/metadata"
)

// defaultEndpoint is loopback only: the page shows every process on the
// node; reach it with kubectl port-forward.
const defaultEndpoint = "127.0.0.1:55690"

// NewFactory returns the timeline extension's factory.
func NewFactory() extension.Factory {
	return extension.NewFactory(metadata.Type, createDefaultConfig, create, metadata.ExtensionStability)
}

// createDefaultConfig serves on loopback; a page polls once a second
// (JFR flushes once a second) over the last 30 s, and draws up to 5000
// windows and 5000 spans one by one, about what an SVG redraws within a
// poll; beyond that it draws a summary.
func createDefaultConfig() component.Config {
	server := confighttp.NewDefaultServerConfig()
	server.NetAddr.Endpoint = defaultEndpoint
	return &Config{
		ServerConfig: server,
		PollInterval: time.Second,
		Range:        30 * time.Second,
		MaxWindows:   5000,
		MaxSpans:     5000,
	}
}

func create(_ context.Context, set extension.Settings, cfg component.Config) (extension.Extension, error) {
	return newExtension(set, cfg.(*Config))
}
