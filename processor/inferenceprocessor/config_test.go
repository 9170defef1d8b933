package inferenceprocessor

import (
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"

	"github.com/otelcol-ai/otelcol-ai/internal/cfgtest"
)

func loadConfig(t *testing.T, name string) *Config {
	t.Helper()
	return cfgtest.Load(t, component.MustNewIDWithName("inference", name), createDefaultConfig().(*Config))
}

func TestConfigDefaultRunsTheDefaultModel(t *testing.T) {
	cfg := loadConfig(t, "")
	if err := confmap.Validate(cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.Extension != component.MustNewID("onnxinference") || cfg.Model != "runtime_overlap" || cfg.ModelVersion != 0 ||
		cfg.Input != "" || cfg.Batch != (BatchConfig{MaxSize: 512}) || len(cfg.Conditions) != 0 || len(cfg.AttributesPresent) != 0 {
		t.Fatalf("defaults: %+v", cfg)
	}
	wantFeatures := []string{"duration", "runtime.overlap.jvm.safepoint.duration", "runtime.overlap.jvm.gc.pause.duration",
		"runtime.overlap.python.gil.wait.duration", "runtime.overlap.python.gc.pause.duration"}
	for i, f := range cfg.Features {
		if name := f.Field + f.Attribute; name != wantFeatures[i] || f.Scale != 1e-6 {
			t.Errorf("features[%d] = %+v, want %s scaled ns to ms", i, f, wantFeatures[i])
		}
		if i > 0 && (f.Default == nil || *f.Default != 0) {
			t.Errorf("features[%d]: an absent overlap must default to 0", i)
		}
	}
	if len(cfg.Outputs) != 4 || cfg.Outputs[3].Attribute != "inference.runtime_overlap.anomaly_score" || cfg.Outputs[0].Attribute != "inference.runtime_overlap.explained_fraction" {
		t.Fatalf("outputs %+v", cfg.Outputs)
	}
}

func TestConfigEveryKey(t *testing.T) {
	cfg := loadConfig(t, "custom")
	if err := confmap.Validate(cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.Extension != component.MustNewIDWithName("onnxinference", "models") || cfg.Model != "isolation_forest" ||
		cfg.ModelVersion != 3 || cfg.Input != "X" || len(cfg.Conditions) != 1 || cfg.AttributesPresent[0] != "http.route" {
		t.Fatalf("top level: %+v", cfg)
	}
	if len(cfg.Features) != 4 || cfg.Features[1].Scale != 0.5 || *cfg.Features[2].Default != 0 ||
		cfg.Features[3].ResourceAttribute != "host.cpu.count" || *cfg.Features[3].Default != 8 || cfg.Features[3].Offset != -1 {
		t.Fatalf("features: %+v", cfg.Features)
	}
	if cfg.Outputs[1] != (OutputConfig{Output: "label", Index: 0, Attribute: "anomaly.label"}) {
		t.Fatalf("outputs: %+v", cfg.Outputs)
	}
	if cfg.Batch != (BatchConfig{MaxSize: 64, MaxWait: 5 * time.Millisecond}) {
		t.Fatalf("batch: %+v", cfg.Batch)
	}
}

func TestConfigErrorsNameTheField(t *testing.T) {
	tests := []struct {
		name string
		want []string
	}{
		{"no_model", []string{"model: must be set"}},
		{"bad_feature", []string{"features[0]: set exactly one", `features[1]: field: "latency"`}},
		{"bad_outputs", []string{"outputs[0]::attribute", "outputs[1]::attribute: inference.model.version", "outputs[2]::index"}},
		{"bad_batch", []string{"batch::max_size", "batch::max_wait"}},
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
}
