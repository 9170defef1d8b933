package nvmlreceiver

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync/atomic"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"go.opentelemetry.io/collector/pdata/pcommon"
)

// notAvailable is NVML_VALUE_NOT_AVAILABLE: NVML could not read the value
// (e.g. per-process memory of a process in another container on some
// drivers).
const notAvailable = math.MaxUint64

// feature bits remember what a device answered NOT_SUPPORTED to, so that it
// is not asked again on every scrape.
type feature uint32

const (
	featMemoryV2 feature = 1 << iota
	featMemoryV1
	featUtilGeneral
	featUtilEncoder
	featUtilDecoder
	featPower
	featEnergy
	featTemperature
	featECC
	featMIG
	featGraphicsProcesses
	featComputeProcesses
	featProcessUtilization
	featMPSProcesses
)

// optionalSymbols are the NVML functions that older drivers lack, with the
// features that call them. go-nvml resolves C symbols lazily: calling one the
// loaded library does not export would end the process, so a feature whose
// symbol is missing is marked unsupported before any call.
var optionalSymbols = []struct {
	features feature
	symbol   string
}{
	{featMemoryV2, "nvmlDeviceGetMemoryInfo_v2"},
	{featUtilGeneral | featUtilEncoder | featUtilDecoder, "nvmlDeviceGetSamples"},
	{featPower, "nvmlDeviceGetPowerUsage"},
	{featEnergy, "nvmlDeviceGetTotalEnergyConsumption"},
	{featTemperature, "nvmlDeviceGetTemperature"},
	{featECC, "nvmlDeviceGetTotalEccErrors"},
	{featMIG, "nvmlDeviceGetMigMode"},
	{featMIG, "nvmlDeviceGetMaxMigDeviceCount"},
	{featMIG, "nvmlDeviceGetMigDeviceHandleByIndex"},
	{featProcessUtilization, "nvmlDeviceGetProcessUtilization"},
	{featMPSProcesses, "nvmlDeviceGetMPSComputeRunningProcesses"},
}

// missingFeatures returns the features whose NVML functions the loaded
// library does not export, and the names of those functions.
func missingFeatures(lib nvml.Interface) (feature, []string) {
	ext := lib.Extensions()
	if ext == nil {
		return 0, nil
	}
	var missing feature
	var names []string
	for _, o := range optionalSymbols {
		if err := ext.LookupSymbol(o.symbol); err != nil {
			missing |= o.features
			names = append(names, o.symbol)
		}
	}
	return missing, names
}

// gpu is one physical device: what never changes, found at enumeration, and
// the little state its scrapes carry from one to the next.
type gpu struct {
	index    int
	handle   nvml.Device
	uuid     string
	model    string
	nodeName string
	busID    string
	serial   string
	resource pcommon.Resource

	// busy is set while a scrape goroutine reads the device; a scrape that
	// finds it set skips the device rather than queue behind a stuck call.
	busy atomic.Bool
	// lost is set once NVML says the GPU fell off the bus.
	lost atomic.Bool

	// The fields below are touched only by the goroutine holding busy.
	unsupported  feature
	missing      feature   // functions the loaded library lacks
	migEnabled   bool      // MIG mode at the previous scrape
	lastSample   [3]uint64 // per utilizationTasks entry, NVML µs timestamps
	lastProcess  uint64    // newest per-process utilization sample, µs
	migProfiles  map[uint32]string
	migProfilesK bool
}

func (g *gpu) supports(f feature) bool { return g.unsupported&f == 0 }

// note records NOT_SUPPORTED answers and reports whether ret is SUCCESS.
func (g *gpu) note(f feature, ret nvml.Return) bool {
	if ret == nvml.ERROR_NOT_SUPPORTED || ret == nvml.ERROR_FUNCTION_NOT_FOUND {
		g.unsupported |= f
	}
	return ret == nvml.SUCCESS
}

// memoryReading is one framebuffer reading; Reserved is known only from
// memory info v2.
type memoryReading struct {
	ok                bool
	total, used, free uint64
	reserved          uint64
	reservedKnown     bool
}

type valueReading struct {
	ok bool
	v  float64
}

// processReading is one process's memory on one device (a GPU or a MIG
// device).
type processReading struct {
	pid      uint32
	used     uint64
	deviceID string
	// smUtil is the mean fraction of time the process had kernels running,
	// over the samples since the previous scrape; valid when smOK.
	smUtil float64
	smOK   bool
}

type migReading struct {
	uuid       string
	instanceID int64
	profile    string
	memory     memoryReading
}

// deviceReading is everything one scrape read from one GPU.
type deviceReading struct {
	gpu         *gpu
	memory      memoryReading
	utilization [3]valueReading // general, encoder, decoder
	power       valueReading    // W
	energy      valueReading    // J
	temperature valueReading    // °C
	ecc         [2]valueReading // corrected, uncorrected
	migs        []migReading
	processes   []processReading
	err         error
}

// utilizationTasks are the sample buffers averaged for hw.gpu.utilization,
// in the order of deviceReading.utilization.
var utilizationTasks = [3]struct {
	sampling nvml.SamplingType
	feature  feature
	call     string
}{
	{nvml.GPU_UTILIZATION_SAMPLES, featUtilGeneral, "nvmlDeviceGetSamples(GPU_UTILIZATION)"},
	{nvml.ENC_UTILIZATION_SAMPLES, featUtilEncoder, "nvmlDeviceGetSamples(ENC_UTILIZATION)"},
	{nvml.DEC_UTILIZATION_SAMPLES, featUtilDecoder, "nvmlDeviceGetSamples(DEC_UTILIZATION)"},
}

// errGPULost marks a device that stopped answering.
var errGPULost = errors.New("GPU is lost")

// readDevice reads one GPU. It runs on its own goroutine; a panic in the
// binding (a mock without a function, a driver bug) becomes an error for
// this device only.
func (r *nvmlReceiver) readDevice(g *gpu, withProcesses bool) (rd deviceReading) {
	rd.gpu = g
	defer func() {
		if p := recover(); p != nil {
			rd.err = fmt.Errorf("nvml: GPU %d (%s): panic in NVML binding: %v", g.index, g.uuid, p)
		}
	}()
	t := r.timer

	if g.supports(featMemoryV2) {
		start := time.Now()
		m, ret := g.handle.GetMemoryInfo_v2()
		t.observe("nvmlDeviceGetMemoryInfo_v2", start)
		if ret == nvml.ERROR_GPU_IS_LOST {
			rd.err = fmt.Errorf("nvml: GPU %d (%s): %w", g.index, g.uuid, errGPULost)
			return rd
		}
		if g.note(featMemoryV2, ret) {
			rd.memory = memoryReading{ok: true, total: m.Total, used: m.Used, free: m.Free, reserved: m.Reserved, reservedKnown: true}
		}
	}
	if !rd.memory.ok && g.supports(featMemoryV1) {
		start := time.Now()
		m, ret := g.handle.GetMemoryInfo()
		t.observe("nvmlDeviceGetMemoryInfo", start)
		if g.note(featMemoryV1, ret) {
			rd.memory = memoryReading{ok: true, total: m.Total, used: m.Used, free: m.Free}
		}
	}

	for i, task := range utilizationTasks {
		if !g.supports(task.feature) {
			continue
		}
		start := time.Now()
		vt, samples, ret := g.handle.GetSamples(task.sampling, g.lastSample[i])
		t.observe(task.call, start)
		if !g.note(task.feature, ret) {
			continue
		}
		if avg, last, ok := averageSamples(vt, samples, g.lastSample[i]); ok {
			rd.utilization[i] = valueReading{ok: true, v: avg / 100}
			g.lastSample[i] = last
		}
	}

	if g.supports(featPower) {
		start := time.Now()
		mw, ret := g.handle.GetPowerUsage()
		t.observe("nvmlDeviceGetPowerUsage", start)
		if g.note(featPower, ret) {
			rd.power = valueReading{ok: true, v: float64(mw) / 1000}
		}
	}
	if g.supports(featEnergy) {
		start := time.Now()
		mj, ret := g.handle.GetTotalEnergyConsumption()
		t.observe("nvmlDeviceGetTotalEnergyConsumption", start)
		if g.note(featEnergy, ret) {
			rd.energy = valueReading{ok: true, v: float64(mj) / 1000}
		}
	}
	if g.supports(featTemperature) {
		start := time.Now()
		c, ret := g.handle.GetTemperature(nvml.TEMPERATURE_GPU)
		t.observe("nvmlDeviceGetTemperature", start)
		if g.note(featTemperature, ret) {
			rd.temperature = valueReading{ok: true, v: float64(c)}
		}
	}
	if g.supports(featECC) {
		for i, typ := range [2]nvml.MemoryErrorType{nvml.MEMORY_ERROR_TYPE_CORRECTED, nvml.MEMORY_ERROR_TYPE_UNCORRECTED} {
			start := time.Now()
			n, ret := g.handle.GetTotalEccErrors(typ, nvml.VOLATILE_ECC)
			t.observe("nvmlDeviceGetTotalEccErrors", start)
			if !g.note(featECC, ret) {
				break
			}
			rd.ecc[i] = valueReading{ok: true, v: float64(n)}
		}
	}

	migEnabled := false
	if g.supports(featMIG) {
		start := time.Now()
		current, _, ret := g.handle.GetMigMode()
		t.observe("nvmlDeviceGetMigMode", start)
		migEnabled = g.note(featMIG, ret) && current == nvml.DEVICE_MIG_ENABLE
	}
	if migEnabled != g.migEnabled {
		// What a GPU supports changes with MIG mode (utilization samples
		// are not available in MIG mode): ask again, except for what the
		// library does not have at all.
		g.migEnabled = migEnabled
		g.unsupported = g.unsupported&featMIG | g.missing
	}
	if migEnabled {
		rd.migs, rd.processes = r.readMIG(g, withProcesses)
	} else if withProcesses {
		rd.processes = r.readProcesses(g, g.handle, g.uuid, nil)
		if len(rd.processes) > 0 {
			r.readProcessUtilization(g, rd.processes)
		}
	}
	return rd
}

// readProcessUtilization averages NVML's per-process samples since the
// previous scrape onto the processes read from the same GPU.
func (r *nvmlReceiver) readProcessUtilization(g *gpu, procs []processReading) {
	if !g.supports(featProcessUtilization) {
		return
	}
	start := time.Now()
	samples, ret := g.handle.GetProcessUtilization(g.lastProcess)
	r.timer.observe("nvmlDeviceGetProcessUtilization", start)
	if !g.note(featProcessUtilization, ret) {
		return // ERROR_NOT_FOUND: no sample since the previous scrape
	}
	newest := g.lastProcess
	for i := range procs {
		var sum float64
		n := 0
		for _, s := range samples {
			if s.Pid == procs[i].pid && s.TimeStamp > g.lastProcess {
				sum += float64(s.SmUtil)
				n++
				newest = max(newest, s.TimeStamp)
			}
		}
		if n > 0 {
			procs[i].smUtil, procs[i].smOK = sum/float64(n)/100, true
		}
	}
	g.lastProcess = newest
}

// readProcesses lists the compute, MPS-client and graphics processes on a
// GPU or MIG device. Under MPS the clients are listed apart from the MPS
// server, so a GPU shared through MPS is split per client process. A process
// in several lists is reported once, with the larger figure (NVML reports the
// same allocation in each).
func (r *nvmlReceiver) readProcesses(g *gpu, dev nvml.Device, deviceID string, out []processReading) []processReading {
	first := len(out)
	add := func(infos []nvml.ProcessInfo) {
	next:
		for _, p := range infos {
			if p.UsedGpuMemory == notAvailable {
				continue
			}
			for j := first; j < len(out); j++ {
				if out[j].pid == p.Pid {
					out[j].used = max(out[j].used, p.UsedGpuMemory)
					continue next
				}
			}
			out = append(out, processReading{pid: p.Pid, used: p.UsedGpuMemory, deviceID: deviceID})
		}
	}
	if g.supports(featComputeProcesses) {
		start := time.Now()
		infos, ret := dev.GetComputeRunningProcesses()
		r.timer.observe("nvmlDeviceGetComputeRunningProcesses", start)
		if g.note(featComputeProcesses, ret) {
			add(infos)
		}
	}
	if g.supports(featMPSProcesses) {
		start := time.Now()
		infos, ret := dev.GetMPSComputeRunningProcesses()
		r.timer.observe("nvmlDeviceGetMPSComputeRunningProcesses", start)
		if g.note(featMPSProcesses, ret) {
			add(infos)
		}
	}
	if g.supports(featGraphicsProcesses) {
		start := time.Now()
		infos, ret := dev.GetGraphicsRunningProcesses()
		r.timer.observe("nvmlDeviceGetGraphicsRunningProcesses", start)
		if g.note(featGraphicsProcesses, ret) {
			add(infos)
		}
	}
	return out
}

// readMIG reads every MIG device of a GPU in MIG mode: its memory and, with
// withProcesses, its processes (the parent's process lists do not split
// memory by instance).
func (r *nvmlReceiver) readMIG(g *gpu, withProcesses bool) ([]migReading, []processReading) {
	start := time.Now()
	count, ret := g.handle.GetMaxMigDeviceCount()
	r.timer.observe("nvmlDeviceGetMaxMigDeviceCount", start)
	if ret != nvml.SUCCESS {
		return nil, nil
	}
	var migs []migReading
	var procs []processReading
	for i := 0; i < count; i++ {
		start := time.Now()
		mig, ret := g.handle.GetMigDeviceHandleByIndex(i)
		r.timer.observe("nvmlDeviceGetMigDeviceHandleByIndex", start)
		if ret != nvml.SUCCESS {
			continue // NOT_FOUND: an empty slot
		}
		uuid, ret := mig.GetUUID()
		if ret != nvml.SUCCESS {
			continue
		}
		m := migReading{uuid: uuid, instanceID: -1}
		if id, ret := mig.GetGpuInstanceId(); ret == nvml.SUCCESS {
			m.instanceID = int64(id)
			m.profile = r.migProfile(g, id)
		}
		start = time.Now()
		if mem, ret := mig.GetMemoryInfo_v2(); ret == nvml.SUCCESS {
			m.memory = memoryReading{ok: true, total: mem.Total, used: mem.Used, free: mem.Free, reserved: mem.Reserved, reservedKnown: true}
		} else if mem, ret := mig.GetMemoryInfo(); ret == nvml.SUCCESS {
			m.memory = memoryReading{ok: true, total: mem.Total, used: mem.Used, free: mem.Free}
		}
		r.timer.observe("nvmlDeviceGetMemoryInfo(MIG)", start)
		migs = append(migs, m)
		if withProcesses {
			procs = r.readProcesses(g, mig, uuid, procs)
		}
	}
	return migs, procs
}

// migProfile names the profile of a GPU instance ("1g.10gb"), from a table
// of the device's profiles built on first use.
func (r *nvmlReceiver) migProfile(g *gpu, instanceID int) string {
	if !g.migProfilesK {
		g.migProfilesK = true
		g.migProfiles = map[uint32]string{}
		for p := 0; p < nvml.GPU_INSTANCE_PROFILE_COUNT; p++ {
			info, ret := g.handle.GetGpuInstanceProfileInfo(p)
			if ret != nvml.SUCCESS {
				continue
			}
			g.migProfiles[info.Id] = migProfileName(p, info)
		}
	}
	gi, ret := g.handle.GetGpuInstanceById(instanceID)
	if ret != nvml.SUCCESS {
		return ""
	}
	info, ret := gi.GetInfo()
	if ret != nvml.SUCCESS {
		return ""
	}
	return g.migProfiles[info.ProfileId]
}

// migProfileName composes nvidia-smi's profile name from slice count and
// memory size, with the media-engine and graphics variants marked.
func migProfileName(index int, info nvml.GpuInstanceProfileInfo) string {
	gb := int(math.Round(float64(info.MemorySizeMB) / 1024))
	name := fmt.Sprintf("%dg.%dgb", info.SliceCount, gb)
	switch index {
	case nvml.GPU_INSTANCE_PROFILE_1_SLICE_REV1, nvml.GPU_INSTANCE_PROFILE_2_SLICE_REV1:
		name += "+me"
	case nvml.GPU_INSTANCE_PROFILE_1_SLICE_GFX, nvml.GPU_INSTANCE_PROFILE_2_SLICE_GFX, nvml.GPU_INSTANCE_PROFILE_4_SLICE_GFX:
		name += "+gfx"
	}
	return name
}

// averageSamples averages the samples newer than since and returns the
// newest timestamp seen. ok is false when there is no new sample.
func averageSamples(vt nvml.ValueType, samples []nvml.Sample, since uint64) (avg float64, last uint64, ok bool) {
	var sum float64
	n := 0
	last = since
	for _, s := range samples {
		if s.TimeStamp <= since {
			continue
		}
		v, valid := sampleValue(vt, s.SampleValue)
		if !valid {
			continue
		}
		sum += v
		n++
		last = max(last, s.TimeStamp)
	}
	if n == 0 {
		return 0, since, false
	}
	return sum / float64(n), last, true
}

// sampleValue decodes an nvmlValue_t union (little-endian on every platform
// NVML ships for).
func sampleValue(vt nvml.ValueType, raw [8]byte) (float64, bool) {
	switch vt {
	case nvml.VALUE_TYPE_DOUBLE:
		return math.Float64frombits(binary.LittleEndian.Uint64(raw[:])), true
	case nvml.VALUE_TYPE_UNSIGNED_INT:
		return float64(binary.LittleEndian.Uint32(raw[:4])), true
	case nvml.VALUE_TYPE_UNSIGNED_LONG, nvml.VALUE_TYPE_UNSIGNED_LONG_LONG:
		return float64(binary.LittleEndian.Uint64(raw[:])), true
	case nvml.VALUE_TYPE_SIGNED_LONG_LONG:
		return float64(int64(binary.LittleEndian.Uint64(raw[:]))), true
	case nvml.VALUE_TYPE_SIGNED_INT:
		return float64(int32(binary.LittleEndian.Uint32(raw[:4]))), true
	case nvml.VALUE_TYPE_UNSIGNED_SHORT:
		return float64(binary.LittleEndian.Uint16(raw[:2])), true
	default:
		return 0, false
	}
}

// pciBusID formats the bus id NVML reports, falling back to the numeric
// fields when the string is empty.
func pciBusID(p nvml.PciInfo) string {
	var b strings.Builder
	for _, c := range p.BusId {
		if c == 0 {
			break
		}
		b.WriteByte(byte(c))
	}
	if b.Len() > 0 {
		return b.String()
	}
	return fmt.Sprintf("%08x:%02x:%02x.0", p.Domain, p.Bus, p.Device)
}
