package pythongilreceiver

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/otelcol-ai/otelcol-ai/internal/e2etest"
	"github.com/otelcol-ai/otelcol-ai/internal/window"
	"github.com/otelcol-ai/otelcol-ai/receiver/pythongilreceiver/internal/workloadtest"
)

// These tests drive the built distribution ($OTELCOL_AI_BIN, which `make
// test` sets) through the project's end-to-end harness.

// pythongilConfig probes one pid and writes windows and metrics with the
// file exporter into the harness's output folder.
func pythongilConfig(pid int) string {
	return `receivers:
  pythongil:
    discovery_interval: 100ms
    flush_interval: 100ms
    collection_interval: 500ms
    include:
      pids: [` + strconv.Itoa(pid) + `]
    # Exact counts are asserted: no duty cycling, whatever other Python
    # processes on the host (other tests) cost the shared probes.
    overhead:
      budget: 0
exporters:
  file/metrics:
    path: ${env:` + e2etest.EnvOutputDir + `}/metrics.jsonl
    flush_interval: 100ms
  file/logs:
    path: ${env:` + e2etest.EnvOutputDir + `}/logs.jsonl
    flush_interval: 100ms
service:
  telemetry:
    metrics:
      level: none
  pipelines:
    metrics:
      receivers: [pythongil]
      exporters: [file/metrics]
    logs:
      receivers: [pythongil]
      exporters: [file/logs]
`
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
	if err := c.Eventually(time.Minute, func() bool { return fileContains(metrics, `"python.gil.probe.hits"`) }); err != nil {
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
	if err := c.Eventually(time.Minute, func() bool { return fileContains(metrics, `"python.gil.released.duration"`) }); err != nil {
		t.Fatalf("c.Eventually: %v", err)
	}
	code, err := c.Stop(30 * time.Second)
	if err != nil {
		t.Fatalf("c.Stop: %v", err)
	}
	if code != 0 {
		t.Errorf("c.Stop: got %v, want %v", code, 0)
	}
}

func fileContains(path, s string) bool {
	b, err := os.ReadFile(path)
	return err == nil && bytes.Contains(b, []byte(s))
}
