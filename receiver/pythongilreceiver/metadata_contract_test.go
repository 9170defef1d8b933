package pythongilreceiver

import (
	"slices"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component/componenttest"

	"github.com/otelcol-ai/otelcol-ai/internal/declaredtest"
	"github.com/otelcol-ai/otelcol-ai/internal/window"
	"github.com/otelcol-ai/otelcol-ai/receiver/pythongilreceiver/internal/workloadtest"
)

// histograms are the hand-built histograms of histogramMetrics as
// declaredtest checks them: in seconds, with the attributes a point may
// carry (see appendHistograms).
func histograms() map[string]declaredtest.Histogram {
	attributes := map[string]string{window.AttrThreadID: "int", attrCPythonGCGeneration: "int"}
	hs := map[string]declaredtest.Histogram{}
	for _, h := range histogramMetrics {
		hs[h.name] = declaredtest.Histogram{Unit: "s", Attributes: attributes}
	}
	return hs
}

// TestEmittedMetricsAreDeclared probes three real CPython workloads (threads
// sleeping, two threads contending for the GIL past the switch interval,
// full collections of 200k cyclic objects) with per-thread series, and
// checks every metric the receiver emits against its declaration: nothing
// emitted is undeclared or declared differently, and every declared metric
// (the histograms included) is emitted. Runs in about 5 s.
func TestEmittedMetricsAreDeclared(t *testing.T) {
	decl, hs := declaredtest.Read(t), histograms()
	want := decl.Names(hs)

	sleep := workloadtest.Start(t, "sleep", "3", "20")
	spin := workloadtest.Start(t, "spin", "2", "0.5")
	collect := workloadtest.Start(t, "gc", "3")
	cfg := fastConfig(sleep.PID, spin.PID, collect.PID)
	cfg.PerThread = true
	// A budget, so that python.gil.probe.cost is reported, that these
	// workloads never reach: nothing detached.
	cfg.Overhead = OverheadConfig{Budget: 1, Period: time.Second, CostPerHit: time.Microsecond}
	h := startReceiver(t, cfg, componenttest.NewNopHost())
	for _, w := range []*workloadtest.Process{sleep, spin, collect} {
		h.waitAttached(w.PID)
	}
	img, err := readImage(libPython(t, spin.PID))
	if err != nil {
		t.Fatalf("readImage: %v", err)
	}
	if !img.Symbols.Switch() || img.Symbols.GC() == "" {
		t.Skipf("python3 has no take_gil/drop_gil or gc_collect_main symbols: held time, switches and GC pauses cannot be probed")
	}
	var v map[string]any
	for _, w := range []*workloadtest.Process{sleep, spin, collect} {
		w.Run(&v)
	}

	seen := map[string]bool{}
	checked := 0
	missing := want
	for deadline := time.Now().Add(30 * time.Second); len(missing) > 0 && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
		all := h.metrics.AllMetrics()
		for _, md := range all[checked:] {
			for name := range decl.Check(t, md, hs) {
				seen[name] = true
			}
		}
		checked = len(all)
		missing = slices.DeleteFunc(slices.Clone(want), func(name string) bool { return seen[name] })
	}
	if len(missing) != 0 {
		t.Errorf("declared but never emitted: got %v, want empty", missing)
	}
}

// libPython is the interpreter file pid maps, as this process sees it.
func libPython(t *testing.T, pid int) string {
	t.Helper()
	path, err := workloadtest.LibPython(pid)
	if err != nil {
		t.Fatalf("workloadtest.LibPython: %v", err)
	}
	return path
}
