package runtimestateextension

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/extension"
	"go.opentelemetry.io/collector/extension/extensiontest"

	"github.com/otelcol-ai/otelcol-ai/extension/runtimestateextension/internal/metadata"
	"github.com/otelcol-ai/otelcol-ai/internal/runtimestate"
)

type host struct {
	component.Host
	exts map[component.ID]component.Component
}

func (h host) GetExtensions() map[component.ID]component.Component { return h.exts }

// TestFoundByIDAndCleanOnRestart: a component finds the store by the
// extension's ID once it has started; a restart (Shutdown, Start) starts
// empty.
func TestFoundByIDAndCleanOnRestart(t *testing.T) {
	f := NewFactory()
	id := component.NewID(metadata.Type)
	ext, err := f.Create(context.Background(), extensiontest.NewNopSettings(metadata.Type), f.CreateDefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	h := host{Host: componenttest.NewNopHost(), exts: map[component.ID]component.Component{id: ext}}
	if _, err := runtimestate.Lookup(h, id); !errors.Is(err, runtimestate.ErrNotFound) {
		t.Errorf("before Start: %v", err)
	}
	if _, err := runtimestate.Lookup(h, component.NewIDWithName(metadata.Type, "other")); err == nil || !strings.Contains(err.Error(), "runtimestate/other is not among") {
		t.Errorf("unknown ID: %v", err)
	}
	h.exts[component.MustNewID("nop")] = componenttest.NewNopHost().GetExtensions()[component.ID{}]
	if _, err := runtimestate.Lookup(h, component.MustNewID("nop")); err == nil {
		t.Error("a component that is not a runtimestate extension was taken for one")
	}
	for round := range 2 {
		if err := ext.Start(context.Background(), h); err != nil {
			t.Fatal(err)
		}
		s, err := runtimestate.Lookup(h, id)
		if err != nil {
			t.Fatal(err)
		}
		p := runtimestate.Process{PID: 7, StartTicks: 70}
		if n := len(s.Accounts(p, time.Time{})); n != 0 {
			t.Errorf("round %d: %d accounts at start, want none", round, n)
		}
		s.Record(p, "heap", time.Now(), 1)
		if err := ext.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if err := ext.Shutdown(context.Background()); err != nil {
		t.Errorf("second Shutdown: %v", err)
	}
}

func TestConfigValidated(t *testing.T) {
	cfg := NewFactory().CreateDefaultConfig().(*Config)
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	cfg.Retention, cfg.MaxProcesses, cfg.MaxReadings = 0, 0, 3
	err := cfg.Validate()
	for _, want := range []string{"retention must be positive", "max_processes must be positive", "max_readings must be at least 4"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("want %q in %v", want, err)
		}
	}
}

var _ extension.Extension = (*runtimeState)(nil)
