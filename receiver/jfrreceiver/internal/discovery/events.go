package discovery

import (
	"context"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/otelcol-ai/otelcol-ai/internal/fsdeadline"
	"github.com/otelcol-ai/otelcol-ai/internal/procevents"
	"github.com/otelcol-ai/otelcol-ai/internal/procresource"
)

// Events is the event-fed path of discovery: the node's process events
// (package procevents) turned into JVM arrivals, so that a JVM is seen at
// its exec and again when it announces itself (Watch), and its exit is
// known at once, however long the discovery interval. A goroutine does the
// work; the receiver takes what it found when Ready fires.
type Events struct {
	scanner *Scanner
	sub     *procevents.Subscription
	watch   *Watch // nil without inotify
	logger  *zap.Logger
	stalled func() // may be nil
	cancel  context.CancelFunc
	done    chan struct{}
	ready   chan struct{}

	mu      sync.Mutex
	arrival Arrivals

	// unwatched are the JVMs found at their exec that no inotify watch
	// follows (no inotify instance to be had: a node's
	// fs.inotify.max_user_instances is shared by every container of a
	// user; or no folder of theirs could be watched): they are announced
	// again every recheckEvery for their first recheckFor, which finds
	// their repository and -Xlog files, and their exit is reported as a
	// watched JVM's is. Used by run only.
	unwatched map[int]unwatchedJVM
}

// newWatch is NewWatch; tests take inotify away.
var newWatch = NewWatch

// unwatchedJVM is a JVM found at its exec that no watch follows.
type unwatchedJVM struct {
	jvm   JVM
	found time.Time
}

// The fallback for JVMs no watch follows: announced again every
// recheckEvery for recheckFor after their exec (a JVM makes its
// repository seconds into its life, once JFR has loaded), and at most
// MaxWatched of them are kept for their exit.
const (
	recheckEvery = 250 * time.Millisecond
	recheckFor   = 30 * time.Second
)

// Arrivals is what Events found since the last Take.
type Arrivals struct {
	// JVMs found at their exec or announced since (hsperfdata file or
	// repository folder made); a JVM may come more than once.
	JVMs []JVM
	// Refused are processes Candidate refused.
	Refused []Refusal
	// Exited are the pids of watched JVMs that exited: read their last
	// chunks now.
	Exited []int
	// Overflow says process events were lost: scan.
	Overflow bool
}

// Empty reports whether there is nothing in a.
func (a Arrivals) Empty() bool {
	return len(a.JVMs) == 0 && len(a.Refused) == 0 && len(a.Exited) == 0 && !a.Overflow
}

// NewEvents subscribes to the node's process events and inspects each
// exec under the proc root. stalled, when set, is called once for each JVM
// whose folders could not be watched before the deadline (a call hanging
// on its filesystem). Close it.
func NewEvents(procRoot string, logger *zap.Logger, stalled func()) *Events {
	ctx, cancel := context.WithCancel(context.Background())
	e := &Events{scanner: NewScanner(procRoot), sub: procevents.Subscribe(logger), logger: logger, stalled: stalled,
		cancel: cancel, done: make(chan struct{}), ready: make(chan struct{}, 1),
		unwatched: map[int]unwatchedJVM{}}
	if w, err := newWatch(); err == nil {
		e.watch = w
	} else if e.sub.Mechanism() != procevents.MechanismNone {
		logger.Warn("no inotify instance (raise the node's fs.inotify.max_user_instances, shared by every container of a user): a JVM found at its exec is looked at again every 250 ms for its first 30 s instead of when it makes its hsperfdata file or JFR repository",
			zap.Error(err))
	}
	go e.run(ctx)
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

// Close stops the goroutine and releases the subscription and watches; it
// does not wait for a watch's call that hangs.
func (e *Events) Close() {
	e.cancel()
	<-e.done
	e.sub.Close()
	if e.watch != nil {
		e.watch.Close()
	}
}

func (e *Events) run(ctx context.Context) {
	defer close(e.done)
	var announced <-chan struct{}
	if e.watch != nil {
		announced = e.watch.Ready()
	}
	// The recheck ticker runs only while some unwatched JVM is young
	// enough to be looked at again: nothing wakes the loop otherwise.
	var (
		recheck  *time.Ticker
		recheckC <-chan time.Time
	)
	defer func() {
		if recheck != nil {
			recheck.Stop()
		}
	}()
	for {
		switch young := e.anyYoung(time.Now()); {
		case young && recheck == nil:
			recheck = time.NewTicker(recheckEvery)
			recheckC = recheck.C
		case !young && recheck != nil:
			recheck.Stop()
			recheck, recheckC = nil, nil
		}
		var a Arrivals
		select {
		case <-ctx.Done():
			return
		case <-e.sub.Ready():
			a = e.processEvents(ctx, e.sub.Take())
		case <-announced:
			a.JVMs = e.watch.Take()
		case now := <-recheckC:
			a.JVMs = e.recheck(now)
		}
		if !a.Empty() {
			e.add(a)
		}
	}
}

// anyYoung reports whether a JVM no watch follows is young enough to be
// announced again.
func (e *Events) anyYoung(now time.Time) bool {
	for _, u := range e.unwatched {
		if now.Sub(u.found) < recheckFor {
			return true
		}
	}
	return false
}

// recheck returns the JVMs no watch follows that are young enough to be
// announced again.
func (e *Events) recheck(now time.Time) []JVM {
	var out []JVM
	for _, u := range e.unwatched {
		if now.Sub(u.found) < recheckFor {
			out = append(out, u.jvm)
		}
	}
	return out
}

// processEvents inspects the execs that may be JVMs and notes the exits of
// watched ones. The JVMs' folders are watched under one deadline, from the
// first watch on: JVMs whose folders hang (stalled mounts in their
// containers) hold the batch fsdeadline.Timeout at most, however many, and
// are looked at again as JVMs no watch follows are.
func (e *Events) processEvents(ctx context.Context, b procevents.Batch) Arrivals {
	a := Arrivals{Overflow: b.Overflow}
	var deadline context.Context
	for _, ev := range b.Events {
		switch ev.Kind {
		case procevents.Exec:
			// The command name is the executable's (eBPF gives it): only
			// a java launcher's exec is worth reading /proc for. Without
			// it (the proc connector) Candidate reads the exe link.
			if ev.Comm != "" && procresource.RuntimeOf(ev.Comm) != procresource.RuntimeJava {
				continue
			}
			j, ok, err := e.scanner.Candidate(ev.PID)
			if err != nil {
				a.Refused = append(a.Refused, Refusal{PID: ev.PID, Err: err})
			}
			if !ok {
				continue
			}
			a.JVMs = append(a.JVMs, j)
			delete(e.unwatched, j.PID) // a reused pid
			watching := false
			if e.watch != nil {
				if deadline == nil {
					var cancel context.CancelFunc
					deadline, cancel = context.WithTimeout(ctx, fsdeadline.Timeout)
					defer cancel()
				}
				var stalled bool
				if watching, stalled = e.watch.Add(deadline, j); stalled {
					e.reportStalled(j)
				}
			}
			if !watching && len(e.unwatched) < MaxWatched {
				e.unwatched[j.PID] = unwatchedJVM{jvm: j, found: time.Now()}
			}
		case procevents.Exit:
			if e.watch != nil && e.watch.watched(ev.PID) {
				e.watch.Remove(ev.PID)
				a.Exited = append(a.Exited, ev.PID)
			}
			if _, ok := e.unwatched[ev.PID]; ok {
				delete(e.unwatched, ev.PID)
				a.Exited = append(a.Exited, ev.PID)
			}
		}
	}
	return a
}

// reportStalled says once that j's folders could not be watched in time.
func (e *Events) reportStalled(j JVM) {
	e.logger.Warn("watching a JVM's /tmp and repository folder has not returned after "+fsdeadline.Timeout.String()+
		" (a stalled mount in its container?): it is looked at again every 250 ms for its first 30 s instead, the other JVMs as usual",
		zap.Int("pid", j.PID))
	if e.stalled != nil {
		e.stalled()
	}
}

func (e *Events) add(a Arrivals) {
	e.mu.Lock()
	e.arrival.JVMs = append(e.arrival.JVMs, a.JVMs...)
	e.arrival.Refused = append(e.arrival.Refused, a.Refused...)
	e.arrival.Exited = append(e.arrival.Exited, a.Exited...)
	e.arrival.Overflow = e.arrival.Overflow || a.Overflow
	e.mu.Unlock()
	select {
	case e.ready <- struct{}{}:
	default:
	}
}
