package peerportextension // import "github.com/otelcol-ai/otelcol-ai/extension/peerportextension"

import "go.opentelemetry.io/collector/component"

// Config is the peerport extension's configuration: it has no settings.
type Config struct {
	// prevent unkeyed literal initialization
	_ struct{}
}

var _ component.Config = (*Config)(nil)
