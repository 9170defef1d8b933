package jfrreceiver

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componentstatus"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/extension/xextension/storage"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/receiver"
	"go.opentelemetry.io/otel/attribute"
	otelmetric "go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/otelcol-ai/otelcol-ai/internal/consumergate"
	"github.com/otelcol-ai/otelcol-ai/internal/fsdeadline"
	"github.com/otelcol-ai/otelcol-ai/internal/procresource"
	"github.com/otelcol-ai/otelcol-ai/internal/procroot"
	"github.com/otelcol-ai/otelcol-ai/internal/runtimestate"
	"github.com/otelcol-ai/otelcol-ai/internal/startsignal"
	"github.com/otelcol-ai/otelcol-ai/internal/window"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/attach"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/discovery"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/jvmevent"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/jvmmetrics"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/metadata"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/recordings"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/repository"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/xlog"
)

// jfrReceiver is the one receiver behind a component ID's logs and metrics
// faces: one set of sources, read on one goroutine, feeding both.
type jfrReceiver struct {
	cfg  *Config
	set  receiver.Settings
	node procresource.Node

	// logs and metrics close with their pipeline's face, so that nothing is
	// sent into a pipeline whose exporters may already have stopped.
	logs    consumergate.Gate[consumer.Logs]
	metrics consumergate.Gate[consumer.Metrics]

	// cancel and done belong to start and shutdown, which the shared core
	// (internal/sharedcomponent) calls for the first and last face only and
	// never at the same time.
	cancel context.CancelFunc
	// guard takes a SIGTERM that comes before the collector handles it
	// (while it starts): the recordings started in other processes are
	// then still stopped, and the checkpoints saved.
	guard     *startsignal.Guard
	done      chan struct{}
	telemetry *metadata.TelemetryBuilder

	// Owned by the loop goroutine.
	storage  storage.Client // the recordings' client
	ck       checkpoints    // checkpoints.go
	sources  []jvmevent.Source
	repos    *repository.Source // the live repository source, nil when off
	pods     *attach.PodWatcher // pod and namespace opt-outs, nil when not checked
	xlogs    *xlog.Source       // the -Xlog source, nil when off
	split    *safepointSplit    // the safepoint logs added to JVMs, nil when off
	prefer   *preference        // nil unless both are on and xlog::prefer_jfr
	lastErrs []string           // per source, the last error reported
	cache    *procresource.Cache
	jvms     map[jvmevent.JVM]*jvmInfo
	agg      *jvmmetrics.Aggregator
	acc      *accounts // accounts.go
	// runtime is the runtimestate extension's store the accounts are
	// shared through (accounts::runtime_state), nil when none.
	runtime  *runtimestate.Store
	releases releaseWait
}

// jvmInfo is what the receiver knows about one JVM.
type jvmInfo struct {
	resource pcommon.Resource
	version  string
	first    time.Time
	// release reads the JDK's release file, in the JVM's root (a
	// tenant's filesystem), nil once taken or when there is none; since
	// when, and whether it was reported stalled.
	release        *fsdeadline.Call[string]
	releaseSince   time.Time
	releaseStalled bool
}

// releaseWait is one poll's deadline for the JVMs' release files, from the
// first wait on: JVMs whose files hang hold a poll fsdeadline.Timeout at
// most, however many (a read begun after it fired is not waited for, and
// taken at a later poll).
type releaseWait struct {
	parent context.Context
	ctx    context.Context
	cancel context.CancelFunc
}

// begin starts a poll's waits, which end with parent.
func (w *releaseWait) begin(parent context.Context) { *w = releaseWait{parent: parent} }

// deadline returns the poll's deadline, started at the first call.
func (w *releaseWait) deadline() context.Context {
	if w.ctx == nil {
		if w.parent == nil {
			w.parent = context.Background()
		}
		w.ctx, w.cancel = context.WithTimeout(w.parent, fsdeadline.Timeout)
	}
	return w.ctx
}

// end ends the poll's waits.
func (w *releaseWait) end() {
	if w.cancel != nil {
		w.cancel()
	}
	*w = releaseWait{}
}

func newReceiver(set receiver.Settings, cfg *Config) *jfrReceiver {
	return &jfrReceiver{cfg: cfg, set: set, node: procresource.LocalNode()}
}

// start starts the loop; the first face to start calls it.
func (r *jfrReceiver) start(ctx context.Context, host component.Host) error {
	// From here on a SIGTERM does not kill the collector before this
	// receiver's shutdown (a start that fails releases it).
	guard := startsignal.Hold(func(err error) {
		r.set.Logger.Warn("a signal not followed by this receiver's shutdown; it is sent again until the collector shuts down", zap.Error(err))
	})
	defer func() { guard.Release() }() // nil once the loop owns it
	r.set.Logger.Info("JFR receiver starting",
		zap.Bool("repositories.discover", r.cfg.Repositories.Enabled && r.cfg.Repositories.Discover),
		zap.Bool("repositories.attach", r.cfg.Repositories.Enabled && r.cfg.Repositories.Attach.Enabled),
		zap.Bool("xlog.discover", r.cfg.XLog.Discover))
	var client storage.Client
	if id := r.cfg.Recordings.Storage; id != nil && len(r.cfg.Recordings.Include) > 0 {
		var err error
		if client, err = storageClient(ctx, host, *id, r.set.ID, "recordings::storage", "recordings"); err != nil {
			return err
		}
	}
	tb, err := metadata.NewTelemetryBuilder(r.set.TelemetrySettings)
	if err != nil {
		if client != nil {
			_ = client.Close(ctx)
		}
		return fmt.Errorf("jfr receiver: telemetry: %w", err)
	}
	if r.pods, err = newPodWatcher(r.cfg.Repositories.Attach, r.set.Logger); err != nil {
		tb.Shutdown()
		if client != nil {
			_ = client.Close(ctx)
		}
		return err
	}
	r.runtime = nil
	if id := r.cfg.Accounts.RuntimeState; id != nil {
		if r.runtime, err = runtimestate.Lookup(host, *id); err != nil {
			r.closePods()
			tb.Shutdown()
			if client != nil {
				_ = client.Close(ctx)
			}
			return fmt.Errorf("jfr receiver: accounts::runtime_state: %w", err)
		}
	}
	r.telemetry = tb
	r.storage = client
	if err := r.openCheckpoints(ctx, host); err != nil {
		r.closePods()
		tb.Shutdown()
		if client != nil {
			_ = client.Close(ctx)
		}
		return err
	}
	r.sources = r.newSources()
	r.prefer = nil
	if r.repos != nil && r.xlogs != nil && r.cfg.XLog.PreferJFR {
		r.prefer = newPreference(r.cfg.ProcRoot, r.repos.Followed, r.set.Logger)
	}
	r.lastErrs = make([]string, len(r.sources))
	r.cache = procresource.NewCache(procresource.NewReader(r.cfg.ProcRoot, 0))
	r.jvms = map[jvmevent.JVM]*jvmInfo{}
	cpu := procresource.NewReader(r.cfg.ProcRoot, 0)
	r.agg = jvmmetrics.New(jvmmetrics.Config{
		Metrics: r.cfg.Metrics, ResourceAttributes: r.cfg.ResourceAttributes,
		CPUTime: func(jvm jvmevent.JVM) (time.Duration, bool) { return cpuTime(cpu, jvm) },
	}, r.set)
	// Process events find a JVM within milliseconds of its exec; the
	// periodic scan is the safety net. Subscribed before the loop's first
	// scan, so that no JVM falls between the two: one started while a slow
	// first scan ran (half a second on a loaded node) was seen by neither,
	// and a short-lived one never at all.
	var events *discovery.Events
	if (r.cfg.Repositories.Enabled && r.cfg.Repositories.Discover) || r.cfg.XLog.Discover {
		// A JVM whose folders hang is counted against the source that
		// discovery serves first.
		source := "xlog"
		if r.cfg.Repositories.Enabled && r.cfg.Repositories.Discover {
			source = "repository"
		}
		events = discovery.NewEvents(r.cfg.ProcRoot, r.set.Logger, func() { r.countRefused(source, repository.RefusedStalled) })
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel, r.done = cancel, make(chan struct{})
	r.guard, guard = guard, nil
	go r.loop(ctx, host, events, r.done)
	return nil
}

// shutdown stops the loop; the last started face to shut down calls it.
func (r *jfrReceiver) shutdown(ctx context.Context) error {
	r.guard.Release()
	if err := r.stopLoop(ctx); err != nil {
		return err
	}
	r.closePods()
	r.telemetry.Shutdown()
	return nil
}

// final runs when a face shuts down before the other: the loop stops while
// both pipelines still take what it sends (stopLoop).
func (r *jfrReceiver) final(ctx context.Context) {
	if err := r.stopLoop(ctx); err != nil {
		r.set.Logger.Warn("the JFR receiver's loop did not stop before its first pipeline's shutdown gave up", zap.Error(err))
	}
}

// stopLoop ends the loop and waits for it (or for ctx): its last reads are
// sent and the checkpoints saved. The first face to shut down calls it
// (the Final hook) as the last one does: the loop must not read on once a
// pipeline is gone, since what it read then would be dropped at that
// pipeline's closed gate while the checkpoints moved past it, and the next
// collector would never send it (a helm upgrade lost every collection read
// between the logs face's shutdown and the metrics face's). It is safe to
// call again.
func (r *jfrReceiver) stopLoop(ctx context.Context) error {
	r.cancel()
	select {
	case <-r.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (r *jfrReceiver) newSources() []jvmevent.Source {
	var out []jvmevent.Source
	logger := r.set.Logger
	r.repos, r.xlogs = nil, nil
	// The repositories come first: a poll's -Xlog batches are weighed
	// against what the repositories read in the same poll (preference).
	if rc := r.cfg.Repositories; rc.Enabled {
		r.repos = repository.New(repository.Config{
			Include: rc.Include, Discover: rc.Discover, ProcRoot: r.cfg.ProcRoot,
			DiscoveryInterval: rc.DiscoveryInterval, Logger: logger,
			Attach: repository.AttachConfig{
				Enabled: rc.Attach.Enabled, Settings: rc.Attach.Settings, Timeout: rc.Attach.Timeout,
				SafepointLog: rc.Attach.Enabled && rc.Attach.SafepointLog, Pods: r.podPolicy(), Only: attachOnly,
			},
			MaxChunkSize: rc.MaxChunkSizeMiB << 20, MaxMemory: rc.MaxMemoryMiB << 20,
			Refused: func(reason string) { r.countRefused("repository", reason) },
			Resume:  r.ck.reposResume,
		})
		out = append(out, r.repos)
	}
	if rc := r.cfg.Recordings; len(rc.Include) > 0 {
		out = append(out, recordings.New(recordings.Config{
			Include: rc.Include, DiscoveryInterval: rc.DiscoveryInterval, Storage: r.storage, Logger: logger,
		}))
	}
	r.split = nil
	if r.repos != nil && r.cfg.Repositories.Attach.Enabled && r.cfg.Repositories.Attach.SafepointLog {
		r.split = newSafepointSplit(r.repos)
	}
	if xc := r.cfg.XLog; len(xc.Include) > 0 || xc.Discover || r.split != nil {
		var scanner *discovery.Scanner
		if xc.Discover {
			scanner = discovery.NewScanner(r.cfg.ProcRoot)
		}
		var added func() []xlog.Added
		if r.split != nil {
			added = r.split.added()
		}
		r.xlogs = xlog.NewSource(xlog.Config{
			Include: xc.Include, FromStart: xc.StartAt == "beginning",
			DiscoveryInterval: xc.DiscoveryInterval, Scanner: scanner, Logger: logger,
			Refused: func(reason string) { r.countRefused("xlog", reason) },
			Resume:  r.ck.xlogResume,
			Added:   added,
		})
		out = append(out, r.xlogs)
	}
	return out
}

func (r *jfrReceiver) loop(ctx context.Context, host component.Host, events *discovery.Events, done chan struct{}) {
	defer close(done)
	var arrived <-chan struct{}
	if events != nil {
		defer events.Close()
		arrived = events.Ready()
	}
	poll := time.NewTicker(r.cfg.PollInterval)
	defer poll.Stop()
	collect := time.NewTicker(r.cfg.CollectionInterval)
	defer collect.Stop()
	r.pollOnce(ctx, host)
	for {
		select {
		case <-ctx.Done():
			r.finishReads()
			r.saveCheckpoints(context.Background(), true)
			for _, s := range r.sources {
				if err := s.Close(); err != nil {
					r.set.Logger.Warn("closing a source", zap.Error(err))
				}
			}
			r.closeAccounts()
			// Metrics gathered since the last collection are not lost.
			r.emitMetrics(context.Background())
			r.closeStorage(context.Background())
			return
		case <-poll.C:
			r.pollOnce(ctx, host)
			r.saveCheckpoints(ctx, false)
		case <-arrived:
			r.arrived(ctx, host, events.Take())
			r.saveCheckpoints(ctx, false)
		case <-collect.C:
			r.emitMetrics(ctx)
		}
	}
}

// arrived discovers at once when process events found a JVM (at its exec,
// or announcing itself) or a watched JVM exited, whatever the discovery
// interval: a JVM that lives less than it is followed from its start, and
// its last chunks are read before its repository is gone.
func (r *jfrReceiver) arrived(ctx context.Context, host component.Host, a discovery.Arrivals) {
	for _, ref := range a.Refused {
		// The sources' scans report it too, once.
		r.set.Logger.Debug("JVM refused at its exec", zap.Int("pid", ref.PID), zap.Error(ref.Err))
	}
	if len(a.JVMs) == 0 && len(a.Exited) == 0 && !a.Overflow {
		return
	}
	if r.repos != nil {
		r.repos.Rescan()
	}
	if r.xlogs != nil {
		r.xlogs.Rescan()
	}
	r.pollOnce(ctx, host)
}

// pollOnce reads every source and sends the windows found.
func (r *jfrReceiver) pollOnce(ctx context.Context, host component.Host) {
	logs := plog.NewLogs()
	now := pcommon.NewTimestampFromTime(time.Now())
	r.releases.begin(ctx)
	defer r.releases.end()
	for i, s := range r.sources {
		err := s.Poll(ctx, func(b jvmevent.Batch) { r.handle(s, &b, logs, now) })
		if ctx.Err() != nil {
			break
		}
		// Sources report a lasting problem once; a problem outside any
		// one JVM (an unreadable proc root) comes back at every scan, so
		// a source's last message is not reported again.
		if err != nil && err.Error() != r.lastErrs[i] {
			r.lastErrs[i] = err.Error()
			r.set.Logger.Warn("reading JVM telemetry", zap.Error(err))
			componentstatus.ReportStatus(host, componentstatus.NewRecoverableErrorEvent(err))
		}
	}
	if r.repos != nil {
		r.telemetry.ReceiverJfrRepositoryMemoryHeld.Record(ctx, r.repos.HeldBytes())
		for state, n := range r.repos.JVMStates() {
			r.telemetry.ReceiverJfrJvms.Record(ctx, n, otelmetric.WithAttributeSet(attribute.NewSet(attribute.String("state", string(state)))))
		}
	}
	r.cache.Sweep()
	r.send(ctx, logs)
}

// send hands the windows found to the logs pipeline, if any.
func (r *jfrReceiver) send(ctx context.Context, logs plog.Logs) {
	if logs.LogRecordCount() == 0 {
		return
	}
	r.logs.Send(func(next consumer.Logs) {
		if err := next.ConsumeLogs(window.Measured(ctx, r.set.ID), logs); err != nil && ctx.Err() == nil {
			r.set.Logger.Warn("sending windows", zap.Int("records", logs.LogRecordCount()), zap.Error(err))
		}
	})
}

// finishReads sends what the repositories' reads still running found (a
// poll whose deadline passed leaves them to the next poll, which shutdown
// does not have), before the last checkpoint says it was sent.
func (r *jfrReceiver) finishReads() {
	if r.repos == nil {
		return
	}
	logs := plog.NewLogs()
	now := pcommon.NewTimestampFromTime(time.Now())
	r.releases.begin(context.Background())
	defer r.releases.end()
	r.repos.Finish(func(b jvmevent.Batch) { r.handle(r.repos, &b, logs, now) })
	r.send(context.Background(), logs)
}

// countRefused counts what a source refused (repository.Refused*,
// xlog.Refused*).
func (r *jfrReceiver) countRefused(source, reason string) {
	r.telemetry.ReceiverJfrRefused.Add(context.Background(), 1, otelmetric.WithAttributeSet(attribute.NewSet(attribute.String("source", source), attribute.String("reason", reason))))
}

func (r *jfrReceiver) handle(src jvmevent.Source, b *jvmevent.Batch, logs plog.Logs, now pcommon.Timestamp) {
	retire, metrics := false, true
	switch {
	case b.Added && r.split != nil:
		metrics = r.split.fromLog(b) // the receiver's own log: no preference
	case src == r.repos && r.split != nil:
		r.split.fromJFR(b)
	}
	if r.prefer != nil && !b.Added {
		switch src {
		case r.repos:
			r.prefer.fromJFR(b)
		case r.xlogs:
			retire = r.prefer.fromXlog(b)
		}
	}
	info := r.info(src, b)
	if len(b.Windows) > 0 {
		rl := logs.ResourceLogs().AppendEmpty()
		info.resource.CopyTo(rl.Resource())
		sl := rl.ScopeLogs().AppendEmpty()
		sl.Scope().SetName(metadata.ScopeName)
		sl.Scope().SetVersion(r.set.BuildInfo.Version)
		recs := sl.LogRecords()
		recs.EnsureCapacity(len(b.Windows))
		for _, w := range b.Windows {
			lr := plog.NewLogRecord()
			if err := window.Encode(w, lr); err != nil {
				// Sources only build valid windows: a bad one is a bug.
				r.set.Logger.Debug("window not encoded", zap.String("source", b.JVM.Source), zap.Error(err))
				continue
			}
			lr.SetObservedTimestamp(now)
			lr.MoveTo(recs.AppendEmpty())
		}
	}
	if metrics {
		r.agg.Add(b, info.resource, info.first)
	}
	if retire {
		// The log's safepoint series end here: JFR's, for the same
		// resource and operations, go on (one series each, not two).
		r.agg.Forget(b.JVM)
	}
	if b.Ended {
		delete(r.jvms, b.JVM)
		if r.runtime != nil && b.JVM.StartTicks != 0 {
			r.runtime.Forget(runtimeProcess(b.JVM))
		}
	}
}

// info returns the JVM's resource, building it the first time.
func (r *jfrReceiver) info(src jvmevent.Source, b *jvmevent.Batch) *jvmInfo {
	info := r.jvms[b.JVM]
	if info == nil {
		info = &jvmInfo{resource: pcommon.NewResource(), first: time.Now()}
		r.putResource(info, b.JVM)
		r.jvms[b.JVM] = info
	}
	if info.release != nil {
		r.takeRelease(src, b.JVM, info)
	}
	if b.RuntimeVersion != "" && b.RuntimeVersion != info.version {
		info.version = b.RuntimeVersion
		info.resource.Attributes().PutStr(window.ResourceRuntimeVersion, b.RuntimeVersion)
	}
	return info
}

// takeRelease takes the version read from the JVM's release file, waiting
// for it until the poll's deadline, not at all once it was reported
// stalled: a read that has not returned after fsdeadline.Timeout (a
// stalled mount in the JVM's container) is counted and logged once, its
// JVM's batches go on without the version, and the version is taken when
// the read returns. The JVM's own (JFR's jdk.JVMInformation) wins over
// the file's.
func (r *jfrReceiver) takeRelease(src jvmevent.Source, jvm jvmevent.JVM, info *jvmInfo) {
	var (
		v  string
		ok bool
	)
	switch {
	case !info.releaseStalled:
		v, ok = info.release.Wait(r.releases.deadline())
	case info.release.Done():
		v, ok = info.release.Wait(context.Background())
	}
	if !ok {
		if !info.releaseStalled && time.Since(info.releaseSince) >= fsdeadline.Timeout {
			info.releaseStalled = true
			r.countRefused(r.sourceName(src), repository.RefusedStalled)
			r.set.Logger.Warn("reading the JDK's release file in a JVM's root has not returned after "+fsdeadline.Timeout.String()+
				" (a stalled mount in its container?): its process.runtime.version is added once it does; its telemetry and the other JVMs' go on",
				zap.Int("pid", jvm.PID))
		}
		return
	}
	info.release = nil
	if v != "" && info.version == "" {
		info.version = v
		info.resource.Attributes().PutStr(window.ResourceRuntimeVersion, v)
	}
}

// sourceName names src in otelcol_receiver_jfr_refused's source.
func (r *jfrReceiver) sourceName(src jvmevent.Source) string {
	if src == r.xlogs && r.xlogs != nil {
		return "xlog"
	}
	return "repository"
}

// putResource writes a JVM's resource: the node and process identity
// (procresource.PutIdentity), the runtime and the executable, and starts
// the read of its JDK's release file (info.release, for the runtime
// version). Only a JVM found in the proc root is resolved there: a pid
// taken from a folder name may be another pid namespace's, so it is the
// only identity such a JVM has.
func (r *jfrReceiver) putResource(info *jvmInfo, jvm jvmevent.JVM) {
	attrs := info.resource.Attributes()
	attrs.PutStr(window.ResourceRuntimeName, window.RuntimeJava)
	id := procresource.Identity{PID: jvm.PID}
	if jvm.StartTicks != 0 {
		if res, err := r.cache.Get(jvm.PID); err == nil && res.StartTicks == jvm.StartTicks {
			id = res.Identity()
			if res.ExecutableName != "" {
				attrs.PutStr(jvmmetrics.ResourceExecutableName, res.ExecutableName)
			}
			if exe := res.ExecutablePath; exe != "" {
				procRoot := r.cfg.ProcRoot
				info.release = fsdeadline.Start(func() string { return releaseVersion(procRoot, jvm.PID, exe) })
				info.releaseSince = time.Now()
			}
		}
	}
	procresource.PutIdentity(attrs, id, r.node)
}

// cpuTime reads a JVM's CPU time from its /proc/<pid>/stat (a capped read)
// when the JVM was found in the proc root and the process at its pid is
// still the one that started then (its start time): a pid from a folder
// name or a recording names no process of ours.
func cpuTime(r *procresource.Reader, jvm jvmevent.JVM) (time.Duration, bool) {
	if jvm.StartTicks == 0 || jvm.PID <= 0 {
		return 0, false
	}
	c, err := r.CPUTime(jvm.PID)
	if err != nil || c.StartTicks != jvm.StartTicks {
		return 0, false
	}
	return c.Total(), true
}

// releaseVersion reads JAVA_RUNTIME_VERSION (else JAVA_VERSION) from the
// release file of the JDK the process runs, inside its root (the
// container's: its links never lead to the host's files), a regular file
// of at most 64 KiB (a JDK's is about 1 KiB).
func releaseVersion(procRoot string, pid int, exe string) string {
	const maxRelease = 64 << 10
	if exe == "" {
		return ""
	}
	root, err := procroot.Open(procRoot, pid)
	if err != nil {
		return ""
	}
	defer root.Close()
	home := filepath.Dir(filepath.Dir(exe))
	data, err := root.ReadFile(filepath.Join(home, "release"), maxRelease)
	if err != nil {
		return ""
	}
	var version string
	for _, line := range strings.Split(string(data), "\n") {
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		v = strings.Trim(v, `"`)
		switch k {
		case "JAVA_RUNTIME_VERSION":
			return v
		case "JAVA_VERSION":
			version = v
		}
	}
	return version
}

func (r *jfrReceiver) emitMetrics(ctx context.Context) {
	r.collectAccounts(ctx, time.Now())
	md := r.agg.Emit(time.Now())
	if md.ResourceMetrics().Len() == 0 {
		return
	}
	r.metrics.Send(func(next consumer.Metrics) {
		if err := next.ConsumeMetrics(ctx, md); err != nil && !errors.Is(err, context.Canceled) {
			r.set.Logger.Warn("sending metrics", zap.Error(err))
		}
	})
}

// Errors of the storage extension lookup.
var (
	// ErrStorageNotFound: recordings::storage names no extension.
	ErrStorageNotFound = errors.New("storage extension not found")
	// ErrNotStorage: the extension recordings::storage names is not a
	// storage extension.
	ErrNotStorage = errors.New("extension is not a storage extension")
)

// storageClient opens this receiver's client name of the storage
// extension id, which the config key names.
func storageClient(ctx context.Context, host component.Host, id, self component.ID, key, name string) (storage.Client, error) {
	ext, ok := host.GetExtensions()[id]
	if !ok {
		return nil, fmt.Errorf("jfr receiver: %s %s: %w", key, id, ErrStorageNotFound)
	}
	se, ok := ext.(storage.Extension)
	if !ok {
		return nil, fmt.Errorf("jfr receiver: %s %s: %w", key, id, ErrNotStorage)
	}
	client, err := se.GetClient(ctx, component.KindReceiver, self, name)
	if err != nil {
		return nil, fmt.Errorf("jfr receiver: %s %s: %w", key, id, err)
	}
	return client, nil
}
