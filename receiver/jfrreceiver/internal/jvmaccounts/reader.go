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
	// ThreadDumps turns the thread dumps (the JNI reference counts) on;
	// the heap's place is read either way.
	ThreadDumps bool
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
	// HeapDone is told how a JVM's one GC.heap_info read ended (nil: its
	// heap's place is known), on the goroutine that calls Poll.
	HeapDone func(t Target, err error)
}

// HeapState is what a Reader knows of a JVM's heap place.
type HeapState int

const (
	// HeapPending: not read yet, or the read is under way.
	HeapPending HeapState = iota
	// HeapKnown: Heap returns its place.
	HeapKnown
	// HeapUnknown: the read failed, or the JVM may not be attached to
	// (its opt-outs); it is not read again.
	HeapUnknown
)

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
	// dump: a thread dump was asked for; refs, at and err are its.
	dump bool
	refs JNIRefs
	at   time.Time
	err  error
	// heap: GC.heap_info was asked for; place and heapErr are its.
	heap    bool
	place   HeapPlace
	heapErr error
	// optedOut is why the JVM was not attached to.
	optedOut string
}

type jvm struct {
	started   time.Time // when the last thread dump (or skip) began
	call      *fsdeadline.Call[answer]
	latest    Reading
	have      bool
	seen      bool
	lastErr   string // how the previous dump ended: its error, "" for none
	heap      HeapPlace
	heapState HeapState
	heapAsked bool
	heapTries int
}

// heapTries is how often a JVM's heap is asked for before it is left
// HeapUnknown: a JVM found before it handles the attach signal is asked
// again at the next Poll.
const heapTries = 3

// Reader asks JVMs through the attach protocol for what only they can
// tell: once, where their heap lies (GC.heap_info, which takes the heap's
// lock and no safepoint), and their JNI reference counts from thread
// dumps, at most one per JVM per interval. Reads of one JVM go one at a
// time, each on a goroutine of its own so that a JVM that answers slowly
// holds no one else: Poll starts a read that is due and returns what the
// reads finished so far found. It is not safe for concurrent use.
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
// latest reading, false while there is none. At t's first Poll it asks
// where the heap lies and waits up to heapWait for the answer (Heap).
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
	if r.closed {
		return j.latest, j.have
	}
	dump := r.cfg.ThreadDumps && (j.started.IsZero() || now.Sub(j.started) >= r.cfg.Interval)
	if dump && r.cfg.MaxThreads > 0 && threads > r.cfg.MaxThreads {
		j.started = now
		r.done(t, j, ReadSkippedThreads, fmt.Errorf("%d threads, more than max_threads %d", threads, r.cfg.MaxThreads))
		dump = false
	}
	if j.call == nil && !j.heapAsked {
		// The heap's place first, alone: the unaccounted native memory
		// waits for it, and a JVM that answers at once has it this
		// collection, not the next.
		j.heapAsked = true
		j.call = fsdeadline.Start(func() answer { return r.read(t, true, false) })
		ctx, cancel := context.WithTimeout(context.Background(), heapWait)
		a, ok := j.call.Wait(ctx)
		cancel()
		if ok {
			j.call = nil
			r.settle(t, j, a)
		}
	}
	if j.call == nil && dump {
		j.started = now
		j.call = fsdeadline.Start(func() answer { return r.read(t, false, true) })
	}
	// Else a due dump waits for the read under way.
	return j.latest, j.have
}

// heapWait is how long Poll waits for a heap read it started (an attach
// exchange takes a few milliseconds; once per JVM).
const heapWait = 100 * time.Millisecond

// Heap returns where t's heap lies, as far as its read has told.
func (r *Reader) Heap(t Target) (HeapPlace, HeapState) {
	if j := r.jvms[t]; j != nil {
		return j.heap, j.heapState
	}
	return HeapPlace{}, HeapPending
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
	if ok {
		r.settle(t, j, a)
	}
	// Else not answered in time: the read goes on alone, and ends within
	// the attach timeout.
}

// settle keeps what a read found.
func (r *Reader) settle(t Target, j *jvm, a answer) {
	switch {
	case a.optedOut != "":
		// Opted out: not a read, and not counted; its heap is not
		// asked for again.
		j.heapState = HeapUnknown
		return
	}
	if a.heap {
		j.heapTries++
		switch {
		case a.heapErr == nil:
			j.heap, j.heapState = a.place, HeapKnown
		case j.heapTries < heapTries:
			j.heapAsked = false
		default:
			j.heapState = HeapUnknown
		}
		if r.cfg.HeapDone != nil && j.heapState != HeapPending {
			r.cfg.HeapDone(t, a.heapErr)
		}
	}
	switch {
	case !a.dump:
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

// read asks t, through the attach protocol, where its heap lies (heap)
// and for a thread dump, whose JNI line it parses (dump).
func (r *Reader) read(t Target, heap, dump bool) answer {
	if r.cfg.OptOut != nil {
		if why := r.cfg.OptOut(t); why != "" {
			return answer{optedOut: why}
		}
	}
	a := answer{heap: heap, dump: dump}
	target := attach.NewTarget(r.cfg.ProcRoot, t.PID, t.NSPID, t.StartTicks, r.cfg.Timeout)
	// SIGQUIT starts the attach listener only once the JVM handles it; a
	// process that does not yet is killed by it.
	if ok, why := target.Ready(); !ok {
		err := fmt.Errorf("jvmaccounts: pid %d: not ready for attach: %s", t.PID, why)
		a.err, a.heapErr = err, err
		return a
	}
	if heap {
		out, err := target.Jcmd("GC.heap_info")
		if err == nil {
			a.place, err = ParseHeapInfo(out)
		}
		if err != nil {
			a.heapErr = fmt.Errorf("jvmaccounts: pid %d: %w", t.PID, err)
		}
	}
	if dump {
		out, err := target.Jcmd("Thread.print")
		if err != nil {
			a.err = err
			return a
		}
		if a.refs, err = ParseJNIRefs(out); err != nil {
			a.err = fmt.Errorf("jvmaccounts: pid %d: %w", t.PID, err)
			return a
		}
		a.at = time.Now()
	}
	return a
}
