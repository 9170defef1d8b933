// Package cfgtest loads a component's test configurations as the collector
// does: the component's section of testdata/config.yaml unmarshalled over
// its default configuration.
package cfgtest

import (
	"path/filepath"
	"testing"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap/confmaptest"
)

// Load unmarshals the section id of testdata/config.yaml (relative to the
// test's package) over def, the component's default configuration, and
// returns def. A file or section that cannot be read fails the test.
func Load[C any](t testing.TB, id component.ID, def C) C {
	t.Helper()
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	if err != nil {
		t.Fatalf("confmaptest.LoadConf: %v", err)
	}
	sub, err := cm.Sub(id.String())
	if err != nil {
		t.Fatalf("cm.Sub(%q): %v", id, err)
	}
	if err := sub.Unmarshal(def); err != nil {
		t.Fatalf("sub.Unmarshal(%q): %v", id, err)
	}
	return def
}
