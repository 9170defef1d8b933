// Package runtimestatetest starts a real runtimestate extension for tests
// of the components that name it (runtime_state), with a host that has it.
package runtimestatetest // import "github.com/otelcol-ai/otelcol-ai/extension/runtimestateextension/runtimestatetest"

import (
	"context"
	"testing"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/extension/extensiontest"

	"github.com/otelcol-ai/otelcol-ai/extension/runtimestateextension"
	"github.com/otelcol-ai/otelcol-ai/internal/runtimestate"
)

// ID is the extension's component ID in the tests' configurations.
var ID = component.MustNewID("runtimestate")

// Host is a host with the given extensions (as the collector's service
// gives them to components at Start).
type Host struct {
	component.Host
	Extensions map[component.ID]component.Component
}

// GetExtensions returns the host's extensions.
func (h Host) GetExtensions() map[component.ID]component.Component { return h.Extensions }

// Start starts a runtimestate extension on its default configuration under
// ID, shut down when the test ends, and returns a host that has it and its
// store.
func Start(t testing.TB) (Host, *runtimestate.Store) {
	t.Helper()
	f := runtimestateextension.NewFactory()
	ext, err := f.Create(context.Background(), extensiontest.NewNopSettings(f.Type()), f.CreateDefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	host := Host{Host: componenttest.NewNopHost(), Extensions: map[component.ID]component.Component{ID: ext}}
	if err := ext.Start(context.Background(), host); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := ext.Shutdown(context.Background()); err != nil {
			t.Error(err)
		}
	})
	store, err := runtimestate.Lookup(host, ID)
	if err != nil {
		t.Fatal(err)
	}
	return host, store
}
