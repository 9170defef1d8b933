package nvmlreceiver

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-ai/otelcol-ai/internal/e2e"
)

// These tests drive the built distribution ($OTELCOL_AI_BIN, which `make
// test` sets) through the project's end-to-end harness; they skip when it
// is unset.

// nvmlOnlyConfig is an nvml-only pipeline writing the file exporter's OTLP
// JSON into the harness's output folder.
func nvmlOnlyConfig(library string) string {
	return `receivers:
  nvml:
    collection_interval: 1s
    initial_delay: 0s
    init_retry_interval: 1s
    library_path: ` + library + `
    pod_resources:
      endpoint: ""
exporters:
  file/metrics:
    path: ${env:` + e2e.EnvOutputDir + `}/metrics.jsonl
    flush_interval: 100ms
  file/logs:
    path: ${env:` + e2e.EnvOutputDir + `}/logs.jsonl
    flush_interval: 100ms
service:
  telemetry:
    metrics:
      level: none
  pipelines:
    metrics:
      receivers: [nvml]
      exporters: [file/metrics]
    logs:
      receivers: [nvml]
      exporters: [file/logs]
`
}

func skipWithoutBinary(t *testing.T) {
	t.Helper()
	if os.Getenv(e2e.EnvBinary) == "" {
		t.Skip(e2e.EnvBinary + " is not set: these tests run against the built distribution (make test)")
	}
}

func fileContains(path, s string) bool {
	b, err := os.ReadFile(path)
	return err == nil && bytes.Contains(b, []byte(s))
}

func TestBuiltCollectorWithStubLibrary(t *testing.T) {
	skipWithoutBinary(t)
	lib := buildStubLibrary(t)
	stubLog := filepath.Join(t.TempDir(), "calls.log")
	c := e2e.Start(t, e2e.Options{ConfigYAML: nvmlOnlyConfig(lib), Env: map[string]string{"NVML_STUB_LOG": stubLog}})

	metrics, logs := filepath.Join(c.OutputDir, "metrics.jsonl"), filepath.Join(c.OutputDir, "logs.jsonl")
	pid := strconv.Itoa(c.Pid())
	require.NoError(t, c.Eventually(time.Minute, func() bool {
		// The stub reports the collector itself as the GPU's process.
		return fileContains(metrics, `"hw.gpu.memory.usage"`) && fileContains(metrics, `"intValue":"`+pid+`"`) && fileContains(logs, `"gpu.xid"`)
	}))
	code, err := c.Stop(30 * time.Second)
	require.NoError(t, err)
	assert.Equal(t, 0, code)

	m, err := os.ReadFile(metrics)
	require.NoError(t, err)
	for _, want := range []string{`"NVIDIA H200 (stub)"`, `"GPU-5a17b0c2-0000-4000-8000-000000000000"`, `"gpu.process.memory.usage"`, `"hw.power"`} {
		assert.Contains(t, string(m), want)
	}
	calls, err := os.ReadFile(stubLog)
	require.NoError(t, err)
	assert.Equal(t, "init\nshutdown\n", string(calls), "one nvmlInit, balanced by one nvmlShutdown")
}

func TestBuiltCollectorStaysUpWithoutDriver(t *testing.T) {
	skipWithoutBinary(t)
	absent := filepath.Join(t.TempDir(), "absent", "libnvidia-ml.so.1")
	c := e2e.Start(t, e2e.Options{ConfigYAML: nvmlOnlyConfig(absent)})
	require.NoError(t, c.Eventually(time.Minute, func() bool {
		out := c.Log()
		return strings.Contains(out, "Everything is ready") && strings.Contains(out, "No NVIDIA driver library")
	}))
	code, err := c.Stop(30 * time.Second)
	require.NoError(t, err, "it stayed up until asked to stop")
	assert.Equal(t, 0, code)
}
