package leak

import "time"

// Alarms merges the assessments of one series by several detectors (tiers:
// a slow one over a long window with low thresholds for slow leaks, a fast
// one over a short window with high thresholds for fast ones) into one
// alarm per leak:
//
//   - the series is suspected while any tier's latest ready assessment
//     suspects it;
//   - the first suspicion opens the alarm and is reported, from the tier
//     that suspected it; while the alarm is open, a suspicion by any tier is
//     reported again only once Remind has passed since the last report (a
//     leak the fast tier named is not named again by the slow tier when its
//     longer window catches up);
//   - the alarm ends once no tier has suspected the series for Quiet; a
//     suspicion after that is a new leak, reported at once.
//
// The detectors' own Report is not used.
type Alarms[K comparable] struct {
	tiers  int
	remind time.Duration
	quiet  time.Duration
	alarms map[K]*alarm
}

type alarm struct {
	// suspects holds each tier's latest verdict (false while that tier is
	// not ready).
	suspects      []bool
	ready         []bool
	open          bool
	lastReport    time.Time
	lastSuspected time.Time
	freshness
}

// Verdict is a series' merged state after one tier's assessment.
type Verdict struct {
	// Ready is true while at least one tier's latest assessment is ready.
	Ready bool
	// Suspected is true while a tier's latest ready assessment suspects
	// the series.
	Suspected bool
	// Report is true when this assessment should be reported.
	Report bool
}

// NewAlarms returns alarms over tiers detectors (numbered from 0), that
// remind once per remind while a leak lasts and end an alarm after quiet
// without a suspicion.
func NewAlarms[K comparable](tiers int, remind, quiet time.Duration) *Alarms[K] {
	return &Alarms[K]{tiers: tiers, remind: remind, quiet: quiet, alarms: map[K]*alarm{}}
}

// Len returns the number of series tracked.
func (a *Alarms[K]) Len() int { return len(a.alarms) }

// Assessed takes tier's assessment of k's series, made at at (the reading's
// time), and returns the merged verdict. A tier outside [0, tiers) is
// ignored.
func (a *Alarms[K]) Assessed(k K, tier int, at time.Time, as Assessment) Verdict {
	s := a.alarms[k]
	if s == nil {
		s = &alarm{suspects: make([]bool, a.tiers), ready: make([]bool, a.tiers)}
		a.alarms[k] = s
	}
	s.seen = true
	if tier < 0 || tier >= a.tiers {
		return s.verdict()
	}
	s.ready[tier], s.suspects[tier] = as.Ready, as.Ready && as.Suspected
	v := s.verdict()
	switch {
	case s.suspects[tier] && !s.open:
		s.open, v.Report = true, true
	case s.suspects[tier] && at.Sub(s.lastReport) >= a.remind:
		v.Report = true
	case s.open && !v.Suspected && at.Sub(s.lastSuspected) >= a.quiet:
		s.open = false
	}
	if v.Suspected {
		s.lastSuspected = maxTime(s.lastSuspected, at)
	}
	if v.Report {
		s.lastReport = at
	}
	return v
}

func (s *alarm) verdict() Verdict {
	var v Verdict
	for i := range s.ready {
		v.Ready = v.Ready || s.ready[i]
		v.Suspected = v.Suspected || s.suspects[i]
	}
	return v
}

// Sweep is called once per round of readings, as Detector.Sweep: it forgets
// series that have had no assessment for keepMissed rounds.
func (a *Alarms[K]) Sweep() {
	for k, s := range a.alarms {
		if s.stale() {
			delete(a.alarms, k)
		}
	}
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
