package onnxinferenceextension

import (
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"

	"github.com/otelcol-ai/otelcol-ai/extension/onnxinferenceextension/internal/repository"
	"github.com/otelcol-ai/otelcol-ai/internal/cfgtest"
)

func loadConfig(t *testing.T, name string) *Config {
	t.Helper()
	return cfgtest.Load(t, component.MustNewIDWithName("onnxinference", name), createDefaultConfig().(*Config))
}

func TestConfigDefaults(t *testing.T) {
	cfg := loadConfig(t, "")
	if err := confmap.Validate(cfg); err != nil {
		t.Fatalf("default config invalid: %v", err)
	}
	want := createDefaultConfig().(*Config)
	if cfg.Repository != "" || cfg.PollInterval != 10*time.Second || cfg.SettleTime != 2*time.Second ||
		cfg.MaxModelBytes != 256<<20 || cfg.Session != want.Session || cfg.LibraryPath != "" || len(cfg.Models) != 0 {
		t.Fatalf("defaults: %+v", cfg)
	}
}

func TestConfigEveryKey(t *testing.T) {
	cfg := loadConfig(t, "custom")
	if err := confmap.Validate(cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.LibraryPath != "/opt/onnxruntime/libonnxruntime.so.1" || cfg.Repository != "/var/lib/otelcol-ai/models" ||
		cfg.PollInterval != 30*time.Second || cfg.SettleTime != 5*time.Second || cfg.MaxModelBytes != 1<<20 {
		t.Fatalf("top level: %+v", cfg)
	}
	if p := cfg.Models["runtime_overlap"].VersionPolicy; p.Latest != 2 {
		t.Fatalf("runtime_overlap policy %+v", p)
	}
	if p := cfg.Models["isolation_forest"].VersionPolicy; len(p.Specific) != 1 || p.Specific[0] != 3 {
		t.Fatalf("isolation_forest policy %+v", p)
	}
	want := SessionConfig{IntraOpThreads: 2, InterOpThreads: 1, GraphOptimizationLevel: "extended", ExecutionProvider: "cuda", DeviceID: 1}
	if cfg.Session != want {
		t.Fatalf("session %+v, want %+v", cfg.Session, want)
	}
}

func TestConfigErrorsNameTheField(t *testing.T) {
	tests := []struct {
		name string
		want []string
	}{
		{"bad_policy", []string{"models::m::version_policy", "only one of"}},
		{"escape", []string{"models::..", repository.ErrBadName.Error()}},
		{"bad_session", []string{"session::execution_provider", `"tpu"`, "session::graph_optimization_level", `"max"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := confmap.Validate(loadConfig(t, tt.name))
			if err == nil {
				t.Fatal("config accepted")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
	cfg := createDefaultConfig().(*Config)
	cfg.MaxModelBytes, cfg.PollInterval, cfg.SettleTime = 0, -1, -1
	err := cfg.Validate()
	for _, w := range []string{"max_model_bytes:", "poll_interval:", "settle_time:"} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("error %v does not name %s", err, w)
		}
	}
}
