// Package distribution holds the configurations that ship inside the
// otelcol-ai binary and the confmap provider that serves them.
//
// The provider answers URIs of the form "embedded:<name>", so that
//
//	otelcol-ai --config embedded:default
//
// runs the node-agent configuration in config.yaml without any file on disk,
// and "embedded:gateway" runs the gateway tier's configuration. Embedded
// configurations may use ${env:VAR:-default} references; the collector's
// resolver expands them as for any other source.
package distribution // import "github.com/otelcol-ai/otelcol-ai/distribution"

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"sort"
	"strings"

	"go.opentelemetry.io/collector/confmap"
)

// Scheme is the URI scheme of the embedded-configuration provider.
const Scheme = "embedded"

//go:embed config.yaml gateway.yaml
var configs embed.FS

// files maps a configuration name, as written after "embedded:", to its file.
var files = map[string]string{
	"default": "config.yaml",
	"gateway": "gateway.yaml",
}

// ErrUnknownConfig is returned for an "embedded:" URI naming no embedded
// configuration.
var ErrUnknownConfig = errors.New("unknown embedded configuration")

// Names lists the embedded configurations, sorted.
func Names() []string {
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Config returns the raw YAML of the named embedded configuration.
func Config(name string) ([]byte, error) {
	file, ok := files[name]
	if !ok {
		return nil, fmt.Errorf("%w %q (have %s)", ErrUnknownConfig, name, strings.Join(Names(), ", "))
	}
	return configs.ReadFile(file)
}

// NewFactory returns the factory of the provider for "embedded:" URIs. ocb
// calls it for every provider listed in builder-config.yaml.
func NewFactory() confmap.ProviderFactory {
	return confmap.NewProviderFactory(func(confmap.ProviderSettings) confmap.Provider { return provider{} })
}

type provider struct{}

func (provider) Retrieve(_ context.Context, uri string, _ confmap.WatcherFunc) (*confmap.Retrieved, error) {
	name, ok := strings.CutPrefix(uri, Scheme+":")
	if !ok {
		return nil, fmt.Errorf("%q uri is not supported by the %q provider", uri, Scheme)
	}
	raw, err := Config(name)
	if err != nil {
		return nil, err
	}
	return confmap.NewRetrievedFromYAML(raw)
}

func (provider) Scheme() string { return Scheme }

func (provider) Shutdown(context.Context) error { return nil }
