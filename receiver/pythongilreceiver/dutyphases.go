package pythongilreceiver

import (
	"sync"
	"time"

	"github.com/otelcol-ai/otelcol-ai/receiver/pythongilreceiver/internal/gil"
)

// phaseLog remembers each library's recent attached phases, so that an
// event is weighed by the phase it was taken in, however late the ring
// buffer is read: under load the reader can be behind the duty cycle by a
// phase or more, and the ratio in effect when an event is read may belong
// to another phase or plan.
//
// A library's time is cut into cycles, each a detached stretch followed by
// an attached phase that was planned to last planned. The events of the
// phase's planned part stand for the whole cycle up to its planned end:
// each weighs (off + planned) / planned, off being the detached stretch
// before it. A phase that runs past its plan (a late timer on a busy host,
// a check that found the cost within the budget) sees the overtime whole:
// those events weigh 1. With releases at a steady rate r, the weights of a
// cycle then add up to r times its length, however long each part lasted;
// the phase's length is known only when it ends, the plan when it starts,
// so an event is weighed as soon as it is read.
//
// It is read by the ring buffer's reader and written by the duty cycle,
// each on its own goroutine.
type phaseLog struct {
	mu   sync.Mutex
	keep time.Duration
	libs map[*gil.Library]*libraryPhases
}

// libraryPhases are one library's phases, oldest first, and when it was
// last detached (valid while the newest phase has ended).
type libraryPhases struct {
	phases  []attachedPhase
	lastOff time.Duration
}

// attachedPhase is one attached phase of a library; times are
// CLOCK_MONOTONIC, the events' clock.
type attachedPhase struct {
	// off is the detached time before it, since the library's last
	// detach (0 for its first phase: nothing to stand for).
	off time.Duration
	// on is when it was attached, planned how long it was planned to
	// last.
	on, planned time.Duration
	// end is when it was detached; 0 while it lasts.
	end time.Duration
}

// ratio is the share of the cycle the phase's planned part stands for.
func (p attachedPhase) ratio() float64 {
	if p.off <= 0 || p.planned <= 0 {
		return 1
	}
	return p.planned.Seconds() / (p.off + p.planned).Seconds()
}

func newPhaseLog(period time.Duration) *phaseLog {
	// A reader a minute behind the probes is far behind; its events are
	// then weighed by the library's ratio of the moment.
	return &phaseLog{keep: max(4*period, time.Minute), libs: map[*gil.Library]*libraryPhases{}}
}

// attached starts a phase of each library at on, planned to last what
// planned returns for it; libraries not in libs are forgotten.
func (pl *phaseLog) attached(on time.Duration, libs []dutyLibrary, planned func(*gil.Library) time.Duration) {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	seen := make(map[*gil.Library]bool, len(libs))
	for _, l := range libs {
		seen[l.lib] = true
		lp, ok := pl.libs[l.lib]
		if !ok {
			lp = &libraryPhases{lastOff: on}
			pl.libs[l.lib] = lp
		}
		if n := len(lp.phases); n > 0 && lp.phases[n-1].end == 0 {
			continue // still attached: its phase goes on
		}
		lp.phases = append(lp.phases, attachedPhase{off: on - lp.lastOff, on: on, planned: planned(l.lib)})
		lp.trim(on - pl.keep)
	}
	for lib := range pl.libs {
		if !seen[lib] {
			delete(pl.libs, lib)
		}
	}
}

// seen adds the libraries of libs the log does not know yet, as of now:
// one seen while the probes are attached (the first phase, or a process
// probed mid-phase) starts a phase that stands only for itself (weight 1),
// one seen while they are detached is detached from now.
func (pl *phaseLog) seen(now time.Duration, libs []dutyLibrary, attached bool) {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	for _, l := range libs {
		if _, ok := pl.libs[l.lib]; ok {
			continue
		}
		lp := &libraryPhases{lastOff: now}
		if attached {
			lp.phases = []attachedPhase{{on: now}}
		}
		pl.libs[l.lib] = lp
	}
}

// replanned changes the planned length of lib's current phase (a tail
// planned after the phase began).
func (pl *phaseLog) replanned(lib *gil.Library, planned time.Duration) {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	if lp, ok := pl.libs[lib]; ok {
		if n := len(lp.phases); n > 0 && lp.phases[n-1].end == 0 {
			lp.phases[n-1].planned = planned
		}
	}
}

// detached ends the current phase of the libraries detach says to (all
// when it is nil) at off.
func (pl *phaseLog) detached(off time.Duration, detach func(*gil.Library) bool) {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	for lib, lp := range pl.libs {
		if detach != nil && !detach(lib) {
			continue
		}
		if n := len(lp.phases); n > 0 && lp.phases[n-1].end == 0 {
			lp.phases[n-1].end = off
			lp.lastOff = off
		}
	}
}

// trim forgets the phases that ended before the oldest kept, keeping the
// newest.
func (lp *libraryPhases) trim(before time.Duration) {
	i := 0
	for i+1 < len(lp.phases) && lp.phases[i].end != 0 && lp.phases[i].end < before {
		i++
	}
	if i > 0 {
		lp.phases = append(lp.phases[:0], lp.phases[i:]...)
	}
}

// weight is the ratio an event of lib that ended at t (CLOCK_MONOTONIC) is
// kept at: its phase's ratio within the phase's plan, 1 past it. An event
// that falls between two phases (the probes enable before attaching
// returns; events in flight while detaching) belongs to the nearer one.
// ok is false when lib has no phase around t.
func (pl *phaseLog) weight(lib *gil.Library, t time.Duration) (ratio float64, ok bool) {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	lp, found := pl.libs[lib]
	if !found || len(lp.phases) == 0 || t < lp.phases[0].on-pl.keep {
		return 0, false
	}
	// The last phase that began by t, or the first when t is before all.
	i := len(lp.phases) - 1
	for i > 0 && lp.phases[i].on > t {
		i--
	}
	p := lp.phases[i]
	if p.end != 0 && t >= p.end && i+1 < len(lp.phases) {
		if next := lp.phases[i+1]; next.on-t < t-p.end {
			p = next
		}
	}
	if t < p.on+p.planned {
		return p.ratio(), true
	}
	return 1, true
}
