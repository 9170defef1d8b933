package nvmlreceiver

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componentstatus"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/receiver/receivertest"

	"github.com/otelcol-ai/otelcol-ai/internal/procresource"
	"github.com/otelcol-ai/otelcol-ai/receiver/nvmlreceiver/internal/metadata"
	"github.com/otelcol-ai/otelcol-ai/receiver/nvmlreceiver/nvmlstubtest"
)

// TestRealBindingAgainstStubLibrary runs the receiver through go-nvml's real
// dlopen and cgo path, with the stub standing in for the driver.
func TestRealBindingAgainstStubLibrary(t *testing.T) {
	lib := nvmlstubtest.Build(t)
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
	if err != nil {
		t.Fatalf("newNVMLReceiver: %v", err)
	}
	// The stub reports this test's own pid, which its /proc shows whatever
	// the namespace.
	r.hostPIDs = func() (bool, bool) { return true, true }
	logs := new(consumertest.LogsSink)
	r.setLogsConsumer(logs)
	host := &statusHost{}
	if err := r.start(context.Background(), host); err != nil {
		t.Fatalf("r.start: %v", err)
	}
	if got := host.last().Status(); got != componentstatus.StatusOK {
		t.Errorf("host.last().Status(): got %v, want %v", got, componentstatus.StatusOK)
	}

	md, err := r.scrape(context.Background())
	if err != nil {
		t.Fatalf("r.scrape: %v", err)
	}

	gpu0, ok := resourceWith(md, "hw.id", "GPU-5a17b0c2-0000-4000-8000-000000000000")
	if !ok {
		t.Fatalf("resourceWith: ok is false")
	}
	if got, want := resourceAttrs(gpu0.Resource()), map[string]any{
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
	}; !reflect.DeepEqual(got, want) {
		t.Errorf("resourceAttrs(gpu0.Resource()): got %v, want %v", got, want)
	}
	const gib = 1 << 30
	if got := point(t, gpu0, "hw.gpu.memory.usage", map[string]any{"hw.id": resourceAttrs(gpu0.Resource())["hw.id"]}); got != float64(2*gib) {
		t.Errorf("point(t, gpu0, \"hw.gpu.memory.usage\", map[string]any{\"hw.id\": resourceAttrs(gpu0.Resource())[\"hw.id\"]}): got %v, want %v", got, float64(2*gib))
	}
	if got := point(t, gpu0, "gpu.memory.reserved", nil); got != float64(600*mib) {
		t.Errorf("point(t, gpu0, \"gpu.memory.reserved\", nil): got %v, want %v", got, float64(600*mib))
	}
	if got := point(t, gpu0, "hw.gpu.memory.limit", nil); got != float64(141*gib) {
		t.Errorf("point(t, gpu0, \"hw.gpu.memory.limit\", nil): got %v, want %v", got, float64(141*gib))
	}
	if got := point(t, gpu0, "hw.gpu.utilization", map[string]any{"hw.gpu.task": "general"}); got != 0.4 {
		t.Errorf("point(t, gpu0, \"hw.gpu.utilization\", map[string]any{\"hw.gpu.task\": \"general\"}): got %v, want %v", got, 0.4)
	}
	if got := point(t, gpu0, "hw.gpu.utilization", map[string]any{"hw.gpu.task": "encoder"}); got != 0.05 {
		t.Errorf("point(t, gpu0, \"hw.gpu.utilization\", map[string]any{\"hw.gpu.task\": \"encoder\"}): got %v, want %v", got, 0.05)
	}
	if got := point(t, gpu0, "hw.power", nil); got != 275.5 {
		t.Errorf("point(t, gpu0, \"hw.power\", nil): got %v, want %v", got, 275.5)
	}
	if got := point(t, gpu0, "hw.energy", nil); got != 123456.789 {
		t.Errorf("point(t, gpu0, \"hw.energy\", nil): got %v, want %v", got, 123456.789)
	}
	if got := point(t, gpu0, "hw.temperature", nil); got != 51.0 {
		t.Errorf("point(t, gpu0, \"hw.temperature\", nil): got %v, want %v", got, 51.0)
	}
	if got := point(t, gpu0, "hw.errors", map[string]any{"error.type": "corrected"}); got != 7.0 {
		t.Errorf("point(t, gpu0, \"hw.errors\", map[string]any{\"error.type\": \"corrected\"}): got %v, want %v", got, 7.0)
	}
	if got := point(t, gpu0, "hw.errors", map[string]any{"error.type": "uncorrected"}); got != 1.0 {
		t.Errorf("point(t, gpu0, \"hw.errors\", map[string]any{\"error.type\": \"uncorrected\"}): got %v, want %v", got, 1.0)
	}

	// The stub reports this test process as the GPU's compute process, so
	// the real /proc resolves it.
	self, ok := resourceWith(md, "process.pid", int64(os.Getpid()))
	if !ok {
		t.Fatalf("resourceWith: ok is false")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatalf("os.Executable: %v", err)
	}
	if got := resourceAttrs(self.Resource())["process.executable.name"]; !reflect.DeepEqual(got, filepath.Base(exe)) {
		t.Errorf("resourceAttrs(self.Resource())[\"process.executable.name\"]: got %v, want %q", got, filepath.Base(exe))
	}
	if got := point(t, self, "gpu.process.memory.usage", map[string]any{"hw.id": "GPU-5a17b0c2-0000-4000-8000-000000000000"}); got != float64(2*gib) {
		t.Errorf("point(t, self, \"gpu.process.memory.usage\", map[string]any{\"hw.id\": \"GPU-5a17b0c2-0000-4000-8000-000000000000\"}): got %v, want %v", got, float64(2*gib))
	}
	_, ok = findPoint(self, "gpu.process.utilization", nil)
	if ok {
		t.Errorf("the stub lacks nvmlDeviceGetProcessUtilization: not called, not reported (ok is true)")
	}

	// The event loop delivered the scripted XID 13 on GPU 1.
	for deadline := time.Now().Add(10 * time.Second); logs.LogRecordCount() < 1; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("logs.LogRecordCount(): got %d after 10s, want at least 1", logs.LogRecordCount())
		}
	}
	rl := logs.AllLogs()[0].ResourceLogs().At(0)
	id, _ := rl.Resource().Attributes().Get("hw.id")
	if got := id.Str(); got != "GPU-5a17b0c2-0000-4000-8000-000000000001" {
		t.Errorf("id.Str(): got %q, want %q", got, "GPU-5a17b0c2-0000-4000-8000-000000000001")
	}
	lr := rl.ScopeLogs().At(0).LogRecords().At(0)
	if got := lr.EventName(); got != "gpu.xid" {
		t.Errorf("lr.EventName(): got %q, want %q", got, "gpu.xid")
	}
	if got := lr.Attributes().AsRaw(); !reflect.DeepEqual(got, map[string]any{"gpu.xid.code": int64(13), "gpu.xid.description": xidDescription(13)}) {
		t.Errorf("lr.Attributes().AsRaw(): got %v, want %v", got, map[string]any{"gpu.xid.code": int64(13), "gpu.xid.description": xidDescription(13)})
	}

	if err := r.shutdown(context.Background()); err != nil {
		t.Fatalf("r.shutdown: %v", err)
	}
	calls, err := os.ReadFile(stubLog)
	if err != nil {
		t.Fatalf("os.ReadFile: %v", err)
	}
	if got := string(calls); got != "init\nshutdown\n" {
		t.Errorf("one nvmlInit, balanced by one nvmlShutdown: got %q, want %q", got, "init\nshutdown\n")
	}
}
