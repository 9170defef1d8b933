package pythongilreceiver

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sync"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componentstatus"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/receiver"
	"go.uber.org/zap"

	"github.com/otelcol-ai/otelcol-ai/internal/attention"
	"github.com/otelcol-ai/otelcol-ai/internal/consumergate"
	"github.com/otelcol-ai/otelcol-ai/internal/procresource"
	"github.com/otelcol-ai/otelcol-ai/internal/runtimestate"
	"github.com/otelcol-ai/otelcol-ai/internal/window"
	"github.com/otelcol-ai/otelcol-ai/receiver/pythongilreceiver/internal/discovery"
	"github.com/otelcol-ai/otelcol-ai/receiver/pythongilreceiver/internal/gil"
	"github.com/otelcol-ai/otelcol-ai/receiver/pythongilreceiver/internal/metadata"
)

// gilReceiver owns the probes of one component ID: loading with retry,
// discovery, the event loop, duty cycling, and the logs and metrics built
// from what the probes report.
type gilReceiver struct {
	set receiver.Settings
	cfg *Config

	// logs and metrics close with their pipeline's face, so that nothing is
	// sent into a pipeline whose exporters may already have stopped.
	logs    consumergate.Gate[consumer.Logs]
	metrics consumergate.Gate[consumer.Metrics]

	// cancel and done belong to start and shutdown, which the shared core
	// (internal/sharedcomponent) calls for the first and last face only and
	// never at the same time.
	cancel context.CancelFunc
	done   chan struct{}

	// load is gil.Load, replaced by tests.
	load func(gil.Options) (*gil.Probe, error)

	// attention says which processes recently had spans or JVM pauses
	// (overhead.follow_attention): the runtimestate extension's that
	// overhead.runtime_state names, found at start; nil without it.
	attention *attention.Registry

	// tel is the receiver's own telemetry, from start to shutdown.
	tel *metadata.TelemetryBuilder

	// state is guarded by stateMu: the event reader and the run loop both
	// touch it.
	stateMu sync.Mutex
	state   *runState
}

func newReceiver(set receiver.Settings, cfg *Config) *gilReceiver {
	return &gilReceiver{set: set, cfg: cfg, load: gil.Load}
}

// start starts the run loop; the first face to start calls it. It returns
// at once, and the collector keeps running when eBPF turns out to be
// unavailable.
func (r *gilReceiver) start(_ context.Context, host component.Host) error {
	filter, err := r.cfg.filter()
	if err != nil {
		return err
	}
	r.attention = nil
	if id := r.cfg.Overhead.RuntimeState; id != nil && r.cfg.Overhead.FollowAttention {
		store, err := runtimestate.Lookup(host, *id)
		if err != nil {
			return fmt.Errorf("pythongil: overhead::runtime_state: %w", err)
		}
		r.attention = store.Attention()
	}
	tel, err := metadata.NewTelemetryBuilder(r.set.TelemetrySettings)
	if err != nil {
		return fmt.Errorf("pythongil: telemetry: %w", err)
	}
	r.tel = tel
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	r.cancel, r.done = cancel, done
	go func() {
		defer close(done)
		r.run(ctx, host, filter)
	}()
	return nil
}

// shutdown stops the run loop, flushing pending windows and releasing every
// probe; the last started face to shut down calls it.
func (r *gilReceiver) shutdown(ctx context.Context) error {
	r.cancel()
	defer r.tel.Shutdown()
	select {
	case <-r.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("pythongil: shutdown: %w", ctx.Err())
	}
}

func (cfg *Config) filter() (discovery.Filter, error) {
	f := discovery.Filter{PIDs: cfg.Include.PIDs}
	for _, s := range cfg.Include.Executables {
		re, err := regexp.Compile(s)
		if err != nil {
			return f, fmt.Errorf("pythongil: include.executables: %w", err)
		}
		f.Executables = append(f.Executables, re)
	}
	for _, s := range cfg.Include.CommandLines {
		re, err := regexp.Compile(s)
		if err != nil {
			return f, fmt.Errorf("pythongil: include.command_lines: %w", err)
		}
		f.CommandLines = append(f.CommandLines, re)
	}
	return f, nil
}

// run loads the probes, retrying while eBPF is unavailable, then serves
// them until ctx ends.
func (r *gilReceiver) run(ctx context.Context, host component.Host, filter discovery.Filter) {
	opts := gil.Options{
		MinDuration:  r.cfg.MinDuration,
		FilterPIDs:   !filter.Empty(),
		SwitchProbes: r.cfg.SwitchProbes,
		GC:           r.cfg.GC,
		Futex:        r.cfg.WaitSource == waitSourceFutex,
	}
	logged := false
	for {
		probe, err := r.load(opts)
		if err != nil && opts.Futex {
			// No syscall tracepoints here: waits from the uprobes instead.
			if p, uerr := r.load(withoutFutex(opts)); uerr == nil {
				r.set.Logger.Warn("futex tracepoints unavailable; GIL waits come from uprobes (wait_source: uprobes), whose cost follows every release and which the overhead budget duty-cycles. "+
					"The tracepoints' ids come from tracefs: mount it at /sys/kernel/tracing (mount -t tracefs nodev /sys/kernel/tracing; the Helm chart mounts the host's, agent.tracefsDir)", zap.Error(err))
				probe, err = p, nil
			}
		}
		if err == nil {
			componentstatus.ReportStatus(host, componentstatus.NewEvent(componentstatus.StatusOK))
			r.serve(ctx, host, probe, filter)
			return
		}
		componentstatus.ReportStatus(host, componentstatus.NewRecoverableErrorEvent(err))
		if !logged {
			r.set.Logger.Error("Python GIL probes cannot be loaded; the receiver reports nothing until they can (retrying)",
				zap.Error(err), zap.Duration("retry_interval", r.cfg.RetryInterval))
			logged = true
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(r.cfg.RetryInterval):
		}
	}
}

// serve runs discovery, collection, flushing and duty cycling on one
// goroutine and the ring-buffer reader on another, until ctx ends.
func (r *gilReceiver) serve(ctx context.Context, host component.Host, probe *gil.Probe, filter discovery.Filter) {
	clock, err := window.NewClock()
	if err != nil {
		r.set.Logger.Error("cannot read the clocks", zap.Error(err))
		_ = probe.Close()
		return
	}
	refused := &refusals{tel: r.tel, logger: r.set.Logger, report: func(err error) {
		componentstatus.ReportStatus(host, componentstatus.NewRecoverableErrorEvent(err))
	}}
	scanner := discovery.NewScanner(procresource.NewReader(r.cfg.ProcRoot, 0), filter)
	// Process events find a new interpreter within milliseconds of its
	// exec; the periodic scan is the safety net. Subscribed before the
	// first scan, so that no process falls between the two.
	events := discovery.NewEvents(scanner, r.set.Logger)
	defer events.Close()
	st := newRunState(r.cfg, probe, clock, scanner, procresource.LocalNode(), r.set.Logger, refused)
	st.mb = newMetricsBuilder(r.cfg, r.set)
	r.stateMu.Lock()
	r.state = st
	r.stateMu.Unlock()

	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		r.readEvents(ctx, probe)
	}()

	r.discover()
	discoverT := time.NewTicker(r.cfg.DiscoveryInterval)
	collectT := time.NewTicker(r.cfg.CollectionInterval)
	flushT := time.NewTicker(r.cfg.FlushInterval)
	budget := newDutyCycle(r.cfg.Overhead, probe, monotonicNow)
	var budgetT *time.Timer
	var budgetC <-chan time.Time
	if budget.enabled() {
		budgetT = time.NewTimer(budget.wait)
		budgetC = budgetT.C
		r.stateMu.Lock()
		st.phases = budget.phases
		r.stateMu.Unlock()
	}
	// attended is what otelcol_receiver_pythongil_attended_processes says.
	var attended int64
	defer func() {
		discoverT.Stop()
		collectT.Stop()
		flushT.Stop()
		if budgetT != nil {
			budgetT.Stop()
		}
		r.tel.ReceiverPythongilAttendedProcesses.Add(context.Background(), -attended)
	}()
	for {
		select {
		case <-ctx.Done():
			// Drain what the kernel already produced, then close.
			if err := probe.Flush(); err != nil {
				r.set.Logger.Debug("flushing the ring buffer", zap.Error(err))
			}
			<-readerDone
			r.flush(context.Background())
			r.collect(context.Background())
			r.stateMu.Lock()
			err := st.close()
			r.state = nil
			r.stateMu.Unlock()
			if err != nil {
				r.set.Logger.Warn("closing the probes", zap.Error(err))
			}
			return
		case <-discoverT.C:
			if err := clock.Remeasure(); err != nil {
				r.set.Logger.Warn("re-measuring the clock offset", zap.Error(err))
			}
			r.discover()
		case <-events.Ready():
			r.arrived(events.Take())
		case <-collectT.C:
			r.collect(ctx)
		case <-flushT.C:
			r.flush(ctx)
		case <-budgetC:
			r.stateMu.Lock()
			procs := st.liveProcesses()
			libs := st.dutyLibraries(r.attention, time.Now())
			r.stateMu.Unlock()
			ratio, err := budget.step(procs, libs)
			if err != nil {
				r.set.Logger.Warn("duty cycling the probes", zap.Error(err))
			}
			budgetT.Reset(budget.wait)
			r.stateMu.Lock()
			st.sampling = ratio
			st.probeCost = budget.periodCost()
			st.setSampling(budget)
			n := st.attendedProcesses(budget)
			r.stateMu.Unlock()
			if n != attended {
				r.tel.ReceiverPythongilAttendedProcesses.Add(ctx, n-attended)
				attended = n
			}
		}
	}
}

// readEvents turns ring-buffer events into windows until the probe is
// closed or drained at shutdown.
func (r *gilReceiver) readEvents(ctx context.Context, probe *gil.Probe) {
	for {
		ev, err := probe.ReadEvent()
		if err != nil {
			if errors.Is(err, gil.ErrClosed) || errors.Is(err, gil.ErrFlushed) {
				return
			}
			r.set.Logger.Warn("reading the ring buffer", zap.Error(err))
			continue
		}
		r.stateMu.Lock()
		full := r.state.add(ev)
		r.stateMu.Unlock()
		if full {
			r.flush(ctx)
		}
	}
}

// arrived probes the interpreters process events found and forgets the
// processes that exited; a scan follows when events were lost.
func (r *gilReceiver) arrived(a discovery.Arrivals) {
	r.stateMu.Lock()
	lost := r.state.arrived(a)
	r.stateMu.Unlock()
	if lost {
		r.discover()
	}
}

func (r *gilReceiver) discover() {
	r.stateMu.Lock()
	defer r.stateMu.Unlock()
	r.state.discover()
}

func (r *gilReceiver) flush(ctx context.Context) {
	r.stateMu.Lock()
	if r.state == nil {
		r.stateMu.Unlock()
		return
	}
	batch, n := r.state.takeLogs()
	r.stateMu.Unlock()
	if n == 0 {
		return
	}
	r.logs.Send(func(next consumer.Logs) {
		if err := next.ConsumeLogs(window.Measured(ctx, r.set.ID), batch); err != nil {
			r.set.Logger.Warn("sending GIL windows", zap.Error(err), zap.Int("windows", n))
		}
	})
}

func (r *gilReceiver) collect(ctx context.Context) {
	r.stateMu.Lock()
	if r.state == nil {
		r.stateMu.Unlock()
		return
	}
	md, err := r.state.metrics(pcommon.NewTimestampFromTime(time.Now()))
	r.stateMu.Unlock()
	if err != nil {
		r.set.Logger.Warn("reading probe aggregates", zap.Error(err))
		return
	}
	if md.DataPointCount() == 0 {
		return
	}
	r.metrics.Send(func(next consumer.Metrics) {
		if err := next.ConsumeMetrics(ctx, md); err != nil {
			r.set.Logger.Warn("sending GIL metrics", zap.Error(err))
		}
	})
}

// newLogs returns an empty batch with the receiver's scope.
func newScopeLogs(rl plog.ResourceLogs) plog.ScopeLogs {
	sl := rl.ScopeLogs().AppendEmpty()
	sl.Scope().SetName(metadata.ScopeName)
	return sl
}
