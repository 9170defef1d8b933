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
	"time"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/otelcol-ai/otelcol-ai/extension/onnxinferenceextension/internal/metadatatest"
	"github.com/otelcol-ai/otelcol-ai/internal/modelrepotest"
	"github.com/otelcol-ai/otelcol-ai/pkg/modelrunner"
)

// Copies of the distribution's models/runtime_overlap versions 1 and 2
// (kept here so that retraining those does not change these tests): both
// take "features" float32[-1 5]; version 2 has one more output.
const (
	modelOverlapV1 = "runtime_overlap_v1.onnx"
	modelOverlapV2 = "runtime_overlap_v2.onnx"
)

var (
	overlapV1Outputs = []string{"explained_fraction", "unexplained_ms", "dominant_cause"}
	overlapV2Outputs = []string{"explained_fraction", "unexplained_ms", "dominant_cause", "anomaly_score"}
)

// reloadFixture is an extension serving model "ro" version 1 from
// runtime_overlap v1, with its telemetry, logs and status events recorded.
type reloadFixture struct {
	t    *testing.T
	e    *onnxExtension
	tel  *componenttest.Telemetry
	logs *observer.ObservedLogs
	host *statusHost
	path string // the file of version 1
}

func startReloadFixture(t *testing.T, settle time.Duration) *reloadFixture {
	t.Helper()
	modelrepotest.RequireLibrary(t)
	repo := t.TempDir()
	f := &reloadFixture{t: t, host: &statusHost{Host: componenttest.NewNopHost()}}
	f.path = place(t, repo, "ro", 1, modelOverlapV1)
	f.age(2*settle + time.Minute)
	cfg := testConfig(repo)
	cfg.SettleTime = settle
	f.tel = componenttest.NewTelemetry()
	t.Cleanup(func() { _ = f.tel.Shutdown(context.Background()) })
	set := metadatatest.NewSettings(f.tel)
	core, logs := observer.New(zap.DebugLevel)
	set.Logger, f.logs = zap.New(core), logs
	e, err := newExtension(set, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Start(context.Background(), f.host); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := e.Shutdown(context.Background()); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	})
	f.e = e
	f.expectOutputs("at start", overlapV1Outputs)
	return f
}

// age dates the model file d in the past.
func (f *reloadFixture) age(d time.Duration) {
	f.t.Helper()
	when := time.Now().Add(-d)
	if err := os.Chtimes(f.path, when, when); err != nil {
		f.t.Fatal(err)
	}
}

// overwrite writes data over the model file, in place (same inode), and
// dates it age in the past.
func (f *reloadFixture) overwrite(data []byte, age time.Duration) {
	f.t.Helper()
	if err := os.WriteFile(f.path, data, 0o644); err != nil {
		f.t.Fatal(err)
	}
	f.age(age)
}

func testdataModel(t testing.TB, file string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "models", file))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

var overlapFeatures = []modelrunner.Tensor{named("features", rows(3, 5, func(r, c int) float32 { return float32(r+c) / 10 }))}

// run runs model "ro" on three rows and returns the names of the outputs it
// returned, checking that version 1 ran.
func (f *reloadFixture) run() []string {
	f.t.Helper()
	res, err := f.e.Run(context.Background(), "ro", modelrunner.Request{Inputs: overlapFeatures})
	if err != nil {
		f.t.Fatal(err)
	}
	if res.Version != 1 {
		f.t.Fatalf("ran version %d, want 1", res.Version)
	}
	return outputNames(res.Outputs)
}

func outputNames(ts []modelrunner.Tensor) []string {
	names := make([]string, len(ts))
	for i, t := range ts {
		names[i] = t.Name
	}
	return names
}

// expectOutputs checks that version 1 is the only one served and that both
// its signature and a run show the outputs want.
func (f *reloadFixture) expectOutputs(when string, want []string) {
	f.t.Helper()
	if got := f.e.servedVersions("ro"); !slices.Equal(got, []int64{1}) {
		f.t.Fatalf("%s: served %v, want [1]", when, got)
	}
	sig, err := f.e.Signature("ro", 0)
	if err != nil {
		f.t.Fatal(err)
	}
	if got := outputNames(infosAsTensors(sig.Outputs)); sig.Version != 1 || !slices.Equal(got, want) {
		f.t.Fatalf("%s: signature of version %d has outputs %v, want version 1 with %v", when, sig.Version, got, want)
	}
	if got := f.run(); !slices.Equal(got, want) {
		f.t.Fatalf("%s: a run returned %v, want %v", when, got, want)
	}
}

func infosAsTensors(infos []modelrunner.ValueInfo) []modelrunner.Tensor {
	out := make([]modelrunner.Tensor, len(infos))
	for i, in := range infos {
		out[i].Name = in.Name
	}
	return out
}

// count returns the value of a counter of model "ro", 0 when never added to.
func (f *reloadFixture) count(metric string) int64 {
	f.t.Helper()
	m, err := f.tel.GetMetric(metric)
	if err != nil {
		return 0
	}
	var n int64
	for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
		if v, ok := dp.Attributes.Value("model"); ok && v.AsString() == "ro" {
			n += dp.Value
		}
	}
	return n
}

func (f *reloadFixture) expectCounts(when string, reloads, failures int64) {
	f.t.Helper()
	r, l := f.count("otelcol_onnxinference_model_reloads"), f.count("otelcol_onnxinference_model_load_failures")
	if r != reloads || l != failures {
		f.t.Fatalf("%s: %d reloads and %d load failures counted, want %d and %d", when, r, l, reloads, failures)
	}
}

// statusErrors returns the recoverable errors reported, and whether the last
// event reported is StatusOK.
func (f *reloadFixture) statusErrors() (errs []error, lastOK bool) {
	events := f.host.errors()
	for _, err := range events {
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errs, len(events) > 0 && events[len(events)-1] == nil
}

// TestModelCountersStartAtZero: load failures and reloads have a series
// for every model found, at 0, before anything fails or reloads, so that
// a dashboard tells "none" from "not collected"; a failure then counts on
// its own model's series.
func TestModelCountersStartAtZero(t *testing.T) {
	f := startReloadFixture(t, time.Millisecond)
	ro := attribute.NewSet(attribute.String("model", "ro"))
	metadatatest.AssertEqualOnnxinferenceModelLoadFailures(t, f.tel, []metricdata.DataPoint[int64]{{Attributes: ro, Value: 0}},
		metricdatatest.IgnoreTimestamp())
	metadatatest.AssertEqualOnnxinferenceModelReloads(t, f.tel, []metricdata.DataPoint[int64]{{Attributes: ro, Value: 0}},
		metricdatatest.IgnoreTimestamp())
}

// Replacing a served version's file in place with other content (a model
// with one more output) swaps the new content in under the same version
// number: runs in flight on the old content finish on it, later runs get
// the new one, the reload is logged and counted once.
func TestReloadsAVersionWhoseFileChangedInPlace(t *testing.T) {
	f := startReloadFixture(t, 0)
	v2 := testdataModel(t, modelOverlapV2)

	// Runs go on all along: each must succeed on version 1, with the old
	// outputs or the new ones.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	runErrs := make(chan error, 4)
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
				res, err := f.e.Run(context.Background(), "ro", modelrunner.Request{Inputs: overlapFeatures})
				if got := outputNames(res.Outputs); err == nil && (res.Version != 1 ||
					!slices.Equal(got, overlapV1Outputs) && !slices.Equal(got, overlapV2Outputs)) {
					err = fmt.Errorf("version %d returned %v", res.Version, got)
				}
				if err != nil {
					runErrs <- err
					return
				}
			}
		}()
	}

	// And one run is held in flight on the old content across the swap.
	held, _, err := f.e.acquire("ro", 1)
	if err != nil {
		t.Fatal(err)
	}
	var release sync.Once
	defer release.Do(held.inflight.Done) // on failure too, or Shutdown would wait for it
	f.overwrite(v2, time.Minute)
	scanned := make(chan struct{})
	defer func() { <-scanned }()
	go func() { defer close(scanned); f.e.scan() }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		sig, err := f.e.Signature("ro", 1)
		if err != nil {
			t.Fatal(err)
		}
		if len(sig.Outputs) == len(overlapV2Outputs) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the new content was not swapped in")
		}
		time.Sleep(time.Millisecond)
	}
	select {
	case <-scanned:
		t.Fatal("the scan finished while a run was in flight on the old content")
	default:
	}
	out, err := held.run(overlapFeatures, nil)
	if err != nil {
		t.Fatalf("the run in flight on the old content: %v", err)
	}
	if got := outputNames(out); !slices.Equal(got, overlapV1Outputs) {
		t.Fatalf("the run in flight on the old content returned %v, want %v", got, overlapV1Outputs)
	}
	release.Do(held.inflight.Done)
	select {
	case <-scanned:
	case <-time.After(30 * time.Second):
		t.Fatal("the scan did not finish once the run in flight was done")
	}
	if held.session != nil {
		t.Fatal("the old content's session was not destroyed after draining")
	}
	close(stop)
	wg.Wait()
	close(runErrs)
	for err := range runErrs {
		t.Fatalf("a run during the reload failed: %v", err)
	}

	f.expectOutputs("after the reload", overlapV2Outputs)
	f.expectCounts("after the reload", 1, 0)
	reloaded := f.logs.FilterMessage("model version reloaded: its file changed").All()
	if len(reloaded) != 1 {
		t.Fatalf("%d reload log lines, want 1", len(reloaded))
	}
	if fields := reloaded[0].ContextMap(); reloaded[0].Level != zap.InfoLevel || fields["model"] != "ro" || fields["version"] != int64(1) {
		t.Fatalf("reload logged at %s with %v, want info naming model ro version 1", reloaded[0].Level, fields)
	}
	if errs, _ := f.statusErrors(); len(errs) != 0 {
		t.Fatalf("status errors %v, want none", errs)
	}

	// An unchanged file is not reloaded again; neither is one written
	// again with the same bytes.
	served := f.e.models["ro"].get(1)
	f.e.scan()
	f.overwrite(v2, 30*time.Second)
	f.e.scan()
	f.e.scan()
	if f.e.models["ro"].get(1) != served {
		t.Fatal("the same content was loaded again")
	}
	f.expectCounts("after rescans", 1, 0)
}

// New content that fails (not a model, refused by a component that runs
// it) keeps the previous content serving, is reported once per change of
// the file, and a later good file is taken.
func TestBadContentInPlaceKeepsThePreviousContentServing(t *testing.T) {
	f := startReloadFixture(t, 0)
	failures := func() []observer.LoggedEntry {
		return f.logs.FilterLevelExact(zap.ErrorLevel).FilterMessageSnippet("changed in place and failed to load").All()
	}

	f.overwrite([]byte("this is not an ONNX model"), time.Minute)
	for i := 0; i < 3; i++ {
		f.e.scan()
	}
	f.expectOutputs("with garbage in place", overlapV1Outputs)
	f.expectCounts("with garbage in place", 0, 1)
	if logged := failures(); len(logged) != 1 || logged[0].ContextMap()["model"] != "ro" || logged[0].ContextMap()["version"] != int64(1) ||
		!strings.Contains(fmt.Sprint(logged[0].ContextMap()["error"]), "read model") {
		t.Fatalf("failure log lines %v, want one naming model ro, version 1 and the cause", logged)
	}
	errs, lastOK := f.statusErrors()
	if len(errs) != 1 || lastOK || !strings.Contains(errs[0].Error(), `model "ro" version 1: file changed in place`) {
		t.Fatalf("status errors %v (last OK: %v), want one recoverable error naming model ro version 1", errs, lastOK)
	}

	// A component that runs the model refuses the next content.
	unregister, err := f.e.Watch("ro", func(sig modelrunner.Signature) error {
		if _, ok := sig.Output("anomaly_score"); ok {
			return errors.New("no anomaly scores, please")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	f.overwrite(testdataModel(t, modelOverlapV2), 50*time.Second)
	f.e.scan()
	f.e.scan()
	f.expectOutputs("with refused content in place", overlapV1Outputs)
	f.expectCounts("with refused content in place", 0, 2)
	errs, _ = f.statusErrors()
	if len(failures()) != 2 || len(errs) != 2 || !strings.Contains(errs[1].Error(), "no anomaly scores, please") {
		t.Fatalf("status errors %v, want a second one giving the component's reason", errs)
	}
	unregister()
	f.e.scan()
	f.expectCounts("unchanged file, check gone", 0, 2) // not retried until the file changes

	// The file changes again (touched): taken now.
	f.age(40 * time.Second)
	f.e.scan()
	f.expectOutputs("after the file changed again", overlapV2Outputs)
	f.expectCounts("after the file changed again", 1, 2)
	if errs, lastOK := f.statusErrors(); len(errs) != 2 || !lastOK {
		t.Fatalf("status errors %v (last OK: %v), want StatusOK reported after the reload", errs, lastOK)
	}
}

// A file being rewritten in place slowly is not loaded until it has been
// unmodified for the settle time, and no failure is reported meanwhile.
func TestFileBeingWrittenInPlaceIsNotLoadedBeforeItSettles(t *testing.T) {
	f := startReloadFixture(t, time.Hour) // the test dates the file as time passing would
	v2 := testdataModel(t, modelOverlapV2)
	file, err := os.OpenFile(f.path, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = file.Close() }()
	for i, part := range [][]byte{v2[:len(v2)/3], v2[len(v2)/3 : 2*len(v2)/3], v2[2*len(v2)/3:]} {
		if _, err := file.Write(part); err != nil {
			t.Fatal(err)
		}
		f.e.scan()
		when := fmt.Sprintf("after writing part %d of 3", i+1)
		f.expectOutputs(when, overlapV1Outputs)
		f.expectCounts(when, 0, 0)
	}
	if err := file.Close(); err != nil {
		t.Fatal(err)
	}
	f.e.scan()
	f.expectOutputs("written, not settled", overlapV1Outputs)

	// The settle time passes with the file unmodified.
	f.age(2 * time.Hour)
	f.e.scan()
	f.expectOutputs("settled", overlapV2Outputs)
	f.expectCounts("settled", 1, 0)
	if errs, _ := f.statusErrors(); len(errs) != 0 {
		t.Fatalf("status errors %v, want none", errs)
	}
}
