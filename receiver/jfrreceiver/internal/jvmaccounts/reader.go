package jvmaccounts

import (
	"context"
	"fmt"
	"time"

	"github.com/otelcol-ai/otelcol-ai/internal/fsdeadline"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/attach"
)

// Outcomes of a JNI reference read, as otelcol_receiver_jfr_jni_reads
// counts them.
const (
	ReadOK             = "ok"
	ReadSkippedThreads = "skipped_threads"
	ReadFailed         = "failed"
)

// ReaderConfig configures a Reader.
type ReaderConfig struct {
	// ProcRoot is the proc filesystem the JVMs' pids are in.
	ProcRoot string
	// Interval is the least time between two thread dumps of one JVM.
	Interval time.Duration
	// MaxThreads skips a JVM with more threads (Java and native, from
	// /proc/<pid>/status): its thread dump would hold it longer.
	MaxThreads int64
	// Timeout bounds one attach exchange.
	Timeout time.Duration
	// OptOut says why a JVM must not be attached to ("" when it may be).
	// It runs on the read's goroutine, as it may read the process's
	// environment (which blocks while its memory map is locked).
	OptOut func(Target) string
	// Done is told how each read ended (ReadOK, ReadSkippedThreads,
	// ReadFailed), for a failure why, and whether that differs from how
	// the JVM's previous read ended (to log a JVM's trouble once). It is
	// called on the goroutine that calls Poll.
	Done func(t Target, outcome string, err error, changed bool)
}

// Target is a JVM to read.
type Target struct {
	// PID is its pid in ProcRoot's namespace, NSPID the pid it sees.
	PID, NSPID int
	// StartTicks tells it from a later process of the same pid.
	StartTicks uint64
}

// Reading is the latest JNI reference count read from a JVM.
type Reading struct {
	Refs JNIRefs
	// At is when the thread dump was answered.
	At time.Time
}

type answer struct {
	refs JNIRefs
	at   time.Time
	err  error
	// optedOut is why the JVM was not attached to.
	optedOut string
}

type jvm struct {
	started time.Time // when the last read (or skip) began
	call    *fsdeadline.Call[answer]
	latest  Reading
	have    bool
	seen    bool
	lastErr string // how the previous read ended: its error, "" for none
}

// Reader takes thread dumps of JVMs, at most one per JVM per interval and
// one at a time per JVM, each on a goroutine of its own so that a JVM that
// answers slowly holds no one else: Poll starts a read that is due and
// returns what the reads finished so far found. It is not safe for
// concurrent use.
type Reader struct {
	cfg    ReaderConfig
	jvms   map[Target]*jvm
	closed bool
}

// NewReader returns a Reader.
func NewReader(cfg ReaderConfig) *Reader {
	return &Reader{cfg: cfg, jvms: map[Target]*jvm{}}
}

// Poll takes the answer of t's read if it came, starts the next read when
// one is due (threads is the JVM's thread count now), and returns t's
// latest reading, false while there is none.
func (r *Reader) Poll(t Target, threads int64, now time.Time) (Reading, bool) {
	j := r.jvms[t]
	if j == nil {
		j = &jvm{}
		r.jvms[t] = j
	}
	j.seen = true
	if j.call != nil && j.call.Done() {
		r.take(context.Background(), t, j) // Done: returns at once
	}
	if j.call == nil && !r.closed && (j.started.IsZero() || now.Sub(j.started) >= r.cfg.Interval) {
		j.started = now
		if r.cfg.MaxThreads > 0 && threads > r.cfg.MaxThreads {
			r.done(t, j, ReadSkippedThreads, fmt.Errorf("%d threads, more than max_threads %d", threads, r.cfg.MaxThreads))
		} else {
			j.call = fsdeadline.Start(func() answer { return r.read(t) })
		}
	}
	return j.latest, j.have
}

// Sweep forgets the JVMs not polled since the last Sweep whose reads have
// ended: they exited, or are no longer followed.
func (r *Reader) Sweep() {
	for t, j := range r.jvms {
		if j.seen {
			j.seen = false
			continue
		}
		if j.call == nil || j.call.Done() {
			delete(r.jvms, t)
		}
	}
}

// take waits for j's read until ctx ends and keeps what it found.
func (r *Reader) take(ctx context.Context, t Target, j *jvm) {
	a, ok := j.call.Wait(ctx)
	j.call = nil
	switch {
	case !ok:
		// Not answered in time: the read goes on alone, and ends
		// within the attach timeout.
	case a.optedOut != "":
		// Opted out: not a read, and not counted.
	case a.err != nil:
		r.done(t, j, ReadFailed, a.err)
	default:
		j.latest, j.have = Reading{Refs: a.refs, At: a.at}, true
		r.done(t, j, ReadOK, nil)
	}
}

// Close starts no more reads and waits for those under way, each bounded
// by the attach timeout, until ctx ends; the next Poll returns what they
// found.
func (r *Reader) Close(ctx context.Context) {
	r.closed = true
	for t, j := range r.jvms {
		if j.call != nil {
			r.take(ctx, t, j)
		}
	}
}

// Len returns the number of JVMs held.
func (r *Reader) Len() int { return len(r.jvms) }

func (r *Reader) done(t Target, j *jvm, outcome string, err error) {
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	changed := msg != j.lastErr
	j.lastErr = msg
	if r.cfg.Done != nil {
		r.cfg.Done(t, outcome, err, changed)
	}
}

// read takes one thread dump through the attach protocol and parses its
// JNI line.
func (r *Reader) read(t Target) answer {
	if r.cfg.OptOut != nil {
		if why := r.cfg.OptOut(t); why != "" {
			return answer{optedOut: why}
		}
	}
	target := attach.Target{ProcRoot: r.cfg.ProcRoot, PID: t.PID, NSPID: t.NSPID, StartTicks: t.StartTicks, Timeout: r.cfg.Timeout}
	// SIGQUIT starts the attach listener only once the JVM handles it; a
	// process that does not yet is killed by it.
	if ok, why := target.Ready(); !ok {
		return answer{err: fmt.Errorf("jvmaccounts: pid %d: not ready for attach: %s", t.PID, why)}
	}
	out, err := target.Jcmd("Thread.print")
	if err != nil {
		return answer{err: err}
	}
	refs, err := ParseJNIRefs(out)
	if err != nil {
		return answer{err: fmt.Errorf("jvmaccounts: pid %d: %w", t.PID, err)}
	}
	return answer{refs: refs, at: time.Now()}
}
