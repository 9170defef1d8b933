package nvmlreceiver

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// collectorBinaryEnv names the built distribution (`make build` puts it in
// dist/otelcol-ai). The end-to-end tests below run only when it is set:
//
//	OTELCOL_AI_BIN=$PWD/dist/otelcol-ai go test -run TestBuiltCollector ./receiver/nvmlreceiver/
const collectorBinaryEnv = "OTELCOL_AI_BIN"

func collectorBinary(t *testing.T) string {
	t.Helper()
	bin := os.Getenv(collectorBinaryEnv)
	if bin == "" {
		t.Skip(collectorBinaryEnv + " is not set: build the distribution and point it at the binary")
	}
	_, err := os.Stat(bin)
	require.NoError(t, err, collectorBinaryEnv)
	return bin
}

// collectorConfig is an nvml-only pipeline writing OTLP JSON files.
func collectorConfig(t *testing.T, dir, library string) string {
	t.Helper()
	cfg := `receivers:
  nvml:
    collection_interval: 1s
    initial_delay: 0s
    init_retry_interval: 1s
    library_path: ` + library + `
    pod_resources:
      endpoint: ""
exporters:
  file/metrics:
    path: ` + filepath.Join(dir, "metrics.jsonl") + `
    flush_interval: 100ms
  file/logs:
    path: ` + filepath.Join(dir, "logs.jsonl") + `
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
	path := filepath.Join(dir, "config.yaml")
	require.NoError(t, os.WriteFile(path, []byte(cfg), 0o644))
	return path
}

// lockedBuffer collects the collector's output while the test reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// collector is a running collector process.
type collector struct {
	cmd    *exec.Cmd
	out    *lockedBuffer
	exited chan struct{}
	err    error
}

func startCollector(t *testing.T, bin, config string, env ...string) *collector {
	t.Helper()
	c := &collector{out: &lockedBuffer{}, exited: make(chan struct{})}
	c.cmd = exec.Command(bin, "--config", config)
	c.cmd.Env = append(os.Environ(), env...)
	c.cmd.Stdout, c.cmd.Stderr = c.out, c.out
	require.NoError(t, c.cmd.Start())
	go func() {
		c.err = c.cmd.Wait()
		close(c.exited)
	}()
	t.Cleanup(func() {
		_ = c.cmd.Process.Kill()
		<-c.exited
	})
	return c
}

// waitFor polls cond until it holds, failing early if the collector exits.
func (c *collector) waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		select {
		case <-c.exited:
			t.Fatalf("collector exited (%v):\n%s", c.err, c.out)
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within a minute; collector output:\n%s", c.out)
		}
	}
}

func (c *collector) stop(t *testing.T) {
	t.Helper()
	require.NoError(t, c.cmd.Process.Signal(syscall.SIGTERM))
	<-c.exited
	require.NoError(t, c.err, "collector output:\n%s", c.out)
}

func fileContains(path, s string) bool {
	b, err := os.ReadFile(path)
	return err == nil && bytes.Contains(b, []byte(s))
}

func TestBuiltCollectorWithStubLibrary(t *testing.T) {
	bin := collectorBinary(t)
	lib := buildStubLibrary(t)
	dir := t.TempDir()
	stubLog := filepath.Join(dir, "calls.log")
	c := startCollector(t, bin, collectorConfig(t, dir, lib), "NVML_STUB_LOG="+stubLog)

	metrics, logs := filepath.Join(dir, "metrics.jsonl"), filepath.Join(dir, "logs.jsonl")
	pid := strconv.Itoa(c.cmd.Process.Pid)
	c.waitFor(t, func() bool {
		// The stub reports the collector itself as the GPU's process.
		return fileContains(metrics, `"hw.gpu.memory.usage"`) && fileContains(metrics, `"intValue":"`+pid+`"`) && fileContains(logs, `"gpu.xid"`)
	})
	c.stop(t)

	m, err := os.ReadFile(metrics)
	require.NoError(t, err)
	for _, want := range []string{`"NVIDIA H200 (stub)"`, `"GPU-5a17b0c2-0000-4000-8000-000000000000"`, `"gpu.process.memory.usage"`, `"hw.power"`} {
		assert.Contains(t, string(m), want)
	}
	calls, err := os.ReadFile(stubLog)
	require.NoError(t, err)
	assert.Equal(t, "init\nshutdown\n", string(calls))
}

func TestBuiltCollectorStaysUpWithoutDriver(t *testing.T) {
	bin := collectorBinary(t)
	dir := t.TempDir()
	c := startCollector(t, bin, collectorConfig(t, dir, filepath.Join(dir, "absent", "libnvidia-ml.so.1")))
	c.waitFor(t, func() bool {
		out := c.out.String()
		return strings.Contains(out, "Everything is ready") && strings.Contains(out, "No NVIDIA driver library")
	})
	// It stayed up (waitFor fails if it exits) and stops cleanly.
	c.stop(t)
}
