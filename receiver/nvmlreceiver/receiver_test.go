package nvmlreceiver

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh200"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
	cfg := createDefaultConfig().(*Config)
	cfg.LibraryPath = "mock://" + t.Name()
	cfg.Processes.ProcRoot = t.TempDir()
	cfg.PodResources.Endpoint = ""
	if mutate != nil {
		mutate(cfg)
	}
	require.NoError(t, cfg.Validate())
	core, logged := observer.New(zap.DebugLevel)
	set := receivertest.NewNopSettings(metadata.Type)
	set.ID = component.NewIDWithName(metadata.Type, strings.ReplaceAll(t.Name(), "/", "_"))
	set.Logger = zap.New(core)
	r, err := newNVMLReceiver(set, cfg, node.open)
	require.NoError(t, err)
	tr := &testReceiver{nvmlReceiver: r, logs: new(consumertest.LogsSink), host: &statusHost{}, logged: logged}
	r.setLogsConsumer(tr.logs)
	require.NoError(t, r.start(context.Background(), tr.host))
	t.Cleanup(func() {
		require.NoError(t, r.shutdown(context.Background()))
		assert.Equal(t, 0, libraries.refs(cfg.LibraryPath), "NVML released")
	})
	return tr
}

func (tr *testReceiver) scrapeOnce(t *testing.T) pmetric.Metrics {
	t.Helper()
	md, err := tr.scrape(context.Background())
	require.NoError(t, err)
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
	require.True(t, ok, "no %s point with %v", name, attrs)
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
	require.True(t, ok)
	assert.Equal(t, map[string]any{
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
	}, resourceAttrs(gpu0.Resource()))

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
	assert.Equal(t, used, point(t, gpu0, "hw.gpu.memory.usage", id), "used bytes alone: no state attribute whose sum is the total")
	assert.Equal(t, 1, pointCount(gpu0, "hw.gpu.memory.usage"))
	assert.Equal(t, float64(reservedBytes), point(t, gpu0, "gpu.memory.reserved", id))
	assert.Equal(t, total, point(t, gpu0, "hw.gpu.memory.limit", id))
	assert.InDelta(t, used/total, point(t, gpu0, "hw.gpu.memory.utilization", id), 1e-12)
	assert.Equal(t, 0.5, point(t, gpu0, "hw.gpu.utilization", with(id, "hw.gpu.task", "general")),
		"mean of the samples since the last scrape, excluding the one already counted")
	assert.Equal(t, 0.1, point(t, gpu0, "hw.gpu.utilization", with(id, "hw.gpu.task", "encoder")))
	_, hasDecoder := findPoint(gpu0, "hw.gpu.utilization", map[string]any{"hw.gpu.task": "decoder"})
	assert.False(t, hasDecoder, "decoder samples are not supported by this fake")
	assert.Equal(t, 350.0, point(t, gpu0, "hw.power", gpuPoint))
	assert.Equal(t, 1000.0, point(t, gpu0, "hw.energy", gpuPoint))
	assert.Equal(t, 40.0, point(t, gpu0, "hw.temperature", with(id, "hw.sensor_location", "gpu_die")))
	assert.Equal(t, 3.0, point(t, gpu0, "hw.errors", with(gpuPoint, "error.type", "corrected")))
	assert.Equal(t, 0.0, point(t, gpu0, "hw.errors", with(gpuPoint, "error.type", "uncorrected")))

	gpu7, ok := resourceWith(md, "hw.id", uuidOf(srv, 7))
	require.True(t, ok)
	assert.Equal(t, 357.0, point(t, gpu7, "hw.power", nil))
	assert.Equal(t, "0000:07:00.0", resourceAttrs(gpu7.Resource())["gpu.pci.bus_id"])

	// Eight GPU resources plus one process.
	assert.Equal(t, 9, md.ResourceMetrics().Len())

	// A second scrape: NOT_SUPPORTED is remembered, not asked again.
	calls := node.decoderCalls.Load()
	node.advanceSamples()
	md = tr.scrapeOnce(t)
	assert.Equal(t, calls, node.decoderCalls.Load())
	gpu0, _ = resourceWith(md, "hw.id", uuidOf(srv, 0))
	assert.Equal(t, 0.5, point(t, gpu0, "hw.gpu.utilization", map[string]any{"hw.gpu.task": "general"}))
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
	require.True(t, ok)
	assert.Equal(t, map[string]any{
		"process.pid":             int64(4242),
		"process.vpid":            int64(1),
		"process.executable.name": "java",
		"process.command_line":    "java -jar /app/inference.jar",
		"container.id":            containerID,
		"k8s.pod.uid":             podUID,
		"host.name":               testNodeName,
		"k8s.node.name":           testNodeName,
	}, resourceAttrs(java.Resource()))
	assert.Equal(t, float64(3*1024*mib), point(t, java, "gpu.process.memory.usage", map[string]any{"hw.id": uuidOf(srv, 0)}),
		"listed as compute and graphics, counted once")
	assert.InDelta(t, 0.3, point(t, java, "gpu.process.utilization", map[string]any{"hw.id": uuidOf(srv, 0)}), 1e-12,
		"mean of the samples since the previous scrape")

	py, ok := resourceWith(md, "process.pid", int64(5000))
	require.True(t, ok)
	assert.Equal(t, float64(1024*mib), point(t, py, "gpu.process.memory.usage", map[string]any{"hw.id": uuidOf(srv, 1)}))
	assert.Equal(t, float64(2048*mib), point(t, py, "gpu.process.memory.usage", map[string]any{"hw.id": uuidOf(srv, 2)}))

	other, ok := resourceWith(md, "process.pid", int64(6000))
	require.True(t, ok)
	assert.Equal(t, map[string]any{"process.pid": int64(6000), "host.name": testNodeName, "k8s.node.name": testNodeName}, resourceAttrs(other.Resource()),
		"a pid outside the proc root: the node's name and the pid, nothing read")

	// pid 5000 exits: its series disappear from the next scrape.
	node.setProcess(1, 5000, 0)
	node.setProcess(2, 5000, 0)
	md = tr.scrapeOnce(t)
	_, ok = resourceWith(md, "process.pid", int64(5000))
	assert.False(t, ok)
	_, ok = resourceWith(md, "process.pid", int64(4242))
	assert.True(t, ok)
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
			require.True(t, ok)
			got := map[string]any{}
			for k, v := range resourceAttrs(rm.Resource()) {
				if strings.HasPrefix(k, "k8s.") {
					got[k] = v
				}
			}
			assert.Equal(t, tt.want, got)
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
	assert.Equal(t, 1, tr.logged.FilterMessageSnippet("pod-resources socket not found").Len(), "said once")
}

func TestMIG(t *testing.T) {
	srv := dgxh200.New()
	node := newFakeNode(t, srv)
	d := srv.Devices[7].(*server.Device)
	_, ret := d.SetMigMode(nvml.DEVICE_MIG_ENABLE)
	require.Equal(t, nvml.SUCCESS, ret)
	profile, ret := d.GetGpuInstanceProfileInfo(nvml.GPU_INSTANCE_PROFILE_1_SLICE)
	require.Equal(t, nvml.SUCCESS, ret)
	var ids []int
	for range 2 {
		gi, ret := d.CreateGpuInstance(&profile)
		require.Equal(t, nvml.SUCCESS, ret)
		info, _ := gi.GetInfo()
		ids = append(ids, int(info.Id))
	}
	node.migs[7] = []*fakeMIG{
		{uuid: "MIG-aaaa", instanceID: ids[0], total: 18 * 1024 * mib, used: 4 * 1024 * mib,
			processes: []nvml.ProcessInfo{{Pid: 700, UsedGpuMemory: 4 * 1024 * mib}}},
		{uuid: "MIG-bbbb", instanceID: ids[1], total: 18 * 1024 * mib, used: 0},
	}
	tr := newTestReceiver(t, node, nil)

	md := tr.scrapeOnce(t)
	rm, ok := resourceWith(md, "hw.id", d.UUID)
	require.True(t, ok)
	a := map[string]any{"gpu.mig.device.id": "MIG-aaaa", "gpu.mig.gpu_instance.id": int64(ids[0]), "gpu.mig.profile": "1g.18gb"}
	assert.Equal(t, float64(18*1024*mib), point(t, rm, "gpu.mig.memory.limit", a))
	assert.Equal(t, float64(4*1024*mib), point(t, rm, "gpu.mig.memory.usage", a))
	b := map[string]any{"gpu.mig.device.id": "MIG-bbbb"}
	assert.Equal(t, 0.0, point(t, rm, "gpu.mig.memory.usage", b))
	assert.Equal(t, float64(18*1024*mib), point(t, rm, "gpu.mig.memory.limit", b))

	proc, ok := resourceWith(md, "process.pid", int64(700))
	require.True(t, ok)
	assert.Equal(t, float64(4*1024*mib), point(t, proc, "gpu.process.memory.usage", map[string]any{"hw.id": "MIG-aaaa"}),
		"a process on a MIG device is reported against the MIG device")
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
	require.Len(t, leaks, 2, "onset, then once more after a window")
	lr := leaks[0]
	assert.Equal(t, "gpu.memory.leak_suspected", lr.EventName())
	attrs := lr.Attributes().AsRaw()
	assert.Equal(t, uuidOf(srv, 0), attrs["hw.id"])
	assert.InDelta(t, 8*mib/10.0, attrs["gpu.memory.growth_rate"], 1)
	assert.GreaterOrEqual(t, attrs["gpu.memory.floor_growth"], int64(32*mib))
	assert.GreaterOrEqual(t, attrs["gpu.memory.leak.window"], 150.0)
	assert.Equal(t, int64(4242), resources[0].Attributes().AsRaw()["process.pid"])
	assert.Equal(t, "java", resources[0].Attributes().AsRaw()["process.executable.name"])
	assert.Equal(t, 2, tr.logged.FilterMessage("GPU memory leak suspected").Len())

	node.setProcess(0, 4242, (1024+8*50)*mib)
	md := tr.scrapeOnce(t)
	leaker, _ := resourceWith(md, "process.pid", int64(4242))
	assert.InDelta(t, 8*mib/10.0, point(t, leaker, "gpu.process.memory.growth_rate", map[string]any{"hw.id": uuidOf(srv, 0)}), 1)
	steady, _ := resourceWith(md, "process.pid", int64(5000))
	assert.Equal(t, 0.0, point(t, steady, "gpu.process.memory.growth_rate", map[string]any{"hw.id": uuidOf(srv, 1)}))
}

func TestSoftDisableAndRetry(t *testing.T) {
	srv := dgxh100.New()
	node := newFakeNode(t, srv)
	node.initRet.Store(int32(nvml.ERROR_LIBRARY_NOT_FOUND))
	tr := newTestReceiver(t, node, func(c *Config) { c.InitRetryInterval = 5 * time.Millisecond })

	ev := tr.host.last()
	require.NotNil(t, ev)
	assert.Equal(t, componentstatus.StatusRecoverableError, ev.Status())
	assert.ErrorContains(t, ev.Err(), "ERROR_LIBRARY_NOT_FOUND")
	assert.ErrorContains(t, ev.Err(), "not installed on this host or not mounted")
	warn := tr.logged.FilterMessageSnippet("No NVIDIA driver library")
	require.Equal(t, 1, warn.Len())
	assert.Contains(t, warn.All()[0].Message, "On a GPU node it reports per-GPU memory")

	md := tr.scrapeOnce(t)
	assert.Equal(t, 0, md.ResourceMetrics().Len(), "idle, not failing")

	// The driver appears (installed, or the container restarted with it).
	node.initRet.Store(int32(nvml.SUCCESS))
	require.Eventually(t, func() bool { return tr.session.Load() != nil }, 10*time.Second, time.Millisecond)
	assert.Equal(t, componentstatus.StatusOK, tr.host.last().Status())
	md = tr.scrapeOnce(t)
	assert.Equal(t, 8, md.ResourceMetrics().Len())
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
	require.NoError(t, err)
	require.NoError(t, rcv.Start(context.Background(), host))
	require.NoError(t, rcv.Shutdown(context.Background()))

	ev := host.last()
	require.NotNil(t, ev)
	assert.Equal(t, componentstatus.StatusRecoverableError, ev.Status())
	var ie *InitError
	require.ErrorAs(t, ev.Err(), &ie)
	assert.True(t, ie.LibraryMissing())
	assert.Equal(t, 1, logged.FilterMessageSnippet("No NVIDIA driver library").Len())
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
			require.NoError(t, err)
			l, err := factory.CreateLogs(context.Background(), set, cfg, consumertest.NewNop())
			require.NoError(t, err)
			comps = append(comps, m, l)
		}
		for _, c := range comps {
			require.NoError(t, c.Start(context.Background(), host))
		}
		assert.Equal(t, int32(round+1), node.inits.Load(), "one Init per process, whatever the number of instances")
		assert.Equal(t, 2, libraries.refs(cfg.LibraryPath))
		for _, c := range comps {
			require.NoError(t, c.Shutdown(context.Background()))
			require.NoError(t, c.Shutdown(context.Background()), "twice is safe")
		}
		assert.Equal(t, node.inits.Load(), node.shutdowns.Load(), "Shutdown balances Init")
		assert.Equal(t, 0, libraries.refs(cfg.LibraryPath))
	}
	assert.Equal(t, int32(6), node.eventSetsFreed.Load(), "each instance's event set freed, every round")
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
	require.NoError(t, err)
	_, ok := resourceWith(md, "hw.id", uuidOf(srv, 3))
	assert.False(t, ok, "the stuck GPU is left out of this scrape")
	for _, i := range []int{0, 1, 2, 4, 5, 6, 7} {
		_, ok := resourceWith(md, "hw.id", uuidOf(srv, i))
		assert.True(t, ok, "GPU %d still reported", i)
	}

	assert.Equal(t, 1, tr.logged.FilterMessageSnippet("did not answer NVML within the scrape timeout").Len())

	// Next scrape: GPU 3 is still busy, so no second goroutine piles up, and
	// the GPU is not named again.
	md = tr.scrapeOnce(t)
	_, ok = resourceWith(md, "hw.id", uuidOf(srv, 3))
	assert.False(t, ok)
	assert.Equal(t, 0, tr.logged.FilterMessageSnippet("still busy").Len())
	for i := 0; i < md.ResourceMetrics().Len()-1; i++ {
		a, _ := md.ResourceMetrics().At(i).Resource().Attributes().Get("gpu.index")
		b, _ := md.ResourceMetrics().At(i + 1).Resource().Attributes().Get("gpu.index")
		assert.Less(t, a.Int(), b.Int(), "GPUs in index order")
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
	require.Eventually(t, func() bool { return tr.logs.LogRecordCount() == 4 }, 10*time.Second, time.Millisecond)

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
	assert.ElementsMatch(t, []rec{
		{"gpu.xid", uuidOf(srv, 0), map[string]any{"gpu.xid.code": int64(31), "gpu.xid.description": "GPU memory page fault (an application accessed an invalid address)"}},
		{"gpu.ecc", uuidOf(srv, 5), map[string]any{"error.type": "uncorrected"}},
		{"gpu.xid", uuidOf(srv, 0), map[string]any{"gpu.xid.code": int64(79), "gpu.xid.description": "GPU has fallen off the bus"}},
		{"gpu.device.lost", uuidOf(srv, 0), map[string]any{"gpu.nvml.return": "XID 79"}},
	}, got)

	// The lost GPU is no longer scraped.
	md := tr.scrapeOnce(t)
	_, ok := resourceWith(md, "hw.id", uuidOf(srv, 0))
	assert.False(t, ok)
	assert.Equal(t, 7, md.ResourceMetrics().Len())
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
			assert.Equal(t, tt.wantOK, ok)
			assert.Equal(t, tt.wantAvg, avg)
			assert.Equal(t, tt.wantLast, last)
		})
	}
}

func TestMIGProfileName(t *testing.T) {
	assert.Equal(t, "1g.10gb", migProfileName(nvml.GPU_INSTANCE_PROFILE_1_SLICE, nvml.GpuInstanceProfileInfo{SliceCount: 1, MemorySizeMB: 9856}))
	assert.Equal(t, "1g.10gb+me", migProfileName(nvml.GPU_INSTANCE_PROFILE_1_SLICE_REV1, nvml.GpuInstanceProfileInfo{SliceCount: 1, MemorySizeMB: 9856}))
	assert.Equal(t, "7g.80gb", migProfileName(nvml.GPU_INSTANCE_PROFILE_7_SLICE, nvml.GpuInstanceProfileInfo{SliceCount: 7, MemorySizeMB: 81920}))
}

func TestXIDDescription(t *testing.T) {
	assert.Equal(t, "double-bit ECC error (uncorrectable)", xidDescription(48))
	assert.Equal(t, "unknown XID", xidDescription(99999))
}

func TestUnsupportedCallsAskedAgainAfterMIGModeChange(t *testing.T) {
	srv := dgxh100.New()
	node := newFakeNode(t, srv)
	tr := newTestReceiver(t, node, nil)
	tr.scrapeOnce(t)
	asked := node.decoderCalls.Load()
	assert.Equal(t, int32(8), asked, "each GPU asked once")
	tr.scrapeOnce(t)
	assert.Equal(t, asked, node.decoderCalls.Load(), "NOT_SUPPORTED remembered")

	_, ret := srv.Devices[2].(*server.Device).SetMigMode(nvml.DEVICE_MIG_ENABLE)
	require.Equal(t, nvml.SUCCESS, ret)
	tr.scrapeOnce(t) // sees the new mode
	tr.scrapeOnce(t)
	assert.Equal(t, asked+1, node.decoderCalls.Load(), "GPU 2 asked again after its MIG mode changed")
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
	require.NoError(t, err)
	r.hostPIDs = func() (bool, bool) { return false, true }
	require.NoError(t, r.start(context.Background(), &statusHost{}))
	defer func() { require.NoError(t, r.shutdown(context.Background())) }()

	md, err := r.scrape(context.Background())
	require.NoError(t, err)
	rm, ok := resourceWith(md, "process.pid", int64(os.Getpid()))
	require.True(t, ok)
	assert.Equal(t, map[string]any{"process.pid": int64(os.Getpid()), "host.name": testNodeName, "k8s.node.name": testNodeName}, resourceAttrs(rm.Resource()),
		"our /proc is another pid namespace: nothing is read from it")
	assert.Equal(t, 1, logged.FilterMessageSnippet("not in the host's pid namespace").Len())
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
		require.True(t, ok, "pid %d", pid)
		assert.Equal(t, want, point(t, rm, "gpu.process.memory.usage", map[string]any{"hw.id": uuidOf(srv, 4)}), "pid %d", pid)
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
	require.NoError(t, err)
	l, err := f.CreateLogs(context.Background(), set, cfg, consumertest.NewNop())
	require.NoError(t, err)
	logs := l.(*sharedcomponent.Face[*nvmlReceiver])
	assert.True(t, logs.Value().logs.IsOpen(), "logs connected at creation")

	require.NoError(t, m.Start(context.Background(), &statusHost{}))
	assert.Equal(t, 1, logs.Core().Started())
	require.NoError(t, l.Shutdown(context.Background()))
	assert.False(t, logs.Value().logs.IsOpen(), "logs disconnected by Shutdown without Start")
	assert.Equal(t, 1, logs.Core().Started(), "the metrics face keeps the receiver running")

	require.NoError(t, m.Shutdown(context.Background()))
	assert.Equal(t, 0, logs.Core().Started())
	l2, err := f.CreateLogs(context.Background(), set, cfg, consumertest.NewNop())
	require.NoError(t, err)
	assert.NotSame(t, logs.Value(), l2.(*sharedcomponent.Face[*nvmlReceiver]).Value(), "a new build gets a fresh receiver")
	require.NoError(t, l2.Shutdown(context.Background()))
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
	require.True(t, ok)
	assert.Equal(t, map[string]any{
		"process.pid":             int64(4242),
		"process.executable.name": "java",
		"container.id":            containerID,
		"k8s.pod.uid":             podUID,
		"k8s.node.name":           testNodeName,
	}, resourceAttrs(rm.Resource()))
}
