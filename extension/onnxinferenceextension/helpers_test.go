package onnxinferenceextension

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componentstatus"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/extension"
	"go.opentelemetry.io/collector/extension/extensiontest"

	"github.com/otelcol-ai/otelcol-ai/internal/modelrepotest"
	"github.com/otelcol-ai/otelcol-ai/pkg/modelrunner"
)

// The real models from onnxruntime_go's test_data, in testdata/models.
const (
	modelDynamicAxes  = "example_dynamic_axes.onnx"               // float32[-1 10] -> sum per row, float32[-1]
	modelSeveral      = "example_several_inputs_and_outputs.onnx" // int32, float32, bfloat16 in; int64, float64 out
	modelRandomForest = "sklearn_randomforest.onnx"               // float32[-1 4] -> int64 label, seq(map) probabilities
)

// place copies testdata/models/file into repo as <model>/<version>/model.onnx,
// dated in the past so that it counts as settled.
func place(t testing.TB, repo, model string, version int64, file string) string {
	t.Helper()
	return modelrepotest.Place(t, repo, model, version, filepath.Join("testdata", "models", file))
}

// testConfig is the default config on repo, with polling off (tests call
// scan themselves) and no settle time.
func testConfig(repo string) *Config {
	cfg := createDefaultConfig().(*Config)
	cfg.Repository = repo
	cfg.PollInterval = 0
	cfg.SettleTime = 0
	return cfg
}

// statusHost records the status events the extension reports.
type statusHost struct {
	component.Host
	mu     sync.Mutex
	events []error
}

// Report implements componentstatus.Reporter.
func (h *statusHost) Report(ev *componentstatus.Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.events = append(h.events, ev.Err())
}

func (h *statusHost) errors() []error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]error(nil), h.events...)
}

func start(t testing.TB, cfg *Config) *onnxExtension {
	t.Helper()
	return startOn(t, cfg, componenttest.NewNopHost())
}

func startOn(t testing.TB, cfg *Config, host component.Host) *onnxExtension {
	t.Helper()
	modelrepotest.RequireLibrary(t)
	e, err := newExtension(extensiontest.NewNopSettings(NewFactory().Type()), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Start(context.Background(), host); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		if err := e.Shutdown(context.Background()); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	})
	return e
}

func rows(n, width int, f func(row, col int) float32) modelrunner.Tensor {
	data := make([]float32, n*width)
	for r := 0; r < n; r++ {
		for c := 0; c < width; c++ {
			data[r*width+c] = f(r, c)
		}
	}
	return modelrunner.Tensor{Type: modelrunner.TypeFloat32, Shape: []int64{int64(n), int64(width)}, Data: data}
}

func named(name string, t modelrunner.Tensor) modelrunner.Tensor { t.Name = name; return t }

func timeNow() time.Time { return time.Now() }

func extensiontestSettings() extension.Settings {
	return extensiontest.NewNopSettings(NewFactory().Type())
}

func nopHost() component.Host { return componenttest.NewNopHost() }
