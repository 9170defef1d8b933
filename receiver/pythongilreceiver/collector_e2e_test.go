package pythongilreceiver

import (
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/otelcol-ai/otelcol-ai/internal/e2etest"
	"github.com/otelcol-ai/otelcol-ai/internal/window"
	"github.com/otelcol-ai/otelcol-ai/receiver/pythongilreceiver/internal/workloadtest"
)

// These tests drive the built distribution ($OTELCOL_AI_BIN, which `make
// test` sets) through the project's end-to-end harness.

// pythongilConfig probes one pid and writes windows and metrics with the
// file exporter into the harness's output folder.
func pythongilConfig(pid int) string {
	return e2etest.FileExportConfig("pythongil", `    discovery_interval: 100ms
    flush_interval: 100ms
    collection_interval: 500ms
    include:
      pids: [`+strconv.Itoa(pid)+`]
    # Exact counts are asserted: no duty cycling, whatever other Python
    # processes on the host (other tests) cost the shared probes.
    overhead:
      budget: 0
`)
}

// fileWindows decodes every window of pid in a file exporter's JSON lines.
func fileWindows(t *testing.T, path string, pid int) []window.Window {
	t.Helper()
	batches, err := e2etest.ReadJSONLines(path, (&plog.JSONUnmarshaler{}).UnmarshalLogs)
	if err != nil {
		t.Fatal(err)
	}
	return e2etest.WindowsOf(batches, int64(pid))
}

func TestBuiltCollectorEmitsGILWindows(t *testing.T) {
	e2etest.RequireComponents(t, "pythongil")
	w := workloadtest.Start(t, "sleep", "3", "20")
	c := e2etest.Start(t, e2etest.Options{ConfigYAML: pythongilConfig(w.PID)})
	logs, metrics := filepath.Join(c.OutputDir, "logs.jsonl"), filepath.Join(c.OutputDir, "metrics.jsonl")
	// The receiver discovers, selects and attaches before its first
	// collection, so once its own metrics appear the workload is probed.
	if err := c.Eventually(time.Minute, func() bool { return e2etest.FileContains(metrics, `"python.gil.probe.hits"`) }); err != nil {
		t.Fatalf("c.Eventually: %v", err)
	}
	var res struct {
		TID   int64       `json:"tid"`
		N     int         `json:"n"`
		DNS   int64       `json:"d_ns"`
		Calls []sleepCall `json:"calls"`
	}
	w.Run(&res)
	if got := len(res.Calls); got != res.N {
		t.Fatalf("len(res.Calls): got %d, want %d", got, res.N)
	}
	// Each sleep is one released window, matched to its call by the
	// workload's clock readings (matchSleeps), not by length.
	self := func(win window.Window) window.Window { return win }
	sleeps := func() [][]window.Window {
		return matchSleeps(fileWindows(t, logs, w.PID), self, res.TID, res.Calls, time.Duration(res.DNS), res.DNS/2)
	}
	if err := c.Eventually(time.Minute, func() bool { return everyCallMatched(sleeps()) }); err != nil {
		t.Fatalf("c.Eventually: %v", err)
	}
	oneWindowPerCall(t, "sleep thread", sleeps(), self, res.Calls)
	if err := c.Eventually(time.Minute, func() bool { return e2etest.FileContains(metrics, `"python.gil.released.duration"`) }); err != nil {
		t.Fatalf("c.Eventually: %v", err)
	}
	c.StopCleanly(t, 30*time.Second)
}

// gaugePoint is one data point of a per-host gauge the receiver reports.
type gaugePoint struct {
	at    int64
	value float64
}

// gaugePoints reads every point of the gauge name from a file exporter's
// JSON lines.
func gaugePoints(t *testing.T, path, name string) []gaugePoint {
	t.Helper()
	batches, err := e2etest.ReadJSONLines(path, (&pmetric.JSONUnmarshaler{}).UnmarshalMetrics)
	if err != nil {
		t.Fatal(err)
	}
	var out []gaugePoint
	for _, md := range batches {
		for _, rm := range md.ResourceMetrics().All() {
			for _, sm := range rm.ScopeMetrics().All() {
				for _, m := range sm.Metrics().All() {
					if m.Name() != name || m.Type() != pmetric.MetricTypeGauge {
						continue
					}
					for _, dp := range m.Gauge().DataPoints().All() {
						out = append(out, gaugePoint{at: int64(dp.Timestamp()), value: dp.DoubleValue()})
					}
				}
			}
		}
	}
	return out
}

// TestBuiltCollectorDefaultBudgetKeepsACheapWorkload runs the built
// collector on the embedded default configuration (every CPython on the
// host, the default 2% budget) beside a workload whose probes cost a few
// hundredths of a percent of a CPU: one thread sleeping 40 x 25 ms while
// two others contend for the GIL. At least 39 of the 40 sleeps are kept,
// and what the receiver reports says why: the probes' cost over the period
// (python.gil.probe.cost, every process the default configuration probes
// on the host included) stayed under the budget, and the sampling ratio
// over the run is 1. Before the budget tolerated bursts, one 100 ms check
// over budget (another process starting up) detached the probes for the
// rest of the period: ratio 0.010, 0 of 40 sleeps.
func TestBuiltCollectorDefaultBudgetKeepsACheapWorkload(t *testing.T) {
	e2etest.RequireComponents(t, "pythongil")
	const calls, sleep = 40, 25 * time.Millisecond
	budget := createDefaultConfig().(*Config).Overhead.Budget
	w := workloadtest.Start(t, "contend", strconv.Itoa(calls), strconv.Itoa(int(sleep/time.Millisecond)), "2")
	c := e2etest.Start(t, e2etest.Options{Configs: []string{"embedded:default"}})
	logs, metrics := filepath.Join(c.OutputDir, "logs.jsonl"), filepath.Join(c.OutputDir, "metrics.jsonl")
	// The receiver discovers and attaches before its first collection,
	// which reports the cost (the budget is on).
	if err := c.Eventually(2*time.Minute, func() bool { return e2etest.FileContains(metrics, `"python.gil.probe.cost"`) }); err != nil {
		t.Fatalf("c.Eventually: %v", err)
	}
	var res struct {
		TID  int64      `json:"tid"`
		N    int        `json:"n"`
		Wall [][2]int64 `json:"wall_calls"`
	}
	w.Run(&res)
	if len(res.Wall) != calls {
		t.Fatalf("%d calls reported, want %d", len(res.Wall), calls)
	}
	ended := res.Wall[len(res.Wall)-1][1]
	sleeps := make([]sleepCall, len(res.Wall))
	for i, c := range res.Wall {
		sleeps[i] = sleepCall{c[0], c[1]}
	}
	self := func(win window.Window) window.Window { return win }
	kept := func() int {
		n := 0
		for _, ws := range matchSleeps(fileWindows(t, logs, w.PID), self, res.TID, sleeps, sleep, int64(sleep/2)) {
			if len(ws) > 0 {
				n++
			}
		}
		return n
	}
	// The first collection after the run reports the ratio over the
	// period that holds it.
	after := func() bool {
		return slices.ContainsFunc(gaugePoints(t, metrics, metricSamplingRatio), func(p gaugePoint) bool { return p.at > ended })
	}
	if err := c.Eventually(time.Minute, func() bool { return after() && kept() == calls }); err != nil && !after() {
		t.Fatalf("no %s reported after the run: %v", metricSamplingRatio, err)
	}
	got := kept()
	ratios := gaugePoints(t, metrics, metricSamplingRatio)
	costs := gaugePoints(t, metrics, "python.gil.probe.cost")
	// The ratio of the first collection after the run, and the highest
	// cost reported up to it.
	var ratio, maxCost float64 = -1, 0
	var at int64
	for _, p := range ratios {
		if p.at > ended && (ratio < 0 || p.at < at) {
			ratio, at = p.value, p.at
		}
	}
	for _, p := range costs {
		if p.at <= at {
			maxCost = max(maxCost, p.value)
		}
	}
	t.Logf("kept %d of %d sleeps; sampling ratio after the run %.4f; highest probe cost reported %.5f of a CPU (budget %.2f)", got, calls, ratio, maxCost, budget)
	if got < calls-1 {
		t.Errorf("kept %d of %d sleeps, want at least %d (sampling ratio %.4f, probe cost %.5f, budget %.2f)", got, calls, calls-1, ratio, maxCost, budget)
	}
	if ratio != 1 {
		t.Errorf("sampling ratio over the run: got %.4f, want 1 (probe cost up to %.5f of a CPU, budget %.2f)", ratio, maxCost, budget)
	}
	if maxCost > budget {
		t.Errorf("probe cost reported up to %.5f of a CPU, over the budget %.2f, for a workload of some 240 hits a second", maxCost, budget)
	}
	c.StopCleanly(t, 30*time.Second)
}
