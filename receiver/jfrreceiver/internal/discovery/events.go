package discovery

import (
	"time"

	"go.uber.org/zap"

	"github.com/otelcol-ai/otelcol-ai/internal/fsdeadline"
	"github.com/otelcol-ai/otelcol-ai/internal/procdiscovery"
	"github.com/otelcol-ai/otelcol-ai/internal/procevents"
	"github.com/otelcol-ai/otelcol-ai/internal/procresource"
)

// Events is the event-fed path of discovery: the node's process events
// (procdiscovery.Events) turned into JVM arrivals, so that a JVM is seen at
// its exec and again when it announces itself (Watch), and its exit is
// known at once, however long the discovery interval. The receiver takes
// what it found when Ready fires.
//
// A JVM found at its exec that no inotify watch follows (no inotify
// instance to be had: a node's fs.inotify.max_user_instances is shared by
// every container of a user; or no folder of its could be watched in time)
// is announced again every recheckEvery for its first recheckFor, which
// finds its repository and -Xlog files, and its exit is reported as a
// watched JVM's is.
type Events struct {
	events  *procdiscovery.Events[JVM]
	watch   *Watch // nil without inotify
	logger  *zap.Logger
	stalled func() // may be nil
}

// newWatch is NewWatch; tests take inotify away.
var newWatch = NewWatch

// The policy for JVMs: an exec is read from /proc only when its command
// name (eBPF gives it) is a java launcher's, once (a java exec is a JVM at
// once); a JVM no watch follows is announced again every recheckEvery for
// recheckFor after its exec (it makes its repository seconds into its
// life, once JFR has loaded); at most maxTracked JVMs are followed to their
// exit (the watched and the others).
const (
	recheckEvery = 250 * time.Millisecond
	recheckFor   = 30 * time.Second
	maxTracked   = 2 * MaxWatched
)

// Arrivals is what Events found since the last Take.
type Arrivals struct {
	// JVMs found at their exec or announced since (hsperfdata file or
	// repository folder made); a JVM may come more than once.
	JVMs []JVM
	// Refused are processes Candidate refused.
	Refused []Refusal
	// Exited are the pids of JVMs found at their exec that exited: read
	// their last chunks now.
	Exited []int
	// Overflow says process events were lost: scan.
	Overflow bool
}

// NewEvents subscribes to the node's process events and inspects each
// exec under the proc root. stalled, when set, is called once for each JVM
// whose folders could not be watched before the deadline (a call hanging
// on its filesystem). Close it.
func NewEvents(procRoot string, logger *zap.Logger, stalled func()) *Events {
	src := procdiscovery.Subscribe(logger)
	w, err := newWatch()
	if err != nil && src.Mechanism() != procevents.MechanismNone {
		logger.Warn("no inotify instance (raise the node's fs.inotify.max_user_instances, shared by every container of a user): a JVM found at its exec is looked at again every 250 ms for its first 30 s instead of when it makes its hsperfdata file or JFR repository",
			zap.Error(err))
	}
	return newEvents(NewScanner(procRoot), src, w, logger, stalled)
}

// newEvents starts the events of src with w (nil: none) watching the JVMs
// found.
func newEvents(s *Scanner, src procdiscovery.Source, w *Watch, logger *zap.Logger, stalled func()) *Events {
	e := &Events{watch: w, logger: logger, stalled: stalled}
	policy := procdiscovery.Policy[JVM]{
		Comm:       func(comm string) bool { return procresource.RuntimeOf(comm) == procresource.RuntimeJava },
		Found:      e.found,
		Every:      recheckEvery,
		For:        recheckFor,
		MaxTracked: maxTracked,
	}
	if w != nil {
		policy.Exited, policy.Announced, policy.Announcements = w.Remove, w.Ready(), w.Take
	}
	e.events = procdiscovery.NewEvents(s.scan, src, policy)
	return e
}

// Mechanism says where the process events come from.
func (e *Events) Mechanism() procevents.Mechanism { return e.events.Mechanism() }

// Ready fires when Take has something.
func (e *Events) Ready() <-chan struct{} { return e.events.Ready() }

// Take returns what was found since the last Take.
func (e *Events) Take() Arrivals {
	a := e.events.Take()
	return Arrivals{JVMs: a.Found, Refused: a.Refused, Exited: a.Exited, Overflow: a.Overflow}
}

// Close stops the goroutine and releases the subscription and watches; it
// does not wait for a watch's call that hangs.
func (e *Events) Close() {
	e.events.Close()
	if e.watch != nil {
		e.watch.Close()
	}
}

// found watches the folders of a JVM found at its exec, under the batch's
// one deadline from the first watch on: JVMs whose folders hang (stalled
// mounts in their containers) hold the batch fsdeadline.Timeout at most,
// however many. It reports whether the JVM is to be announced again (no
// watch follows it).
func (e *Events) found(b *procdiscovery.Batch, j JVM) bool {
	if e.watch == nil {
		return true
	}
	watching, stalled := e.watch.Add(b.Deadline(fsdeadline.Timeout), j)
	if stalled {
		e.reportStalled(j)
	}
	return !watching
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
