package discovery

import (
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/otelcol-ai/otelcol-ai/internal/procevents"
)

// Retries are when a process is inspected again after its exec, until it
// is found to run CPython, exits, or the last has passed: a python built
// shared maps libpython a few milliseconds after its exec (the dynamic
// loader), a host that loads it with dlopen later (the periodic scan finds
// those).
var Retries = []time.Duration{0, 2 * time.Millisecond, 10 * time.Millisecond, 30 * time.Millisecond,
	100 * time.Millisecond, 300 * time.Millisecond}

// MaxTracked bounds the processes waiting for a retry; past it, a new
// process is inspected once, at its exec.
const MaxTracked = 4096

// Events is the event-fed path of discovery: the node's process events
// (package procevents) turned into interpreter arrivals, so that a CPython
// is probed within milliseconds of its exec however long the discovery
// interval, and its exit is known at once. A goroutine does the work; the
// receiver takes what it found when Ready fires.
type Events struct {
	scanner *Scanner
	sub     *procevents.Subscription
	stop    chan struct{}
	done    chan struct{}
	ready   chan struct{}

	// Owned by the goroutine: the processes waiting for their next try,
	// one FIFO per retry (each FIFO is in due order, having one delay).
	waiting [][]tracked
	tracked map[int]int // pid -> the retry it waits for

	mu      sync.Mutex
	arrival Arrivals
}

type tracked struct {
	pid int
	due time.Time
}

// Arrivals is what Events found since the last Take.
type Arrivals struct {
	// Interpreters found after their exec.
	Interpreters []Interpreter
	// Refused are processes Candidate refused.
	Refused []Refusal
	// Exited are the pids that exited (any process: the receiver knows
	// which are its own).
	Exited []int
	// Overflow says process events were lost: scan.
	Overflow bool
}

// Empty reports whether there is nothing in a.
func (a Arrivals) Empty() bool {
	return len(a.Interpreters) == 0 && len(a.Refused) == 0 && len(a.Exited) == 0 && !a.Overflow
}

// NewEvents subscribes to the node's process events and inspects each
// exec with scanner. Close it.
func NewEvents(scanner *Scanner, logger *zap.Logger) *Events {
	e := &Events{scanner: scanner, sub: procevents.Subscribe(logger),
		stop: make(chan struct{}), done: make(chan struct{}), ready: make(chan struct{}, 1),
		waiting: make([][]tracked, len(Retries)), tracked: map[int]int{}}
	go e.run()
	return e
}

// Mechanism says where the process events come from.
func (e *Events) Mechanism() procevents.Mechanism { return e.sub.Mechanism() }

// Ready fires when Take has something.
func (e *Events) Ready() <-chan struct{} { return e.ready }

// Take returns what was found since the last Take.
func (e *Events) Take() Arrivals {
	e.mu.Lock()
	defer e.mu.Unlock()
	a := e.arrival
	e.arrival = Arrivals{}
	return a
}

// Close stops the goroutine and releases the subscription.
func (e *Events) Close() {
	close(e.stop)
	<-e.done
	e.sub.Close()
}

func (e *Events) run() {
	defer close(e.done)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		var a Arrivals
		select {
		case <-e.stop:
			return
		case <-e.sub.Ready():
			b := e.sub.Take()
			a.Overflow = b.Overflow
			now := time.Now()
			for _, ev := range b.Events {
				switch ev.Kind {
				case procevents.Exec:
					e.track(ev.PID, now)
				case procevents.Exit:
					// Its entries in waiting are dropped when due.
					delete(e.tracked, ev.PID)
					a.Exited = append(a.Exited, ev.PID)
				}
			}
		case <-timer.C:
		}
		e.tryDue(&a, time.Now())
		if !a.Empty() {
			e.add(a)
		}
		e.reset(timer)
	}
}

// track queues pid for its first try.
func (e *Events) track(pid int, now time.Time) {
	if _, ok := e.tracked[pid]; !ok && len(e.tracked) >= MaxTracked {
		return
	}
	e.tracked[pid] = 0
	e.waiting[0] = append(e.waiting[0], tracked{pid: pid, due: now.Add(Retries[0])})
}

// tryDue inspects the processes whose try is due, queueing the ones not
// (yet) found for their next.
func (e *Events) tryDue(a *Arrivals, now time.Time) {
	for level := range e.waiting {
		q := e.waiting[level]
		n := 0
		for n < len(q) && !q[n].due.After(now) {
			e.try(a, q[n].pid, level, now)
			n++
		}
		e.waiting[level] = q[n:]
		if len(e.waiting[level]) == 0 {
			e.waiting[level] = q[:0] // reuse the array
		}
	}
}

func (e *Events) try(a *Arrivals, pid, level int, now time.Time) {
	if l, ok := e.tracked[pid]; !ok || l != level {
		return // exited, or exec'd again and queued anew
	}
	in, ok, err := e.scanner.Candidate(pid)
	if err != nil {
		a.Refused = append(a.Refused, Refusal{PID: pid, Err: err})
	}
	if ok || err != nil || level+1 == len(Retries) {
		delete(e.tracked, pid)
		if ok {
			a.Interpreters = append(a.Interpreters, in)
		}
		return
	}
	e.tracked[pid] = level + 1
	e.waiting[level+1] = append(e.waiting[level+1], tracked{pid: pid, due: now.Add(Retries[level+1])})
}

// reset sets timer to the earliest due try.
func (e *Events) reset(timer *time.Timer) {
	var next time.Time
	for _, q := range e.waiting {
		if len(q) > 0 && (next.IsZero() || q[0].due.Before(next)) {
			next = q[0].due
		}
	}
	timer.Stop()
	if !next.IsZero() {
		timer.Reset(max(time.Until(next), 0))
	}
}

func (e *Events) add(a Arrivals) {
	e.mu.Lock()
	e.arrival.Interpreters = append(e.arrival.Interpreters, a.Interpreters...)
	e.arrival.Refused = append(e.arrival.Refused, a.Refused...)
	e.arrival.Exited = append(e.arrival.Exited, a.Exited...)
	e.arrival.Overflow = e.arrival.Overflow || a.Overflow
	e.mu.Unlock()
	select {
	case e.ready <- struct{}{}:
	default:
	}
}
