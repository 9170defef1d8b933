package nvmlreceiver

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componentstatus"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/receiver"
	"go.uber.org/zap"

	"github.com/otelcol-ai/otelcol-ai/internal/consumergate"
	"github.com/otelcol-ai/otelcol-ai/internal/leak"
	"github.com/otelcol-ai/otelcol-ai/internal/procresource"
	"github.com/otelcol-ai/otelcol-ai/internal/runtimestate"
	"github.com/otelcol-ai/otelcol-ai/receiver/nvmlreceiver/internal/metadata"
	"github.com/otelcol-ai/otelcol-ai/receiver/nvmlreceiver/internal/podresources"
)

// session is NVML while it is initialised: the library and the GPUs found.
type session struct {
	lib           nvml.Interface
	driverVersion string
	gpus          []*gpu
}

// nvmlReceiver owns NVML for one component ID: initialisation with retry,
// the scrape, the event loop and the leak detector.
type nvmlReceiver struct {
	cfg       *Config
	set       receiver.Settings
	logger    *zap.Logger
	open      openLibrary
	telemetry *metadata.TelemetryBuilder
	timer     *callTimer
	now       func() time.Time
	hostPIDs  func() (inHost, known bool)
	node      procresource.Node

	mu     sync.Mutex // guards the fields up to wg
	host   component.Host
	cancel context.CancelFunc
	// logs closes with the logs face, so that nothing is sent into the logs
	// pipeline once its exporters may have stopped.
	logs consumergate.Gate[consumer.Logs]
	wg   sync.WaitGroup

	// session is nil while NVML is unavailable.
	session atomic.Pointer[session]
	// inflight counts device goroutines, so Shutdown does not unload NVML
	// under a call that is still running.
	inflight sync.WaitGroup

	// Used only by the scrape goroutine.
	scr scrapeState
}

func newNVMLReceiver(set receiver.Settings, cfg *Config, open openLibrary) (*nvmlReceiver, error) {
	tb, err := metadata.NewTelemetryBuilder(set.TelemetrySettings)
	if err != nil {
		return nil, fmt.Errorf("nvml: telemetry: %w", err)
	}
	r := &nvmlReceiver{
		cfg:       cfg,
		set:       set,
		logger:    set.Logger,
		open:      open,
		telemetry: tb,
		timer:     newCallTimer(tb),
		now:       time.Now,
		hostPIDs:  procresource.InHostPIDNamespace,
		node:      procresource.LocalNode(),
	}
	r.scr = newScrapeState(set, cfg)
	return r, nil
}

// setLogsConsumer connects the logs pipeline (XID/ECC events, leak records).
func (r *nvmlReceiver) setLogsConsumer(next consumer.Logs) { r.logs.Open(next) }

// sendLogs sends logs through the logs pipeline while it is connected.
func (r *nvmlReceiver) sendLogs(ctx context.Context, logs plog.Logs, what string) {
	if logs.LogRecordCount() == 0 {
		return
	}
	r.logs.Send(func(next consumer.Logs) {
		if err := next.ConsumeLogs(ctx, logs); err != nil {
			r.logger.Warn("Dropping "+what, zap.Error(err))
		}
	})
}

// start initialises NVML and starts the event loop; the first face to start
// (metrics scraper or logs receiver) calls it. It never fails for a missing
// GPU: the receiver reports a recoverable error and retries in the
// background.
func (r *nvmlReceiver) start(_ context.Context, host component.Host) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.host = host
	r.scr.runtime = nil
	if id := r.cfg.LeakDetection.RuntimeState; id != nil {
		s, err := runtimestate.Lookup(host, *id)
		if err != nil {
			return fmt.Errorf("nvml receiver: leak_detection::runtime_state: %w", err)
		}
		r.scr.runtime = s
	}
	ctx, cancel := context.WithCancel(context.Background())

	if r.cfg.Processes.Enabled {
		if r.procPIDsMatchNVML() {
			r.scr.procs = procresource.NewCache(procresource.NewReader(r.cfg.Processes.ProcRoot, r.cfg.Processes.CommandLineMaxLength))
		}
		if r.cfg.PodResources.Endpoint != "" {
			c, err := podresources.NewClient(r.cfg.PodResources.Endpoint)
			if err != nil {
				cancel()
				return err
			}
			r.scr.pods = c
		}
	}
	r.cancel = cancel

	if err := r.activate(ctx); err != nil {
		r.reportUnavailable(err)
		r.wg.Add(1)
		go r.retryInit(ctx)
	}
	return nil
}

// procPIDsMatchNVML reports whether pids from NVML (host pids) can be looked
// up in the configured proc root. The collector's own /proc shows its own pid
// namespace: outside the host's (no hostPID), a host pid there is at best
// absent and at worst another process, so nothing is read rather than the
// wrong thing. A host /proc mounted elsewhere (proc_root: /hostfs/proc) is
// trusted.
func (r *nvmlReceiver) procPIDsMatchNVML() bool {
	if filepath.Clean(r.cfg.Processes.ProcRoot) != procresource.DefaultProcRoot {
		return true
	}
	inHost, known := r.hostPIDs()
	if !known || inHost {
		return true
	}
	r.logger.Warn("The collector is not in the host's pid namespace, so NVML's (host) pids cannot be looked up in /proc: GPU processes are reported by process.pid, without executable, command line or container, and with a pod only where a GPU belongs to one pod. Run the collector with hostPID: true, or mount the host's /proc and set processes.proc_root to it.")
	return false
}

// activate initialises NVML, enumerates the GPUs and starts the event loop.
// The caller holds r.mu.
func (r *nvmlReceiver) activate(ctx context.Context) error {
	lib, err := libraries.acquire(r.cfg.LibraryPath, r.open)
	if err != nil {
		return err
	}
	s, err := r.enumerate(lib)
	if err != nil {
		if rerr := libraries.release(r.cfg.LibraryPath); rerr != nil {
			r.logger.Warn("Releasing NVML after a failed enumeration", zap.Error(rerr))
		}
		return err
	}
	r.session.Store(s)
	r.telemetry.ReceiverNvmlAvailable.Record(context.Background(), 1)
	componentstatus.ReportStatus(r.host, componentstatus.NewEvent(componentstatus.StatusOK))
	r.logger.Info("NVML initialised",
		zap.String("library", libraryName(r.cfg.LibraryPath)),
		zap.String("driver_version", s.driverVersion),
		zap.Int("gpus", len(s.gpus)))
	if r.logs.IsOpen() && r.eventsWanted() && len(s.gpus) > 0 {
		r.wg.Add(1)
		go r.watchEvents(ctx, s)
	}
	return nil
}

// reportUnavailable says, once per outage, why the receiver is idle and what
// it would report on a GPU node.
func (r *nvmlReceiver) reportUnavailable(err error) {
	r.telemetry.ReceiverNvmlAvailable.Record(context.Background(), 0)
	componentstatus.ReportStatus(r.host, componentstatus.NewRecoverableErrorEvent(err))
	var ie *InitError
	fields := []zap.Field{
		zap.Error(err),
		zap.Duration("retry_interval", r.cfg.InitRetryInterval),
	}
	msg := "NVML is not available; the nvml receiver stays idle and retries. On a GPU node it reports per-GPU memory (used/free/reserved), utilization, power, energy, temperature and ECC errors, per-process GPU memory attributed to containers and pods, MIG instances, XID events and GPU-memory leak suspicion."
	if errors.As(err, &ie) && ie.LibraryMissing() {
		msg = "No NVIDIA driver library (" + libraryName(r.cfg.LibraryPath) + ") on this host; the nvml receiver stays idle and retries. On a GPU node it reports per-GPU memory (used/free/reserved), utilization, power, energy, temperature and ECC errors, per-process GPU memory attributed to containers and pods, MIG instances, XID events and GPU-memory leak suspicion."
	}
	r.logger.Warn(msg, fields...)
}

func (r *nvmlReceiver) retryInit(ctx context.Context) {
	defer r.wg.Done()
	t := time.NewTicker(r.cfg.InitRetryInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		r.mu.Lock()
		if ctx.Err() != nil {
			r.mu.Unlock()
			return
		}
		// wg.Add inside activate happens under r.mu while this goroutine
		// still holds its own count, so Shutdown's Wait cannot miss it.
		err := r.activate(ctx)
		r.mu.Unlock()
		if err == nil {
			return
		}
		r.logger.Debug("NVML still unavailable", zap.Error(err))
	}
}

// enumerate reads what does not change about each GPU.
func (r *nvmlReceiver) enumerate(lib nvml.Interface) (s *session, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("nvml: panic in NVML binding during enumeration: %v", p)
		}
	}()
	s = &session{lib: lib}
	count, ret := lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return nil, fmt.Errorf("nvml: nvmlDeviceGetCount: %s", ret.Error())
	}
	if v, ret := lib.SystemGetDriverVersion(); ret == nvml.SUCCESS {
		s.driverVersion = v
	}
	missing, names := missingFeatures(lib)
	if len(names) > 0 {
		r.logger.Info("The NVML library lacks some functions (older driver); the metrics that need them are not reported",
			zap.Strings("functions", names), zap.String("driver_version", s.driverVersion))
	}
	for i := 0; i < count; i++ {
		h, ret := lib.DeviceGetHandleByIndex(i)
		if ret != nvml.SUCCESS {
			r.logger.Warn("Skipping GPU NVML cannot open", zap.Int("index", i), zap.String("nvml_return", ret.Error()))
			continue
		}
		uuid, ret := h.GetUUID()
		if ret != nvml.SUCCESS {
			r.logger.Warn("Skipping GPU without a UUID", zap.Int("index", i), zap.String("nvml_return", ret.Error()))
			continue
		}
		g := &gpu{index: i, handle: h, uuid: uuid, unsupported: missing, missing: missing}
		if name, ret := h.GetName(); ret == nvml.SUCCESS {
			g.model = name
		}
		if minor, ret := h.GetMinorNumber(); ret == nvml.SUCCESS {
			g.nodeName = fmt.Sprintf("nvidia%d", minor)
		}
		if pci, ret := h.GetPciInfo(); ret == nvml.SUCCESS {
			g.busID = pciBusID(pci)
		}
		if r.cfg.ResourceAttributes.HwSerialNumber.Enabled {
			if serial, ret := h.GetSerial(); ret == nvml.SUCCESS {
				g.serial = serial
			}
		}
		rb := r.scr.mb.NewResourceBuilder()
		rb.SetHwID(g.uuid)
		rb.SetHwType("gpu")
		rb.SetHwVendor("NVIDIA")
		rb.SetGpuIndex(int64(i))
		procresource.SetIdentity(rb, procresource.Identity{}, r.node)
		// What NVML would not say is left out, not sent empty.
		for _, a := range []struct {
			set   func(string)
			value string
		}{
			{rb.SetHwModel, g.model},
			{rb.SetHwName, g.nodeName},
			{rb.SetHwDriverVersion, s.driverVersion},
			{rb.SetGpuPciBusID, g.busID},
			{rb.SetHwSerialNumber, g.serial},
		} {
			if a.value != "" {
				a.set(a.value)
			}
		}
		g.resource = rb.Emit()
		s.gpus = append(s.gpus, g)
	}
	return s, nil
}

// shutdown stops everything start started; the last started face to shut
// down calls it. It is safe without start and when called twice.
func (r *nvmlReceiver) shutdown(ctx context.Context) error {
	r.mu.Lock()
	cancel := r.cancel
	r.cancel = nil
	r.mu.Unlock()
	if cancel == nil {
		return nil
	}
	cancel()
	r.wg.Wait()

	var errs []error
	if r.scr.pods != nil {
		errs = append(errs, r.scr.pods.Close())
		r.scr.pods = nil
	}
	if s := r.session.Swap(nil); s != nil {
		if waitGroup(ctx, &r.inflight) {
			errs = append(errs, libraries.release(r.cfg.LibraryPath))
		} else {
			// A device call is still stuck inside NVML; unloading the
			// library under it could crash the process. Keep the
			// reference: the library stays loaded until the process ends.
			r.logger.Warn("An NVML call is still running at shutdown; NVML is left initialised")
		}
	}
	r.telemetry.Shutdown()
	return errors.Join(errs...)
}

// waitGroup waits for wg or ctx, whichever comes first, and reports whether
// wg finished.
func waitGroup(ctx context.Context, wg *sync.WaitGroup) bool {
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return true
	case <-ctx.Done():
		return false
	}
}

// leakConfig returns the detector thresholds.
func (cfg *Config) leakConfig() leak.Config { return cfg.LeakDetection.thresholds() }
