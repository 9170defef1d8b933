package nvmlreceiver

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componentstatus"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/receiver/receivertest"

	"github.com/otelcol-ai/otelcol-ai/internal/procresource"
	"github.com/otelcol-ai/otelcol-ai/receiver/nvmlreceiver/internal/metadata"
)

// buildStubLibrary compiles testdata/nvmlstub/nvmlstub.c into a
// libnvidia-ml.so.1 in a temp dir, against go-nvml's nvml.h.
func buildStubLibrary(t *testing.T) string {
	t.Helper()
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("gcc not found: the stub NVML library cannot be built")
	}
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/NVIDIA/go-nvml").Output()
	require.NoError(t, err, "locating go-nvml's nvml.h")
	include := filepath.Join(strings.TrimSpace(string(out)), "pkg", "nvml")
	lib := filepath.Join(t.TempDir(), "libnvidia-ml.so.1")
	cmd := exec.Command(gcc, "-Wall", "-Werror", "-Wno-deprecated-declarations", "-shared", "-fPIC",
		"-I", include, "-o", lib, filepath.Join("testdata", "nvmlstub", "nvmlstub.c"))
	msg, err := cmd.CombinedOutput()
	require.NoError(t, err, "gcc: %s", msg)
	return lib
}

// TestRealBindingAgainstStubLibrary runs the receiver through go-nvml's real
// dlopen and cgo path, with the stub standing in for the driver.
func TestRealBindingAgainstStubLibrary(t *testing.T) {
	lib := buildStubLibrary(t)
	stubLog := filepath.Join(t.TempDir(), "calls.log")
	t.Setenv("NVML_STUB_LOG", stubLog)
	t.Setenv(procresource.EnvNodeName, testNodeName)
	defer func(ms uint32) { eventWaitMillis = ms }(eventWaitMillis)
	eventWaitMillis = 10

	cfg := createDefaultConfig().(*Config)
	cfg.LibraryPath = lib
	cfg.PodResources.Endpoint = ""
	set := receivertest.NewNopSettings(metadata.Type)
	set.ID = component.NewIDWithName(metadata.Type, "stub")
	r, err := newNVMLReceiver(set, cfg, openSystemLibrary)
	require.NoError(t, err)
	// The stub reports this test's own pid, which its /proc shows whatever
	// the namespace.
	r.hostPIDs = func() (bool, bool) { return true, true }
	logs := new(consumertest.LogsSink)
	r.setLogsConsumer(logs)
	host := &statusHost{}
	require.NoError(t, r.start(context.Background(), host))
	assert.Equal(t, componentstatus.StatusOK, host.last().Status())

	md, err := r.scrape(context.Background())
	require.NoError(t, err)

	gpu0, ok := resourceWith(md, "hw.id", "GPU-5a17b0c2-0000-4000-8000-000000000000")
	require.True(t, ok)
	assert.Equal(t, map[string]any{
		"hw.id":             "GPU-5a17b0c2-0000-4000-8000-000000000000",
		"hw.type":           "gpu",
		"hw.vendor":         "NVIDIA",
		"hw.model":          "NVIDIA H200 (stub)",
		"hw.name":           "nvidia0",
		"hw.driver_version": "570.86.15-stub",
		"gpu.index":         int64(0),
		"gpu.pci.bus_id":    "00000000:18:00.0",
		"host.name":         testNodeName,
		"k8s.node.name":     testNodeName,
	}, resourceAttrs(gpu0.Resource()))
	const gib = 1 << 30
	assert.Equal(t, float64(2*gib), point(t, gpu0, "hw.gpu.memory.usage", map[string]any{"hw.id": resourceAttrs(gpu0.Resource())["hw.id"]}))
	assert.Equal(t, float64(600*mib), point(t, gpu0, "gpu.memory.reserved", nil))
	assert.Equal(t, float64(141*gib), point(t, gpu0, "hw.gpu.memory.limit", nil))
	assert.Equal(t, 0.4, point(t, gpu0, "hw.gpu.utilization", map[string]any{"hw.gpu.task": "general"}))
	assert.Equal(t, 0.05, point(t, gpu0, "hw.gpu.utilization", map[string]any{"hw.gpu.task": "encoder"}))
	assert.Equal(t, 275.5, point(t, gpu0, "hw.power", nil))
	assert.Equal(t, 123456.789, point(t, gpu0, "hw.energy", nil))
	assert.Equal(t, 51.0, point(t, gpu0, "hw.temperature", nil))
	assert.Equal(t, 7.0, point(t, gpu0, "hw.errors", map[string]any{"error.type": "corrected"}))
	assert.Equal(t, 1.0, point(t, gpu0, "hw.errors", map[string]any{"error.type": "uncorrected"}))

	// The stub reports this test process as the GPU's compute process, so
	// the real /proc resolves it.
	self, ok := resourceWith(md, "process.pid", int64(os.Getpid()))
	require.True(t, ok)
	exe, err := os.Executable()
	require.NoError(t, err)
	assert.Equal(t, filepath.Base(exe), resourceAttrs(self.Resource())["process.executable.name"])
	assert.Equal(t, float64(2*gib), point(t, self, "gpu.process.memory.usage", map[string]any{"hw.id": "GPU-5a17b0c2-0000-4000-8000-000000000000"}))
	_, ok = findPoint(self, "gpu.process.utilization", nil)
	assert.False(t, ok, "the stub lacks nvmlDeviceGetProcessUtilization: not called, not reported")

	// The event loop delivered the scripted XID 13 on GPU 1.
	require.Eventually(t, func() bool { return logs.LogRecordCount() >= 1 }, 10*time.Second, time.Millisecond)
	rl := logs.AllLogs()[0].ResourceLogs().At(0)
	id, _ := rl.Resource().Attributes().Get("hw.id")
	assert.Equal(t, "GPU-5a17b0c2-0000-4000-8000-000000000001", id.Str())
	lr := rl.ScopeLogs().At(0).LogRecords().At(0)
	assert.Equal(t, "gpu.xid", lr.EventName())
	assert.Equal(t, map[string]any{"gpu.xid.code": int64(13), "gpu.xid.description": xidDescription(13)}, lr.Attributes().AsRaw())

	require.NoError(t, r.shutdown(context.Background()))
	calls, err := os.ReadFile(stubLog)
	require.NoError(t, err)
	assert.Equal(t, "init\nshutdown\n", string(calls), "one nvmlInit, balanced by one nvmlShutdown")
}
