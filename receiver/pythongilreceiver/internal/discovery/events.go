package discovery

import (
	"time"

	"go.uber.org/zap"

	"github.com/otelcol-ai/otelcol-ai/internal/procdiscovery"
	"github.com/otelcol-ai/otelcol-ai/internal/procevents"
)

// Retries are when a process is inspected after its exec, each after the
// one before, until it is found to run CPython, exits, or the last has
// passed: a python built shared maps libpython a few milliseconds after its
// exec (the dynamic loader), a host that loads it with dlopen later (the
// periodic scan finds those).
var Retries = []time.Duration{0, 2 * time.Millisecond, 10 * time.Millisecond, 30 * time.Millisecond,
	100 * time.Millisecond, 300 * time.Millisecond}

// MaxTracked bounds the processes waiting for a retry; past it, a new
// process is inspected once, at its exec.
const MaxTracked = 4096

// Events is the event-fed path of discovery: the node's process events
// (procdiscovery.Events) turned into interpreter arrivals, so that a
// CPython is probed within milliseconds of its exec however long the
// discovery interval, and its exit is known at once. Any exec may be an
// interpreter (a JVM embedding CPython), so every one is inspected, on
// Retries' schedule. The receiver takes what it found when Ready fires.
type Events struct {
	events *procdiscovery.Events[Interpreter]
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

// NewEvents subscribes to the node's process events and inspects each
// exec with scanner. Close it.
func NewEvents(scanner *Scanner, logger *zap.Logger) *Events {
	return newEvents(scanner, procdiscovery.Subscribe(logger))
}

func newEvents(scanner *Scanner, src procdiscovery.Source) *Events {
	return &Events{procdiscovery.NewEvents(scanner.scan, src, procdiscovery.Policy[Interpreter]{
		Backoff: Retries, MaxTracked: MaxTracked, AllExits: true,
	})}
}

// Mechanism says where the process events come from.
func (e *Events) Mechanism() procevents.Mechanism { return e.events.Mechanism() }

// Ready fires when Take has something.
func (e *Events) Ready() <-chan struct{} { return e.events.Ready() }

// Take returns what was found since the last Take.
func (e *Events) Take() Arrivals {
	a := e.events.Take()
	return Arrivals{Interpreters: a.Found, Refused: a.Refused, Exited: a.Exited, Overflow: a.Overflow}
}

// Close stops the goroutine and releases the subscription.
func (e *Events) Close() { e.events.Close() }
