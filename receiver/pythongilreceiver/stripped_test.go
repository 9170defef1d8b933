package pythongilreceiver

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/receiver/receivertest"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/otelcol-ai/otelcol-ai/internal/procresource"
	"github.com/otelcol-ai/otelcol-ai/internal/window"
	"github.com/otelcol-ai/otelcol-ai/receiver/pythongilreceiver/internal/discovery"
	"github.com/otelcol-ai/otelcol-ai/receiver/pythongilreceiver/internal/gil"
	"github.com/otelcol-ai/otelcol-ai/receiver/pythongilreceiver/internal/metadata"
	"github.com/otelcol-ai/otelcol-ai/receiver/pythongilreceiver/internal/metadatatest"
	"github.com/otelcol-ai/otelcol-ai/receiver/pythongilreceiver/internal/workloadtest"
)

// TestStrippedLibPythonEndToEnd runs the GC workload on a private copy of
// python3's libpython stripped as the official images' build strips it:
// the receiver finds take_gil, drop_gil and gc_collect_main by decoding,
// says so in otelcol_receiver_pythongil_functions, and reports one
// python.gc.pause window per gc.collect(2), where without decoding it
// reported none.
func TestStrippedLibPythonEndToEnd(t *testing.T) {
	env := workloadtest.StrippedLibPython(t)
	tt := componenttest.NewTelemetry()
	t.Cleanup(func() { _ = tt.Shutdown(t.Context()) })
	set := receivertest.NewNopSettings(metadata.Type)
	set.TelemetrySettings = tt.NewTelemetrySettings()
	w := workloadtest.StartEnv(t, env, "gc", "4")
	h := startReceiverWith(t, fastConfig(w.PID), componenttest.NewNopHost(), set)
	h.waitAttached(w.PID)
	var res struct {
		TID int64 `json:"tid"`
		N   int   `json:"n"`
	}
	w.Run(&res)
	pauses := func() int {
		n := 0
		for _, r := range h.windows(w.PID) {
			if r.w.Kind == window.KindPythonGCPause && r.w.ThreadID == res.TID && r.w.Attributes[window.AttrPythonGCGeneration] == int64(2) {
				n++
			}
		}
		return n
	}
	waitFor(t, "the GC pause windows", func() bool { return pauses() >= res.N })
	if got := pauses(); got != res.N {
		t.Fatalf("generation-2 GC pauses: got %d, want %d", got, res.N)
	}
	point := func(function string) metricdata.DataPoint[int64] {
		return metricdata.DataPoint[int64]{Value: 1, Attributes: attribute.NewSet(attribute.String("function", function), attribute.String("source", sourceDecoded))}
	}
	metadatatest.AssertEqualReceiverPythongilFunctions(t, tt, []metricdata.DataPoint[int64]{point("take_gil"), point("drop_gil"), point("gc")},
		metricdatatest.IgnoreTimestamp())
}

// TestMissingStaticFunctionsAreReported attaches a stripped file whose
// exported GIL functions call no take_gil or drop_gil (the USDT fixture:
// its GC pauses come from USDT probes): the functions it lacks are
// counted with source none and named in one warning, with why and what
// is then not measured.
func TestMissingStaticFunctionsAreReported(t *testing.T) {
	p, err := gil.Load(gil.Options{SwitchProbes: true, GC: true})
	if errors.Is(err, gil.ErrUnavailable) {
		t.Skipf("eBPF unavailable: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	path := filepath.Join("internal", "gil", "testdata", "usdt", "usdt.elf")
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	l, err := p.Attach(f)
	if errors.Is(err, gil.ErrUnavailable) {
		t.Skipf("uprobes unavailable: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	sets, missing := functionSources(l, true)
	want := []attribute.Set{
		attribute.NewSet(attribute.String("function", "take_gil"), attribute.String("source", sourceNone)),
		attribute.NewSet(attribute.String("function", "drop_gil"), attribute.String("source", sourceNone)),
		attribute.NewSet(attribute.String("function", "gc"), attribute.String("source", sourceUSDT)),
	}
	if !reflect.DeepEqual(sets, want) || !reflect.DeepEqual(missing, []string{"take_gil", "drop_gil"}) {
		t.Errorf("functionSources: %v missing %v; want %v missing [take_gil drop_gil]", sets, missing, want)
	}
	core, logs := observer.New(zapcore.InfoLevel)
	st := &runState{logger: zap.New(core)}
	st.logFunctions(discovery.Interpreter{Resource: procresource.Resource{PID: 42}, Path: path}, l, missing)
	warned := logs.FilterMessageSnippet("static CPython functions not found").All()
	if len(warned) != 1 {
		t.Fatalf("%d warnings, want 1: %v", len(warned), logs.All())
	}
	fields := warned[0].ContextMap()
	if got := fields["missing"]; !reflect.DeepEqual(got, []any{"take_gil", "drop_gil"}) {
		t.Errorf("missing: got %v", got)
	}
	// The fixture exports PyEval_SaveThread and PyEval_RestoreThread only.
	if decode, _ := fields["decode"].(string); !strings.Contains(decode, "take_gil: the file does not export PyEval_AcquireThread") {
		t.Errorf("decode: got %q, want why take_gil was not found", decode)
	}
	if lost, _ := fields["not_measured"].([]any); len(lost) != 1 || !strings.Contains(lost[0].(string), "forced switches and held time") {
		t.Errorf("not_measured: got %v", fields["not_measured"])
	}
}
