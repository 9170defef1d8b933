package nvmlreceiver

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh200"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componentstatus"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/receiver/receivertest"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/otelcol-ai/otelcol-ai/internal/procresource"
	"github.com/otelcol-ai/otelcol-ai/internal/sharedcomponent"
	"github.com/otelcol-ai/otelcol-ai/receiver/nvmlreceiver/internal/metadata"
	"github.com/otelcol-ai/otelcol-ai/receiver/nvmlreceiver/internal/podresources/podresourcestest"
)

const (
	containerID = "3f1b2c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f809"
	podUID      = "1a2b3c4d-5e6f-4a1b-8c9d-0e1f2a3b4c5d"
	podUIDUnder = "1a2b3c4d_5e6f_4a1b_8c9d_0e1f2a3b4c5d"
)

type testReceiver struct {
	*nvmlReceiver
	logs   *consumertest.LogsSink
	host   *statusHost
	logged *observer.ObservedLogs
}

// newTestReceiver builds a started receiver over a fake node. Each test gets
// its own library key so the process-wide registry does not mix tests.
func newTestReceiver(t *testing.T, node *fakeNode, mutate func(*Config)) *testReceiver {
	t.Helper()
	return newTestReceiverOn(t, node, &statusHost{}, mutate)
}

// newTestReceiverOn is newTestReceiver on a host of the test's (its
// extensions).
func newTestReceiverOn(t *testing.T, node *fakeNode, host *statusHost, mutate func(*Config)) *testReceiver {
	t.Helper()
	cfg := createDefaultConfig().(*Config)
	cfg.LibraryPath = "mock://" + t.Name()
	cfg.Processes.ProcRoot = t.TempDir()
	cfg.PodResources.Endpoint = ""
	if mutate != nil {
		mutate(cfg)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("cfg.Validate: %v", err)
	}
	core, logged := observer.New(zap.DebugLevel)
	set := receivertest.NewNopSettings(metadata.Type)
	set.ID = component.NewIDWithName(metadata.Type, strings.ReplaceAll(t.Name(), "/", "_"))
	set.Logger = zap.New(core)
	r, err := newNVMLReceiver(set, cfg, node.open)
	if err != nil {
		t.Fatalf("newNVMLReceiver: %v", err)
	}
	tr := &testReceiver{nvmlReceiver: r, logs: new(consumertest.LogsSink), host: host, logged: logged}
	r.setLogsConsumer(tr.logs)
	if err := r.start(context.Background(), tr.host); err != nil {
		t.Fatalf("r.start: %v", err)
	}
	t.Cleanup(func() {
		if err := r.shutdown(context.Background()); err != nil {
			t.Fatalf("r.shutdown: %v", err)
		}
		if got := libraries.refs(cfg.LibraryPath); got != 0 {
			t.Errorf("NVML released: got %v, want %v", got, 0)
		}
	})
	return tr
}

func (tr *testReceiver) scrapeOnce(t *testing.T) pmetric.Metrics {
	t.Helper()
	md, err := tr.scrape(context.Background())
	if err != nil {
		t.Fatalf("tr.scrape: %v", err)
	}
	return md
}

// resourceWith returns the resource metrics whose resource has key=value.
func resourceWith(md pmetric.Metrics, key string, value any) (pmetric.ResourceMetrics, bool) {
	for i := 0; i < md.ResourceMetrics().Len(); i++ {
		rm := md.ResourceMetrics().At(i)
		if v, ok := rm.Resource().Attributes().Get(key); ok && v.AsRaw() == value {
			return rm, true
		}
	}
	return pmetric.ResourceMetrics{}, false
}

// point returns the value of the data point of metric name whose attributes
// include attrs.
func point(t *testing.T, rm pmetric.ResourceMetrics, name string, attrs map[string]any) float64 {
	t.Helper()
	v, ok := findPoint(rm, name, attrs)
	if !ok {
		t.Fatalf("no %s point with %v (ok is false)", name, attrs)
	}
	return v
}

func findPoint(rm pmetric.ResourceMetrics, name string, attrs map[string]any) (float64, bool) {
	for i := 0; i < rm.ScopeMetrics().Len(); i++ {
		ms := rm.ScopeMetrics().At(i).Metrics()
		for j := 0; j < ms.Len(); j++ {
			m := ms.At(j)
			if m.Name() != name {
				continue
			}
			var dps pmetric.NumberDataPointSlice
			switch m.Type() {
			case pmetric.MetricTypeGauge:
				dps = m.Gauge().DataPoints()
			case pmetric.MetricTypeSum:
				dps = m.Sum().DataPoints()
			default:
				continue
			}
		next:
			for k := 0; k < dps.Len(); k++ {
				dp := dps.At(k)
				for ak, av := range attrs {
					v, ok := dp.Attributes().Get(ak)
					if !ok || v.AsRaw() != av {
						continue next
					}
				}
				if dp.ValueType() == pmetric.NumberDataPointValueTypeInt {
					return float64(dp.IntValue()), true
				}
				return dp.DoubleValue(), true
			}
		}
	}
	return 0, false
}

func resourceAttrs(r pcommon.Resource) map[string]any { return r.Attributes().AsRaw() }

func uuidOf(srv *server.Server, i int) string { return srv.Devices[i].(*server.Device).UUID }

// testNodeName is the node's name tests give through K8S_NODE_NAME, as the
// chart does from the downward API.
const testNodeName = "gpu-node-3"

func TestScrapeDevices(t *testing.T) {
	t.Setenv(procresource.EnvNodeName, testNodeName)
	srv := dgxh100.New()
	node := newFakeNode(t, srv)
	node.setProcess(0, 4242, 20*1024*mib)
	tr := newTestReceiver(t, node, nil)

	md := tr.scrapeOnce(t)
	gpu0, ok := resourceWith(md, "hw.id", uuidOf(srv, 0))
	if !ok {
		t.Fatalf("resourceWith: ok is false")
	}
	if got, want := resourceAttrs(gpu0.Resource()), map[string]any{
		"hw.id":             uuidOf(srv, 0),
		"hw.type":           "gpu",
		"hw.vendor":         "NVIDIA",
		"hw.model":          "NVIDIA H100 80GB HBM3",
		"hw.name":           "nvidia0",
		"hw.driver_version": "550.54.15",
		"gpu.index":         int64(0),
		"gpu.pci.bus_id":    "0000:00:00.0",
		"host.name":         testNodeName,
		"k8s.node.name":     testNodeName,
	}; !reflect.DeepEqual(got, want) {
		t.Errorf("resourceAttrs(gpu0.Resource()): got %v, want %v", got, want)
	}

	total := float64(81920 * mib)
	used := float64(20 * 1024 * mib)
	id := map[string]any{"hw.id": uuidOf(srv, 0)}
	gpuPoint := map[string]any{"hw.id": uuidOf(srv, 0), "hw.type": "gpu"}
	with := func(base map[string]any, k string, v any) map[string]any {
		out := map[string]any{k: v}
		for bk, bv := range base {
			out[bk] = bv
		}
		return out
	}
	if got := point(t, gpu0, "hw.gpu.memory.usage", id); got != used {
		t.Errorf("used bytes alone: no state attribute whose sum is the total: got %v, want %v", got, used)
	}
	if got := pointCount(gpu0, "hw.gpu.memory.usage"); got != 1 {
		t.Errorf("pointCount(gpu0, \"hw.gpu.memory.usage\"): got %v, want %v", got, 1)
	}
	if got := point(t, gpu0, "gpu.memory.reserved", id); got != float64(reservedBytes) {
		t.Errorf("point(t, gpu0, \"gpu.memory.reserved\", id): got %v, want %v", got, float64(reservedBytes))
	}
	if got := point(t, gpu0, "hw.gpu.memory.limit", id); got != total {
		t.Errorf("point(t, gpu0, \"hw.gpu.memory.limit\", id): got %v, want %v", got, total)
	}
	if got := point(t, gpu0, "hw.gpu.memory.utilization", id); !(math.Abs(used/total-got) <= 1e-12) {
		t.Errorf("point(t, gpu0, \"hw.gpu.memory.utilization\", id): got %v, want %v ± %v", got, used/total, 1e-12)
	}
	if got := point(t, gpu0, "hw.gpu.utilization", with(id, "hw.gpu.task", "general")); got != 0.5 {
		t.Errorf("mean of the samples since the last scrape, excluding the one already counted: got %v, want %v", got, 0.5)
	}
	if got := point(t, gpu0, "hw.gpu.utilization", with(id, "hw.gpu.task", "encoder")); got != 0.1 {
		t.Errorf("point(t, gpu0, \"hw.gpu.utilization\", with(id, \"hw.gpu.task\", \"encoder\")): got %v, want %v", got, 0.1)
	}
	_, hasDecoder := findPoint(gpu0, "hw.gpu.utilization", map[string]any{"hw.gpu.task": "decoder"})
	if hasDecoder {
		t.Errorf("decoder samples are not supported by this fake (hasDecoder is true)")
	}
	if got := point(t, gpu0, "hw.power", gpuPoint); got != 350.0 {
		t.Errorf("point(t, gpu0, \"hw.power\", gpuPoint): got %v, want %v", got, 350.0)
	}
	if got := point(t, gpu0, "hw.energy", gpuPoint); got != 1000.0 {
		t.Errorf("point(t, gpu0, \"hw.energy\", gpuPoint): got %v, want %v", got, 1000.0)
	}
	if got := point(t, gpu0, "hw.temperature", with(id, "hw.sensor_location", "gpu_die")); got != 40.0 {
		t.Errorf("point(t, gpu0, \"hw.temperature\", with(id, \"hw.sensor_location\", \"gpu_die\")): got %v, want %v", got, 40.0)
	}
	if got := point(t, gpu0, "hw.errors", with(gpuPoint, "error.type", "corrected")); got != 3.0 {
		t.Errorf("point(t, gpu0, \"hw.errors\", with(gpuPoint, \"error.type\", \"corrected\")): got %v, want %v", got, 3.0)
	}
	if got := point(t, gpu0, "hw.errors", with(gpuPoint, "error.type", "uncorrected")); got != 0.0 {
		t.Errorf("point(t, gpu0, \"hw.errors\", with(gpuPoint, \"error.type\", \"uncorrected\")): got %v, want %v", got, 0.0)
	}

	gpu7, ok := resourceWith(md, "hw.id", uuidOf(srv, 7))
	if !ok {
		t.Fatalf("resourceWith: ok is false")
	}
	if got := point(t, gpu7, "hw.power", nil); got != 357.0 {
		t.Errorf("point(t, gpu7, \"hw.power\", nil): got %v, want %v", got, 357.0)
	}
	if got := resourceAttrs(gpu7.Resource())["gpu.pci.bus_id"]; !reflect.DeepEqual(got, "0000:07:00.0") {
		t.Errorf("resourceAttrs(gpu7.Resource())[\"gpu.pci.bus_id\"]: got %v, want %q", got, "0000:07:00.0")
	}

	// Eight GPU resources plus one process.
	if got := md.ResourceMetrics().Len(); got != 9 {
		t.Errorf("md.ResourceMetrics().Len(): got %v, want %v", got, 9)
	}

	// A second scrape: NOT_SUPPORTED is remembered, not asked again.
	calls := node.decoderCalls.Load()
	node.advanceSamples()
	md = tr.scrapeOnce(t)
	if got := node.decoderCalls.Load(); got != calls {
		t.Errorf("node.decoderCalls.Load(): got %v, want %v", got, calls)
	}
	gpu0, _ = resourceWith(md, "hw.id", uuidOf(srv, 0))
	if got := point(t, gpu0, "hw.gpu.utilization", map[string]any{"hw.gpu.task": "general"}); got != 0.5 {
		t.Errorf("point(t, gpu0, \"hw.gpu.utilization\", map[string]any{\"hw.gpu.task\": \"general\"}): got %v, want %v", got, 0.5)
	}
}

func TestScrapeProcessesWithContainers(t *testing.T) {
	t.Setenv(procresource.EnvNodeName, testNodeName)
	srv := dgxh200.New()
	node := newFakeNode(t, srv)
	tr := newTestReceiver(t, node, nil)
	root := tr.cfg.Processes.ProcRoot
	writeProc(t, root, fakeProc{
		pid:     4242,
		exe:     "/usr/lib/jvm/java-21/bin/java",
		cmdline: "java\x00-jar\x00/app/inference.jar\x00",
		cgroup:  "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + podUIDUnder + ".slice/cri-containerd-" + containerID + ".scope\n",
		vpid:    1,
	})
	// pid 5000 holds memory on two GPUs; pid 6000 is not in our proc root
	// (another pid namespace): it is still reported, by pid alone.
	writeProc(t, root, fakeProc{pid: 5000, exe: "/usr/bin/python3.12", cmdline: "python3\x00serve.py\x00", cgroup: "0::/system.slice/docker-" + containerID + ".scope\n"})
	node.setProcess(0, 4242, 3*1024*mib)
	node.setProcess(1, 5000, 1024*mib)
	node.setProcess(2, 5000, 2048*mib)
	node.setProcess(3, 6000, 512*mib)

	md := tr.scrapeOnce(t)

	java, ok := resourceWith(md, "process.pid", int64(4242))
	if !ok {
		t.Fatalf("resourceWith: ok is false")
	}
	if got, want := resourceAttrs(java.Resource()), map[string]any{
		"process.pid":             int64(4242),
		"process.vpid":            int64(1),
		"process.executable.name": "java",
		"process.command_line":    "java -jar /app/inference.jar",
		"container.id":            containerID,
		"k8s.pod.uid":             podUID,
		"host.name":               testNodeName,
		"k8s.node.name":           testNodeName,
	}; !reflect.DeepEqual(got, want) {
		t.Errorf("resourceAttrs(java.Resource()): got %v, want %v", got, want)
	}
	if got := point(t, java, "gpu.process.memory.usage", map[string]any{"hw.id": uuidOf(srv, 0)}); got != float64(3*1024*mib) {
		t.Errorf("listed as compute and graphics, counted once: got %v, want %v", got, float64(3*1024*mib))
	}
	if got := point(t, java, "gpu.process.utilization", map[string]any{"hw.id": uuidOf(srv, 0)}); !(math.Abs(0.3-got) <= 1e-12) {
		t.Errorf("mean of the samples since the previous scrape: got %v, want %v ± %v", got, 0.3, 1e-12)
	}

	py, ok := resourceWith(md, "process.pid", int64(5000))
	if !ok {
		t.Fatalf("resourceWith: ok is false")
	}
	if got := point(t, py, "gpu.process.memory.usage", map[string]any{"hw.id": uuidOf(srv, 1)}); got != float64(1024*mib) {
		t.Errorf("point(t, py, \"gpu.process.memory.usage\", map[string]any{\"hw.id\": uuidOf(srv, 1)}): got %v, want %v", got, float64(1024*mib))
	}
	if got := point(t, py, "gpu.process.memory.usage", map[string]any{"hw.id": uuidOf(srv, 2)}); got != float64(2048*mib) {
		t.Errorf("point(t, py, \"gpu.process.memory.usage\", map[string]any{\"hw.id\": uuidOf(srv, 2)}): got %v, want %v", got, float64(2048*mib))
	}

	other, ok := resourceWith(md, "process.pid", int64(6000))
	if !ok {
		t.Fatalf("resourceWith: ok is false")
	}
	if got := resourceAttrs(other.Resource()); !reflect.DeepEqual(got, map[string]any{"process.pid": int64(6000), "host.name": testNodeName, "k8s.node.name": testNodeName}) {
		t.Errorf("a pid outside the proc root: the node's name and the pid, nothing read: got %v, want %v", got, map[string]any{"process.pid": int64(6000), "host.name": testNodeName, "k8s.node.name": testNodeName})
	}

	// pid 5000 exits: its series disappear from the next scrape.
	node.setProcess(1, 5000, 0)
	node.setProcess(2, 5000, 0)
	md = tr.scrapeOnce(t)
	_, ok = resourceWith(md, "process.pid", int64(5000))
	if ok {
		t.Errorf("resourceWith: ok is true")
	}
	_, ok = resourceWith(md, "process.pid", int64(4242))
	if !ok {
		t.Errorf("resourceWith: ok is false")
	}
}

func serveKubelet(t testing.TB, pods []*podresourcesv1.PodResources) string {
	return podresourcestest.Serve(t, pods)
}

func pod(ns, name, ctr string, ids ...string) *podresourcesv1.PodResources {
	return podresourcestest.Pod(ns, name, ctr, "nvidia.com/gpu", ids...)
}

func TestPodAttribution(t *testing.T) {
	srv := dgxh100.New()
	node := newFakeNode(t, srv)
	gpu0, gpu1 := uuidOf(srv, 0), uuidOf(srv, 1)
	endpoint := serveKubelet(t, []*podresourcesv1.PodResources{
		pod("inference", "triton-0", "triton", gpu0),
		// GPU 1 is time-sliced between two pods.
		pod("batch", "embedder-a", "app", gpu1+"::0"),
		pod("batch", "embedder-b", "app", gpu1+"::1"),
		// GPU 3 is shared by two containers of one pod.
		{Namespace: "inference", Name: "multi", Containers: []*podresourcesv1.ContainerResources{
			{Name: "encoder", Devices: []*podresourcesv1.ContainerDevices{{ResourceName: "nvidia.com/gpu", DeviceIds: []string{uuidOf(srv, 3) + "::0"}}}},
			{Name: "decoder", Devices: []*podresourcesv1.ContainerDevices{{ResourceName: "nvidia.com/gpu", DeviceIds: []string{uuidOf(srv, 3) + "::1"}}}},
		}},
	})
	tr := newTestReceiver(t, node, func(c *Config) { c.PodResources.Endpoint = endpoint })
	root := tr.cfg.Processes.ProcRoot
	writeProc(t, root, fakeProc{pid: 100, exe: "/opt/tritonserver/bin/tritonserver", environ: "HOSTNAME=triton-0\x00"})
	writeProc(t, root, fakeProc{pid: 200, exe: "/usr/bin/java", environ: "PATH=/bin\x00HOSTNAME=embedder-a\x00"})
	writeProc(t, root, fakeProc{pid: 300, exe: "/usr/bin/java", environ: "HOSTNAME=embedder-b\x00"})
	writeProc(t, root, fakeProc{pid: 400, exe: "/usr/bin/java"}) // environment unreadable
	writeProc(t, root, fakeProc{pid: 500, exe: "/usr/bin/python3"})
	node.setProcess(0, 100, 10*1024*mib)
	node.setProcess(1, 200, 1024*mib)
	node.setProcess(1, 300, 2048*mib)
	node.setProcess(1, 400, 512*mib)
	node.setProcess(2, 500, 256*mib)                                // GPU 2 is not allocated to any pod
	writeProc(t, root, fakeProc{pid: 600, exe: "/usr/bin/python3"}) // environment unreadable
	node.setProcess(3, 600, 128*mib)

	md := tr.scrapeOnce(t)
	tests := []struct {
		pid  int64
		want map[string]any // k8s.* attributes
	}{
		{100, map[string]any{"k8s.namespace.name": "inference", "k8s.pod.name": "triton-0", "k8s.container.name": "triton"}},
		{200, map[string]any{"k8s.namespace.name": "batch", "k8s.pod.name": "embedder-a", "k8s.container.name": "app"}},
		{300, map[string]any{"k8s.namespace.name": "batch", "k8s.pod.name": "embedder-b", "k8s.container.name": "app"}},
		{400, map[string]any{}},
		{500, map[string]any{}},
		{600, map[string]any{"k8s.namespace.name": "inference", "k8s.pod.name": "multi"}},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.pid), func(t *testing.T) {
			rm, ok := resourceWith(md, "process.pid", tt.pid)
			if !ok {
				t.Fatalf("resourceWith: ok is false")
			}
			got := map[string]any{}
			for k, v := range resourceAttrs(rm.Resource()) {
				if strings.HasPrefix(k, "k8s.") {
					got[k] = v
				}
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("k8s.* resource attributes: got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestPodResourcesSocketAbsent(t *testing.T) {
	srv := dgxh100.New()
	node := newFakeNode(t, srv)
	tr := newTestReceiver(t, node, func(c *Config) {
		c.PodResources.Endpoint = "unix://" + filepath.Join(t.TempDir(), "absent.sock")
	})
	node.setProcess(0, 100, mib)
	tr.scrapeOnce(t)
	tr.scrapeOnce(t)
	if got := tr.logged.FilterMessageSnippet("pod-resources socket not found").Len(); got != 1 {
		t.Errorf("said once: got %v, want %v", got, 1)
	}
}

func TestMIG(t *testing.T) {
	srv := dgxh200.New()
	node := newFakeNode(t, srv)
	d := srv.Devices[7].(*server.Device)
	ids := createMIGInstances(t, d, 2)
	node.migs[7] = []*fakeMIG{
		{uuid: "MIG-aaaa", instanceID: ids[0], total: 18 * 1024 * mib, used: 4 * 1024 * mib,
			processes: []nvml.ProcessInfo{{Pid: 700, UsedGpuMemory: 4 * 1024 * mib}}},
		{uuid: "MIG-bbbb", instanceID: ids[1], total: 18 * 1024 * mib, used: 0},
	}
	tr := newTestReceiver(t, node, nil)

	md := tr.scrapeOnce(t)
	rm, ok := resourceWith(md, "hw.id", d.UUID)
	if !ok {
		t.Fatalf("resourceWith: ok is false")
	}
	a := map[string]any{"gpu.mig.device.id": "MIG-aaaa", "gpu.mig.gpu_instance.id": int64(ids[0]), "gpu.mig.profile": "1g.18gb"}
	if got := point(t, rm, "gpu.mig.memory.limit", a); got != float64(18*1024*mib) {
		t.Errorf("point(t, rm, \"gpu.mig.memory.limit\", a): got %v, want %v", got, float64(18*1024*mib))
	}
	if got := point(t, rm, "gpu.mig.memory.usage", a); got != float64(4*1024*mib) {
		t.Errorf("point(t, rm, \"gpu.mig.memory.usage\", a): got %v, want %v", got, float64(4*1024*mib))
	}
	b := map[string]any{"gpu.mig.device.id": "MIG-bbbb"}
	if got := point(t, rm, "gpu.mig.memory.usage", b); got != 0.0 {
		t.Errorf("point(t, rm, \"gpu.mig.memory.usage\", b): got %v, want %v", got, 0.0)
	}
	if got := point(t, rm, "gpu.mig.memory.limit", b); got != float64(18*1024*mib) {
		t.Errorf("point(t, rm, \"gpu.mig.memory.limit\", b): got %v, want %v", got, float64(18*1024*mib))
	}

	proc, ok := resourceWith(md, "process.pid", int64(700))
	if !ok {
		t.Fatalf("resourceWith: ok is false")
	}
	if got := point(t, proc, "gpu.process.memory.usage", map[string]any{"hw.id": "MIG-aaaa"}); got != float64(4*1024*mib) {
		t.Errorf("a process on a MIG device is reported against the MIG device: got %v, want %v", got, float64(4*1024*mib))
	}
}

func TestLeakSuspicion(t *testing.T) {
	srv := dgxh100.New()
	node := newFakeNode(t, srv)
	tr := newTestReceiver(t, node, func(c *Config) {
		c.LeakDetection.Window = 5 * time.Minute
		c.LeakDetection.MinSamples = 5
	})
	clock := &fakeClock{t: time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC), step: 10 * time.Second}
	tr.now = clock.now
	writeProc(t, tr.cfg.Processes.ProcRoot, fakeProc{pid: 4242, exe: "/usr/bin/java"})

	// pid 4242 leaks 8 MiB per 10 s scrape on GPU 0; pid 5000 is steady on
	// GPU 1; pid 6000 is a caching allocator's sawtooth on GPU 2.
	for i := range 50 {
		node.setProcess(0, 4242, uint64(1024+8*i)*mib)
		node.setProcess(1, 5000, 4096*mib)
		node.setProcess(2, 6000, uint64(1024+(i%6)*512)*mib)
		tr.scrapeOnce(t)
	}

	var leaks []plog.LogRecord
	var resources []pcommon.Resource
	for _, ld := range tr.logs.AllLogs() {
		for i := 0; i < ld.ResourceLogs().Len(); i++ {
			rl := ld.ResourceLogs().At(i)
			lrs := rl.ScopeLogs().At(0).LogRecords()
			for j := 0; j < lrs.Len(); j++ {
				leaks = append(leaks, lrs.At(j))
				resources = append(resources, rl.Resource())
			}
		}
	}
	if got := len(leaks); got != 2 {
		t.Fatalf("onset, then once more after a window: got %d, want %d", got, 2)
	}
	lr := leaks[0]
	if got := lr.EventName(); got != "gpu.memory.leak_suspected" {
		t.Errorf("lr.EventName(): got %q, want %q", got, "gpu.memory.leak_suspected")
	}
	attrs := lr.Attributes().AsRaw()
	if got := attrs["hw.id"]; !reflect.DeepEqual(got, uuidOf(srv, 0)) {
		t.Errorf("attrs[\"hw.id\"]: got %v, want %q", got, uuidOf(srv, 0))
	}
	if got, ok := attrs["gpu.memory.growth_rate"].(float64); !ok || !(math.Abs(8*mib/10.0-got) <= 1) {
		t.Errorf("attrs[\"gpu.memory.growth_rate\"]: got %v, want %v ± %v", attrs["gpu.memory.growth_rate"], 8*mib/10.0, 1)
	}
	if got, ok := attrs["gpu.memory.floor_growth"].(int64); !ok || got < int64(32*mib) {
		t.Errorf("attrs[\"gpu.memory.floor_growth\"]: got %v, want >= %v", attrs["gpu.memory.floor_growth"], int64(32*mib))
	}
	if got, ok := attrs["gpu.memory.leak.window"].(float64); !ok || !(got >= 150.0) {
		t.Errorf("attrs[\"gpu.memory.leak.window\"]: got %v, want >= %v", attrs["gpu.memory.leak.window"], 150.0)
	}
	if got := resources[0].Attributes().AsRaw()["process.pid"]; !reflect.DeepEqual(got, int64(4242)) {
		t.Errorf("resources[0].Attributes().AsRaw()[\"process.pid\"]: got %v, want %v", got, int64(4242))
	}
	if got := resources[0].Attributes().AsRaw()["process.executable.name"]; !reflect.DeepEqual(got, "java") {
		t.Errorf("resources[0].Attributes().AsRaw()[\"process.executable.name\"]: got %v, want %q", got, "java")
	}
	if got := tr.logged.FilterMessage("GPU memory leak suspected").Len(); got != 2 {
		t.Errorf("tr.logged.FilterMessage(\"GPU memory leak suspected\").Len(): got %v, want %v", got, 2)
	}

	node.setProcess(0, 4242, (1024+8*50)*mib)
	md := tr.scrapeOnce(t)
	leaker, _ := resourceWith(md, "process.pid", int64(4242))
	if got := point(t, leaker, "gpu.process.memory.growth_rate", map[string]any{"hw.id": uuidOf(srv, 0)}); !(math.Abs(8*mib/10.0-got) <= 1) {
		t.Errorf("point(t, leaker, \"gpu.process.memory.growth_rate\", map[string]any{\"hw.id\": uuidOf(srv, 0)}): got %v, want %v ± %v", got, 8*mib/10.0, 1)
	}
	steady, _ := resourceWith(md, "process.pid", int64(5000))
	if got := point(t, steady, "gpu.process.memory.growth_rate", map[string]any{"hw.id": uuidOf(srv, 1)}); got != 0.0 {
		t.Errorf("point(t, steady, \"gpu.process.memory.growth_rate\", map[string]any{\"hw.id\": uuidOf(srv, 1)}): got %v, want %v", got, 0.0)
	}
}

func TestSoftDisableAndRetry(t *testing.T) {
	srv := dgxh100.New()
	node := newFakeNode(t, srv)
	node.initRet.Store(int32(nvml.ERROR_LIBRARY_NOT_FOUND))
	tr := newTestReceiver(t, node, func(c *Config) { c.InitRetryInterval = 5 * time.Millisecond })

	ev := tr.host.last()
	if ev == nil {
		t.Fatalf("ev: got nil, want non-nil")
	}
	if got := ev.Status(); got != componentstatus.StatusRecoverableError {
		t.Errorf("ev.Status(): got %v, want %v", got, componentstatus.StatusRecoverableError)
	}
	if err := ev.Err(); err == nil || !strings.Contains(err.Error(), "ERROR_LIBRARY_NOT_FOUND") {
		t.Errorf("ev.Err: got error %v, want one containing %q", err, "ERROR_LIBRARY_NOT_FOUND")
	}
	if err := ev.Err(); err == nil || !strings.Contains(err.Error(), "not installed on this host or not mounted") {
		t.Errorf("ev.Err: got error %v, want one containing %q", err, "not installed on this host or not mounted")
	}
	warn := tr.logged.FilterMessageSnippet("No NVIDIA driver library")
	if got := warn.Len(); got != 1 {
		t.Fatalf("warn.Len(): got %v, want %v", got, 1)
	}
	if got := warn.All()[0].Message; !strings.Contains(got, "On a GPU node it reports per-GPU memory") {
		t.Errorf("warn.All()[0].Message: got %q, want it to contain %q", got, "On a GPU node it reports per-GPU memory")
	}

	md := tr.scrapeOnce(t)
	if got := md.ResourceMetrics().Len(); got != 0 {
		t.Errorf("idle, not failing: got %v, want %v", got, 0)
	}

	// The driver appears (installed, or the container restarted with it).
	node.initRet.Store(int32(nvml.SUCCESS))
	for deadline := time.Now().Add(10 * time.Second); tr.session.Load() == nil; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("tr.session: still nil after 10s, want a session")
		}
	}
	if got := tr.host.last().Status(); got != componentstatus.StatusOK {
		t.Errorf("tr.host.last().Status(): got %v, want %v", got, componentstatus.StatusOK)
	}
	md = tr.scrapeOnce(t)
	if got := md.ResourceMetrics().Len(); got != 8 {
		t.Errorf("md.ResourceMetrics().Len(): got %v, want %v", got, 8)
	}
}

func TestSoftDisableWithoutDriverLibrary(t *testing.T) {
	// The real binding, pointed at a library that does not exist: the path
	// this receiver takes on any host without an NVIDIA driver.
	cfg := createDefaultConfig().(*Config)
	cfg.LibraryPath = filepath.Join(t.TempDir(), "libnvidia-ml.so.1")
	cfg.PodResources.Endpoint = ""
	core, logged := observer.New(zap.InfoLevel)
	set := receivertest.NewNopSettings(metadata.Type)
	set.Logger = zap.New(core)
	host := &statusHost{}
	rcv, err := NewFactory().CreateMetrics(context.Background(), set, cfg, consumertest.NewNop())
	if err != nil {
		t.Fatalf("NewFactory().CreateMetrics: %v", err)
	}
	if err := rcv.Start(context.Background(), host); err != nil {
		t.Fatalf("rcv.Start: %v", err)
	}
	if err := rcv.Shutdown(context.Background()); err != nil {
		t.Fatalf("rcv.Shutdown: %v", err)
	}

	ev := host.last()
	if ev == nil {
		t.Fatalf("ev: got nil, want non-nil")
	}
	if got := ev.Status(); got != componentstatus.StatusRecoverableError {
		t.Errorf("ev.Status(): got %v, want %v", got, componentstatus.StatusRecoverableError)
	}
	var ie *InitError
	if err := ev.Err(); !errors.As(err, &ie) {
		t.Fatalf("ev.Err: got error %v, want one of type %T", err, &ie)
	}
	if !ie.LibraryMissing() {
		t.Errorf("ie.LibraryMissing() is false")
	}
	if got := logged.FilterMessageSnippet("No NVIDIA driver library").Len(); got != 1 {
		t.Errorf("logged.FilterMessageSnippet(\"No NVIDIA driver library\").Len(): got %v, want %v", got, 1)
	}
}

func TestInitShutdownBalanced(t *testing.T) {
	srv := dgxh100.New()
	node := newFakeNode(t, srv)
	factory := newFactory(node.open)
	cfg := createDefaultConfig().(*Config)
	cfg.LibraryPath = "mock://" + t.Name()
	cfg.PodResources.Endpoint = ""
	host := &statusHost{}

	for round := range 3 {
		// Two receiver instances (two component IDs) on the same library,
		// each with a metrics and a logs face, started and stopped in an
		// interleaved order.
		var comps []component.Component
		for _, name := range []string{"a", "b"} {
			set := receivertest.NewNopSettings(metadata.Type)
			set.ID = component.NewIDWithName(metadata.Type, name)
			m, err := factory.CreateMetrics(context.Background(), set, cfg, consumertest.NewNop())
			if err != nil {
				t.Fatalf("factory.CreateMetrics: %v", err)
			}
			l, err := factory.CreateLogs(context.Background(), set, cfg, consumertest.NewNop())
			if err != nil {
				t.Fatalf("factory.CreateLogs: %v", err)
			}
			comps = append(comps, m, l)
		}
		for _, c := range comps {
			if err := c.Start(context.Background(), host); err != nil {
				t.Fatalf("c.Start: %v", err)
			}
		}
		if got := node.inits.Load(); got != int32(round+1) {
			t.Errorf("one Init per process, whatever the number of instances: got %v, want %v", got, int32(round+1))
		}
		if got := libraries.refs(cfg.LibraryPath); got != 2 {
			t.Errorf("libraries.refs(cfg.LibraryPath): got %v, want %v", got, 2)
		}
		for _, c := range comps {
			if err := c.Shutdown(context.Background()); err != nil {
				t.Fatalf("c.Shutdown: %v", err)
			}
			if err := c.Shutdown(context.Background()); err != nil {
				t.Fatalf("twice is safe: %v", err)
			}
		}
		if got := node.shutdowns.Load(); got != node.inits.Load() {
			t.Errorf("Shutdown balances Init: got %v, want %v", got, node.inits.Load())
		}
		if got := libraries.refs(cfg.LibraryPath); got != 0 {
			t.Errorf("libraries.refs(cfg.LibraryPath): got %v, want %v", got, 0)
		}
	}
	if got := node.eventSetsFreed.Load(); got != int32(6) {
		t.Errorf("each instance's event set freed, every round: got %v, want %v", got, int32(6))
	}
}

func TestSlowDeviceDoesNotStallOthers(t *testing.T) {
	srv := dgxh100.New()
	node := newFakeNode(t, srv)
	unblock := make(chan struct{})
	node.blockMem[3] = unblock
	tr := newTestReceiver(t, node, nil)
	t.Cleanup(func() { close(unblock) }) // runs before the receiver's shutdown

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	md, err := tr.scrape(ctx)
	if err != nil {
		t.Fatalf("tr.scrape: %v", err)
	}
	_, ok := resourceWith(md, "hw.id", uuidOf(srv, 3))
	if ok {
		t.Errorf("the stuck GPU is left out of this scrape (ok is true)")
	}
	for _, i := range []int{0, 1, 2, 4, 5, 6, 7} {
		_, ok := resourceWith(md, "hw.id", uuidOf(srv, i))
		if !ok {
			t.Errorf("GPU %d still reported (ok is false)", i)
		}
	}

	if got := tr.logged.FilterMessageSnippet("did not answer NVML within the scrape timeout").Len(); got != 1 {
		t.Errorf("tr.logged.FilterMessageSnippet(\"did not answer NVML within the scrape timeout\").Len(): got %v, want %v", got, 1)
	}

	// Next scrape: GPU 3 is still busy, so no second goroutine piles up, and
	// the GPU is not named again.
	md = tr.scrapeOnce(t)
	_, ok = resourceWith(md, "hw.id", uuidOf(srv, 3))
	if ok {
		t.Errorf("resourceWith: ok is true")
	}
	if got := tr.logged.FilterMessageSnippet("still busy").Len(); got != 0 {
		t.Errorf("tr.logged.FilterMessageSnippet(\"still busy\").Len(): got %v, want %v", got, 0)
	}
	for i := 0; i < md.ResourceMetrics().Len()-1; i++ {
		a, _ := md.ResourceMetrics().At(i).Resource().Attributes().Get("gpu.index")
		b, _ := md.ResourceMetrics().At(i + 1).Resource().Attributes().Get("gpu.index")
		if got := a.Int(); got >= b.Int() {
			t.Errorf("GPUs in index order: got %v, want < %v", got, b.Int())
		}
	}
}

func TestEvents(t *testing.T) {
	srv := dgxh100.New()
	node := newFakeNode(t, srv)
	tr := newTestReceiver(t, node, nil)
	dev0, dev5 := srv.Devices[0], srv.Devices[5]
	node.events <- nvml.EventData{Device: dev0, EventType: nvml.EventTypeXidCriticalError, EventData: 31}
	node.events <- nvml.EventData{Device: dev5, EventType: nvml.EventTypeDoubleBitEccError}
	node.events <- nvml.EventData{Device: dev0, EventType: nvml.EventTypeXidCriticalError, EventData: 79}
	for deadline := time.Now().Add(10 * time.Second); tr.logs.LogRecordCount() != 4; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("tr.logs.LogRecordCount(): got %d after 10s, want 4", tr.logs.LogRecordCount())
		}
	}

	type rec struct {
		event string
		hwID  string
		attrs map[string]any
	}
	var got []rec
	for _, ld := range tr.logs.AllLogs() {
		rl := ld.ResourceLogs().At(0)
		id, _ := rl.Resource().Attributes().Get("hw.id")
		lrs := rl.ScopeLogs().At(0).LogRecords()
		for j := 0; j < lrs.Len(); j++ {
			got = append(got, rec{lrs.At(j).EventName(), id.Str(), lrs.At(j).Attributes().AsRaw()})
		}
	}
	want := []rec{
		{"gpu.xid", uuidOf(srv, 0), map[string]any{"gpu.xid.code": int64(31), "gpu.xid.description": "GPU memory page fault (an application accessed an invalid address)"}},
		{"gpu.ecc", uuidOf(srv, 5), map[string]any{"error.type": "uncorrected"}},
		{"gpu.xid", uuidOf(srv, 0), map[string]any{"gpu.xid.code": int64(79), "gpu.xid.description": "GPU has fallen off the bus"}},
		{"gpu.device.lost", uuidOf(srv, 0), map[string]any{"gpu.nvml.return": "XID 79"}},
	}
	if !sameElements(got, want) {
		t.Errorf("log records: got %v, want %v in any order", got, want)
	}

	// The lost GPU is no longer scraped.
	md := tr.scrapeOnce(t)
	_, ok := resourceWith(md, "hw.id", uuidOf(srv, 0))
	if ok {
		t.Errorf("resourceWith: ok is true")
	}
	if got := md.ResourceMetrics().Len(); got != 7 {
		t.Errorf("md.ResourceMetrics().Len(): got %v, want %v", got, 7)
	}
}

func TestAverageSamples(t *testing.T) {
	tests := []struct {
		name     string
		samples  []nvml.Sample
		since    uint64
		wantAvg  float64
		wantLast uint64
		wantOK   bool
	}{
		{"none", nil, 5, 0, 5, false},
		{"only old", []nvml.Sample{uintSample(3, 90), uintSample(5, 90)}, 5, 0, 5, false},
		{"new after old", []nvml.Sample{uintSample(5, 90), uintSample(6, 20), uintSample(8, 40)}, 5, 30, 8, true},
		{"first scrape takes the buffer", []nvml.Sample{uintSample(1, 10), uintSample(2, 30)}, 0, 20, 2, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			avg, last, ok := averageSamples(nvml.VALUE_TYPE_UNSIGNED_INT, tt.samples, tt.since)
			if ok != tt.wantOK {
				t.Errorf("averageSamples: got %v, want %v", ok, tt.wantOK)
			}
			if avg != tt.wantAvg {
				t.Errorf("averageSamples: got %v, want %v", avg, tt.wantAvg)
			}
			if last != tt.wantLast {
				t.Errorf("averageSamples: got %v, want %v", last, tt.wantLast)
			}
		})
	}
}

func TestMIGProfileName(t *testing.T) {
	if got := migProfileName(nvml.GPU_INSTANCE_PROFILE_1_SLICE, nvml.GpuInstanceProfileInfo{SliceCount: 1, MemorySizeMB: 9856}); got != "1g.10gb" {
		t.Errorf("migProfileName(nvml.GPU_INSTANCE_PROFILE_1_SLICE, nvml.GpuInstanceProfileInfo{SliceCount: 1, MemorySizeMB: 9856}): got %q, want %q", got, "1g.10gb")
	}
	if got := migProfileName(nvml.GPU_INSTANCE_PROFILE_1_SLICE_REV1, nvml.GpuInstanceProfileInfo{SliceCount: 1, MemorySizeMB: 9856}); got != "1g.10gb+me" {
		t.Errorf("migProfileName(nvml.GPU_INSTANCE_PROFILE_1_SLICE_REV1, nvml.GpuInstanceProfileInfo{SliceCount: 1, MemorySizeMB: 9856}): got %q, want %q", got, "1g.10gb+me")
	}
	if got := migProfileName(nvml.GPU_INSTANCE_PROFILE_7_SLICE, nvml.GpuInstanceProfileInfo{SliceCount: 7, MemorySizeMB: 81920}); got != "7g.80gb" {
		t.Errorf("migProfileName(nvml.GPU_INSTANCE_PROFILE_7_SLICE, nvml.GpuInstanceProfileInfo{SliceCount: 7, MemorySizeMB: 81920}): got %q, want %q", got, "7g.80gb")
	}
}

func TestXIDDescription(t *testing.T) {
	if got := xidDescription(48); got != "double-bit ECC error (uncorrectable)" {
		t.Errorf("xidDescription(48): got %q, want %q", got, "double-bit ECC error (uncorrectable)")
	}
	if got := xidDescription(99999); got != "unknown XID" {
		t.Errorf("xidDescription(99999): got %q, want %q", got, "unknown XID")
	}
}

func TestUnsupportedCallsAskedAgainAfterMIGModeChange(t *testing.T) {
	srv := dgxh100.New()
	node := newFakeNode(t, srv)
	tr := newTestReceiver(t, node, nil)
	tr.scrapeOnce(t)
	asked := node.decoderCalls.Load()
	if asked != int32(8) {
		t.Errorf("each GPU asked once: got %v, want %v", asked, int32(8))
	}
	tr.scrapeOnce(t)
	if got := node.decoderCalls.Load(); got != asked {
		t.Errorf("NOT_SUPPORTED remembered: got %v, want %v", got, asked)
	}

	_, ret := srv.Devices[2].(*server.Device).SetMigMode(nvml.DEVICE_MIG_ENABLE)
	if ret != nvml.SUCCESS {
		t.Fatalf("srv.Devices[2].(*server.Device).SetMigMode: got %v, want %v", ret, nvml.SUCCESS)
	}
	tr.scrapeOnce(t) // sees the new mode
	tr.scrapeOnce(t)
	if got := node.decoderCalls.Load(); got != asked+1 {
		t.Errorf("GPU 2 asked again after its MIG mode changed: got %v, want %v", got, asked+1)
	}
}

func TestNotInHostPIDNamespace(t *testing.T) {
	t.Setenv(procresource.EnvNodeName, testNodeName)
	srv := dgxh100.New()
	node := newFakeNode(t, srv)
	node.setProcess(0, uint32(os.Getpid()), mib)
	cfg := createDefaultConfig().(*Config)
	cfg.LibraryPath = "mock://" + t.Name()
	cfg.PodResources.Endpoint = ""
	core, logged := observer.New(zap.InfoLevel)
	set := receivertest.NewNopSettings(metadata.Type)
	set.Logger = zap.New(core)
	r, err := newNVMLReceiver(set, cfg, node.open)
	if err != nil {
		t.Fatalf("newNVMLReceiver: %v", err)
	}
	r.hostPIDs = func() (bool, bool) { return false, true }
	if err := r.start(context.Background(), &statusHost{}); err != nil {
		t.Fatalf("r.start: %v", err)
	}
	defer func() {
		if err := r.shutdown(context.Background()); err != nil {
			t.Fatalf("r.shutdown: %v", err)
		}
	}()

	md, err := r.scrape(context.Background())
	if err != nil {
		t.Fatalf("r.scrape: %v", err)
	}
	rm, ok := resourceWith(md, "process.pid", int64(os.Getpid()))
	if !ok {
		t.Fatalf("resourceWith: ok is false")
	}
	if got := resourceAttrs(rm.Resource()); !reflect.DeepEqual(got, map[string]any{"process.pid": int64(os.Getpid()), "host.name": testNodeName, "k8s.node.name": testNodeName}) {
		t.Errorf("our /proc is another pid namespace: nothing is read from it: got %v, want %v", got, map[string]any{"process.pid": int64(os.Getpid()), "host.name": testNodeName, "k8s.node.name": testNodeName})
	}
	if got := logged.FilterMessageSnippet("not in the host's pid namespace").Len(); got != 1 {
		t.Errorf("logged.FilterMessageSnippet(\"not in the host's pid namespace\").Len(): got %v, want %v", got, 1)
	}
}

func TestMPSClientsSplitPerProcess(t *testing.T) {
	srv := dgxh100.New()
	node := newFakeNode(t, srv)
	// Under MPS the compute list shows the MPS server; the clients, each
	// with its own memory, are in the MPS list.
	node.setProcess(4, 900, 64*mib) // nvidia-cuda-mps-server
	node.mps[4] = []nvml.ProcessInfo{
		{Pid: 901, UsedGpuMemory: 3 * 1024 * mib},
		{Pid: 902, UsedGpuMemory: 5 * 1024 * mib},
	}
	tr := newTestReceiver(t, node, nil)
	md := tr.scrapeOnce(t)
	for pid, want := range map[int64]float64{900: 64 * mib, 901: 3 * 1024 * mib, 902: 5 * 1024 * mib} {
		rm, ok := resourceWith(md, "process.pid", pid)
		if !ok {
			t.Fatalf("pid %d (ok is false)", pid)
		}
		if got := point(t, rm, "gpu.process.memory.usage", map[string]any{"hw.id": uuidOf(srv, 4)}); got != want {
			t.Errorf("pid %d: got %v, want %v", pid, got, want)
		}
	}
}

// TestFacesShareOneCore: the metrics and logs faces of one component ID
// share one receiver; the logs pipeline, connected from CreateLogs on, is
// disconnected by the logs face's Shutdown even without Start, and the
// receiver runs while the metrics face does.
func TestFacesShareOneCore(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	cfg.LibraryPath = filepath.Join(t.TempDir(), "libnvidia-ml.so.1")
	cfg.PodResources.Endpoint = ""
	set := receivertest.NewNopSettings(metadata.Type)
	f := NewFactory()
	m, err := f.CreateMetrics(context.Background(), set, cfg, consumertest.NewNop())
	if err != nil {
		t.Fatalf("f.CreateMetrics: %v", err)
	}
	l, err := f.CreateLogs(context.Background(), set, cfg, consumertest.NewNop())
	if err != nil {
		t.Fatalf("f.CreateLogs: %v", err)
	}
	logs := l.(*sharedcomponent.Face[*nvmlReceiver])
	if !logs.Value().logs.IsOpen() {
		t.Errorf("logs connected at creation (logs.Value().logs.IsOpen() is false)")
	}

	if err := m.Start(context.Background(), &statusHost{}); err != nil {
		t.Fatalf("m.Start: %v", err)
	}
	if got := logs.Core().Started(); got != 1 {
		t.Errorf("logs.Core().Started(): got %v, want %v", got, 1)
	}
	if err := l.Shutdown(context.Background()); err != nil {
		t.Fatalf("l.Shutdown: %v", err)
	}
	if logs.Value().logs.IsOpen() {
		t.Errorf("logs disconnected by Shutdown without Start (logs.Value().logs.IsOpen() is true)")
	}
	if got := logs.Core().Started(); got != 1 {
		t.Errorf("the metrics face keeps the receiver running: got %v, want %v", got, 1)
	}

	if err := m.Shutdown(context.Background()); err != nil {
		t.Fatalf("m.Shutdown: %v", err)
	}
	if got := logs.Core().Started(); got != 0 {
		t.Errorf("logs.Core().Started(): got %v, want %v", got, 0)
	}
	l2, err := f.CreateLogs(context.Background(), set, cfg, consumertest.NewNop())
	if err != nil {
		t.Fatalf("f.CreateLogs: %v", err)
	}
	if l2.(*sharedcomponent.Face[*nvmlReceiver]).Value() == logs.Value() {
		t.Errorf("a new build gets a fresh receiver: got the same pointer %p, want a different one", l2.(*sharedcomponent.Face[*nvmlReceiver]).Value())
	}
	if err := l2.Shutdown(context.Background()); err != nil {
		t.Fatalf("l2.Shutdown: %v", err)
	}
}

// TestIdentityAttributesHaveSwitches: the identity attributes are generated
// resource attributes, each with its enabled switch.
func TestIdentityAttributesHaveSwitches(t *testing.T) {
	t.Setenv(procresource.EnvNodeName, testNodeName)
	srv := dgxh100.New()
	node := newFakeNode(t, srv)
	tr := newTestReceiver(t, node, func(cfg *Config) {
		cfg.ResourceAttributes.ProcessVpid.Enabled = false
		cfg.ResourceAttributes.HostName.Enabled = false
	})
	writeProc(t, tr.cfg.Processes.ProcRoot, fakeProc{
		pid: 4242, exe: "/usr/bin/java",
		cgroup: "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + podUIDUnder + ".slice/cri-containerd-" + containerID + ".scope\n",
		vpid:   1,
	})
	node.setProcess(0, 4242, mib)
	rm, ok := resourceWith(tr.scrapeOnce(t), "process.pid", int64(4242))
	if !ok {
		t.Fatalf("resourceWith: ok is false")
	}
	if got, want := resourceAttrs(rm.Resource()), map[string]any{
		"process.pid":             int64(4242),
		"process.executable.name": "java",
		"container.id":            containerID,
		"k8s.pod.uid":             podUID,
		"k8s.node.name":           testNodeName,
	}; !reflect.DeepEqual(got, want) {
		t.Errorf("resourceAttrs(rm.Resource()): got %v, want %v", got, want)
	}
}

// sameElements reports whether a and b hold the same elements, each as many
// times, in any order (elements compared with reflect.DeepEqual).
func sameElements[T any](a, b []T) bool {
	if len(a) != len(b) {
		return false
	}
	used := make([]bool, len(b))
next:
	for _, x := range a {
		for j, y := range b {
			if !used[j] && reflect.DeepEqual(x, y) {
				used[j] = true
				continue next
			}
		}
		return false
	}
	return true
}
