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

// timed runs one NVML call and records how long it took under the
// function's name.
func timed[T any](t *callTimer, name string, call func() (T, nvml.Return)) (T, nvml.Return) {
	start := time.Now()
	v, ret := call()
	t.observe(name, start)
	return v, ret
}

// ask runs one timed NVML call for a feature the device has not refused,
// remembers a NOT_SUPPORTED answer, and reports whether the call succeeded.
// ret is the call's answer (ERROR_NOT_SUPPORTED when it was not asked).
func ask[T any](t *callTimer, g *gpu, f feature, name string, call func() (T, nvml.Return)) (v T, ret nvml.Return, ok bool) {
	if !g.supports(f) {
		return v, nvml.ERROR_NOT_SUPPORTED, false
	}
	v, ret = timed(t, name, call)
	return v, ret, g.note(f, ret)
}

// samples is what nvmlDeviceGetSamples returns besides its code.
type samples struct {
	vt     nvml.ValueType
	values []nvml.Sample
}

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
	var lost bool
	if rd.memory, lost = r.readMemory(g); lost {
		rd.err = fmt.Errorf("nvml: GPU %d (%s): %w", g.index, g.uuid, errGPULost)
		return rd
	}
	rd.utilization = r.readUtilization(g)
	r.readSensors(g, &rd)
	if r.readMIGMode(g) {
		rd.migs, rd.processes = r.readMIG(g, withProcesses)
	} else if withProcesses {
		rd.processes = r.readProcesses(g, g.handle, g.uuid, nil)
		if len(rd.processes) > 0 {
			r.readProcessUtilization(g, rd.processes)
		}
	}
	return rd
}

// readMemory reads the framebuffer, from memory info v2 where the device
// has it (reserved apart), else v1. lost reports that the GPU fell off the
// bus.
func (r *nvmlReceiver) readMemory(g *gpu) (m memoryReading, lost bool) {
	v2, ret, ok := ask(r.timer, g, featMemoryV2, "nvmlDeviceGetMemoryInfo_v2", g.handle.GetMemoryInfo_v2)
	if ret == nvml.ERROR_GPU_IS_LOST {
		return m, true
	}
	if ok {
		return memoryReading{ok: true, total: v2.Total, used: v2.Used, free: v2.Free, reserved: v2.Reserved, reservedKnown: true}, false
	}
	if v1, _, ok := ask(r.timer, g, featMemoryV1, "nvmlDeviceGetMemoryInfo", g.handle.GetMemoryInfo); ok {
		return memoryReading{ok: true, total: v1.Total, used: v1.Used, free: v1.Free}, false
	}
	return m, false
}

// readUtilization averages each engine's samples since the previous scrape.
func (r *nvmlReceiver) readUtilization(g *gpu) (out [3]valueReading) {
	for i, task := range utilizationTasks {
		s, _, ok := ask(r.timer, g, task.feature, task.call, func() (samples, nvml.Return) {
			vt, values, ret := g.handle.GetSamples(task.sampling, g.lastSample[i])
			return samples{vt: vt, values: values}, ret
		})
		if !ok {
			continue
		}
		if avg, last, ok := averageSamples(s.vt, s.values, g.lastSample[i]); ok {
			out[i] = valueReading{ok: true, v: avg / 100}
			g.lastSample[i] = last
		}
	}
	return out
}

// readSensors reads power (W), energy (J), temperature (°C) and the
// volatile ECC counters.
func (r *nvmlReceiver) readSensors(g *gpu, rd *deviceReading) {
	t := r.timer
	if mw, _, ok := ask(t, g, featPower, "nvmlDeviceGetPowerUsage", g.handle.GetPowerUsage); ok {
		rd.power = valueReading{ok: true, v: float64(mw) / 1000}
	}
	if mj, _, ok := ask(t, g, featEnergy, "nvmlDeviceGetTotalEnergyConsumption", g.handle.GetTotalEnergyConsumption); ok {
		rd.energy = valueReading{ok: true, v: float64(mj) / 1000}
	}
	temperature := func() (uint32, nvml.Return) { return g.handle.GetTemperature(nvml.TEMPERATURE_GPU) }
	if c, _, ok := ask(t, g, featTemperature, "nvmlDeviceGetTemperature", temperature); ok {
		rd.temperature = valueReading{ok: true, v: float64(c)}
	}
	for i, typ := range [2]nvml.MemoryErrorType{nvml.MEMORY_ERROR_TYPE_CORRECTED, nvml.MEMORY_ERROR_TYPE_UNCORRECTED} {
		ecc := func() (uint64, nvml.Return) { return g.handle.GetTotalEccErrors(typ, nvml.VOLATILE_ECC) }
		n, _, ok := ask(t, g, featECC, "nvmlDeviceGetTotalEccErrors", ecc)
		if !ok {
			break
		}
		rd.ecc[i] = valueReading{ok: true, v: float64(n)}
	}
}

// readMIGMode reports whether the GPU is in MIG mode. When the mode
// changed since the previous scrape, what the device refused is asked
// again (utilization samples are not available in MIG mode), except what
// the library does not have at all.
func (r *nvmlReceiver) readMIGMode(g *gpu) bool {
	mode := func() (int, nvml.Return) {
		current, _, ret := g.handle.GetMigMode()
		return current, ret
	}
	current, _, ok := ask(r.timer, g, featMIG, "nvmlDeviceGetMigMode", mode)
	enabled := ok && current == nvml.DEVICE_MIG_ENABLE
	if enabled != g.migEnabled {
		g.migEnabled = enabled
		g.unsupported = g.unsupported&featMIG | g.missing
	}
	return enabled
}

// readProcessUtilization averages NVML's per-process samples since the
// previous scrape onto the processes read from the same GPU.
func (r *nvmlReceiver) readProcessUtilization(g *gpu, procs []processReading) {
	utilization := func() ([]nvml.ProcessUtilizationSample, nvml.Return) {
		return g.handle.GetProcessUtilization(g.lastProcess)
	}
	samples, _, ok := ask(r.timer, g, featProcessUtilization, "nvmlDeviceGetProcessUtilization", utilization)
	if !ok {
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
	if infos, _, ok := ask(r.timer, g, featComputeProcesses, "nvmlDeviceGetComputeRunningProcesses", dev.GetComputeRunningProcesses); ok {
		add(infos)
	}
	if infos, _, ok := ask(r.timer, g, featMPSProcesses, "nvmlDeviceGetMPSComputeRunningProcesses", dev.GetMPSComputeRunningProcesses); ok {
		add(infos)
	}
	if infos, _, ok := ask(r.timer, g, featGraphicsProcesses, "nvmlDeviceGetGraphicsRunningProcesses", dev.GetGraphicsRunningProcesses); ok {
		add(infos)
	}
	return out
}

// readMIG reads every MIG device of a GPU in MIG mode: its memory and, with
// withProcesses, its processes (the parent's process lists do not split
// memory by instance).
func (r *nvmlReceiver) readMIG(g *gpu, withProcesses bool) ([]migReading, []processReading) {
	count, ret := timed(r.timer, "nvmlDeviceGetMaxMigDeviceCount", g.handle.GetMaxMigDeviceCount)
	if ret != nvml.SUCCESS {
		return nil, nil
	}
	var migs []migReading
	var procs []processReading
	for i := 0; i < count; i++ {
		handle := func() (nvml.Device, nvml.Return) { return g.handle.GetMigDeviceHandleByIndex(i) }
		mig, ret := timed(r.timer, "nvmlDeviceGetMigDeviceHandleByIndex", handle)
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
		m.memory, _ = timed(r.timer, "nvmlDeviceGetMemoryInfo(MIG)", func() (memoryReading, nvml.Return) { return migMemory(mig) })
		migs = append(migs, m)
		if withProcesses {
			procs = r.readProcesses(g, mig, uuid, procs)
		}
	}
	return migs, procs
}

// migMemory reads a MIG device's framebuffer, from memory info v2 where it
// answers, else v1.
func migMemory(mig nvml.Device) (memoryReading, nvml.Return) {
	if mem, ret := mig.GetMemoryInfo_v2(); ret == nvml.SUCCESS {
		return memoryReading{ok: true, total: mem.Total, used: mem.Used, free: mem.Free, reserved: mem.Reserved, reservedKnown: true}, ret
	}
	mem, ret := mig.GetMemoryInfo()
	if ret != nvml.SUCCESS {
		return memoryReading{}, ret
	}
	return memoryReading{ok: true, total: mem.Total, used: mem.Used, free: mem.Free}, ret
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
