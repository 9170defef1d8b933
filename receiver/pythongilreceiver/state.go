package pythongilreceiver

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/otelcol-ai/otelcol-ai/internal/procresource"
	"github.com/otelcol-ai/otelcol-ai/internal/procroot"
	"github.com/otelcol-ai/otelcol-ai/internal/window"
	"github.com/otelcol-ai/otelcol-ai/receiver/pythongilreceiver/internal/discovery"
	"github.com/otelcol-ai/otelcol-ai/receiver/pythongilreceiver/internal/gil"
	"github.com/otelcol-ai/otelcol-ai/receiver/pythongilreceiver/internal/metadata"
)

// runState is what the receiver knows while its probes are loaded.
type runState struct {
	cfg      *Config
	probe    *gil.Probe
	clock    *window.Clock
	scanner  *discovery.Scanner
	node     procresource.Node
	logger   *zap.Logger
	refusals *refusals
	// open is scanner.Open; tests replace it to exercise the recovery.
	open func(discovery.Interpreter) (*os.File, error)

	libraries map[discovery.FileID]*library
	// skipped remembers files that cannot be probed, and why (the
	// reason of their processes' refused status), so that each is
	// reported once, not at every discovery.
	skipped   map[discovery.FileID]string
	processes map[uint32]*process
	// statuses says where each discovered process stands (log line on
	// change, otelcol_receiver_pythongil_processes).
	statuses *discovery.Statuses

	// sampling is the fraction of time the probes were attached in the
	// current duty cycle (1 without duty cycling).
	sampling float64
	// probeCost is what the budget estimates the probes cost over the last
	// period (dutyCycle.periodCost, shares of a CPU per probed process);
	// reported only while a budget is set.
	probeCost float64
	// phases are the duty cycle's phases, which weigh each event by the
	// phase it was taken in (nil without a budget).
	phases *phaseLog

	// mb builds the metrics metadata.yaml declares.
	mb *metadata.MetricsBuilder

	pending      plog.Logs
	pendingByPID map[uint32]plog.LogRecordSlice
	pendingCount int
	// lastWait is each thread's latest wait in pending, which a
	// continuation (gil.Event.Continues) lengthens.
	lastWait map[threadKey]pendingWait
}

// library is one probed ELF file and the live processes that map it.
type library struct {
	lib  *gil.Library
	pids map[uint32]struct{}
	// functions are its otelcol_receiver_pythongil_functions attribute
	// sets, counted while it is attached.
	functions []attribute.Set
}

// process is one probed interpreter.
type process struct {
	pid       uint32
	res       procresource.Resource
	version   string
	startTime pcommon.Timestamp
	exited    bool
	// hists hold the windows that came as events, keyed by kind and (with
	// per_thread) thread.
	hists map[histKey]*histogram
	// estimates are the time and switch counters scaled by the sampling
	// ratio; raw are the unscaled values they were last computed from.
	estimates map[counterKey]float64
	raw       map[counterKey]float64
	// aggEst are the kernel's short-window aggregates scaled by the
	// sampling ratio; aggRaw the raw totals they were last computed from.
	aggEst map[histKey]aggEstimate
	aggRaw map[histKey]gil.Aggregate
	// threadNames caches each thread's name ("" when it has none of its
	// own), read once per thread.
	threadNames map[uint32]string
	// sampling is the process's library's ratio (dutyCycle.ratioOf); 0
	// until the duty cycle sets one: the receiver's. lib is that library,
	// set with it.
	sampling float64
	lib      *gil.Library
}

type histKey struct {
	kind gil.Kind
	tid  uint32
	gen  int // GC generation, -1 for other kinds
}

type counterKey struct {
	kind gil.Kind
	tid  uint32
}

func newRunState(cfg *Config, probe *gil.Probe, clock *window.Clock, scanner *discovery.Scanner, node procresource.Node, logger *zap.Logger, refused *refusals) *runState {
	st := &runState{
		cfg: cfg, probe: probe, clock: clock, scanner: scanner, node: node, logger: logger, refusals: refused,
		libraries: map[discovery.FileID]*library{},
		skipped:   map[discovery.FileID]string{},
		processes: map[uint32]*process{},
		statuses:  discovery.NewStatuses(logger, refused.countStatus),
		sampling:  1,
	}
	st.open = scanner.Open
	st.resetPending()
	return st
}

func (st *runState) resetPending() {
	st.pending = plog.NewLogs()
	st.pendingByPID = map[uint32]plog.LogRecordSlice{}
	st.pendingCount = 0
	st.lastWait = map[threadKey]pendingWait{}
}

type threadKey struct{ pid, tid uint32 }

// pendingWait is a wait in the pending batch: its record, the event it was
// made from, and the histogram and ratio it was recorded with.
type pendingWait struct {
	lr   plog.LogRecord
	ev   gil.Event
	hist *histogram
	kept float64
}

// join lengthens the thread's pending wait by ev when ev continues it: the
// kernel sent the wait at a wake-up that found the GIL free, and another
// thread took the GIL first; the two parts are one wait. A continuation
// whose first part already left (another batch) is a window of its own.
func (st *runState) join(ev gil.Event) bool {
	k := threadKey{ev.PID, ev.TID}
	pw, ok := st.lastWait[k]
	if !ok {
		return false
	}
	joined := pw.ev
	if !gil.Join(&joined, ev) {
		return false
	}
	pw.hist.unrecord(pw.ev.Duration, pw.kept)
	pw.hist.record(joined.Duration, pw.kept)
	pw.lr.Attributes().PutInt(window.AttrDuration, int64(joined.Duration))
	pw.ev = joined
	st.lastWait[k] = pw
	return true
}

// close detaches every library and releases the probe.
func (st *runState) close() error {
	var errs []error
	for id, l := range st.libraries {
		errs = append(errs, l.lib.Close())
		st.countFunctions(l.functions, -1)
		delete(st.libraries, id)
	}
	errs = append(errs, st.probe.Close())
	return errors.Join(errs...)
}

func (st *runState) liveProcesses() int {
	n := 0
	for _, p := range st.processes {
		if !p.exited {
			n++
		}
	}
	return n
}

// discover scans for interpreters, attaches libraries new to the receiver,
// marks processes that are gone and detaches libraries no process maps.
func (st *runState) discover() {
	found, refused, err := st.scanner.Scan()
	if err != nil {
		st.logger.Warn("discovering Python processes", zap.Error(err))
		return
	}
	for _, r := range refused {
		st.refuse(r)
	}
	live := map[uint32]struct{}{}
	for _, in := range found {
		if st.consider(in) {
			live[uint32(in.Resource.PID)] = struct{}{}
		}
	}
	for pid, p := range st.processes {
		if _, ok := live[pid]; !ok {
			p.exited = true
		}
	}
	st.statuses.Prune(func(pid int, start uint64) bool {
		_, ok := live[uint32(pid)]
		return ok || st.scanner.Alive(pid, start)
	})
	for id, l := range st.libraries {
		for pid := range l.pids {
			if _, ok := live[pid]; !ok {
				delete(l.pids, pid)
			}
		}
		if len(l.pids) == 0 {
			st.detach(id, l)
		}
	}
}

// arrived handles what the process events found: interpreters are probed
// at once, exited processes marked and their libraries detached when no
// other process maps them. It reports whether events were lost (scan).
func (st *runState) arrived(a discovery.Arrivals) bool {
	for _, r := range a.Refused {
		st.refuse(r)
	}
	for _, in := range a.Interpreters {
		st.consider(in)
	}
	for _, pid := range a.Exited {
		st.exit(pid)
	}
	return a.Overflow
}

// exit ends what the receiver holds for pid at its exit event: the process
// is marked exited and its library detached when no other process maps it.
// A process of that pid that still runs with its start time is a later
// one, found before the earlier one's exit was taken: it is kept.
func (st *runState) exit(pid int) {
	st.statuses.Exit(pid, st.scanner.Ended)
	if p, ok := st.processes[uint32(pid)]; ok {
		if !st.scanner.Ended(pid, p.res.StartTicks) {
			return
		}
		p.exited = true
	}
	for id, l := range st.libraries {
		if _, ok := l.pids[uint32(pid)]; ok {
			delete(l.pids, uint32(pid))
			if len(l.pids) == 0 {
				st.detach(id, l)
			}
		}
	}
}

func (st *runState) detach(id discovery.FileID, l *library) {
	if err := l.lib.Close(); err != nil {
		st.logger.Warn("detaching probes", zap.Error(err))
	}
	st.countFunctions(l.functions, -1)
	delete(st.libraries, id)
}

// refuse counts and logs a process the scanner refused.
func (st *runState) refuse(r discovery.Refusal) {
	st.refusals.refuse(r.Err, zap.Int("pid", r.PID))
	reason, _ := refusalReason(r.Err)
	st.statuses.Set(r.PID, r.StartTicks, discovery.StateRefused, reason)
}

// Why a Python process is refused besides the refusal reasons (refusal.go):
// the values of its status's reason.
const (
	reasonFreeThreaded = "free_threaded"
	reasonNoGILSymbols = "no_gil_symbols"
	reasonAttachFailed = "attach_failed"
)

// countStatus moves a process between the states of
// otelcol_receiver_pythongil_processes ("" is none).
func (r *refusals) countStatus(from, to discovery.State) {
	if r.tel == nil {
		return
	}
	for _, c := range []struct {
		state discovery.State
		delta int64
	}{{from, -1}, {to, 1}} {
		if c.state != "" {
			r.tel.ReceiverPythongilProcesses.Add(context.Background(), c.delta, metric.WithAttributeSet(attribute.NewSet(attribute.String("state", string(c.state)))))
		}
	}
}

// consider probes one interpreter found by a scan or at its exec: attaches
// its file's probes unless they are attached already, and selects the
// process. It reports whether the process is probed.
func (st *runState) consider(in discovery.Interpreter) bool {
	pid := uint32(in.Resource.PID)
	if in.FreeThreaded {
		if _, ok := st.skipped[in.FileID]; !ok {
			st.skipped[in.FileID] = reasonFreeThreaded
			st.logger.Info("free-threaded CPython build: it has no GIL, nothing to probe",
				zap.Int("pid", in.Resource.PID), zap.String("file", in.Path), zap.String("version", in.Version))
		}
		st.statuses.Set(in.Resource.PID, in.Resource.StartTicks, discovery.StateRefused, reasonFreeThreaded)
		return false
	}
	lib, ok := st.libraries[in.FileID]
	if !ok {
		if reason, skip := st.skipped[in.FileID]; skip {
			st.statuses.Set(in.Resource.PID, in.Resource.StartTicks, discovery.StateRefused, reason)
			return false
		}
		st.statuses.Set(in.Resource.PID, in.Resource.StartTicks, discovery.StateFound, "")
		l, err := st.attach(in)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				// The process went away mid-attach (or the path
				// names nothing in its root); another process mapping
				// the same file will bring it back.
				st.logger.Debug("file not found while attaching", zap.Int("pid", in.Resource.PID), zap.Error(err))
				st.statuses.Forget(in.Resource.PID)
				return false
			}
			reason := reasonAttachFailed
			switch {
			case st.refusals.refuse(err, zap.Int("pid", in.Resource.PID), zap.String("file", in.Path), zap.Stringer("file_id", in.FileID)):
				reason, _ = refusalReason(err)
			case errors.Is(err, gil.ErrNoSymbols):
				reason = reasonNoGILSymbols
				st.logger.Debug("skipping process without CPython GIL symbols", zap.Int("pid", in.Resource.PID), zap.Error(err))
			default:
				st.logger.Warn("cannot probe CPython", zap.Int("pid", in.Resource.PID), zap.String("file", in.Path), zap.Error(err))
			}
			st.skipped[in.FileID] = reason
			st.statuses.Set(in.Resource.PID, in.Resource.StartTicks, discovery.StateRefused, reason)
			return false
		}
		lib = &library{lib: l, pids: map[uint32]struct{}{}}
		st.libraries[in.FileID] = lib
		var missing []string
		lib.functions, missing = functionSources(l, st.cfg.GC)
		st.countFunctions(lib.functions, 1)
		st.logFunctions(in, l, missing)
		gc, gcErr := l.GC()
		st.logger.Debug("probing CPython", zap.Int("pid", in.Resource.PID), zap.String("file", in.Path), zap.String("version", in.Version),
			zap.Bool("switch_probes", l.Symbols().Switch()), zap.String("gc", gc), zap.NamedError("gc_usdt", gcErr))
	}
	lib.pids[pid] = struct{}{}
	if lib.lib.Detached() {
		// Mapping a library the budget detached for now.
		if err := st.probe.Detach(map[*gil.Library][]uint32{lib.lib: {pid}}); err != nil {
			st.logger.Warn("marking a process detached", zap.Uint32("pid", pid), zap.Error(err))
		}
	}
	if st.cfg.filtered() {
		if err := st.probe.Select(pid); err != nil {
			st.logger.Warn("selecting process", zap.Uint32("pid", pid), zap.Error(err))
		}
	}
	if in.DataHi > in.DataLo && st.probe.WaitsFromFutex() {
		if err := st.probe.SetDataRange(pid, in.DataLo, in.DataHi); err != nil {
			st.logger.Warn("telling the probes where the GIL is", zap.Uint32("pid", pid), zap.Error(err))
		}
	}
	p := st.process(pid)
	p.res, p.version, p.exited = in.Resource, in.Version, false
	st.statuses.Set(in.Resource.PID, in.Resource.StartTicks, discovery.StateProbed, "")
	return true
}

// attach opens in's file inside its process's root, checks it is the file
// mapped, and attaches the probes through that one descriptor. A panic
// while decoding the file is returned as an error wrapping
// discovery.ErrPanic: that file is refused, the others are probed.
func (st *runState) attach(in discovery.Interpreter) (l *gil.Library, err error) {
	defer func() {
		if p := recover(); p != nil {
			l, err = nil, discovery.Recovered(fmt.Sprintf("pythongil: pid %d: %s", in.Resource.PID, in.Path), p)
		}
	}()
	f, err := st.open(in)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return st.probe.Attach(f)
}

// filtered reports whether the include keys select processes.
func (cfg *Config) filtered() bool {
	in := cfg.Include
	return len(in.Executables) > 0 || len(in.CommandLines) > 0 || len(in.PIDs) > 0
}

// process returns pid's state, creating it for a process the probes saw
// before discovery did (a new process mapping an already probed library).
func (st *runState) process(pid uint32) *process {
	if p, ok := st.processes[pid]; ok {
		return p
	}
	p := &process{
		pid:         pid,
		startTime:   pcommon.NewTimestampFromTime(time.Now()),
		hists:       map[histKey]*histogram{},
		estimates:   map[counterKey]float64{},
		raw:         map[counterKey]float64{},
		aggEst:      map[histKey]aggEstimate{},
		aggRaw:      map[histKey]gil.Aggregate{},
		threadNames: map[uint32]string{},
	}
	in, ok, err := st.scanner.Candidate(int(pid))
	if err != nil {
		st.refusals.refuse(err, zap.Uint32("pid", pid))
	}
	if ok {
		p.res, p.version = in.Resource, in.Version
	} else {
		p.res = procresource.Resource{PID: int(pid)}
	}
	st.processes[pid] = p
	return p
}

// add records one event: into its process's histogram and, as a window,
// into the pending logs; a wait's continuation lengthens the thread's
// pending wait instead (join). It reports whether the batch is full.
func (st *runState) add(ev gil.Event) bool {
	if ev.Continues && st.join(ev) {
		return false
	}
	p := st.process(ev.PID)
	tid := uint32(0)
	if st.cfg.PerThread {
		tid = ev.TID
	}
	key := histKey{kind: ev.Kind, tid: tid, gen: -1}
	if ev.Kind == gil.KindGC {
		key.gen = int(ev.Generation)
	}
	h, ok := p.hists[key]
	if !ok {
		h = newHistogram(st.cfg.MinDuration)
		p.hists[key] = h
	}
	kept := keptRatio(st.cfg, ev.Kind, st.samplingAt(p, ev.Start+int64(ev.Duration)))
	h.record(ev.Duration, kept)

	kind, ok := windowKind(ev.Kind)
	if !ok {
		return false
	}
	recs, ok := st.pendingByPID[ev.PID]
	if !ok {
		rl := st.pending.ResourceLogs().AppendEmpty()
		st.putResource(rl.Resource(), p)
		recs = newScopeLogs(rl).LogRecords()
		st.pendingByPID[ev.PID] = recs
	}
	w := window.Window{Kind: kind, Start: st.clock.ToUnixNano(ev.Start), Duration: ev.Duration, ThreadID: int64(ev.TID), ThreadName: st.threadName(p, ev.TID)}
	if w.Start <= 0 {
		// Only a clock offset gone wrong can do this; Encode would refuse.
		st.logger.Debug("window before the Unix epoch", zap.Int64("start", w.Start))
		return false
	}
	lr := recs.AppendEmpty()
	lr.SetObservedTimestamp(pcommon.NewTimestampFromTime(time.Now()))
	// Encode cannot fail here: the kind is known, start positive and the
	// duration unsigned in the kernel.
	_ = window.Encode(w, lr)
	attrs := lr.Attributes()
	switch ev.Kind {
	case gil.KindWait:
		if cause := causeName(ev.Cause); cause != "" {
			attrs.PutStr(window.AttrPythonGILWaitCause, cause)
		}
		st.lastWait[threadKey{ev.PID, ev.TID}] = pendingWait{lr: lr, ev: ev, hist: h, kept: kept}
	case gil.KindGC:
		attrs.PutInt(window.AttrPythonGCGeneration, int64(ev.Generation))
	}
	if kept < 1 {
		attrs.PutDouble(window.AttrSamplingRatio, kept)
	}
	st.pendingCount++
	return st.pendingCount >= st.cfg.MaxBatchSize
}

// threadName returns the kernel's name for a thread when the thread has
// one of its own: the JVM names its threads (a Java thread calling into
// Python through Jep shows as "jep-worker-0"), Python threads keep the
// process's name unless a library renames them. The name is read once, when
// the thread's first window arrives.
func (st *runState) threadName(p *process, tid uint32) string {
	if name, ok := p.threadNames[tid]; ok {
		return name
	}
	if len(p.threadNames) >= maxThreadNames {
		return ""
	}
	base := filepath.Join(st.cfg.ProcRoot, strconv.Itoa(int(p.pid)))
	name := readComm(filepath.Join(base, "task", strconv.Itoa(int(tid)), "comm"))
	if name != "" && name == readComm(filepath.Join(base, "comm")) {
		name = ""
	}
	p.threadNames[tid] = name
	return name
}

// maxThreadNames bounds the per-process cache of thread names.
const maxThreadNames = 4096

// readComm reads a comm file of the proc filesystem (the kernel's is at
// most 16 bytes), capped all the same: the proc root may be a tenant's
// bind mount.
func readComm(path string) string {
	data, err := procroot.ReadProcFile(path, 64)
	if err != nil {
		return ""
	}
	return strings.TrimRight(string(data), "\n")
}

// putResource writes a process's resource: the node and process identity
// (procresource.PutIdentity), the runtime and the executable.
func (st *runState) putResource(res pcommon.Resource, p *process) {
	a := res.Attributes()
	id := p.res.Identity()
	id.PID = int(p.pid)
	procresource.PutIdentity(a, id, st.node)
	a.PutStr(window.ResourceRuntimeName, window.RuntimeCPython)
	if p.version != "" {
		a.PutStr(window.ResourceRuntimeVersion, p.version)
	}
	if p.res.ExecutableName != "" {
		a.PutStr("process.executable.name", p.res.ExecutableName)
	}
}

// takeLogs hands over the pending windows.
func (st *runState) takeLogs() (plog.Logs, int) {
	out, n := st.pending, st.pendingCount
	st.resetPending()
	return out, n
}

func windowKind(k gil.Kind) (window.Kind, bool) {
	switch k {
	case gil.KindReleased:
		return window.KindPythonGILReleased, true
	case gil.KindWait:
		return window.KindPythonGILWait, true
	case gil.KindGC:
		return window.KindPythonGCPause, true
	}
	return "", false
}

func causeName(c gil.Cause) string {
	switch c {
	case gil.CauseRestore:
		return window.GILWaitCauseRestore
	case gil.CauseEnsure:
		return window.GILWaitCauseEnsure
	case gil.CauseSwitch:
		return window.GILWaitCauseSwitch
	}
	return ""
}
