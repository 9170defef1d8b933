package pythongilreceiver

import (
	"reflect"
	"strconv"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component/componenttest"

	"github.com/otelcol-ai/otelcol-ai/internal/window"
	"github.com/otelcol-ai/otelcol-ai/receiver/pythongilreceiver/internal/workloadtest"
)

// TestJVMEmbeddingCPythonThroughJep probes a java process that embeds
// libpython: four Java threads each call into Python five times, and each
// call sleeps 10 ms without the GIL.
func TestJVMEmbeddingCPythonThroughJep(t *testing.T) {
	w := workloadtest.StartCommand(t, workloadtest.Jep(t, "GilJep.java", "4", "5", "10"))
	h := startReceiver(t, fastConfig(w.PID), componenttest.NewNopHost())
	h.waitAttached(w.PID)
	var res struct {
		N       int   `json:"n"`
		DNS     int64 `json:"d_ns"`
		Threads []struct {
			TID   int64       `json:"tid"`
			Calls []sleepCall `json:"calls"`
		} `json:"threads"`
	}
	w.Run(&res)
	// Each sleep is exactly one released window on its thread
	// (matchSleeps: the thread also releases the GIL between calls, while
	// Java runs), inside the call's wall-clock bounds (1 ms slack, plus the
	// clock offset's uncertainty).
	for _, th := range res.Threads {
		if got := len(th.Calls); got != res.N {
			t.Fatalf("len(th.Calls): got %d, want %d", got, res.N)
		}
		got, ok := h.sleepWindows(w.PID, th.TID, th.Calls, time.Duration(res.DNS), res.DNS/2)
		if !ok {
			continue
		}
		slack := h.slack()
		for i, r := range got {
			if r.w.Start < th.Calls[i][0]-slack {
				t.Errorf("java thread %d: window of call %d starts before the call: got %v, want >= %v", th.TID, i, r.w.Start, th.Calls[i][0]-slack)
			}
			if got := r.w.End(); got > th.Calls[i][1]+slack {
				t.Errorf("java thread %d: window of call %d ends after the call: got %v, want <= %v", th.TID, i, got, th.Calls[i][1]+slack)
			}
		}
	}
	// The JVM names its threads; the windows carry the name.
	names := map[string]bool{}
	for _, r := range h.windows(w.PID) {
		for _, th := range res.Threads {
			if r.w.ThreadID == th.TID {
				names[r.w.ThreadName] = true
			}
		}
	}
	for i := range res.Threads {
		if !names["jep-worker-"+strconv.Itoa(i)] {
			t.Errorf("no window named jep-worker-%d among %v (names[\"jep-worker-\"+strconv.Itoa(i)] is false)", i, names)
		}
	}
	got := h.windows(w.PID)
	if len(got) == 0 {
		t.Errorf("h.windows(w.PID): got no windows, want at least one")
	} else {
		attrs := got[0].res.AsRaw()
		if got := attrs["process.executable.name"]; !reflect.DeepEqual(got, "java") {
			t.Errorf("attrs[\"process.executable.name\"]: got %v, want %q", got, "java")
		}
		if got := attrs[window.ResourceRuntimeName]; !reflect.DeepEqual(got, window.RuntimeCPython) {
			t.Errorf("attrs[window.ResourceRuntimeName]: got %v, want %q", got, window.RuntimeCPython)
		}
		if got := attrs[window.ResourceRuntimeVersion]; !reflect.DeepEqual(got, "3.11") {
			t.Errorf("attrs[window.ResourceRuntimeVersion]: got %v, want %q", got, "3.11")
		}
	}
}
