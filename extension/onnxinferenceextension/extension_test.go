package onnxinferenceextension

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/extension/extensiontest"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/otelcol-ai/otelcol-ai/extension/onnxinferenceextension/internal/ortenv"
	"github.com/otelcol-ai/otelcol-ai/extension/onnxinferenceextension/internal/repository"
	"github.com/otelcol-ai/otelcol-ai/internal/modelrepotest"
	"github.com/otelcol-ai/otelcol-ai/pkg/modelrunner"
)

func TestLifecycleSharesOneEnvironment(t *testing.T) {
	modelrepotest.RequireLibrary(t)
	repo := t.TempDir()
	place(t, repo, "sum", 1, modelDynamicAxes)
	factory := NewFactory()
	for cycle := 0; cycle < 2; cycle++ {
		a, err := factory.Create(context.Background(), extensiontest.NewNopSettings(factory.Type()), testConfig(repo))
		if err != nil {
			t.Fatal(err)
		}
		b, err := factory.Create(context.Background(), extensiontest.NewNopSettings(factory.Type()), testConfig(repo))
		if err != nil {
			t.Fatal(err)
		}
		if err := a.Start(context.Background(), componenttest.NewNopHost()); err != nil {
			t.Fatalf("cycle %d: start a: %v", cycle, err)
		}
		if err := b.Start(context.Background(), componenttest.NewNopHost()); err != nil {
			t.Fatalf("cycle %d: start b: %v", cycle, err)
		}
		if got := ortenv.Refs(); got != 2 {
			t.Fatalf("cycle %d: %d references to ONNX Runtime, want 2", cycle, got)
		}
		if err := a.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		// b still runs after a has released its reference.
		res, err := b.(modelrunner.Provider).Run(context.Background(), "sum", modelrunner.Request{
			Inputs: []modelrunner.Tensor{named("input_vectors", rows(1, 10, func(_, c int) float32 { return float32(c) }))},
		})
		if err != nil {
			t.Fatalf("cycle %d: run after the other instance stopped: %v", cycle, err)
		}
		if got := res.Outputs[0].Float32s(); len(got) != 1 || got[0] != 45 {
			t.Fatalf("cycle %d: sum of 0..9 = %v, want [45]", cycle, got)
		}
		if err := b.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := b.Shutdown(context.Background()); err != nil {
			t.Fatalf("second Shutdown: %v", err)
		}
		if got := ortenv.Refs(); got != 0 {
			t.Fatalf("cycle %d: %d references left after shutdown", cycle, got)
		}
	}
}

func TestShutdownWithoutStart(t *testing.T) {
	e, err := NewFactory().Create(context.Background(), extensiontest.NewNopSettings(NewFactory().Type()), testConfig(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestServesThirdPartyModels(t *testing.T) {
	repo := t.TempDir()
	place(t, repo, "sum", 1, modelDynamicAxes)
	place(t, repo, "several", 1, modelSeveral)
	place(t, repo, "forest", 3, modelRandomForest)
	e := start(t, testConfig(repo))
	ctx := context.Background()

	t.Run("dynamic axes: any batch size", func(t *testing.T) {
		for _, n := range []int{1, 3, 100} {
			in := rows(n, 10, func(r, c int) float32 { return float32(r) + float32(c)/10 })
			res, err := e.Run(ctx, "sum", modelrunner.Request{Inputs: []modelrunner.Tensor{named("input_vectors", in)}})
			if err != nil {
				t.Fatal(err)
			}
			out := res.Outputs[0]
			if out.Name != "output_scalars" || !slices.Equal(out.Shape, []int64{int64(n)}) {
				t.Fatalf("batch %d: output %q shape %v", n, out.Name, out.Shape)
			}
			for r, got := range out.Float32s() {
				want := 10*float32(r) + 4.5
				if d := got - want; d > 1e-4 || d < -1e-4 {
					t.Fatalf("batch %d row %d: %v, want %v", n, r, got, want)
				}
			}
			if res.Model != "sum" || res.Version != 1 {
				t.Fatalf("result labelled %s/%d", res.Model, res.Version)
			}
		}
	})

	t.Run("several inputs and outputs, bfloat16 included", func(t *testing.T) {
		sig, err := e.Signature("several", 0)
		if err != nil {
			t.Fatal(err)
		}
		want := []string{`"input 1": int32[2 5 2 5]`, `"input 2": float32[2 3 20]`, `"input 3": bfloat16[9]`}
		for i, in := range sig.Inputs {
			if in.String() != want[i] {
				t.Errorf("input %d = %s, want %s", i, in, want[i])
			}
		}
		a := make([]int32, 100)
		for i := range a {
			a[i] = int32(i)
		}
		b := make([]float32, 120)
		for i := range b {
			b[i] = float32(i) / 2
		}
		c := make([]byte, 18)
		c[1] = 0x40 // bfloat16 2.0, little-endian
		res, err := e.Run(ctx, "several", modelrunner.Request{Inputs: []modelrunner.Tensor{
			{Name: "input 3", Type: modelrunner.TypeBFloat16, Shape: []int64{9}, Data: c},
			{Name: "input 1", Type: modelrunner.TypeInt32, Shape: []int64{2, 5, 2, 5}, Data: a},
			{Name: "input 2", Type: modelrunner.TypeFloat32, Shape: []int64{2, 3, 20}, Data: b},
		}})
		if err != nil {
			t.Fatal(err)
		}
		out1, _ := res.Output("output 1")
		out2, _ := res.Output("output 2")
		got1 := out1.Data.([]int64)
		if !slices.Equal(out1.Shape, []int64{10, 10}) || got1[0] != 2 || got1[99] != 99 {
			t.Fatalf("output 1 shape %v [0]=%d [99]=%d, want [10 10], 2, 99", out1.Shape, got1[0], got1[99])
		}
		got2 := out2.Data.([]float64)
		if !slices.Equal(out2.Shape, []int64{1, 2, 3, 4, 5}) || got2[119] != 59.5 {
			t.Fatalf("output 2 shape %v [119]=%v", out2.Shape, got2[119])
		}
	})

	t.Run("scikit-learn forest: label tensor, and ZipMap probabilities as a tensor", func(t *testing.T) {
		sig, err := e.Signature("forest", 0)
		if err != nil {
			t.Fatal(err)
		}
		if p, _ := sig.Output("output_probability"); p.Kind != modelrunner.KindSequence {
			t.Fatalf("output_probability described as %s", p)
		}
		in := named("X", rows(2, 4, func(r, c int) float32 { return float32(r*4 + c) }))
		res, err := e.Run(ctx, "forest", modelrunner.Request{Inputs: []modelrunner.Tensor{in}, Outputs: []string{"output_label"}})
		if err != nil {
			t.Fatal(err)
		}
		if res.Version != 3 || len(res.Outputs) != 1 || len(res.Outputs[0].Data.([]int64)) != 2 {
			t.Fatalf("result %+v", res)
		}
		res, err = e.Run(ctx, "forest", modelrunner.Request{Inputs: []modelrunner.Tensor{in}, Outputs: []string{"output_probability", "output_label"}})
		if err != nil {
			t.Fatal(err)
		}
		p, labels := res.Outputs[0], res.Outputs[1].Data.([]int64)
		if p.Type != modelrunner.TypeFloat32 || len(p.Shape) != 2 || p.Shape[0] != 2 || p.Shape[1] < 2 {
			t.Fatalf("probabilities %s %v, want float32 [2 classes]", p.Type, p.Shape)
		}
		k := int(p.Shape[1])
		for r := 0; r < 2; r++ {
			row := p.Float32s()[r*k : (r+1)*k]
			sum, best := float32(0), 0
			for c, v := range row {
				sum += v
				if v > row[best] {
					best = c
				}
			}
			if sum < 0.999 || sum > 1.001 {
				t.Fatalf("row %d probabilities %v sum to %v", r, row, sum)
			}
			if int64(best) != labels[r] { // classes are 0..k-1: the label is the likeliest
				t.Fatalf("row %d: label %d but probabilities %v", r, labels[r], row)
			}
		}
	})

	t.Run("unknown model and version", func(t *testing.T) {
		if _, err := e.Signature("nope", 0); !errors.Is(err, modelrunner.ErrUnknownModel) {
			t.Fatalf("unknown model: %v", err)
		}
		if _, err := e.Signature("sum", 7); !errors.Is(err, modelrunner.ErrUnknownVersion) {
			t.Fatalf("unknown version: %v", err)
		}
	})
}

func TestRunRefusesInputsThatDoNotMatch(t *testing.T) {
	repo := t.TempDir()
	place(t, repo, "sum", 4, modelDynamicAxes)
	e := start(t, testConfig(repo))
	good := named("input_vectors", rows(2, 10, func(int, int) float32 { return 1 }))
	tests := []struct {
		name   string
		inputs []modelrunner.Tensor
		input  string
		reason string
	}{
		{"wrong name", []modelrunner.Tensor{named("x", good)}, "x", "no such input"},
		{"missing input", nil, "input_vectors", "missing"},
		{"twice", []modelrunner.Tensor{good, good}, "input_vectors", "given twice"},
		{"wrong element type", []modelrunner.Tensor{{Name: "input_vectors", Type: modelrunner.TypeFloat64, Shape: []int64{2, 10}, Data: make([]float64, 20)}}, "input_vectors", "element type float64"},
		{"data of another type", []modelrunner.Tensor{{Name: "input_vectors", Type: modelrunner.TypeFloat32, Shape: []int64{2, 10}, Data: make([]float64, 20)}}, "input_vectors", "does not carry"},
		{"wrong rank", []modelrunner.Tensor{{Name: "input_vectors", Type: modelrunner.TypeFloat32, Shape: []int64{20}, Data: make([]float32, 20)}}, "input_vectors", "rank 1"},
		{"fixed dimension differs (no broadcast)", []modelrunner.Tensor{named("input_vectors", rows(2, 9, func(int, int) float32 { return 1 }))}, "input_vectors", "dimension 1"},
		{"too few elements (no padding)", []modelrunner.Tensor{{Name: "input_vectors", Type: modelrunner.TypeFloat32, Shape: []int64{2, 10}, Data: make([]float32, 19)}}, "input_vectors", "19 elements"},
		{"too many elements (no truncation)", []modelrunner.Tensor{{Name: "input_vectors", Type: modelrunner.TypeFloat32, Shape: []int64{2, 10}, Data: make([]float32, 21)}}, "input_vectors", "21 elements"},
		{"negative dimension", []modelrunner.Tensor{{Name: "input_vectors", Type: modelrunner.TypeFloat32, Shape: []int64{-2, 10}, Data: make([]float32, 20)}}, "input_vectors", "does not fit"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := e.Run(context.Background(), "sum", modelrunner.Request{Inputs: tt.inputs})
			var ie *modelrunner.InputError
			if !errors.As(err, &ie) || !errors.Is(err, modelrunner.ErrInputMismatch) {
				t.Fatalf("err = %v, want *InputError", err)
			}
			if ie.Model != "sum" || ie.Version != 4 || ie.Input != tt.input || !strings.Contains(ie.Reason, tt.reason) {
				t.Fatalf("err = %q, want model sum version 4 input %q reason containing %q", err, tt.input, tt.reason)
			}
		})
	}
}

func TestHotReload(t *testing.T) {
	repo := t.TempDir()
	place(t, repo, "m", 1, modelDynamicAxes)
	host := &statusHost{Host: componenttest.NewNopHost()}
	e := startOn(t, testConfig(repo), host)
	version := func() int64 {
		t.Helper()
		sig, err := e.Signature("m", 0)
		if err != nil {
			t.Fatal(err)
		}
		return sig.Version
	}
	if v := version(); v != 1 {
		t.Fatalf("serving %d, want 1", v)
	}

	// A newer version replaces it.
	place(t, repo, "m", 2, modelDynamicAxes)
	e.scan()
	if v := version(); v != 2 {
		t.Fatalf("after adding 2: serving %d, want 2", v)
	}
	if got := e.servedVersions("m"); !slices.Equal(got, []int64{2}) {
		t.Fatalf("served %v, want only [2] (latest 1)", got)
	}

	// A corrupt newer version keeps 2 serving and reports a recoverable error.
	modelrepotest.Write(t, repo, "m", 3, []byte("this is not an ONNX model"))
	e.scan()
	e.scan() // an unchanged bad file is not retried
	if v := version(); v != 2 {
		t.Fatalf("after a corrupt 3: serving %d, want 2", v)
	}
	errs := host.errors()
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), `model "m" version 3`) {
		t.Fatalf("status events %v, want one naming model m version 3", errs)
	}

	// A model whose inputs a registered component cannot feed is refused.
	unregister, err := e.Watch("m", func(sig modelrunner.Signature) error {
		if in := sig.Inputs[0]; in.Shape[1] != 10 {
			return errors.New("needs 10 features")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	place(t, repo, "m", 4, modelRandomForest) // 4 features
	e.scan()
	if v := version(); v != 2 {
		t.Fatalf("after an unfeedable 4: serving %d, want 2", v)
	}
	unregister()

	// A half-written file is not taken while it settles.
	e.cfg.SettleTime = 3600e9
	e.repo, _ = repository.Open(repo, e.cfg.MaxModelBytes, e.cfg.SettleTime)
	path := place(t, repo, "m", 5, modelDynamicAxes)
	now := timeNow()
	if err := os.Chtimes(path, now, now); err != nil {
		t.Fatal(err)
	}
	e.scan()
	if v := version(); v != 2 {
		t.Fatalf("with an unsettled 5: serving %d, want 2", v)
	}
	if err := os.RemoveAll(filepath.Join(repo, "m", "5")); err != nil {
		t.Fatal(err)
	}
	e.repo, _ = repository.Open(repo, e.cfg.MaxModelBytes, 0)

	// Removing the served version falls back to the newest loadable one.
	if err := os.RemoveAll(filepath.Join(repo, "m", "2")); err != nil {
		t.Fatal(err)
	}
	e.scan()
	if v := version(); v != 1 {
		t.Fatalf("after removing 2: serving %d, want 1", v)
	}
	// Loading a version after failures reports the extension healthy again.
	if errs := host.errors(); errs[len(errs)-1] != nil {
		t.Fatalf("last status %v, want StatusOK after a successful load", errs[len(errs)-1])
	}

	// Removing the model's directory unloads it.
	if err := os.RemoveAll(filepath.Join(repo, "m")); err != nil {
		t.Fatal(err)
	}
	e.scan()
	if _, err := e.Signature("m", 0); !errors.Is(err, modelrunner.ErrUnknownModel) {
		t.Fatalf("after removing the model: %v, want ErrUnknownModel", err)
	}
}

func TestVersionPolicies(t *testing.T) {
	repo := t.TempDir()
	for v := int64(1); v <= 4; v++ {
		place(t, repo, "m", v, modelDynamicAxes)
	}
	tests := []struct {
		name   string
		policy repository.Policy
		want   []int64
	}{
		{"default: newest", repository.Policy{}, []int64{4}},
		{"latest 2", repository.Policy{Latest: 2}, []int64{4, 3}},
		{"all", repository.Policy{All: true}, []int64{4, 3, 2, 1}},
		{"specific", repository.Policy{Specific: []int64{1, 3, 9}}, []int64{3, 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig(repo)
			cfg.Models = map[string]ModelConfig{"m": {VersionPolicy: tt.policy}}
			e := start(t, cfg)
			if got := e.servedVersions("m"); !slices.Equal(got, tt.want) {
				t.Fatalf("served %v, want %v", got, tt.want)
			}
			if sig, _ := e.Signature("m", 0); sig.Version != tt.want[0] {
				t.Fatalf("version 0 resolves to %d, want %d", sig.Version, tt.want[0])
			}
		})
	}
}

func TestPerModelConfigFile(t *testing.T) {
	repo := t.TempDir()
	for v := int64(1); v <= 3; v++ {
		place(t, repo, "m", v, modelDynamicAxes)
	}
	if err := os.WriteFile(filepath.Join(repo, "m", "config.yaml"), []byte("version_policy:\n  specific: [1, 2]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	e := start(t, testConfig(repo))
	if got := e.servedVersions("m"); !slices.Equal(got, []int64{2, 1}) {
		t.Fatalf("served %v, want [2 1] from config.yaml", got)
	}
}

func TestRepositoryBoundaries(t *testing.T) {
	outside := t.TempDir()
	place(t, outside, "elsewhere", 1, modelDynamicAxes)
	repo := t.TempDir()
	place(t, repo, "ok", 1, modelDynamicAxes)
	// A model directory linked outside the repository.
	if err := os.Symlink(filepath.Join(outside, "elsewhere"), filepath.Join(repo, "linked")); err != nil {
		t.Fatal(err)
	}
	// A version whose file links outside the repository.
	if err := os.MkdirAll(filepath.Join(repo, "sneaky", "1"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "elsewhere", "1", "model.onnx"), filepath.Join(repo, "sneaky", "1", "model.onnx")); err != nil {
		t.Fatal(err)
	}
	// A file over the size limit.
	big := place(t, repo, "big", 1, modelRandomForest)
	cfg := testConfig(repo)
	info, _ := os.Stat(big)
	cfg.MaxModelBytes = info.Size() - 1
	host := &statusHost{Host: componenttest.NewNopHost()}
	e := startOn(t, cfg, host)

	if _, err := e.Signature("ok", 0); err != nil {
		t.Fatalf("the model inside the repository: %v", err)
	}
	for _, name := range []string{"linked", "sneaky", "big"} {
		if _, err := e.Signature(name, 0); !errors.Is(err, modelrunner.ErrUnknownModel) {
			t.Errorf("model %q: %v, want it not served", name, err)
		}
	}
	var all string
	for _, err := range host.errors() {
		if err != nil {
			all += err.Error() + "\n"
		}
	}
	for _, want := range []string{repository.ErrOutsideRoot.Error(), repository.ErrTooLarge.Error()} {
		if !strings.Contains(all, want) {
			t.Errorf("status events do not mention %q:\n%s", want, all)
		}
	}
}

func TestStartFailsForAConfiguredModelWithoutVersions(t *testing.T) {
	modelrepotest.RequireLibrary(t)
	repo := t.TempDir()
	modelrepotest.Write(t, repo, "broken", 1, []byte("garbage"))
	cfg := testConfig(repo)
	cfg.Models = map[string]ModelConfig{"broken": {}}
	e, err := newExtension(extensiontest.NewNopSettings(NewFactory().Type()), cfg)
	if err != nil {
		t.Fatal(err)
	}
	err = e.Start(context.Background(), componenttest.NewNopHost())
	if err == nil || !strings.Contains(err.Error(), "models::broken") {
		t.Fatalf("Start = %v, want an error naming models::broken", err)
	}
	if ortenv.Refs() != 0 {
		t.Fatalf("a failed Start left %d references to ONNX Runtime", ortenv.Refs())
	}
	if err := e.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestStartFailsWithoutLibrary(t *testing.T) {
	cfg := testConfig(t.TempDir())
	cfg.LibraryPath = filepath.Join(t.TempDir(), "missing.so")
	e, err := newExtension(extensiontest.NewNopSettings(NewFactory().Type()), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Start(context.Background(), componenttest.NewNopHost()); err == nil || !strings.Contains(err.Error(), "library_path") {
		t.Fatalf("Start = %v, want an error naming library_path", err)
	}
}

// With a CPU-only ONNX Runtime (as the distribution ships), cuda falls back
// to the CPU with a warning, and models still run.
func TestCUDAFallsBackToCPU(t *testing.T) {
	modelrepotest.RequireLibrary(t)
	repo := t.TempDir()
	place(t, repo, "sum", 1, modelDynamicAxes)
	cfg := testConfig(repo)
	cfg.Session.ExecutionProvider, cfg.Session.DeviceID = ProviderCUDA, 0
	core, logs := observer.New(zap.WarnLevel)
	set := extensiontestSettings()
	set.Logger = zap.New(core)
	e, err := newExtension(set, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Start(context.Background(), nopHost()); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = e.Shutdown(context.Background()) }()
	warned := logs.FilterMessageSnippet("CUDA execution provider unavailable").All()
	if len(warned) != 1 {
		t.Skipf("the CUDA provider loaded here (%d fallback warnings): nothing to fall back from", len(warned))
	}
	res, err := e.Run(context.Background(), "sum", modelrunner.Request{
		Inputs: []modelrunner.Tensor{named("input_vectors", rows(1, 10, func(int, int) float32 { return 2 }))},
	})
	if err != nil || res.Outputs[0].Float32s()[0] != 20 {
		t.Fatalf("run on the CPU after the fallback: %+v, %v", res, err)
	}
}

// A model copied in just before start is served once it settles, at start.
func TestStartWaitsForFreshFilesToSettle(t *testing.T) {
	repo := t.TempDir()
	path := place(t, repo, "m", 1, modelDynamicAxes)
	now := timeNow()
	if err := os.Chtimes(path, now, now); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(repo)
	cfg.SettleTime = 200e6
	e := start(t, cfg)
	if got := e.servedVersions("m"); !slices.Equal(got, []int64{1}) {
		t.Fatalf("served %v at start, want [1]", got)
	}
}

// Runs in flight while versions are swapped in and out finish on the version
// they started on: none fails, and each result names a version that existed.
func TestSwapsDrainRunsInFlight(t *testing.T) {
	repo := t.TempDir()
	place(t, repo, "m", 1, modelDynamicAxes)
	e := start(t, testConfig(repo))
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	in := []modelrunner.Tensor{named("input_vectors", rows(8, 10, func(_, c int) float32 { return float32(c) }))}
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				res, err := e.Run(context.Background(), "m", modelrunner.Request{Inputs: in})
				if err == nil && (res.Version < 1 || res.Outputs[0].Float32s()[7] != 45) {
					err = fmt.Errorf("version %d gave %v", res.Version, res.Outputs[0].Float32s())
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	next := int64(1)
	reloadCycles(t, e, repo, &next, 30)
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("a run during the swaps failed: %v", err)
	}
}
