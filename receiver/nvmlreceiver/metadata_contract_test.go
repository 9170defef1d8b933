package nvmlreceiver

import (
	"slices"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh200"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/otelcol-ai/otelcol-ai/internal/declaredtest"
)

// TestEmittedMetricsAreDeclared drives the receiver over a DGX H200 mock
// (one GPU in MIG mode with a process on a MIG device, processes on whole
// GPUs with per-process samples, a leaking process so that the growth rate
// is reported) and checks every emitted metric against metadata.yaml:
// nothing emitted is undeclared or declared differently, and every
// declared metric was emitted.
func TestEmittedMetricsAreDeclared(t *testing.T) {
	srv := dgxh200.New()
	node := newFakeNode(t, srv)
	d := srv.Devices[7].(*server.Device)
	ids := createMIGInstances(t, d, 1)
	node.migs[7] = []*fakeMIG{{uuid: "MIG-aaaa", instanceID: ids[0], total: 18 * 1024 * mib, used: 4 * 1024 * mib,
		processes: []nvml.ProcessInfo{{Pid: 700, UsedGpuMemory: 4 * 1024 * mib}}}}

	tr := newTestReceiver(t, node, func(c *Config) {
		c.LeakDetection.Window = time.Minute
		c.LeakDetection.MinSamples = 3
	})
	clock := &fakeClock{t: time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC), step: 10 * time.Second}
	tr.now = clock.now
	writeProc(t, tr.cfg.Processes.ProcRoot, fakeProc{pid: 4242, exe: "/usr/bin/python3.12", cmdline: "python3\x00serve.py\x00",
		cgroup: "0::/kubepods.slice/kubepods-pod" + podUIDUnder + ".slice/cri-containerd-" + containerID + ".scope\n", vpid: 1})

	decl := declaredtest.Read(t)
	seen := map[string]bool{}
	for i := range 6 {
		node.setProcess(0, 4242, uint64(1024+64*i)*mib)
		node.setProcess(1, 5000, 2048*mib)
		node.advanceSamples()
		for name := range decl.Check(t, tr.scrapeOnce(t), nil) {
			seen[name] = true
		}
	}
	missing := slices.DeleteFunc(decl.Names(nil), func(name string) bool { return seen[name] })
	if len(missing) != 0 {
		t.Errorf("declared in metadata.yaml but never emitted: got %v, want empty", missing)
	}
}

// pointCount is the number of points of metric name on rm.
func pointCount(rm pmetric.ResourceMetrics, name string) int {
	n := 0
	for i := range rm.ScopeMetrics().Len() {
		ms := rm.ScopeMetrics().At(i).Metrics()
		for j := range ms.Len() {
			if m := ms.At(j); m.Name() == name {
				switch m.Type() {
				case pmetric.MetricTypeGauge:
					n += m.Gauge().DataPoints().Len()
				case pmetric.MetricTypeSum:
					n += m.Sum().DataPoints().Len()
				}
			}
		}
	}
	return n
}
