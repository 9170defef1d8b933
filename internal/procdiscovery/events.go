package procdiscovery

import (
	"context"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/otelcol-ai/otelcol-ai/internal/procevents"
)

// Source is where Events takes process events from: the collector's
// process events (Subscribe), or a test's.
type Source interface {
	Mechanism() procevents.Mechanism
	Ready() <-chan struct{}
	Take() procevents.Batch
	Close()
}

// Subscribe returns a subscription to the collector's process events
// (procevents.Subscribe) as a Source.
func Subscribe(logger *zap.Logger) Source { return procevents.Subscribe(logger) }

// Policy is what one receiver's discovery does with process events: which
// execs it reads /proc for, when it looks at a process again, and which
// exits it reports.
type Policy[T any] struct {
	// Comm, when set, says whether an exec whose command name the events
	// carry (eBPF does; the proc connector does not) may be the
	// receiver's: /proc is not read for the others.
	Comm func(comm string) bool
	// Backoff are the delays of a process's inspections after its exec,
	// each after the one before (the first, 0, at the exec itself), until
	// it is found, refused or exits: a process may become the receiver's
	// some milliseconds into its life (the dynamic loader maps its
	// libraries). Empty: one inspection, at the exec.
	Backoff []time.Duration
	// Found, when set, is called with each process found after its exec
	// (on the events' goroutine; Batch bounds what it does on the
	// process's filesystems); it reports whether the process is to be
	// announced again every Every until For after it was found, for what
	// it makes later in its start (a JVM's repository folder).
	Found      func(b *Batch, t T) (again bool)
	Every, For time.Duration
	// MaxTracked bounds the processes waiting for an inspection or
	// followed to their exit; past it, a process is inspected at its exec
	// only.
	MaxTracked int
	// AllExits reports the exit of every process (the receiver knows
	// which are its own); otherwise only of those found after their exec,
	// and a process found is followed to its exit.
	AllExits bool
	// Exited, when set, is called with the exit of each process found
	// after its exec (or its next exec: the image found is gone).
	Exited func(pid int)
	// Announced and Announcements are another source of processes found
	// (a JVM announcing itself through its files): when Announced fires,
	// Announcements' processes are added to what Take hands over.
	Announced     <-chan struct{}
	Announcements func() []T
}

// Arrivals is what Events found since the last Take.
type Arrivals[T any] struct {
	// Found are the processes found after their exec, announced again
	// (Policy.Found) or announcing themselves; one may come more than once.
	Found []T
	// Refused are processes the scanner refused.
	Refused []Refusal
	// Exited are the pids of processes that exited (Policy.AllExits).
	Exited []int
	// Overflow says process events were lost: scan.
	Overflow bool
}

// Empty reports whether there is nothing in a.
func (a Arrivals[T]) Empty() bool {
	return len(a.Found) == 0 && len(a.Refused) == 0 && len(a.Exited) == 0 && !a.Overflow
}

// Batch is one turn of the events' loop: the events taken at once, or the
// inspections due.
type Batch struct {
	ctx      context.Context
	deadline context.Context
	cancel   context.CancelFunc
}

// Deadline returns a context that ends d after its first call in this
// batch (or when Events closes): what the batch does on processes'
// filesystems, which may hang, is bounded by d in all, however many.
func (b *Batch) Deadline(d time.Duration) context.Context {
	if b.deadline == nil {
		b.deadline, b.cancel = context.WithTimeout(b.ctx, d)
	}
	return b.deadline
}

func (b *Batch) end() {
	if b.cancel != nil {
		b.cancel()
	}
}

// Events is the event-fed path of discovery: the node's process events
// turned into a receiver's processes, found within milliseconds of their
// exec however long the discovery interval, and their exits known at once.
// A goroutine does the work; the receiver takes what it found when Ready
// fires.
type Events[T any] struct {
	scanner *Scanner[T]
	src     Source
	policy  Policy[T]
	cancel  context.CancelFunc
	done    chan struct{}
	ready   chan struct{}

	// Owned by the goroutine: the processes waiting for their next turn
	// or followed to their exit, and the turns due, one FIFO per delay
	// (Backoff's, then Every), each in due order.
	tracked map[int]*tracked[T]
	queues  [][]turn
	seq     uint64

	mu      sync.Mutex
	arrival Arrivals[T]
}

// tracked is one process Events follows; seq tells it from an earlier
// process of the same pid.
type tracked[T any] struct {
	seq   uint64
	step  int // the Backoff inspection due next
	found bool
	t     T
	since time.Time // when it was found
}

// turn is a tracked process's next inspection or announcement.
type turn struct {
	pid int
	seq uint64
	due time.Time
}

// NewEvents starts turning src's events into the processes scanner finds,
// as policy says. Close it.
func NewEvents[T any](scanner *Scanner[T], src Source, policy Policy[T]) *Events[T] {
	if len(policy.Backoff) == 0 {
		policy.Backoff = []time.Duration{0}
	}
	ctx, cancel := context.WithCancel(context.Background())
	e := &Events[T]{scanner: scanner, src: src, policy: policy, cancel: cancel,
		done: make(chan struct{}), ready: make(chan struct{}, 1),
		tracked: map[int]*tracked[T]{}, queues: make([][]turn, len(policy.Backoff)+1)}
	go e.run(ctx)
	return e
}

// Mechanism says where the process events come from.
func (e *Events[T]) Mechanism() procevents.Mechanism { return e.src.Mechanism() }

// Ready fires when Take has something.
func (e *Events[T]) Ready() <-chan struct{} { return e.ready }

// Take returns what was found since the last Take.
func (e *Events[T]) Take() Arrivals[T] {
	e.mu.Lock()
	defer e.mu.Unlock()
	a := e.arrival
	e.arrival = Arrivals[T]{}
	return a
}

// Close stops the goroutine and closes the source.
func (e *Events[T]) Close() {
	e.cancel()
	<-e.done
	e.src.Close()
}

func (e *Events[T]) run(ctx context.Context) {
	defer close(e.done)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		b := &Batch{ctx: ctx}
		var a Arrivals[T]
		select {
		case <-ctx.Done():
			return
		case <-e.src.Ready():
			e.events(b, &a, e.src.Take())
		case <-e.policy.Announced:
			a.Found = e.policy.Announcements()
		case <-timer.C:
		}
		e.turns(b, &a, time.Now())
		b.end()
		if !a.Empty() {
			e.add(a)
		}
		e.reset(timer)
	}
}

// events handles a batch of process events in their order.
func (e *Events[T]) events(b *Batch, a *Arrivals[T], batch procevents.Batch) {
	a.Overflow = batch.Overflow
	now := time.Now()
	for _, ev := range batch.Events {
		switch ev.Kind {
		case procevents.Exec:
			if ev.Comm != "" && e.policy.Comm != nil && !e.policy.Comm(ev.Comm) {
				continue
			}
			e.exec(b, a, ev.PID, now)
		case procevents.Exit:
			e.exit(a, ev.PID, e.policy.AllExits)
		}
	}
}

// exec starts following pid, inspecting it at once when its first delay
// is 0: a process whose exit comes in the same batch is still found.
func (e *Events[T]) exec(b *Batch, a *Arrivals[T], pid int, now time.Time) {
	e.exit(a, pid, false)
	if len(e.tracked) >= e.policy.MaxTracked {
		e.inspect(b, a, pid, nil, now)
		return
	}
	e.seq++
	tr := &tracked[T]{seq: e.seq}
	e.tracked[pid] = tr
	if e.policy.Backoff[0] <= 0 {
		e.inspect(b, a, pid, tr, now)
		return
	}
	e.queue(0, pid, tr, now)
}

// exit stops following pid and reports its exit when report is set or the
// process was found.
func (e *Events[T]) exit(a *Arrivals[T], pid int, report bool) {
	tr := e.tracked[pid]
	delete(e.tracked, pid)
	if tr != nil && tr.found && e.policy.Exited != nil {
		e.policy.Exited(pid)
	}
	if report || (tr != nil && tr.found) {
		a.Exited = append(a.Exited, pid)
	}
}

// inspect runs one of pid's inspections; tr is nil past MaxTracked (the
// process is inspected once, not followed).
func (e *Events[T]) inspect(b *Batch, a *Arrivals[T], pid int, tr *tracked[T], now time.Time) {
	t, ok, err := e.scanner.Candidate(pid)
	if err != nil {
		a.Refused = append(a.Refused, e.scanner.refusal(pid, err))
	}
	if ok {
		a.Found = append(a.Found, t)
	}
	if tr == nil {
		return
	}
	if !ok {
		if tr.step++; err == nil && tr.step < len(e.policy.Backoff) {
			e.queue(tr.step, pid, tr, now)
			return
		}
		delete(e.tracked, pid)
		return
	}
	again := e.policy.Found != nil && e.policy.Found(b, t)
	if e.policy.AllExits && !again {
		delete(e.tracked, pid)
		return
	}
	// Found may have taken a while (a filesystem that hangs).
	tr.found, tr.t, tr.since = true, t, time.Now()
	now = tr.since
	if again && e.policy.Every > 0 {
		e.queue(len(e.policy.Backoff), pid, tr, now)
	}
}

// queue makes pid's next turn due after the delay of queue q (q <
// len(Backoff): its inspection q; else an announcement).
func (e *Events[T]) queue(q, pid int, tr *tracked[T], now time.Time) {
	d := e.policy.Every
	if q < len(e.policy.Backoff) {
		d = e.policy.Backoff[q]
	}
	e.queues[q] = append(e.queues[q], turn{pid: pid, seq: tr.seq, due: now.Add(d)})
}

// turns takes the turns due: the inspections of processes not found yet,
// the announcements of those found while they are young enough.
func (e *Events[T]) turns(b *Batch, a *Arrivals[T], now time.Time) {
	for q := range e.queues {
		n := 0
		// An announcement is queued again here, Every later: indexing
		// e.queues[q] afresh keeps it.
		for ; n < len(e.queues[q]) && !e.queues[q][n].due.After(now); n++ {
			t := e.queues[q][n]
			tr := e.tracked[t.pid]
			switch {
			case tr == nil || tr.seq != t.seq:
				// exited, or exec'd again and followed anew
			case !tr.found:
				e.inspect(b, a, t.pid, tr, now)
			case now.Sub(tr.since) < e.policy.For:
				a.Found = append(a.Found, tr.t)
				e.queue(q, t.pid, tr, now)
			case e.policy.AllExits:
				delete(e.tracked, t.pid)
			}
		}
		if n == len(e.queues[q]) {
			e.queues[q] = e.queues[q][:0] // reuse the array
		} else {
			e.queues[q] = e.queues[q][n:]
		}
	}
}

// reset sets timer to the earliest turn due.
func (e *Events[T]) reset(timer *time.Timer) {
	var next time.Time
	for _, q := range e.queues {
		if len(q) > 0 && (next.IsZero() || q[0].due.Before(next)) {
			next = q[0].due
		}
	}
	timer.Stop()
	if !next.IsZero() {
		timer.Reset(max(time.Until(next), 0))
	}
}

func (e *Events[T]) add(a Arrivals[T]) {
	e.mu.Lock()
	e.arrival.Found = append(e.arrival.Found, a.Found...)
	e.arrival.Refused = append(e.arrival.Refused, a.Refused...)
	e.arrival.Exited = append(e.arrival.Exited, a.Exited...)
	e.arrival.Overflow = e.arrival.Overflow || a.Overflow
	e.mu.Unlock()
	select {
	case e.ready <- struct{}{}:
	default:
	}
}
