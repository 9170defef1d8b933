package discovery

import (
	"go.uber.org/zap"
)

// State is where a discovered Python process stands with the receiver: one
// of the State* values, the `state` attribute of
// otelcol_receiver_pythongil_processes. The words are the jfr receiver's
// for JVMs where they mean the same (found, refused).
type State string

// The states of a discovered Python process.
const (
	// StateFound: discovered (at its exec or by a scan); not probed yet.
	StateFound State = "found"
	// StateProbed: the GIL probes are attached to the interpreter it runs.
	StateProbed State = "probed"
	// StateRefused: it is not probed, and Status.Reason says why
	// (free_threaded, no_gil_symbols, a refusal reason such as mismatch
	// or maps_too_large, attach_failed).
	StateRefused State = "refused"
)

// States lists every state, in the order status counts are reported.
var States = []State{StateFound, StateProbed, StateRefused}

// Status is one process's state and why.
type Status struct {
	State State
	// Reason says why it is refused; "" otherwise.
	Reason string
}

// Statuses keeps each discovered process's Status, logs every change on
// one line, and counts the processes per state. A process is its pid and
// start time: a status set for another process under a reused pid
// replaces the old process's. Use it from one goroutine.
type Statuses struct {
	logger *zap.Logger
	byPID  map[int]known
	// changed, when set, is called with the state a process left (""
	// for a new one) and the one it entered ("" when forgotten).
	changed func(from, to State)
}

// known is one process's status and its start time (0 when unknown).
type known struct {
	status     Status
	startTicks uint64
}

// NewStatuses returns an empty set; changed may be nil.
func NewStatuses(logger *zap.Logger, changed func(from, to State)) *Statuses {
	if changed == nil {
		changed = func(State, State) {}
	}
	return &Statuses{logger: logger, byPID: map[int]known{}, changed: changed}
}

// Set records the status of the process pid started at startTicks (0:
// not known, then the pid's process as recorded), logging it when it
// changed. Another start time than the recorded one is another process:
// the old one is forgotten.
func (s *Statuses) Set(pid int, startTicks uint64, state State, reason string) {
	old, ok := s.byPID[pid]
	if ok && old.startTicks != 0 && startTicks != 0 && old.startTicks != startTicks {
		s.Forget(pid)
		old, ok = known{}, false
	}
	if startTicks == 0 {
		startTicks = old.startTicks
	}
	st := Status{State: state, Reason: reason}
	s.byPID[pid] = known{status: st, startTicks: startTicks}
	if ok && old.status == st {
		return
	}
	s.changed(old.status.State, state)
	s.logger.Info("Python process status", zap.Int("pid", pid), zap.String("state", string(state)), zap.String("reason", reason))
}

// Get returns pid's status (false when it is not known).
func (s *Statuses) Get(pid int) (Status, bool) {
	k, ok := s.byPID[pid]
	return k.status, ok
}

// Forget drops an exited process.
func (s *Statuses) Forget(pid int) {
	if old, ok := s.byPID[pid]; ok {
		delete(s.byPID, pid)
		s.changed(old.status.State, "")
	}
}

// Exit forgets pid's process at an exit event of pid, unless ended, given
// the pid and the process's recorded start time, says the exit was not
// that process's (procdiscovery.Ended).
func (s *Statuses) Exit(pid int, ended func(pid int, startTicks uint64) bool) {
	if k, ok := s.byPID[pid]; ok && ended(pid, k.startTicks) {
		s.Forget(pid)
	}
}

// Counts returns the number of processes in each state (every state
// present).
func (s *Statuses) Counts() map[State]int64 {
	out := make(map[State]int64, len(States))
	for _, st := range States {
		out[st] = 0
	}
	for _, k := range s.byPID {
		out[k.status.State]++
	}
	return out
}

// Prune forgets the processes for which alive, given a process's pid and
// recorded start time (0 when unknown), is false.
func (s *Statuses) Prune(alive func(pid int, startTicks uint64) bool) {
	for pid, k := range s.byPID {
		if !alive(pid, k.startTicks) {
			s.Forget(pid)
		}
	}
}
