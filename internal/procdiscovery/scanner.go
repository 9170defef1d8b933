// Package procdiscovery finds a receiver's processes on a node, the part
// every runtime receiver shares; what makes a process the receiver's (a
// java launcher, a mapped libpython) is the receiver's Inspect.
//
// A Scanner lists a proc root and inspects each process, bounding an
// inspection that hangs, recovering one that panics, and reporting a refused
// process once (by pid and start time, against pid reuse). Events turns the
// node's process events (package procevents) into the processes found at
// their exec, inspected again on the receiver's schedule until found, and
// their exits. Alive is the one liveness rule: a process is identified by
// pid and start time, and one that has exited is not alive, though its
// entry stays until it is reaped.
package procdiscovery // import "github.com/otelcol-ai/otelcol-ai/internal/procdiscovery"

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"sync"
	"time"

	"github.com/otelcol-ai/otelcol-ai/internal/procresource"
)

// Errors callers branch on with errors.Is.
var (
	// ErrPanic is wrapped by the error for a process whose inspection
	// panicked: the panic is recovered and the process refused, so that
	// one bad input cannot stop the others.
	ErrPanic = errors.New("panic while decoding")
	// ErrStalled: inspecting the process has not returned within
	// InspectTimeout (a process stuck holding its memory map lock, a file
	// on a hung FUSE or NFS mount); the scan goes on without it and it is
	// looked at again once that inspection returns.
	ErrStalled = errors.New("reading the process stalled")
)

// InspectTimeout bounds how long the inspection of one process may hold a
// scan: past it, the inspection goes on in its own goroutine and the scan
// moves on to the other processes.
const InspectTimeout = 2 * time.Second

// Recovered turns a value recovered from a panic while handling what
// names into an error wrapping ErrPanic, with the stack, for the log.
func Recovered(what string, p any) error {
	return fmt.Errorf("%s: %w: %v\n%s", what, ErrPanic, p, debug.Stack())
}

// Refusal is a process that could not be inspected safely.
type Refusal struct {
	PID int
	// StartTicks is the refused process's start time (with PID, its
	// identity); 0 when it could not be read, or the inspection stalled.
	StartTicks uint64
	Err        error
}

// Inspect tells whether process pid is one of the receiver's, and what it
// is. A process that vanishes while read is not one (false, nil); an error
// refuses the process: it is reported once, and not inspected again while
// the same process (pid and start time) runs.
type Inspect[T any] func(pid int) (T, bool, error)

// Scanner finds a receiver's processes under one proc root: all of them
// (Scan, the periodic safety net) or one process a process event names
// (Candidate). It is safe for concurrent use.
type Scanner[T any] struct {
	reader  *procresource.Reader
	inspect Inspect[T]
	// self is the collector's own pid as the proc root names it (0 when
	// it does not): the collector never inspects itself.
	self    int
	timeout time.Duration

	mu sync.Mutex
	// refused remembers the processes refused, by pid with their start
	// time, so that each is reported once.
	refused map[int]uint64
	// stalled are the inspections still running after the timeout, by
	// pid; their pids are skipped until they return.
	stalled map[int]chan struct{}
}

// NewScanner returns a Scanner over the proc root of reader that inspects
// each process with inspect.
func NewScanner[T any](reader *procresource.Reader, inspect Inspect[T]) *Scanner[T] {
	return &Scanner[T]{reader: reader, inspect: inspect, self: selfPID(reader.Root()), timeout: InspectTimeout,
		refused: map[int]uint64{}, stalled: map[int]chan struct{}{}}
}

// selfPID is the pid the proc root's "self" link names: the collector's
// own pid in that proc filesystem's pid namespace, which is not
// os.Getpid() when the collector runs in a container and reads the host's
// processes through a mount of the host's proc.
func selfPID(root string) int {
	link, err := os.Readlink(filepath.Join(root, "self"))
	if err != nil {
		return 0
	}
	pid, _ := ParsePID(link)
	return pid
}

// ParsePID parses the name of a process's proc directory: a positive
// decimal pid written as the kernel writes it (no sign, no leading zero),
// so that a name maps to one pid and a pid to one name.
func ParsePID(name string) (int, bool) {
	if name == "" || len(name) > 10 || name[0] == '0' {
		return 0, false
	}
	n := 0
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	if n > 1<<31-1 {
		return 0, false
	}
	return n, true
}

// Scan returns the receiver's processes now running, and the processes
// this scan refused (each once). Processes that vanish while being read are
// left out; only an unreadable proc root is an error.
func (s *Scanner[T]) Scan() ([]T, []Refusal, error) {
	entries, err := os.ReadDir(s.reader.Root())
	if err != nil {
		return nil, nil, fmt.Errorf("discovery: list %s: %w", s.reader.Root(), err)
	}
	var (
		out     []T
		refused []Refusal
	)
	seen := map[int]bool{}
	for _, e := range entries {
		pid, ok := ParsePID(e.Name())
		if !ok || pid == s.self {
			continue
		}
		seen[pid] = true
		t, ok, err := s.bounded(pid)
		if err != nil {
			refused = append(refused, s.refusal(pid, err))
		}
		if ok {
			out = append(out, t)
		}
	}
	s.mu.Lock()
	for pid := range s.refused {
		if !seen[pid] {
			delete(s.refused, pid)
		}
	}
	s.mu.Unlock()
	return out, refused, nil
}

// bounded is Candidate, waited for at most the timeout: a process whose
// inspection hangs is reported once (ErrStalled) and skipped while the read
// goes on, so that it never holds the scan of the others.
func (s *Scanner[T]) bounded(pid int) (T, bool, error) {
	var zero T
	s.mu.Lock()
	done, stalled := s.stalled[pid]
	s.mu.Unlock()
	if stalled {
		select {
		case <-done:
			s.mu.Lock()
			delete(s.stalled, pid)
			s.mu.Unlock()
		default:
			return zero, false, nil
		}
	}
	type result struct {
		t   T
		ok  bool
		err error
	}
	ch := make(chan result, 1)
	done = make(chan struct{})
	go func() {
		defer close(done)
		t, ok, err := s.Candidate(pid)
		ch <- result{t, ok, err}
	}()
	timer := time.NewTimer(s.timeout)
	defer timer.Stop()
	select {
	case r := <-ch:
		return r.t, r.ok, r.err
	case <-timer.C:
		s.mu.Lock()
		s.stalled[pid] = done
		s.mu.Unlock()
		return zero, false, fmt.Errorf("discovery: pid %d: %w after %v; skipped until the read returns", pid, ErrStalled, s.timeout)
	}
}

// Candidate inspects one process: the path for a process event and for
// each process a Scan lists. A process refused (Inspect's error, or a panic
// recovered as ErrPanic) gives its error the first time and is skipped
// while it runs.
func (s *Scanner[T]) Candidate(pid int) (t T, ok bool, err error) {
	s.mu.Lock()
	start, refused := s.refused[pid]
	s.mu.Unlock()
	if refused {
		if now, err := s.reader.StartTicks(pid); err == nil && now == start {
			return t, false, nil
		}
		s.mu.Lock()
		delete(s.refused, pid)
		s.mu.Unlock()
	}
	defer func() {
		if p := recover(); p != nil {
			var zero T
			t, ok, err = zero, false, Recovered(fmt.Sprintf("discovery: pid %d", pid), p)
		}
		if err == nil {
			return
		}
		if start, serr := s.reader.StartTicks(pid); serr == nil {
			s.mu.Lock()
			s.refused[pid] = start
			s.mu.Unlock()
		}
	}()
	return s.inspect(pid)
}

// refusal is the Refusal of pid for err, with the start time Candidate
// remembered it by.
func (s *Scanner[T]) refusal(pid int, err error) Refusal {
	s.mu.Lock()
	start := s.refused[pid]
	s.mu.Unlock()
	return Refusal{PID: pid, StartTicks: start, Err: err}
}

// Alive reports whether the process pid started at startTicks still runs
// (Alive, the package function, through the scanner's proc root).
func (s *Scanner[T]) Alive(pid int, startTicks uint64) bool {
	return Alive(s.reader, pid, startTicks)
}

// Ended reports whether an exit event of pid ends the process pid started
// at startTicks (Ended, the package function, through the scanner's proc
// root).
func (s *Scanner[T]) Ended(pid int, startTicks uint64) bool {
	return Ended(s.reader, pid, startTicks)
}

// Ended reports whether an exit event of pid, read through reader, ends
// the process pid started at startTicks. An exit event names a pid alone,
// and may be taken after a later process under that pid was found (by a
// scan, or at its exec in the same batch): while the process with this
// start time still runs (Alive), the exit was an earlier process's. A
// start time of 0 (unknown) is ended by any exit of its pid.
func Ended(reader *procresource.Reader, pid int, startTicks uint64) bool {
	return startTicks == 0 || !Alive(reader, pid, startTicks)
}

// Alive reports whether pid, read through reader, still runs with the start
// time startTicks (0: whatever its start time). A process that has exited
// does not, though its proc entry stays until it is reaped (which may be
// never, under a parent that does not wait): what a receiver holds for it
// is finished at once, as at its exit event.
func Alive(reader *procresource.Reader, pid int, startTicks uint64) bool {
	st, exited, err := reader.Liveness(pid)
	return err == nil && !exited && (startTicks == 0 || st == startTicks)
}
