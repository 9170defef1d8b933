package attach

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/otelcol-ai/otelcol-ai/internal/fsdeadline"
	"github.com/otelcol-ai/otelcol-ai/internal/procresource"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/discovery"
)

// RecordingName names the recordings the receiver starts; JFR.stop names
// it, so only those are ever stopped.
const RecordingName = "otelcol-ai"

// The recording's bounds: what it keeps on disk in the JVM's repository
// (HotSpot deletes the oldest chunks past either), and how often the JVM
// flushes (what the receiver reads each poll).
const (
	RecordingMaxAge  = "10m"
	RecordingMaxSize = "64m"
)

// A JVM that does not take the commands yet (JFR registers its commands
// late in a JVM's start, and initializes on the first) is tried once per
// discovery until it has been tried maxTries times over at least
// minTrying; maxReason is what is kept of a JVM's answer in a status (it
// comes from the JVM's socket, the container's to write).
const (
	maxTries  = 5
	minTrying = time.Minute
	maxReason = 4 << 10
)

// PodPolicy tells whether a pod (by UID, as its processes' cgroups name
// it) opted out of attaching. It is asked from the goroutines that read
// JVMs' opt-outs, several at once.
type PodPolicy interface {
	// OptOut returns what opted the pod out ("" for nothing), and false
	// when that cannot be read yet (the pod not in the pod list, the API
	// not answering), with why: the JVM is then not attached, and looked
	// at again at the next discovery.
	OptOut(podUID string) (reason string, known bool)
}

// RecorderConfig configures a Recorder.
type RecorderConfig struct {
	// ProcRoot is the proc filesystem the JVMs' pids are in.
	ProcRoot string
	// Enabled starts recordings; false only reports what is seen.
	Enabled bool
	// Timeout bounds one attach exchange.
	Timeout time.Duration
	// SafepointLog, with Enabled, adds a log of its safepoints to a JVM
	// whose own recordings leave short ones out (safepointlog.go).
	SafepointLog bool
	// Settings puts the .jfc to record with where the JVM reads it and
	// returns its path as the JVM sees it and a cleanup.
	Settings func(discovery.JVM) (path string, cleanup func(), err error)
	// Pods, when set, is asked about JVMs in a pod (k8s.pod.uid from
	// their cgroup).
	Pods PodPolicy
	// Logger gets one line per status change.
	Logger *zap.Logger
	// Stalled, when set, is called once for each attach exchange that has
	// not returned after Timeout and stallGrace (a call hanging on the
	// JVM's /tmp or working directory, a stalled mount in its container),
	// and once for each read of a JVM's opt-out that has not returned
	// after checkStall.
	Stalled func()
}

// stallGrace is how long past Timeout an exchange may run before it is
// taken as stalled: Timeout bounds its socket calls, not its calls on the
// JVM's files (a stat, a create or a remove on a stalled FUSE or NFS mount
// blocks until the mount answers).
const stallGrace = 2 * time.Second

// A JVM's opt-out is read in a goroutine of its own: its /proc/<pid>
// environ and cmdline block while the process's memory map is locked, and
// its namespace's read from the API takes up to namespaceTimeout. Consider
// waits for the read checkWait (the /proc reads and the informer's lookup
// take microseconds, a namespace read milliseconds) and takes a slower one
// at a later discovery, the other JVMs looked at meanwhile; one that has
// not returned after checkStall (the deadline on a tenant's files and the
// namespace read's own) hangs, and is reported once.
const (
	checkWait  = 250 * time.Millisecond
	checkStall = fsdeadline.Timeout + namespaceTimeout
)

type jvmKey struct {
	pid   int
	start uint64
}

type jvmEntry struct {
	jvm    discovery.JVM
	status Status
	tries  int
	first  time.Time // the first try
	ours   bool      // a recording named RecordingName runs, which we stop
	// pending is the attach exchange running now (start), nil when none;
	// since is when it began, stalled says its stall was reported.
	pending *fsdeadline.Call[tryOutcome]
	since   time.Time
	stalled bool
	// check is the read of its opt-out running now (mayAttach), nil when
	// none; checkSince and checkStalled are since and stalled for it.
	check        *fsdeadline.Call[optOutRead]
	checkSince   time.Time
	checkStalled bool
	checked      bool // command line and environment read (they do not change)
	disabled     bool // -XX:+DisableAttachMechanism
	// log is its safepoint log, for a JVM that records JFR itself
	// (safepointlog.go).
	log jvmLog
	// theirs says why it records JFR itself (its status reason without
	// the log's part).
	theirs string
}

// Recorder decides for every discovered JVM whether the receiver starts a
// recording in it, starts it (JFR.start through the attach protocol),
// keeps each JVM's Status, and stops its recordings at the end. Use it from
// one goroutine. Its map is bounded by the JVMs running (Forget).
type Recorder struct {
	cfg    RecorderConfig
	reader *procresource.Reader
	jvms   map[jvmKey]*jvmEntry
}

// NewRecorder returns a Recorder.
func NewRecorder(cfg RecorderConfig) *Recorder {
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	return &Recorder{cfg: cfg, reader: procresource.NewReader(cfg.ProcRoot, 0), jvms: map[jvmKey]*jvmEntry{}}
}

// target is the attach exchange with j: the one place a Target is made
// from a discovered JVM, in the recorder's proc root, within its timeout.
func (r *Recorder) target(j discovery.JVM) Target {
	return NewTarget(r.cfg.ProcRoot, j.PID, j.NSPID, j.StartTicks, r.cfg.Timeout)
}

// Consider looks at one discovered JVM, hasRepository telling whether its
// JFR repository was found: a JVM that records JFR is read, never given a
// second recording; one whose owner opted out is left alone; any other gets
// a recording once it can take one. Nothing it does waits on the JVM for
// long: its opt-out is read (mayAttach) and its recording started (start)
// in goroutines of their own. It returns an error only for a failure worth
// reporting (once per JVM).
func (r *Recorder) Consider(j discovery.JVM, hasRepository bool) error {
	k := jvmKey{j.PID, j.StartTicks}
	e := r.jvms[k]
	if e == nil {
		e = &jvmEntry{jvm: j}
		r.jvms[k] = e
	}
	if e.pending != nil {
		// Still exchanging (nil), or what the exchange found; a JVM not
		// ready yet is tried again at the next discovery.
		err := r.settle(e)
		if e.pending != nil && !e.stalled && time.Since(e.since) > r.cfg.Timeout+stallGrace {
			e.stalled = true
			r.set(e, StateFound, fmt.Sprintf("an attach exchange has not returned after %v: a call on its files hangs (a stalled mount in its /tmp or working directory?); it is not tried again until it returns", r.cfg.Timeout+stallGrace))
			if r.cfg.Stalled != nil {
				r.cfg.Stalled()
			}
		}
		return err
	}
	switch {
	case e.ours:
		r.set(e, StateRecordingOurs, "started by the receiver ("+RecordingName+")")
		return nil
	case hasRepository && e.tries == 0:
		// After a try of ours (a JFR.start that timed out may still have
		// run) start's JFR.check tells whose recording the repository is.
		r.theirs(e, "its own recording's disk repository")
		return nil
	case j.StartsRecording:
		r.theirs(e, "-XX:StartFlightRecording")
		return nil
	case e.status.State == StateRecordingTheirs:
		r.theirs(e, e.theirs)
		return nil
	case e.status.State == StateOptedOut || e.status.State == StateRefused:
		return nil // decided for this JVM's life
	case !r.cfg.Enabled:
		r.set(e, StateFound, "repositories::attach::enabled is false")
		return nil
	}
	if !r.mayAttach(e) {
		return nil
	}
	if e.disabled {
		r.set(e, StateRefused, "-XX:+DisableAttachMechanism (attach is off in the JVM)")
		return nil
	}
	return r.start(e)
}

// mayAttach reports whether the JVM's owner lets it be attached now. The
// read runs in a goroutine of its own, waited for checkWait once: one not
// back by then is taken at a later Consider, and reported stalled once
// after checkStall. It sets the JVM's status when the answer is no, or not
// back yet.
func (r *Recorder) mayAttach(e *jvmEntry) bool {
	var (
		res optOutRead
		ok  bool
	)
	switch {
	case e.check == nil:
		e.check, e.checkSince, e.checkStalled = fsdeadline.Start(r.readOptOut(e.jvm, e.checked)), time.Now(), false
		ctx, cancel := context.WithTimeout(context.Background(), checkWait)
		res, ok = e.check.Wait(ctx)
		cancel()
	case e.check.Done():
		res, ok = e.check.Wait(context.Background())
	}
	if !ok {
		switch {
		case !e.checkStalled && time.Since(e.checkSince) > checkStall:
			e.checkStalled = true
			r.set(e, StateFound, fmt.Sprintf("reading its opt-out (its /proc environ, cmdline and cgroup, its pod and namespace) has not returned after %v; it is not attached until it does", checkStall))
			if r.cfg.Stalled != nil {
				r.cfg.Stalled()
			}
		case e.status.State == "":
			r.set(e, StateFound, "reading its opt-out")
		}
		return false
	}
	e.check = nil
	if res.checked {
		e.checked, e.disabled = true, res.disabled
	}
	if res.state != "" {
		r.set(e, res.state, res.reason)
		return false
	}
	return true
}

// optOutRead is what a read of a JVM's opt-out found: the state that keeps
// it from being attached now and why ("" when none), and, when its own
// switches were read (checked), whether attach is off in it.
type optOutRead struct {
	state    State
	reason   string
	checked  bool
	disabled bool
}

// readOptOut returns the read of j's opt-out, for a goroutine of its own:
// its owner's switches unless checked already (they do not change), then
// its pod's. An opt-out that cannot be read means no attach until it can.
func (r *Recorder) readOptOut(j discovery.JVM, checked bool) func() optOutRead {
	return func() optOutRead {
		var res optOutRead
		if !checked {
			if why := ProcessOptOut(r.reader, j.PID); why != "" {
				return optOutRead{state: StateOptedOut, reason: why}
			}
			res.checked, res.disabled = true, AttachDisabled(r.reader, j.PID)
		}
		res.state, res.reason = r.podOptOut(j)
		return res
	}
}

// podOptOut returns the state that the JVM's pod or namespace keeps it in,
// and why: opted out, or its opt-out cannot be read; "" when nothing does.
func (r *Recorder) podOptOut(j discovery.JVM) (State, string) {
	if r.cfg.Pods == nil {
		return "", ""
	}
	id, cgroup, err := r.reader.IdentityWithCgroup(j.PID)
	if err != nil || id.StartTicks != j.StartTicks {
		return StateFound, "process gone"
	}
	if id.PodUID == "" {
		// Its pod's opt-out is unknown where the cgroup (the same
		// process's) cannot be read, or lies under a kubepods hierarchy
		// all the same.
		switch {
		case cgroup.Err != nil:
			return StateOptOutUnknown, "its cgroup cannot be read, so neither can its pod's opt-out: " + cgroup.Err.Error()
		case bytes.Contains(cgroup.Data, []byte("kubepods")):
			return StateOptOutUnknown, "its cgroup names a Kubernetes pod, not by a pod UID (8-4-4-4-12): a static pod (named by its config hash) or an unknown layout, whose opt-out cannot be looked up"
		}
		return "", ""
	}
	why, known := r.cfg.Pods.OptOut(id.PodUID)
	switch {
	case !known:
		return StateOptOutUnknown, "pod " + id.PodUID + ": " + why
	case why != "":
		return StateOptedOut, why
	}
	return "", ""
}

// tryOutcome is what one try's attach exchange found: why the JVM is not
// ready ("" when it is), JFR.check's answer (or its error), then, when no
// recording ran, JFR.start's error.
type tryOutcome struct {
	notReady string
	check    string
	checkErr error
	started  bool // JFR.start was sent
	startErr error
}

// start checks that the JVM is ready and runs no recording (an in-memory
// one has no repository), and starts the receiver's. The exchange runs in
// a goroutine of its own, its readiness check (a look in the JVM's /tmp)
// included: a busy JVM can take seconds to answer, a JVM's first JFR
// command initializes JFR in it, and a call on a stalled mount in its
// container does not return at all. Discovery and the reading of every
// other JVM go on meanwhile, and a later Consider takes the outcome.
func (r *Recorder) start(e *jvmEntry) error {
	j := e.jvm
	t := r.target(j)
	if e.status.State == "" {
		r.set(e, StateFound, "attaching (readiness, JFR.check, then JFR.start)")
	}
	e.pending = fsdeadline.Start(func() tryOutcome {
		var x tryOutcome
		if ok, why := t.Ready(); !ok {
			x.notReady = why
			return x
		}
		x.check, x.checkErr = t.Jcmd("JFR.check")
		if x.checkErr == nil {
			if _, running := runningRecording(x.check); !running {
				x.started = true
				x.startErr = r.startRecording(j, t)
			}
		}
		return x
	})
	e.since, e.stalled = time.Now(), false
	return nil
}

// settle takes the outcome of e's exchange when it has come; nil while it
// has not.
func (r *Recorder) settle(e *jvmEntry) error {
	if !e.pending.Done() {
		return nil
	}
	x, _ := e.pending.Wait(context.Background())
	e.pending = nil
	return r.outcome(e, x)
}

// outcome records what an exchange found.
func (r *Recorder) outcome(e *jvmEntry, x tryOutcome) error {
	if x.notReady != "" {
		r.set(e, StateFound, "not started far enough to attach ("+x.notReady+")")
		return nil
	}
	e.tries++
	if e.tries == 1 {
		e.first = time.Now()
	}
	j := e.jvm
	err := x.checkErr
	if err == nil {
		if !x.started {
			name, _ := runningRecording(x.check)
			if name == RecordingName {
				// A collector before this one started it and did not stop
				// it: ours to read and stop.
				e.ours = true
				r.set(e, StateRecordingOurs, "adopted a running recording named "+RecordingName)
			} else {
				r.theirs(e, "recording "+name+" runs without a disk repository (JFR.check)")
			}
			return nil
		}
		err = x.startErr
	}
	if err == nil {
		e.ours = true
		r.set(e, StateRecordingOurs, "started by the receiver ("+RecordingName+")")
		return nil
	}
	// The first JFR command initializes JFR in the JVM, which can take
	// longer than the timeout in a busy JVM: the JVM goes on with it, and
	// the next try finds it done. So does an attach listener slower to
	// start than the timeout (the next try finds its socket).
	if (NotYet(err) || errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, ErrNoListener)) && (e.tries < maxTries || time.Since(e.first) < minTrying) {
		r.set(e, StateFound, "JFR not ready in the JVM yet")
		return nil
	}
	if errors.Is(err, ErrGone) {
		return nil
	}
	r.set(e, StateRefused, err.Error())
	return fmt.Errorf("attach: starting a recording in pid %d: %w", j.PID, err)
}

func (r *Recorder) startRecording(j discovery.JVM, t Target) error {
	settings, cleanup, err := r.cfg.Settings(j)
	if err != nil {
		return err
	}
	defer cleanup()
	_, err = t.Jcmd(fmt.Sprintf("JFR.start name=%s settings=%s disk=true maxage=%s maxsize=%s", RecordingName, settings, RecordingMaxAge, RecordingMaxSize))
	return err
}

// runningRecording reads JFR.check's answer ("Recording 1: name=x
// maxsize=… (running)" per recording, or "No available recordings."): the
// name of a running recording, ours when there is one.
func runningRecording(out string) (name string, running bool) {
	for line := range strings.SplitSeq(out, "\n") {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "Recording ") || !strings.HasSuffix(line, "(running)") {
			continue
		}
		n := ""
		if _, after, ok := strings.Cut(line, " name="); ok {
			n, _, _ = strings.Cut(after, " ")
		}
		if !running || n == RecordingName {
			name, running = n, true
		}
	}
	return name, running
}

// theirs records that e records JFR itself (why), and looks at it for the
// safepoint log.
func (r *Recorder) theirs(e *jvmEntry, why string) {
	e.theirs = why
	if more := r.considerLog(e); more != "" {
		why += "; " + more
	}
	r.set(e, StateRecordingTheirs, why)
}

// set records e's status and logs a change.
func (r *Recorder) set(e *jvmEntry, state State, reason string) {
	if len(reason) > maxReason {
		reason = reason[:maxReason]
	}
	s := Status{State: state, Reason: reason}
	if e.status == s {
		return
	}
	e.status = s
	r.cfg.Logger.Info("JVM status", zap.Int("pid", e.jvm.PID), zap.Int("vpid", e.jvm.NSPID),
		zap.String("state", string(state)), zap.String("reason", reason))
}

// Status returns a JVM's status (false when it is not known).
func (r *Recorder) Status(pid int, startTicks uint64) (Status, bool) {
	e := r.jvms[jvmKey{pid, startTicks}]
	if e == nil {
		return Status{}, false
	}
	return e.status, true
}

// Counts returns the number of JVMs in each state (every state present).
func (r *Recorder) Counts() map[State]int64 {
	out := make(map[State]int64, len(States))
	for _, s := range States {
		out[s] = 0
	}
	for _, e := range r.jvms {
		out[e.status.State]++
	}
	return out
}

// Forget drops the JVMs for which alive is false (exited).
func (r *Recorder) Forget(alive func(pid int, startTicks uint64) bool) {
	for k := range r.jvms {
		if !alive(k.pid, k.start) {
			delete(r.jvms, k)
		}
	}
}

// StopAll stops the recordings the receiver started (JFR.stop by name),
// in the JVMs still running with the start time they had: a pid that names
// another process now is left alone. The stops run at once, and the
// exchanges in flight are waited for meanwhile (a JFR.start in flight may
// start a recording: its outcome says whether to stop one), all under one
// deadline (Timeout and stallGrace), so that JVMs whose files hang hold
// the shutdown no longer than one; what has not returned by then is left
// to finish on its own.
func (r *Recorder) StopAll() {
	ctx, cancel := context.WithTimeout(context.Background(), r.cfg.Timeout+stallGrace)
	defer cancel()
	type stopped struct {
		pid int
		log bool // a safepoint log removed, not a recording stopped
		err error
	}
	done := make(chan stopped, 2*len(r.jvms))
	running := 0
	stop := func(k jvmKey, e *jvmEntry) {
		delete(r.jvms, k)
		t := r.target(e.jvm)
		running++
		go func() {
			_, err := t.Jcmd("JFR.stop name=" + RecordingName)
			done <- stopped{pid: t.PID, err: err}
		}()
	}
	unlog := func(e *jvmEntry) {
		t, path := r.target(e.jvm), e.log.path
		e.log.state = logNotAdded
		running++
		go func() { done <- stopped{pid: t.PID, log: true, err: removeLog(t, path)} }()
	}
	for _, e := range r.jvms {
		if e.log.call != nil && !e.log.stalled {
			if x, ok := e.log.call.Wait(ctx); ok {
				e.log.call = nil
				r.logOutcome(e, x)
			} else {
				r.cfg.Logger.Warn("adding a safepoint log still running at shutdown; a log it adds is not removed (HotSpot rotates it within 3 MiB)", zap.Int("pid", e.jvm.PID))
			}
		}
		if e.log.state == logAdded {
			unlog(e)
		}
	}
	for k, e := range r.jvms {
		if e.pending == nil && e.ours {
			stop(k, e)
		}
	}
	for k, e := range r.jvms {
		switch {
		case e.pending == nil:
			continue
		case e.stalled:
			// Hung past Timeout and stallGrace already: not waited for.
			r.cfg.Logger.Warn("attach exchange still hanging at shutdown; a recording it starts is not stopped (its maxage and maxsize bound it)", zap.Int("pid", e.jvm.PID))
			continue
		}
		x, ok := e.pending.Wait(ctx)
		if !ok {
			r.cfg.Logger.Warn("attach exchange still running at shutdown; a recording it starts is not stopped (its maxage and maxsize bound it)", zap.Int("pid", e.jvm.PID))
			continue
		}
		e.pending = nil
		_ = r.outcome(e, x)
		if e.ours {
			stop(k, e)
		}
	}
	for ; running > 0; running-- {
		select {
		case s := <-done:
			switch {
			case errors.Is(s.err, ErrGone):
			case s.err != nil && s.log:
				r.cfg.Logger.Warn("removing the safepoint log the receiver added", zap.Int("pid", s.pid), zap.Error(s.err))
			case s.err != nil:
				r.cfg.Logger.Warn("stopping the JFR recording the receiver started", zap.Int("pid", s.pid), zap.Error(s.err))
			case s.log:
				r.cfg.Logger.Info("removed the safepoint log the receiver added", zap.Int("pid", s.pid))
			default:
				r.cfg.Logger.Info("stopped the JFR recording the receiver started", zap.Int("pid", s.pid))
			}
		case <-ctx.Done():
			r.cfg.Logger.Warn("JFR recordings or safepoint logs the receiver started still being stopped at shutdown; left to finish (their bounds hold them)", zap.Int("jvms", running))
			return
		}
	}
}
