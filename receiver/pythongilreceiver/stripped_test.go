package pythongilreceiver

import (
	"testing"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/receiver/receivertest"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"

	"github.com/otelcol-ai/otelcol-ai/internal/window"
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
