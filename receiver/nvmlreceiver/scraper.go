package nvmlreceiver

import (
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/receiver"
	"go.uber.org/zap"

	"github.com/otelcol-ai/otelcol-ai/internal/leak"
	"github.com/otelcol-ai/otelcol-ai/internal/procresource"
	"github.com/otelcol-ai/otelcol-ai/internal/runtimestate"
	"github.com/otelcol-ai/otelcol-ai/receiver/nvmlreceiver/internal/metadata"
	"github.com/otelcol-ai/otelcol-ai/receiver/nvmlreceiver/internal/podresources"
)

// scrapeState is what the scrape goroutine keeps between scrapes.
type scrapeState struct {
	mb    *metadata.MetricsBuilder
	lb    *metadata.LogsBuilder
	procs *procresource.Cache
	pods  *podresources.Client
	leaks *leak.Detector[leakKey]
	// runtime is the runtimestate extension's store the JVMs' accounts
	// come through (leak_detection::runtime_state), nil when none.
	runtime *runtimestate.Store

	podsSocket      string
	podsNoticed     bool
	lastPodsErr     string
	byPID           map[uint32][]processReading
	pidOrder        []uint32
	timeoutsLogged  map[int]bool
	readingsScratch []deviceReading
}

// leakKey names one leak-detection series: a process on a device.
type leakKey struct {
	pid    uint32
	device string
}

func newScrapeState(set receiver.Settings, cfg *Config) scrapeState {
	st := scrapeState{
		mb:             metadata.NewMetricsBuilder(cfg.MetricsBuilderConfig, set),
		lb:             metadata.NewLogsBuilder(metadata.LogsBuilderConfig{Events: cfg.Events, ResourceAttributes: cfg.ResourceAttributes}, set),
		byPID:          map[uint32][]processReading{},
		timeoutsLogged: map[int]bool{},
	}
	if cfg.LeakDetection.Enabled {
		st.leaks = leak.New[leakKey](cfg.leakConfig())
	}
	if ep, ok := strings.CutPrefix(cfg.PodResources.Endpoint, "unix://"); ok {
		st.podsSocket = ep
	}
	return st
}

// scrape reads every GPU in parallel, bounded by the scrape's deadline, and
// turns the readings into metrics (and leak records into logs).
func (r *nvmlReceiver) scrape(ctx context.Context) (pmetric.Metrics, error) {
	s := r.session.Load()
	if s == nil {
		return pmetric.NewMetrics(), nil
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, r.cfg.CollectionInterval)
		defer cancel()
	}
	readings := r.readDevices(ctx, s)
	now := r.now()
	ts := pcommon.NewTimestampFromTime(now)
	st := &r.scr

	var errs []error
	for i := range readings {
		rd := &readings[i]
		if rd.err != nil {
			if errors.Is(rd.err, errGPULost) {
				rd.gpu.lost.Store(true)
				r.logger.Error("GPU lost: NVML reports it fell off the bus; it is no longer scraped", zap.Int("index", rd.gpu.index), zap.String("uuid", rd.gpu.uuid))
				continue
			}
			errs = append(errs, rd.err)
			continue
		}
		r.recordDevice(ts, rd)
		st.mb.EmitForResource(metadata.WithResource(rd.gpu.resource))
	}
	if r.cfg.Processes.Enabled {
		r.recordProcesses(ctx, now, readings)
	}
	return st.mb.Emit(), errors.Join(errs...)
}

// readDevices starts one goroutine per GPU and collects what finished before
// ctx ended. A GPU whose previous read is still running is skipped, so one
// stuck device costs one goroutine, not one per scrape.
func (r *nvmlReceiver) readDevices(ctx context.Context, s *session) []deviceReading {
	results := make(chan deviceReading, len(s.gpus))
	started := 0
	withProcesses := r.cfg.Processes.Enabled
	for _, g := range s.gpus {
		if g.lost.Load() {
			continue
		}
		if !g.busy.CompareAndSwap(false, true) {
			r.telemetry.ReceiverNvmlDeviceTimeouts.Add(context.Background(), 1)
			if !r.scr.timeoutsLogged[g.index] {
				r.scr.timeoutsLogged[g.index] = true
				r.logger.Warn("GPU still busy with an earlier scrape's NVML calls; skipping it", zap.Int("index", g.index), zap.String("uuid", g.uuid))
			}
			continue
		}
		started++
		r.inflight.Add(1)
		go func(g *gpu) {
			defer r.inflight.Done()
			rd := r.readDevice(g, withProcesses)
			g.busy.Store(false)
			results <- rd
		}(g)
	}
	out := r.scr.readingsScratch[:0]
wait:
	for received := 0; received < started; received++ {
		select {
		case rd := <-results:
			out = append(out, rd)
			delete(r.scr.timeoutsLogged, rd.gpu.index)
		case <-ctx.Done():
			r.telemetry.ReceiverNvmlDeviceTimeouts.Add(context.Background(), int64(started-received))
			r.warnLate(s, out)
			break wait
		}
	}
	// Report GPUs in index order whatever order they answered in.
	slices.SortFunc(out, func(a, b deviceReading) int { return a.gpu.index - b.gpu.index })
	r.scr.readingsScratch = out
	return out
}

// warnLate names, once until they answer again, the GPUs that missed the
// scrape deadline.
func (r *nvmlReceiver) warnLate(s *session, answered []deviceReading) {
	for _, g := range s.gpus {
		if g.lost.Load() || r.scr.timeoutsLogged[g.index] {
			continue
		}
		if slices.ContainsFunc(answered, func(rd deviceReading) bool { return rd.gpu == g }) {
			continue
		}
		r.scr.timeoutsLogged[g.index] = true
		r.logger.Warn("GPU did not answer NVML within the scrape timeout; left out of this scrape", zap.Int("index", g.index), zap.String("uuid", g.uuid))
	}
}

// recordDevice records one GPU's reading. Every hw.* point names its GPU
// with hw.id (and hw.type where the conventions require it), as the
// hardware conventions define them; memory usage is the used bytes alone,
// so that summing a series never adds up to the total.
func (r *nvmlReceiver) recordDevice(ts pcommon.Timestamp, rd *deviceReading) {
	mb := r.scr.mb
	id := rd.gpu.uuid
	if m := rd.memory; m.ok {
		mb.RecordHwGpuMemoryUsageDataPoint(ts, int64(m.used), id)
		mb.RecordHwGpuMemoryLimitDataPoint(ts, int64(m.total), id)
		if m.reservedKnown {
			mb.RecordGpuMemoryReservedDataPoint(ts, int64(m.reserved), id)
		}
		if m.total > 0 {
			mb.RecordHwGpuMemoryUtilizationDataPoint(ts, float64(m.used)/float64(m.total), id)
		}
	}
	tasks := [3]metadata.AttributeGpuTask{metadata.AttributeGpuTaskGeneral, metadata.AttributeGpuTaskEncoder, metadata.AttributeGpuTaskDecoder}
	for i, u := range rd.utilization {
		if u.ok {
			mb.RecordHwGpuUtilizationDataPoint(ts, u.v, id, tasks[i])
		}
	}
	if rd.power.ok {
		mb.RecordHwPowerDataPoint(ts, rd.power.v, id, metadata.AttributeHwTypeGpu)
	}
	if rd.energy.ok {
		mb.RecordHwEnergyDataPoint(ts, rd.energy.v, id, metadata.AttributeHwTypeGpu)
	}
	if rd.temperature.ok {
		mb.RecordHwTemperatureDataPoint(ts, rd.temperature.v, id, metadata.AttributeSensorLocationGpuDie)
	}
	if rd.ecc[0].ok {
		mb.RecordHwErrorsDataPoint(ts, int64(rd.ecc[0].v), id, metadata.AttributeHwTypeGpu, metadata.AttributeErrorTypeCorrected)
	}
	if rd.ecc[1].ok {
		mb.RecordHwErrorsDataPoint(ts, int64(rd.ecc[1].v), id, metadata.AttributeHwTypeGpu, metadata.AttributeErrorTypeUncorrected)
	}
	for _, m := range rd.migs {
		if !m.memory.ok {
			continue
		}
		mb.RecordGpuMigMemoryUsageDataPoint(ts, int64(m.memory.used), m.uuid, m.instanceID, m.profile)
		mb.RecordGpuMigMemoryLimitDataPoint(ts, int64(m.memory.total), m.uuid, m.instanceID, m.profile)
		if m.memory.reservedKnown {
			mb.RecordGpuMigMemoryReservedDataPoint(ts, int64(m.memory.reserved), m.uuid, m.instanceID, m.profile)
		}
	}
}

// recordProcesses emits one resource per process with its memory on each
// device, feeds the leak detector and sends leak records to the logs
// pipeline. Processes that no longer hold GPU memory simply stop appearing,
// and their leak series and cache entries are dropped.
func (r *nvmlReceiver) recordProcesses(ctx context.Context, now time.Time, readings []deviceReading) {
	st := &r.scr
	ts := pcommon.NewTimestampFromTime(now)
	clear(st.byPID)
	st.pidOrder = st.pidOrder[:0]
	for i := range readings {
		if readings[i].err != nil {
			continue
		}
		for _, p := range readings[i].processes {
			if _, ok := st.byPID[p.pid]; !ok {
				st.pidOrder = append(st.pidOrder, p.pid)
			}
			st.byPID[p.pid] = append(st.byPID[p.pid], p)
		}
	}
	pods := r.listPods(ctx)

	leakLogs := false
	for _, pid := range st.pidOrder {
		procs := st.byPID[pid]
		res, attribution := r.processResource(pid, procs, pods)
		procLeak := false
		for _, p := range procs {
			st.mb.RecordGpuProcessMemoryUsageDataPoint(ts, int64(p.used), p.deviceID)
			r.shareGPUMemory(pid, p.deviceID, now, int64(p.used))
			if p.smOK {
				st.mb.RecordGpuProcessUtilizationDataPoint(ts, p.smUtil, p.deviceID)
			}
			if st.leaks == nil {
				continue
			}
			a := st.leaks.Observe(leakKey{pid: pid, device: p.deviceID}, now, int64(p.used))
			if a.Ready {
				st.mb.RecordGpuProcessMemoryGrowthRateDataPoint(ts, a.GrowthRate, p.deviceID)
			}
			if a.Report {
				leakLogs, procLeak = true, true
				join, grewWith, correlations := r.jvmJoin(pid, leakKey{pid: pid, device: p.deviceID})
				st.lb.RecordGpuMemoryLeakSuspectedEvent(ctx, ts, p.deviceID, a.GrowthRate, a.FloorGrowth, a.Span.Seconds(), int64(p.used), join, grewWith, correlations)
				r.logger.Warn("GPU memory leak suspected",
					zap.Uint32("pid", pid),
					zap.String("device", p.deviceID),
					zap.String("pod", attribution),
					zap.Float64("growth_bytes_per_second", a.GrowthRate),
					zap.Int64("floor_growth_bytes", a.FloorGrowth),
					zap.Duration("window", a.Span),
					zap.Uint64("memory_bytes", p.used),
					zap.String("jvm_join", join.String()),
					zap.Any("jvm_accounts", grewWith))
			}
		}
		st.mb.EmitForResource(metadata.WithResource(res))
		if procLeak {
			st.lb.EmitForResource(metadata.WithLogsResource(res))
		}
	}
	if st.leaks != nil {
		st.leaks.Sweep()
	}
	if st.procs != nil {
		st.procs.Sweep()
	}
	if leakLogs {
		r.sendLogs(ctx, st.lb.Emit(), "GPU memory leak records")
	}
}

// processResource builds a process's resource: the node and process
// identity (procresource.SetIdentity, through the generated builder so that
// each attribute keeps its enabled switch), executable, command line and
// pod. attribution is "namespace/pod" for logs, or "".
func (r *nvmlReceiver) processResource(pid uint32, procs []processReading, pods podresources.Index) (pcommon.Resource, string) {
	rb := r.scr.mb.NewResourceBuilder()
	id := procresource.Identity{PID: int(pid)}
	var env procEnv
	if r.scr.procs != nil {
		if pr, err := r.scr.procs.Get(int(pid)); err == nil {
			id = pr.Identity()
			if pr.ExecutableName != "" {
				rb.SetProcessExecutableName(pr.ExecutableName)
			}
			if pr.CommandLine != "" {
				rb.SetProcessCommandLine(pr.CommandLine)
			}
			env = procEnv{reader: r.scr.procs, pid: int(pid)}
		}
	}
	procresource.SetIdentity(rb, id, r.node)
	attribution := ""
	if pods != nil {
		if o, ok := attributeOwner(procs, pods, env); ok {
			rb.SetK8sNamespaceName(o.Namespace)
			rb.SetK8sPodName(o.Pod)
			if o.Container != "" {
				rb.SetK8sContainerName(o.Container)
			}
			attribution = o.Namespace + "/" + o.Pod
		}
	}
	return rb.Emit(), attribution
}

// procEnv reads a process's environment lazily (only shared GPUs need it).
type procEnv struct {
	reader *procresource.Cache
	pid    int
}

func (e procEnv) hostname() (string, bool) {
	if e.reader == nil {
		return "", false
	}
	return e.reader.Getenv(e.pid, "HOSTNAME")
}

// attributeOwner picks the pod that owns a process: the pod that holds the
// device it uses or, when a GPU is shared between pods (time-slicing, MPS),
// the one whose name is the process's HOSTNAME (Kubernetes sets it to the
// pod name). Several containers of one pod on the device give the pod
// without a container name. When pods cannot be told apart nothing is
// attributed, rather than the wrong pod.
func attributeOwner(procs []processReading, pods podresources.Index, env procEnv) (podresources.Owner, bool) {
	for _, p := range procs {
		owners := pods.Lookup(p.deviceID)
		if len(owners) == 0 {
			continue
		}
		if !samePod(owners) {
			host, ok := env.hostname()
			if !ok {
				return podresources.Owner{}, false
			}
			var mine []podresources.Owner
			for _, o := range owners {
				if o.Pod == host {
					mine = append(mine, o)
				}
			}
			if len(mine) == 0 || !samePod(mine) {
				return podresources.Owner{}, false
			}
			owners = mine
		}
		o := owners[0]
		for _, other := range owners[1:] {
			if other.Container != o.Container {
				o.Container = ""
			}
		}
		return o, true
	}
	return podresources.Owner{}, false
}

// samePod reports whether every owner is a container of one pod.
func samePod(owners []podresources.Owner) bool {
	for _, o := range owners[1:] {
		if o.Namespace != owners[0].Namespace || o.Pod != owners[0].Pod {
			return false
		}
	}
	return true
}

// listPods asks the kubelet for the device allocation, quietly skipping
// nodes where the socket is absent.
func (r *nvmlReceiver) listPods(ctx context.Context) podresources.Index {
	st := &r.scr
	if st.pods == nil {
		return nil
	}
	if st.podsSocket != "" {
		if _, err := os.Stat(st.podsSocket); err != nil {
			if !st.podsNoticed {
				st.podsNoticed = true
				r.logger.Info("Kubelet pod-resources socket not found; processes are attributed to containers (container.id, k8s.pod.uid) but not to pod names",
					zap.String("socket", st.podsSocket))
			}
			return nil
		}
	}
	ix, err := st.pods.List(ctx, r.cfg.PodResources.ResourcePrefix)
	if err != nil {
		if msg := err.Error(); msg != st.lastPodsErr {
			st.lastPodsErr = msg
			r.logger.Warn("Listing pod resources from the kubelet failed", zap.Error(err))
		}
		return nil
	}
	st.lastPodsErr = ""
	return ix
}

// emitLogs sends one batch of event records; used by the event loop.
func (r *nvmlReceiver) emitLogs(ctx context.Context, logs plog.Logs) {
	r.sendLogs(ctx, logs, "GPU event records")
}
