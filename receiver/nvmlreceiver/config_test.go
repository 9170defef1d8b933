package nvmlreceiver

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"

	"github.com/otelcol-ai/otelcol-ai/internal/cfgtest"
	"github.com/otelcol-ai/otelcol-ai/receiver/nvmlreceiver/internal/metadata"
)

func loadConfig(t *testing.T, name string) *Config {
	t.Helper()
	return cfgtest.Load(t, component.NewIDWithName(metadata.Type, name), createDefaultConfig().(*Config))
}

func TestLoadConfig(t *testing.T) {
	t.Run("default", func(t *testing.T) {
		cfg := loadConfig(t, "")
		if err := confmap.Validate(cfg); err != nil {
			t.Fatalf("confmap.Validate: %v", err)
		}
		if !reflect.DeepEqual(cfg, createDefaultConfig()) {
			t.Errorf("loadConfig: got %v, want %v", cfg, createDefaultConfig())
		}
		if cfg.CollectionInterval != 10*time.Second {
			t.Errorf("cfg.CollectionInterval: got %v, want %v", cfg.CollectionInterval, 10*time.Second)
		}
		if cfg.InitRetryInterval != time.Minute {
			t.Errorf("cfg.InitRetryInterval: got %v, want %v", cfg.InitRetryInterval, time.Minute)
		}
		if cfg.LibraryPath != "" {
			t.Errorf("cfg.LibraryPath: got %q, want %q", cfg.LibraryPath, "")
		}
		if cfg.Processes != (ProcessesConfig{Enabled: true, ProcRoot: "/proc", CommandLineMaxLength: 256}) {
			t.Errorf("cfg.Processes: got %v, want %v", cfg.Processes, ProcessesConfig{Enabled: true, ProcRoot: "/proc", CommandLineMaxLength: 256})
		}
		if cfg.PodResources != (PodResourcesConfig{Endpoint: "unix:///var/lib/kubelet/pod-resources/kubelet.sock", ResourcePrefix: "nvidia.com/"}) {
			t.Errorf("cfg.PodResources: got %v, want %v", cfg.PodResources, PodResourcesConfig{Endpoint: "unix:///var/lib/kubelet/pod-resources/kubelet.sock", ResourcePrefix: "nvidia.com/"})
		}
		if cfg.LeakDetection != (LeakDetectionConfig{Enabled: true, Window: 15 * time.Minute, MinGrowthRate: 16384, MinGrowth: 32 << 20, MinSamples: 10, JoinMinCorrelation: 0.8}) {
			t.Errorf("cfg.LeakDetection: got %v, want %v", cfg.LeakDetection, LeakDetectionConfig{Enabled: true, Window: 15 * time.Minute, MinGrowthRate: 16384, MinGrowth: 32 << 20, MinSamples: 10, JoinMinCorrelation: 0.8})
		}
		if !cfg.Metrics.HwTemperature.Enabled {
			t.Errorf("cfg.Metrics.HwTemperature.Enabled is false")
		}
		if cfg.ResourceAttributes.HwSerialNumber.Enabled {
			t.Errorf("cfg.ResourceAttributes.HwSerialNumber.Enabled is true")
		}
	})
	t.Run("custom", func(t *testing.T) {
		cfg := loadConfig(t, "custom")
		if err := confmap.Validate(cfg); err != nil {
			t.Fatalf("confmap.Validate: %v", err)
		}
		if cfg.CollectionInterval != 30*time.Second {
			t.Errorf("cfg.CollectionInterval: got %v, want %v", cfg.CollectionInterval, 30*time.Second)
		}
		if cfg.InitialDelay != 5*time.Second {
			t.Errorf("cfg.InitialDelay: got %v, want %v", cfg.InitialDelay, 5*time.Second)
		}
		if cfg.Timeout != 5*time.Second {
			t.Errorf("cfg.Timeout: got %v, want %v", cfg.Timeout, 5*time.Second)
		}
		if cfg.LibraryPath != "/usr/local/nvidia/lib64/libnvidia-ml.so.1" {
			t.Errorf("cfg.LibraryPath: got %q, want %q", cfg.LibraryPath, "/usr/local/nvidia/lib64/libnvidia-ml.so.1")
		}
		if cfg.InitRetryInterval != 5*time.Minute {
			t.Errorf("cfg.InitRetryInterval: got %v, want %v", cfg.InitRetryInterval, 5*time.Minute)
		}
		if cfg.Processes != (ProcessesConfig{Enabled: true, ProcRoot: "/hostfs/proc", CommandLineMaxLength: 128}) {
			t.Errorf("cfg.Processes: got %v, want %v", cfg.Processes, ProcessesConfig{Enabled: true, ProcRoot: "/hostfs/proc", CommandLineMaxLength: 128})
		}
		if cfg.LeakDetection != (LeakDetectionConfig{Enabled: true, Window: 30 * time.Minute, MinGrowthRate: 4096, MinGrowth: 64 << 20, MinSamples: 20, JoinMinCorrelation: 0.8}) {
			t.Errorf("cfg.LeakDetection: got %v, want %v", cfg.LeakDetection, LeakDetectionConfig{Enabled: true, Window: 30 * time.Minute, MinGrowthRate: 4096, MinGrowth: 64 << 20, MinSamples: 20, JoinMinCorrelation: 0.8})
		}
		if cfg.Metrics.HwTemperature.Enabled {
			t.Errorf("cfg.Metrics.HwTemperature.Enabled is true")
		}
		if !cfg.Metrics.HwPower.Enabled {
			t.Errorf("cfg.Metrics.HwPower.Enabled is false")
		}
		if !cfg.ResourceAttributes.HwSerialNumber.Enabled {
			t.Errorf("cfg.ResourceAttributes.HwSerialNumber.Enabled is false")
		}
		if cfg.Events.GpuEcc.Enabled {
			t.Errorf("cfg.Events.GpuEcc.Enabled is true")
		}
		if !cfg.Events.GpuXid.Enabled {
			t.Errorf("cfg.Events.GpuXid.Enabled is false")
		}
	})
	t.Run("devices only", func(t *testing.T) {
		cfg := loadConfig(t, "devices_only")
		if err := confmap.Validate(cfg); err != nil {
			t.Fatalf("confmap.Validate: %v", err)
		}
		if cfg.Processes.Enabled {
			t.Errorf("cfg.Processes.Enabled is true")
		}
		if cfg.PodResources.Endpoint != "" {
			t.Errorf("cfg.PodResources.Endpoint: got %q, want %q", cfg.PodResources.Endpoint, "")
		}
		if cfg.LeakDetection.Enabled {
			t.Errorf("cfg.LeakDetection.Enabled is true")
		}
	})
	t.Run("invalid names every key", func(t *testing.T) {
		err := confmap.Validate(loadConfig(t, "invalid"))
		if err == nil {
			t.Fatalf("confmap.Validate: got nil error, want an error")
		}
		for _, key := range []string{
			"collection_interval",
			"init_retry_interval",
			"processes.command_line_max_length",
			"processes.proc_root",
			"pod_resources.endpoint",
			"leak_detection: window",
		} {
			if err == nil || !strings.Contains(err.Error(), key) {
				t.Errorf("confmap.Validate: got error %v, want one containing %q", err, key)
			}
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
				if err != nil {
					t.Errorf("cfg.Validate: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("cfg.Validate: got error %v, want one containing %q", err, tt.want)
			}
		})
	}
}
