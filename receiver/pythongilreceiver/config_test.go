package pythongilreceiver

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/confmaptest"

	"github.com/otelcol-ai/otelcol-ai/receiver/pythongilreceiver/internal/metadata"
)

func loadConfig(t *testing.T, name string) *Config {
	t.Helper()
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	require.NoError(t, err)
	cfg := NewFactory().CreateDefaultConfig()
	sub, err := cm.Sub(component.NewIDWithName(metadata.Type, name).String())
	require.NoError(t, err)
	require.NoError(t, sub.Unmarshal(cfg))
	return cfg.(*Config)
}

func TestDefaultConfig(t *testing.T) {
	cfg := loadConfig(t, "")
	assert.Equal(t, createDefaultConfig(), cfg)
	assert.Equal(t, "/proc", cfg.ProcRoot)
	assert.Equal(t, 5*time.Second, cfg.DiscoveryInterval)
	assert.Equal(t, 100*time.Microsecond, cfg.MinDuration)
	assert.True(t, cfg.SwitchProbes)
	assert.Equal(t, waitSourceFutex, cfg.WaitSource)
	assert.True(t, cfg.GC)
	assert.Equal(t, 10*time.Second, cfg.CollectionInterval)
	assert.Equal(t, time.Second, cfg.FlushInterval)
	assert.Equal(t, 1024, cfg.MaxBatchSize)
	assert.False(t, cfg.PerThread)
	assert.Equal(t, time.Minute, cfg.RetryInterval)
	assert.Equal(t, OverheadConfig{Budget: 0.02, Period: 10 * time.Second, CostPerHit: time.Microsecond}, cfg.Overhead)
	assert.False(t, cfg.filtered())
	require.NoError(t, confmap.Validate(cfg))
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
		Overhead:           OverheadConfig{Budget: 0.05, Period: 5 * time.Second, CostPerHit: time.Microsecond},
		Metrics:            defaultMetricsConfig(),
		ResourceAttributes: metadata.DefaultResourceAttributesConfig(),
	}
	want.Metrics.PythonGilSwitches.Enabled = false
	want.Metrics.PythonGilWaitDuration.Enabled = false
	want.ResourceAttributes.ProcessExecutableName.Enabled = false
	assert.Equal(t, want.Metrics.PythonGilSwitches.Enabled, cfg.Metrics.PythonGilSwitches.Enabled)
	assert.Equal(t, want.ResourceAttributes.ProcessExecutableName.Enabled, cfg.ResourceAttributes.ProcessExecutableName.Enabled)
	want.Metrics.PythonGilSwitches = cfg.Metrics.PythonGilSwitches // enabledSetByUser is unexported
	want.ResourceAttributes.ProcessExecutableName = cfg.ResourceAttributes.ProcessExecutableName
	assert.Equal(t, want, cfg)
	assert.True(t, cfg.filtered())
	require.NoError(t, confmap.Validate(cfg))
}

func TestInvalidConfigNamesEveryKey(t *testing.T) {
	err := confmap.Validate(loadConfig(t, "bad"))
	require.Error(t, err)
	for _, key := range []string{"discovery_interval", "include.executables[0]", "include.pids[0]", "overhead.budget"} {
		assert.True(t, strings.Contains(err.Error(), key), "error %q does not name %s", err, key)
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
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.key)
		})
	}
}
