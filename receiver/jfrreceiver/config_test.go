package jfrreceiver

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/confmaptest"

	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/metadata"
)

func loadConfig(t *testing.T, name string) *Config {
	t.Helper()
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := createDefaultConfig().(*Config)
	sub, err := cm.Sub(component.NewIDWithName(metadata.Type, name).String())
	if err != nil {
		t.Fatal(err)
	}
	if err := sub.Unmarshal(cfg); err != nil {
		t.Fatal(err)
	}
	return cfg
}

func TestConfigDefaults(t *testing.T) {
	cfg := loadConfig(t, "")
	want := createDefaultConfig().(*Config)
	if cfg.PollInterval != time.Second || cfg.CollectionInterval != 10*time.Second || cfg.ProcRoot != "/proc" ||
		!cfg.Repositories.Enabled || !cfg.Repositories.Discover || cfg.Repositories.DiscoveryInterval != 5*time.Second ||
		cfg.XLog.StartAt != "end" || len(cfg.XLog.Include) != 0 || cfg.XLog.Discover || !cfg.XLog.PreferJFR ||
		cfg.Repositories.Attach.Enabled || cfg.Repositories.Attach.Timeout != 5*time.Second ||
		cfg.Repositories.MaxChunkSizeMiB != 64 || cfg.Repositories.MaxMemoryMiB != 256 {
		t.Errorf("defaults %+v", cfg)
	}
	if cfg.PollInterval != want.PollInterval {
		t.Errorf("loaded empty config differs from the default")
	}
	if err := confmap.Validate(cfg); err != nil {
		t.Errorf("default config invalid: %v", err)
	}
}

func TestConfigCustom(t *testing.T) {
	cfg := loadConfig(t, "custom")
	if cfg.PollInterval != 500*time.Millisecond || cfg.CollectionInterval != 30*time.Second || cfg.ProcRoot != "/hostfs/proc" ||
		cfg.Repositories.Discover || cfg.Repositories.Include[0] != "/var/jfr/*/2*_*" || cfg.Repositories.DiscoveryInterval != 10*time.Second ||
		cfg.XLog.Include[0] != "/var/log/app/gc*.log" || !cfg.XLog.Discover || cfg.XLog.StartAt != "beginning" || cfg.XLog.DiscoveryInterval != 2*time.Second || cfg.XLog.PreferJFR {
		t.Errorf("custom %+v", cfg)
	}
	if cfg.Recordings.Include[0] != "/var/jfr/dumps/*.jfr" || cfg.Recordings.Storage == nil ||
		cfg.Recordings.Storage.String() != "file_storage/jfr" || cfg.Recordings.DiscoveryInterval != 30*time.Second {
		t.Errorf("custom recordings %+v", cfg.Recordings)
	}
	if r := cfg.Repositories; r.MaxChunkSizeMiB != 16 || r.MaxMemoryMiB != 128 {
		t.Errorf("custom memory bounds %d MiB per chunk, %d MiB in all", r.MaxChunkSizeMiB, r.MaxMemoryMiB)
	}
	if a := cfg.Repositories.Attach; !a.Enabled || a.Settings != "/etc/otelcol-ai/jvm.jfc" || a.Timeout != 3*time.Second {
		t.Errorf("custom attach %+v", a)
	}
	if err := confmap.Validate(cfg); err == nil || !strings.Contains(err.Error(), "repositories::attach::enabled needs repositories::discover") {
		t.Errorf("attach without discovery validated: %v", err)
	}
	cfg.Repositories.Discover = true
	if err := confmap.Validate(cfg); err != nil {
		t.Errorf("custom config invalid: %v", err)
	}
}

// TestConfigValidateNamesTheKey: every wrong key is named in the error.
func TestConfigValidateNamesTheKey(t *testing.T) {
	err := confmap.Validate(loadConfig(t, "bad"))
	if err == nil {
		t.Fatal("bad config validated")
	}
	for _, key := range []string{"poll_interval", "repositories::include[0]", "xlog::start_at", "recordings::discovery_interval", "nothing to read",
		"repositories::max_chunk_size_mib must be between 1 and 2047, got 4096", "repositories::max_memory_mib must be at least"} {
		if !strings.Contains(err.Error(), key) {
			t.Errorf("error does not name %s: %v", key, err)
		}
	}
}

// TestConfigPreferJFRIsABool: xlog::prefer_jfr takes true or false only.
func TestConfigPreferJFRIsABool(t *testing.T) {
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	sub, err := cm.Sub(component.NewIDWithName(metadata.Type, "badprefer").String())
	if err != nil {
		t.Fatal(err)
	}
	cfg := createDefaultConfig().(*Config)
	if err := sub.Unmarshal(cfg); err == nil || !strings.Contains(err.Error(), "prefer_jfr") {
		t.Errorf("prefer_jfr: sometimes accepted: %v", err)
	}
}

// TestConfigSwitches: metrics:: turns off a generated metric and a
// histogram alike, resource_attributes:: a resource attribute; the others
// keep their defaults.
func TestConfigSwitches(t *testing.T) {
	cfg := loadConfig(t, "switches")
	if cfg.Metrics.JvmGcDuration.Enabled || cfg.Metrics.JvmMemoryUsed.Enabled || cfg.ResourceAttributes.ProcessPid.Enabled {
		t.Errorf("switches not applied: %+v", cfg.Metrics)
	}
	if !cfg.Metrics.JvmSafepointDuration.Enabled || !cfg.Metrics.JvmMemoryCommitted.Enabled || !cfg.ResourceAttributes.ContainerID.Enabled {
		t.Errorf("defaults lost: %+v", cfg.Metrics)
	}
	if !cfg.Metrics.JvmGcDuration.CaptureCause {
		t.Errorf("metrics::jvm.gc.duration::capture_cause not applied: %+v", cfg.Metrics.JvmGcDuration)
	}
	if def := createDefaultConfig().(*Config); !def.Metrics.JvmGcDuration.Enabled || !def.Metrics.JvmThreadCount.Enabled || !def.ResourceAttributes.ProcessPid.Enabled {
		t.Errorf("default switches %+v", def.Metrics)
	}
	if def := createDefaultConfig().(*Config); def.Metrics.JvmGcDuration.CaptureCause {
		t.Error("jvm.gc.cause is on by default; the conventions and the Java agent make it opt-in")
	}
}
