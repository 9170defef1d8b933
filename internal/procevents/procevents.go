// Package procevents reports process exec and exit on the node within
// milliseconds, so that discovery need not wait for its next scan: a JVM or
// CPython that lives less than a discovery interval is found at its exec.
//
// Events come from eBPF (the sched_process_exec and sched_process_exit raw
// tracepoints, through a ring buffer), else from the kernel's proc connector
// (netlink), else from nowhere: the Watcher then says so once in the log and
// the receivers rely on their periodic scans. One Watcher serves the whole
// collector process (Subscribe shares it); each Subscription gets every
// event.
//
// Events are cheap by design, so that a fork/exec storm costs little: the
// kernel sends only execs and the exits of whole processes (not of each
// thread), 24 bytes each; the Watcher appends them to each subscriber's
// pending list and wakes it once, however many came (Take hands over all of
// them). A subscriber that falls more than MaxPending events behind loses
// the surplus and is told so (Batch.Overflow), to rescan.
//
// Pids are those of the initial pid namespace (the node's), which is what a
// receiver reading the node's /proc (or a hostPID pod's) names processes by.
package procevents // import "github.com/otelcol-ai/otelcol-ai/internal/procevents"

import (
	"errors"
	"strconv"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/otelcol-ai/otelcol-ai/internal/sharedcomponent"
)

// Kind is what happened to a process.
type Kind uint8

// The kinds; the BPF program uses the same numbers.
const (
	// Exec: the process replaced its image (execve). The new command line,
	// executable and mappings are readable from /proc from then on.
	Exec Kind = 1
	// Exit: the process's thread group leader exited.
	Exit Kind = 2
)

func (k Kind) String() string {
	switch k {
	case Exec:
		return "exec"
	case Exit:
		return "exit"
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

// Event is one process exec or exit.
type Event struct {
	// PID is the process (thread group) id in the initial pid namespace.
	PID int
	Kind
	// Comm is the kernel's command name after the exec (eBPF only; "" from
	// the proc connector).
	Comm string
}

// Mechanism says where a Watcher's events come from.
type Mechanism string

// The mechanisms, best first.
const (
	MechanismEBPF    Mechanism = "ebpf"
	MechanismNetlink Mechanism = "proc_connector"
	// MechanismNone: no events; discovery relies on scans.
	MechanismNone Mechanism = "none"
)

// MaxPending bounds the events held for one subscriber between two Takes.
const MaxPending = 8192

// errorPause is how long the reader waits after a failed read.
const errorPause = 100 * time.Millisecond

// Errors of a source's read.
var (
	// ErrClosed: the Watcher was closed.
	ErrClosed = errors.New("procevents: closed")
	// errLost: the kernel dropped events (the proc connector's socket
	// buffer overflowed).
	errLost = errors.New("procevents: events lost")
)

// source is one mechanism's event stream.
type source interface {
	// read blocks for the next events and appends them to buf; ErrClosed
	// after close.
	read(buf []Event) ([]Event, error)
	// lost returns how many events the kernel dropped so far.
	lost() uint64
	close() error
}

// Watcher reads one source and hands its events to every subscriber.
type Watcher struct {
	mechanism Mechanism
	src       source
	done      chan struct{}

	mu   sync.Mutex
	subs map[*Subscription]struct{}
	lost uint64
}

// open starts the best mechanism available, logging once which one (and
// why the better ones are not).
func open(logger *zap.Logger) *Watcher {
	w := &Watcher{subs: map[*Subscription]struct{}{}, done: make(chan struct{})}
	src, errEBPF := openEBPF()
	if errEBPF == nil {
		w.mechanism, w.src = MechanismEBPF, src
		logger.Debug("process events from eBPF tracepoints")
	} else if src, errNL := openNetlink(); errNL == nil {
		w.mechanism, w.src = MechanismNetlink, src
		logger.Info("process events from the proc connector (eBPF unavailable)", zap.NamedError("ebpf", errEBPF))
	} else {
		w.mechanism = MechanismNone
		logger.Warn("no process events (eBPF and the proc connector are unavailable): processes are discovered by the periodic scans only",
			zap.NamedError("ebpf", errEBPF), zap.NamedError("proc_connector", errNL))
		close(w.done)
		return w
	}
	go w.run()
	return w
}

// Mechanism says where the events come from.
func (w *Watcher) Mechanism() Mechanism { return w.mechanism }

func (w *Watcher) run() {
	defer close(w.done)
	var buf []Event
	for {
		var err error
		buf, err = w.src.read(buf[:0])
		if errors.Is(err, ErrClosed) {
			return
		}
		if len(buf) == 0 && !errors.Is(err, errLost) {
			if err != nil {
				// An error that may repeat: do not spin on it.
				time.Sleep(errorPause)
			}
			continue
		}
		lost := w.src.lost()
		w.mu.Lock()
		overflow := lost != w.lost || errors.Is(err, errLost)
		w.lost = lost
		for s := range w.subs {
			s.deliver(buf, overflow)
		}
		w.mu.Unlock()
	}
}

func (w *Watcher) close() {
	if w.src != nil {
		_ = w.src.close()
	}
	<-w.done
}

// watchers holds the collector's one Watcher while any subscription is open.
var watchers sharedcomponent.Map[struct{}, *Watcher]

// Subscribe returns a subscription to the collector's process events,
// starting the Watcher if it is the first. logger is used for the one line
// that says which mechanism serves (by the first subscriber's). The caller
// closes the subscription.
func Subscribe(logger *zap.Logger) *Subscription {
	ref, _ := watchers.Acquire(struct{}{}, func() (*Watcher, error) { return open(logger), nil }, (*Watcher).close)
	w := ref.Value()
	s := &Subscription{w: w, ref: ref, ready: make(chan struct{}, 1)}
	w.mu.Lock()
	w.subs[s] = struct{}{}
	w.mu.Unlock()
	return s
}

// Subscription is one subscriber's view of the events.
type Subscription struct {
	w     *Watcher
	ref   *sharedcomponent.Ref[*Watcher]
	ready chan struct{}

	mu       sync.Mutex
	pending  []Event
	overflow bool
}

// Batch is what Take hands over.
type Batch struct {
	// Events in the order the kernel reported them.
	Events []Event
	// Overflow says events were lost since the last Take (the kernel's
	// ring buffer or this subscriber's MaxPending was full): rescan.
	Overflow bool
}

// Mechanism says where the events come from; with MechanismNone, Ready
// never fires.
func (s *Subscription) Mechanism() Mechanism { return s.w.mechanism }

// Ready fires when events are pending.
func (s *Subscription) Ready() <-chan struct{} { return s.ready }

// Take returns the pending events and forgets them.
func (s *Subscription) Take() Batch {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := Batch{Events: s.pending, Overflow: s.overflow}
	s.pending, s.overflow = nil, false
	return b
}

func (s *Subscription) deliver(evs []Event, overflow bool) {
	s.mu.Lock()
	room := MaxPending - len(s.pending)
	if len(evs) > room {
		evs, overflow = evs[:room], true
	}
	s.pending = append(s.pending, evs...)
	s.overflow = s.overflow || overflow
	s.mu.Unlock()
	select {
	case s.ready <- struct{}{}:
	default:
	}
}

// Close ends the subscription; the last one closes the Watcher.
func (s *Subscription) Close() {
	s.w.mu.Lock()
	delete(s.w.subs, s)
	s.w.mu.Unlock()
	s.ref.Release()
}
