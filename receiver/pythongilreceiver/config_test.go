package pythongilreceiver

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"

	"github.com/otelcol-ai/otelcol-ai/internal/cfgtest"
	"github.com/otelcol-ai/otelcol-ai/receiver/pythongilreceiver/internal/metadata"
)

func loadConfig(t *testing.T, name string) *Config {
	t.Helper()
	return cfgtest.Load(t, component.NewIDWithName(metadata.Type, name), NewFactory().CreateDefaultConfig().(*Config))
}

func TestDefaultConfig(t *testing.T) {
	cfg := loadConfig(t, "")
	if !reflect.DeepEqual(cfg, createDefaultConfig()) {
		t.Errorf("loadConfig: got %v, want %v", cfg, createDefaultConfig())
	}
	if cfg.ProcRoot != "/proc" {
		t.Errorf("cfg.ProcRoot: got %q, want %q", cfg.ProcRoot, "/proc")
	}
	if cfg.DiscoveryInterval != 5*time.Second {
		t.Errorf("cfg.DiscoveryInterval: got %v, want %v", cfg.DiscoveryInterval, 5*time.Second)
	}
	if cfg.MinDuration != 100*time.Microsecond {
		t.Errorf("cfg.MinDuration: got %v, want %v", cfg.MinDuration, 100*time.Microsecond)
	}
	if !cfg.SwitchProbes {
		t.Errorf("cfg.SwitchProbes is false")
	}
	if cfg.WaitSource != waitSourceFutex {
		t.Errorf("cfg.WaitSource: got %q, want %q", cfg.WaitSource, waitSourceFutex)
	}
	if !cfg.GC {
		t.Errorf("cfg.GC is false")
	}
	if cfg.CollectionInterval != 10*time.Second {
		t.Errorf("cfg.CollectionInterval: got %v, want %v", cfg.CollectionInterval, 10*time.Second)
	}
	if cfg.FlushInterval != time.Second {
		t.Errorf("cfg.FlushInterval: got %v, want %v", cfg.FlushInterval, time.Second)
	}
	if cfg.MaxBatchSize != 1024 {
		t.Errorf("cfg.MaxBatchSize: got %v, want %v", cfg.MaxBatchSize, 1024)
	}
	if cfg.PerThread {
		t.Errorf("cfg.PerThread is true")
	}
	if cfg.RetryInterval != time.Minute {
		t.Errorf("cfg.RetryInterval: got %v, want %v", cfg.RetryInterval, time.Minute)
	}
	if got, want := cfg.Overhead, (OverheadConfig{Budget: 0.02, Period: 10 * time.Second, CostPerHit: time.Microsecond, FollowAttention: true}); got != want {
		t.Errorf("cfg.Overhead: got %v, want %v", got, want)
	}
	if cfg.filtered() {
		t.Errorf("cfg.filtered() is true")
	}
	if err := confmap.Validate(cfg); err != nil {
		t.Fatalf("confmap.Validate: %v", err)
	}
}

func TestCustomConfig(t *testing.T) {
	cfg := loadConfig(t, "custom")
	want := &Config{
		ProcRoot:          "/hostfs/proc",
		DiscoveryInterval: 2 * time.Second,
		Include: IncludeConfig{
			Executables:  []string{"^python3", "^java$"},
			CommandLines: []string{"gunicorn"},
			PIDs:         []int{4242},
		},
		MinDuration:        250 * time.Microsecond,
		WaitSource:         waitSourceUprobes,
		CollectionInterval: 30 * time.Second,
		FlushInterval:      500 * time.Millisecond,
		MaxBatchSize:       256,
		PerThread:          true,
		RetryInterval:      5 * time.Minute,
		Overhead:           OverheadConfig{Budget: 0.05, Period: 5 * time.Second, CostPerHit: time.Microsecond, FollowAttention: true},
		Metrics:            defaultMetricsConfig(),
		ResourceAttributes: metadata.DefaultResourceAttributesConfig(),
	}
	want.Metrics.PythonGilSwitches.Enabled = false
	want.Metrics.PythonGilWaitDuration.Enabled = false
	want.ResourceAttributes.ProcessExecutableName.Enabled = false
	if cfg.Metrics.PythonGilSwitches.Enabled != want.Metrics.PythonGilSwitches.Enabled {
		t.Errorf("cfg.Metrics.PythonGilSwitches.Enabled: got %v, want %v", cfg.Metrics.PythonGilSwitches.Enabled, want.Metrics.PythonGilSwitches.Enabled)
	}
	if cfg.ResourceAttributes.ProcessExecutableName.Enabled != want.ResourceAttributes.ProcessExecutableName.Enabled {
		t.Errorf("cfg.ResourceAttributes.ProcessExecutableName.Enabled: got %v, want %v", cfg.ResourceAttributes.ProcessExecutableName.Enabled, want.ResourceAttributes.ProcessExecutableName.Enabled)
	}
	want.Metrics.PythonGilSwitches = cfg.Metrics.PythonGilSwitches // enabledSetByUser is unexported
	want.ResourceAttributes.ProcessExecutableName = cfg.ResourceAttributes.ProcessExecutableName
	if !reflect.DeepEqual(cfg, want) {
		t.Errorf("cfg: got %v, want %v", cfg, want)
	}
	if !cfg.filtered() {
		t.Errorf("cfg.filtered() is false")
	}
	if err := confmap.Validate(cfg); err != nil {
		t.Fatalf("confmap.Validate: %v", err)
	}
}

func TestInvalidConfigNamesEveryKey(t *testing.T) {
	err := confmap.Validate(loadConfig(t, "bad"))
	if err == nil {
		t.Fatalf("confmap.Validate: got nil error, want an error")
	}
	for _, key := range []string{"discovery_interval", "include.executables[0]", "include.pids[0]", "overhead.budget"} {
		if !strings.Contains(err.Error(), key) {
			t.Errorf("error %q does not name %s (strings.Contains(err.Error(), key) is false)", err, key)
		}
	}
}

func TestValidateEachKey(t *testing.T) {
	tests := []struct {
		key    string
		mutate func(*Config)
	}{
		{"proc_root", func(c *Config) { c.ProcRoot = "" }},
		{"collection_interval", func(c *Config) { c.CollectionInterval = 0 }},
		{"flush_interval", func(c *Config) { c.FlushInterval = -time.Second }},
		{"retry_interval", func(c *Config) { c.RetryInterval = 0 }},
		{"min_duration", func(c *Config) { c.MinDuration = -1 }},
		{"max_batch_size", func(c *Config) { c.MaxBatchSize = 0 }},
		{"wait_source", func(c *Config) { c.WaitSource = "take_gil" }},
		{"include.command_lines[0]", func(c *Config) { c.Include.CommandLines = []string{"[a"} }},
		{"overhead.period", func(c *Config) { c.Overhead.Period = 0 }},
		{"overhead.cost_per_hit", func(c *Config) { c.Overhead.CostPerHit = 0 }},
	}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			cfg := createDefaultConfig().(*Config)
			tt.mutate(cfg)
			err := cfg.Validate()
			if err == nil {
				t.Fatalf("cfg.Validate: got nil error, want an error")
			}
			if got := err.Error(); !strings.Contains(got, tt.key) {
				t.Errorf("error: got %q, want it to contain %q", got, tt.key)
			}
		})
	}
}

// TestFollowAttentionKey: overhead.follow_attention is on by default, can
// be turned off, and takes only a boolean.
func TestFollowAttentionKey(t *testing.T) {
	for _, tt := range []struct {
		name  string
		value any
		want  bool
		bad   bool
	}{
		{"off", false, false, false},
		{"on", true, true, false},
		{"not a boolean", "sometimes", false, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := createDefaultConfig().(*Config)
			err := confmap.NewFromStringMap(map[string]any{"overhead": map[string]any{"follow_attention": tt.value}}).Unmarshal(cfg)
			if tt.bad {
				if err == nil || !strings.Contains(err.Error(), "follow_attention") {
					t.Fatalf("Unmarshal: got %v, want an error naming follow_attention", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Unmarshal: %v", err)
			}
			if cfg.Overhead.FollowAttention != tt.want {
				t.Errorf("overhead.follow_attention: got %v, want %v", cfg.Overhead.FollowAttention, tt.want)
			}
			if err := cfg.Validate(); err != nil {
				t.Errorf("Validate: %v", err)
			}
		})
	}
}
