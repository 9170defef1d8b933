package nvmlreceiver

import (
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componentstatus"
)

const (
	mib           = 1 << 20
	reservedBytes = 512 * mib
)

// fakeNode scripts what a mock NVML server answers beyond what go-nvml's
// dgx mocks implement: memory info v2, utilization samples, power, energy,
// temperature, ECC counters, running processes, MIG device handles and
// events. Tests change the script between scrapes through its methods.
type fakeNode struct {
	srv *server.Server

	mu        sync.Mutex
	used      map[int]uint64             // device index → framebuffer used
	processes map[int][]nvml.ProcessInfo // device index → compute processes
	mps       map[int][]nvml.ProcessInfo // device index → MPS client processes
	migs      map[int][]*fakeMIG         // device index → MIG devices
	sampleTS  uint64                     // newest sample timestamp, µs
	blockMem  map[int]chan struct{}      // device index → blocks GetMemoryInfo_v2 until closed

	inits, shutdowns atomic.Int32
	initRet          atomic.Int32 // nvml.Return answered by Init
	decoderCalls     atomic.Int32
	events           chan nvml.EventData
	eventSetsFreed   atomic.Int32
}

// fakeMIG is one MIG device of a fake GPU.
type fakeMIG struct {
	uuid       string
	instanceID int
	total      uint64
	used       uint64
	processes  []nvml.ProcessInfo
}

func newFakeNode(t testing.TB, srv *server.Server) *fakeNode {
	t.Helper()
	n := &fakeNode{
		srv:       srv,
		used:      map[int]uint64{},
		processes: map[int][]nvml.ProcessInfo{},
		mps:       map[int][]nvml.ProcessInfo{},
		migs:      map[int][]*fakeMIG{},
		blockMem:  map[int]chan struct{}{},
		sampleTS:  1_000_000,
		events:    make(chan nvml.EventData, 16),
	}
	srv.InitFunc = func() nvml.Return {
		n.inits.Add(1)
		return nvml.Return(n.initRet.Load())
	}
	srv.ShutdownFunc = func() nvml.Return {
		n.shutdowns.Add(1)
		return nvml.SUCCESS
	}
	srv.EventSetCreateFunc = func() (nvml.EventSet, nvml.Return) {
		return &mock.EventSet{
			WaitFunc: func(uint32) (nvml.EventData, nvml.Return) {
				select {
				case e := <-n.events:
					return e, nvml.SUCCESS
				case <-time.After(2 * time.Millisecond):
					return nvml.EventData{}, nvml.ERROR_TIMEOUT
				}
			},
			FreeFunc: func() nvml.Return {
				n.eventSetsFreed.Add(1)
				return nvml.SUCCESS
			},
		}, nvml.SUCCESS
	}
	for i, d := range srv.Devices {
		n.script(i, d.(*server.Device))
	}
	return n
}

func (n *fakeNode) script(i int, d *server.Device) {
	d.GetPciInfoFunc = func() (nvml.PciInfo, nvml.Return) {
		p := nvml.PciInfo{PciDeviceId: d.Config.PciDeviceId, Bus: uint32(i)}
		for j, c := range d.PciBusID {
			p.BusId[j] = int8(c)
		}
		return p, nvml.SUCCESS
	}
	d.GetMemoryInfo_v2Func = func() (nvml.Memory_v2, nvml.Return) {
		n.mu.Lock()
		block := n.blockMem[i]
		n.mu.Unlock()
		if block != nil {
			<-block
		}
		n.mu.Lock()
		defer n.mu.Unlock()
		total := d.MemoryInfo.Total
		used := n.used[i]
		return nvml.Memory_v2{Total: total, Reserved: reservedBytes, Used: used, Free: total - reservedBytes - used}, nvml.SUCCESS
	}
	d.GetSamplesFunc = func(typ nvml.SamplingType, since uint64) (nvml.ValueType, []nvml.Sample, nvml.Return) {
		n.mu.Lock()
		newest := n.sampleTS
		n.mu.Unlock()
		var values []uint32
		switch typ {
		case nvml.GPU_UTILIZATION_SAMPLES:
			values = []uint32{40, 60} // average 50 %
		case nvml.ENC_UTILIZATION_SAMPLES:
			values = []uint32{10, 10}
		default:
			n.decoderCalls.Add(1)
			return 0, nil, nvml.ERROR_NOT_SUPPORTED
		}
		// NVML returns its whole ring buffer; the sample at `since` was
		// already counted last time and must not be counted again.
		out := []nvml.Sample{uintSample(since, 100)}
		for k, v := range values {
			out = append(out, uintSample(newest-uint64(len(values)-1-k), v))
		}
		return nvml.VALUE_TYPE_UNSIGNED_INT, out, nvml.SUCCESS
	}
	d.GetPowerUsageFunc = func() (uint32, nvml.Return) { return 350_000 + uint32(i)*1000, nvml.SUCCESS }
	d.GetTotalEnergyConsumptionFunc = func() (uint64, nvml.Return) { return 1_000_000 * uint64(i+1), nvml.SUCCESS }
	d.GetTemperatureFunc = func(nvml.TemperatureSensors) (uint32, nvml.Return) { return 40 + uint32(i), nvml.SUCCESS }
	d.GetTotalEccErrorsFunc = func(typ nvml.MemoryErrorType, _ nvml.EccCounterType) (uint64, nvml.Return) {
		if typ == nvml.MEMORY_ERROR_TYPE_CORRECTED {
			return 3, nvml.SUCCESS
		}
		return 0, nvml.SUCCESS
	}
	d.GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) {
		n.mu.Lock()
		defer n.mu.Unlock()
		return append([]nvml.ProcessInfo(nil), n.processes[i]...), nvml.SUCCESS
	}
	d.GetMPSComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) {
		n.mu.Lock()
		defer n.mu.Unlock()
		return append([]nvml.ProcessInfo(nil), n.mps[i]...), nvml.SUCCESS
	}
	d.GetGraphicsRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) {
		n.mu.Lock()
		defer n.mu.Unlock()
		// A process with a graphics context too is listed in both.
		if ps := n.processes[i]; len(ps) > 0 {
			return []nvml.ProcessInfo{ps[0]}, nvml.SUCCESS
		}
		return nil, nvml.SUCCESS
	}
	d.GetProcessUtilizationFunc = func(since uint64) ([]nvml.ProcessUtilizationSample, nvml.Return) {
		n.mu.Lock()
		defer n.mu.Unlock()
		ps := n.processes[i]
		if len(ps) == 0 {
			return nil, nvml.ERROR_NOT_FOUND
		}
		// Each process: an already-counted sample at `since`, then two new
		// ones at 20 % and 40 % SM time (mean 30 %).
		var out []nvml.ProcessUtilizationSample
		for _, p := range ps {
			out = append(out,
				nvml.ProcessUtilizationSample{Pid: p.Pid, TimeStamp: since, SmUtil: 100},
				nvml.ProcessUtilizationSample{Pid: p.Pid, TimeStamp: n.sampleTS - 1, SmUtil: 20},
				nvml.ProcessUtilizationSample{Pid: p.Pid, TimeStamp: n.sampleTS, SmUtil: 40})
		}
		return out, nvml.SUCCESS
	}
	d.GetMaxMigDeviceCountFunc = func() (int, nvml.Return) { return 7, nvml.SUCCESS }
	d.GetMigDeviceHandleByIndexFunc = func(k int) (nvml.Device, nvml.Return) {
		n.mu.Lock()
		defer n.mu.Unlock()
		if k >= len(n.migs[i]) {
			return nil, nvml.ERROR_NOT_FOUND
		}
		return n.migDevice(n.migs[i][k]), nvml.SUCCESS
	}
	d.GetGpuInstanceByIdFunc = func(id int) (nvml.GpuInstance, nvml.Return) {
		d.RLock()
		defer d.RUnlock()
		for gi := range d.GpuInstances {
			if int(gi.Info.Id) == id {
				return gi, nvml.SUCCESS
			}
		}
		return nil, nvml.ERROR_NOT_FOUND
	}
	d.GetSupportedEventTypesFunc = func() (uint64, nvml.Return) { return nvml.EventTypeAll, nvml.SUCCESS }
	d.RegisterEventsFunc = func(uint64, nvml.EventSet) nvml.Return { return nvml.SUCCESS }
}

func (n *fakeNode) migDevice(m *fakeMIG) nvml.Device {
	return &mock.Device{
		GetUUIDFunc:          func() (string, nvml.Return) { return m.uuid, nvml.SUCCESS },
		GetGpuInstanceIdFunc: func() (int, nvml.Return) { return m.instanceID, nvml.SUCCESS },
		GetMemoryInfo_v2Func: func() (nvml.Memory_v2, nvml.Return) {
			n.mu.Lock()
			defer n.mu.Unlock()
			return nvml.Memory_v2{Total: m.total, Used: m.used, Free: m.total - m.used}, nvml.SUCCESS
		},
		GetComputeRunningProcessesFunc: func() ([]nvml.ProcessInfo, nvml.Return) {
			n.mu.Lock()
			defer n.mu.Unlock()
			return append([]nvml.ProcessInfo(nil), m.processes...), nvml.SUCCESS
		},
		GetGraphicsRunningProcessesFunc:   func() ([]nvml.ProcessInfo, nvml.Return) { return nil, nvml.SUCCESS },
		GetMPSComputeRunningProcessesFunc: func() ([]nvml.ProcessInfo, nvml.Return) { return nil, nvml.SUCCESS },
	}
}

// createMIGInstances turns MIG mode on on d and creates n GPU instances of
// one slice each, returning their ids.
func createMIGInstances(t testing.TB, d *server.Device, n int) []int {
	t.Helper()
	_, ret := d.SetMigMode(nvml.DEVICE_MIG_ENABLE)
	if ret != nvml.SUCCESS {
		t.Fatalf("d.SetMigMode: got %v, want %v", ret, nvml.SUCCESS)
	}
	profile, ret := d.GetGpuInstanceProfileInfo(nvml.GPU_INSTANCE_PROFILE_1_SLICE)
	if ret != nvml.SUCCESS {
		t.Fatalf("d.GetGpuInstanceProfileInfo: got %v, want %v", ret, nvml.SUCCESS)
	}
	ids := make([]int, 0, n)
	for range n {
		gi, ret := d.CreateGpuInstance(&profile)
		if ret != nvml.SUCCESS {
			t.Fatalf("d.CreateGpuInstance: got %v, want %v", ret, nvml.SUCCESS)
		}
		info, ret := gi.GetInfo()
		if ret != nvml.SUCCESS {
			t.Fatalf("gi.GetInfo: got %v, want %v", ret, nvml.SUCCESS)
		}
		ids = append(ids, int(info.Id))
	}
	return ids
}

func uintSample(ts uint64, v uint32) nvml.Sample {
	s := nvml.Sample{TimeStamp: ts}
	s.SampleValue[0], s.SampleValue[1], s.SampleValue[2], s.SampleValue[3] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24)
	return s
}

// setProcess sets (or with used 0, removes) a process's memory on a device.
func (n *fakeNode) setProcess(device int, pid uint32, used uint64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	ps := n.processes[device][:0:0]
	for _, p := range n.processes[device] {
		if p.Pid != pid {
			ps = append(ps, p)
		}
	}
	if used > 0 {
		ps = append(ps, nvml.ProcessInfo{Pid: pid, UsedGpuMemory: used, GpuInstanceId: 0xFFFFFFFF, ComputeInstanceId: 0xFFFFFFFF})
	}
	n.processes[device] = ps
	var sum uint64
	for _, p := range ps {
		sum += p.UsedGpuMemory
	}
	n.used[device] = sum
}

// advanceSamples moves NVML's sample clock by one scrape.
func (n *fakeNode) advanceSamples() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.sampleTS += 10_000_000
}

func (n *fakeNode) open(string) nvml.Interface { return n.srv }

// fakeProc writes a fake /proc entry for a process.
type fakeProc struct {
	pid     int
	exe     string
	cmdline string
	cgroup  string
	environ string
	vpid    int // the pid inside its pid namespace; 0: no status file
}

func writeProc(t testing.TB, root string, p fakeProc) {
	t.Helper()
	dir := filepath.Join(root, strconv.Itoa(p.pid))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatalf("os.MkdirAll: %v", err)
	}
	stat := strconv.Itoa(p.pid) + " (" + filepath.Base(p.exe) + ") S 1 1 1 0 -1 4194304 100 0 0 0 5 3 0 0 20 0 1 0 " +
		strconv.Itoa(1000+p.pid) + " 1000000 100 0 0 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0\n"
	if err := os.WriteFile(filepath.Join(dir, "stat"), []byte(stat), 0o644); err != nil {
		t.Fatalf("os.WriteFile: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "cmdline"), []byte(p.cmdline), 0o644); err != nil {
		t.Fatalf("os.WriteFile: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "cgroup"), []byte(p.cgroup), 0o644); err != nil {
		t.Fatalf("os.WriteFile: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "environ"), []byte(p.environ), 0o644); err != nil {
		t.Fatalf("os.WriteFile: %v", err)
	}
	if err := os.Symlink(p.exe, filepath.Join(dir, "exe")); err != nil {
		t.Fatalf("os.Symlink: %v", err)
	}
	if p.vpid != 0 {
		status := "Name:\t" + filepath.Base(p.exe) + "\nPid:\t" + strconv.Itoa(p.pid) + "\nNSpid:\t" + strconv.Itoa(p.pid)
		if p.vpid != p.pid {
			status += "\t" + strconv.Itoa(p.vpid)
		}
		if err := os.WriteFile(filepath.Join(dir, "status"), []byte(status+"\n"), 0o644); err != nil {
			t.Fatalf("os.WriteFile: %v", err)
		}
	}
}

// statusHost records the component status events a receiver reports.
type statusHost struct {
	mu     sync.Mutex
	events []*componentstatus.Event
	exts   map[component.ID]component.Component
}

var _ componentstatus.Reporter = (*statusHost)(nil)

func (h *statusHost) GetExtensions() map[component.ID]component.Component { return h.exts }

func (h *statusHost) Report(e *componentstatus.Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.events = append(h.events, e)
}

func (h *statusHost) last() *componentstatus.Event {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.events) == 0 {
		return nil
	}
	return h.events[len(h.events)-1]
}

// fakeClock advances by step on every call, standing in for scrape times.
type fakeClock struct {
	mu   sync.Mutex
	t    time.Time
	step time.Duration
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(c.step)
	return c.t
}
