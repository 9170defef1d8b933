package nvmlreceiver

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/confmaptest"

	"github.com/otelcol-ai/otelcol-ai/receiver/nvmlreceiver/internal/metadata"
)

func loadConfig(t *testing.T, name string) *Config {
	t.Helper()
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	require.NoError(t, err)
	cfg := createDefaultConfig()
	id := component.NewID(metadata.Type)
	if name != "" {
		id = component.NewIDWithName(metadata.Type, name)
	}
	sub, err := cm.Sub(id.String())
	require.NoError(t, err)
	require.NoError(t, sub.Unmarshal(cfg))
	return cfg.(*Config)
}

func TestLoadConfig(t *testing.T) {
	t.Run("default", func(t *testing.T) {
		cfg := loadConfig(t, "")
		require.NoError(t, confmap.Validate(cfg))
		assert.Equal(t, createDefaultConfig(), cfg)
		assert.Equal(t, 10*time.Second, cfg.CollectionInterval)
		assert.Equal(t, time.Minute, cfg.InitRetryInterval)
		assert.Equal(t, "", cfg.LibraryPath)
		assert.Equal(t, ProcessesConfig{Enabled: true, ProcRoot: "/proc", CommandLineMaxLength: 256}, cfg.Processes)
		assert.Equal(t, PodResourcesConfig{Endpoint: "unix:///var/lib/kubelet/pod-resources/kubelet.sock", ResourcePrefix: "nvidia.com/"}, cfg.PodResources)
		assert.Equal(t, LeakDetectionConfig{Enabled: true, Window: 15 * time.Minute, MinGrowthRate: 16384, MinGrowth: 32 << 20, MinSamples: 10}, cfg.LeakDetection)
		assert.True(t, cfg.Metrics.HwTemperature.Enabled)
		assert.False(t, cfg.ResourceAttributes.HwSerialNumber.Enabled)
	})
	t.Run("custom", func(t *testing.T) {
		cfg := loadConfig(t, "custom")
		require.NoError(t, confmap.Validate(cfg))
		assert.Equal(t, 30*time.Second, cfg.CollectionInterval)
		assert.Equal(t, 5*time.Second, cfg.InitialDelay)
		assert.Equal(t, 5*time.Second, cfg.Timeout)
		assert.Equal(t, "/usr/local/nvidia/lib64/libnvidia-ml.so.1", cfg.LibraryPath)
		assert.Equal(t, 5*time.Minute, cfg.InitRetryInterval)
		assert.Equal(t, ProcessesConfig{Enabled: true, ProcRoot: "/hostfs/proc", CommandLineMaxLength: 128}, cfg.Processes)
		assert.Equal(t, LeakDetectionConfig{Enabled: true, Window: 30 * time.Minute, MinGrowthRate: 4096, MinGrowth: 64 << 20, MinSamples: 20}, cfg.LeakDetection)
		assert.False(t, cfg.Metrics.HwTemperature.Enabled)
		assert.True(t, cfg.Metrics.HwPower.Enabled)
		assert.True(t, cfg.ResourceAttributes.HwSerialNumber.Enabled)
		assert.False(t, cfg.Events.GpuEcc.Enabled)
		assert.True(t, cfg.Events.GpuXid.Enabled)
	})
	t.Run("devices only", func(t *testing.T) {
		cfg := loadConfig(t, "devices_only")
		require.NoError(t, confmap.Validate(cfg))
		assert.False(t, cfg.Processes.Enabled)
		assert.Equal(t, "", cfg.PodResources.Endpoint)
		assert.False(t, cfg.LeakDetection.Enabled)
	})
	t.Run("invalid names every key", func(t *testing.T) {
		err := confmap.Validate(loadConfig(t, "invalid"))
		require.Error(t, err)
		for _, key := range []string{
			"collection_interval",
			"init_retry_interval",
			"processes.command_line_max_length",
			"processes.proc_root",
			"pod_resources.endpoint",
			"leak_detection: window",
		} {
			assert.ErrorContains(t, err, key)
		}
	})
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		mut  func(*Config)
		want string
	}{
		{"defaults are valid", func(*Config) {}, ""},
		{"negative timeout", func(c *Config) { c.Timeout = -time.Second }, "timeout must not be negative"},
		{"leak thresholds ignored when disabled", func(c *Config) { c.LeakDetection = LeakDetectionConfig{} }, ""},
		{"leak rate", func(c *Config) { c.LeakDetection.MinGrowthRate = 0 }, "leak_detection: min_growth_rate must be positive"},
		{"leak growth", func(c *Config) { c.LeakDetection.MinGrowth = -5 }, "leak_detection: min_growth must be positive"},
		{"leak samples", func(c *Config) { c.LeakDetection.MinSamples = 1 }, "leak_detection: min_samples must be at least 3"},
		{"proc root may be empty when processes are off", func(c *Config) {
			c.Processes.Enabled = false
			c.Processes.ProcRoot = ""
		}, ""},
		{"pod resources off", func(c *Config) { c.PodResources.Endpoint = "" }, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := createDefaultConfig().(*Config)
			tt.mut(cfg)
			err := cfg.Validate()
			if tt.want == "" {
				assert.NoError(t, err)
				return
			}
			assert.ErrorContains(t, err, tt.want)
		})
	}
}
