package pythongilreceiver

import (
	"errors"
	"time"

	"github.com/otelcol-ai/otelcol-ai/internal/window"
	"github.com/otelcol-ai/otelcol-ai/receiver/pythongilreceiver/internal/gil"
)

// dutyCycle keeps the probes' estimated cost within the overhead budget by
// attaching them for only a fraction of each period. The estimate is the
// kernel's hit count since the last check (at most recheck apart while the
// ratio is 1; a whole attached phase otherwise) over that time, times the
// configured cost per hit, averaged over the probed processes.
//
// What the probes cost is also accounted, as in a token bucket
// (budgetBucket): the budget accrues with time and every check spends its
// hits' cost (including the first estimate, at full cost, and the hits
// while the links close). While the probes are attached all the time, they
// stay so as long as the last check's rate fits the budget or the bucket
// still holds what was spent: a burst (a process starting up, importing
// its modules: 2,400 hits in 100 ms seen) is paid from the budget accrued
// before it, not answered by detaching for a period. A detached phase
// lasts until the spending is paid back, so that the cost stays within the
// budget over any stretch of a period or more, not only in the steady
// state.
//
// Attached time runs from when attaching returns (the uprobes fire from
// then: none while it runs) to when detaching starts (the kernel stops them
// at once and then waits tens of ms for readers to go: about 2 ms of hits
// in a 60 ms close here), so that the ratio says what was kept.
//
// Attention (overhead.follow_attention): while over budget, when some
// libraries' processes have attention (attention.Registry: recent spans
// or JVM pauses) and others not, every library is attached for the others'
// share of the period, then only the attended ones for the rest of theirs
// (the tail), so that the budget goes to them: the others get the minimum
// ratio, or more when the attended ones are attached all period
// (planAttention). Both parts are measured apart, which tells the attended
// libraries' cost from everyone's. Every library attaches at once, at the
// start of an attached phase, so that what a thread did before it is stale
// for all alike.
//
// It does not sleep: step does what is due and sets wait, the time until
// the next step, which the receiver's loop waits for; every time is read
// from clock (CLOCK_MONOTONIC, the events' clock), so that tests drive it
// without waiting. Each phase is written to phases, which weighs the
// events the probes keep (phaseLog).
type dutyCycle struct {
	cfg   OverheadConfig
	probe dutyProbe
	clock func() time.Duration
	// wait is how long after a step the next is due.
	wait time.Duration

	phase dutyPhase
	// plan is the current attached phase's plan: ratio every library's
	// attached fraction (the others' under a plan with attended
	// libraries), hi the attended ones'. It is chosen when the phase is
	// attached (next, chosen at the check that ended the last one), so
	// that each phase's events are weighed by the plan they were kept
	// under; planned is false while the probes stay attached past a plan
	// (a phase of checks that fitted the budget), whose plan starts at the
	// check that ends it.
	plan, next dutyPlan
	planned    bool
	// effective is the fraction measured over the last period (the
	// others'), effectiveHi the attended ones': what is reported.
	effective, effectiveHi float64
	// since is when the current phase began: attached (the tail is part
	// of it) or detached; cycle is when the last attached phase began;
	// checked is when the attached phase's hits were last read;
	// tailSince when the tail began.
	since, cycle, checked, tailSince time.Duration
	// onFor is how long every library was attached in the last attached
	// phase, onForHi how long the attended ones were (the tail included).
	onFor, onForHi time.Duration
	hitsSince      uint64
	// tolerant says bursts over budget are paid from the bucket: from the
	// start, and once every check fitted the budget for a period (since
	// fitSince, fitting false while one did not), never within a
	// duty-cycled phase, where a check with few hits (the workloads not
	// scheduled for a while) says nothing of the cost.
	tolerant bool
	fitting  bool
	fitSince time.Duration
	bucket   budgetBucket
	// offUntil is when the current detached phase is planned to end, and
	// nextCost what the next attached phase is estimated to spend: a
	// detached phase ends early, once paid for, while a probed process's
	// GIL is not known yet (learning).
	offUntil time.Duration
	nextCost float64
	// rate is the cost measured with every library attached, attRate with
	// only the attended ones (0: not measured yet), as shares of a CPU per
	// probed process.
	rate, attRate float64

	phases *phaseLog
}

// dutyPhase is where a duty cycle stands.
type dutyPhase int

const (
	// phaseAttached: every library attached.
	phaseAttached dutyPhase = iota
	// phaseTail: only the plan's attended libraries attached.
	phaseTail
	// phaseDetached: none attached.
	phaseDetached
)

// dutyProbe is what the duty cycle does with the probes (gil.Probe).
type dutyProbe interface {
	Counters() (gil.Counters, error)
	SetActive(bool) error
	Detach(map[*gil.Library][]uint32) error
	WaitsFromFutex() bool
	KnownGILs() (int, error)
}

// firstEstimate is when the first cost estimate is made: early, because
// until then the probes cost what they cost; 50 ms of hits are plenty at
// the rates that matter.
const firstEstimate = 50 * time.Millisecond

// recheck is how often the cost is re-estimated while it fits the budget:
// a workload that starts churning after an idle estimate is probed at full
// cost for at most this long.
const recheck = 100 * time.Millisecond

// minAttached is the shortest attached phase worth having.
const minAttached = 10 * time.Millisecond

// newDutyCycle starts a duty cycle over probe, attached, at clock's now.
func newDutyCycle(cfg OverheadConfig, probe dutyProbe, clock func() time.Duration) *dutyCycle {
	now := clock()
	d := &dutyCycle{cfg: cfg, probe: probe, clock: clock, plan: dutyPlan{ratio: 1, hi: 1}, next: dutyPlan{ratio: 1, hi: 1}, effective: 1, effectiveHi: 1,
		since: now, cycle: now, checked: now, tolerant: true, bucket: newBudgetBucket(cfg, now), phases: newPhaseLog(cfg.Period)}
	if cfg.Budget <= 0 {
		return d
	}
	if c, err := probe.Counters(); err == nil {
		d.hitsSince = c.Hits
	}
	// The first estimate comes early, so that an expensive workload is not
	// probed at full cost for a whole period.
	d.wait = min(cfg.Period, firstEstimate)
	return d
}

// enabled says whether the duty cycle steps at all (a budget is set).
func (d *dutyCycle) enabled() bool {
	return d.cfg.Budget > 0
}

// attached says whether the uprobes are attached (all or the tail).
func (d *dutyCycle) attached() bool {
	return d.phase != phaseDetached
}

// after sets the next step due in wait.
func (d *dutyCycle) after(wait time.Duration) {
	d.wait = wait
}

// retry is the next step after a failed probe action: a period later.
func (d *dutyCycle) retry() {
	d.after(d.cfg.Period)
}

// ratioOf is the share of l's released windows, GC pauses and held time
// that the probes keep: its attached fraction over the last period.
func (d *dutyCycle) ratioOf(l *gil.Library) float64 {
	if d.plan.attended[l] {
		return d.effectiveHi
	}
	return d.effective
}

// periodCost is the estimated cost over the last period (budgetBucket).
func (d *dutyCycle) periodCost() float64 {
	return d.bucket.periodCost()
}

// step ends the current phase: after an attached phase it re-estimates the
// cost and chooses the ratio, and where libs' attention says so the tail;
// it returns the others' ratio now in effect (ratioOf: each library's).
func (d *dutyCycle) step(processes int, libs []dutyLibrary) (float64, error) {
	now := d.clock()
	d.phases.seen(now, libs, d.attached())
	switch d.phase {
	case phaseDetached:
		return d.attach(now, processes, libs)
	case phaseTail:
		return d.endTail(now, processes)
	}
	c, err := d.probe.Counters()
	if err != nil {
		d.retry()
		return d.plan.ratio, err
	}
	attached := (now - d.checked).Seconds()
	hits := c.Hits - d.hitsSince
	d.rate = ratioCost(d.cfg, float64(hits), attached, processes)
	prev := d.plan.ratio
	ratio := ratioFor(d.cfg, float64(hits), attached, processes)
	d.bucket.spend(now, hits, processes)
	d.hitsSince, d.checked = c.Hits, now
	if ratio >= 1 {
		if !d.fitting {
			d.fitting, d.fitSince = true, now
		}
		d.tolerant = d.tolerant || now-d.fitSince >= d.cfg.Period
	} else {
		d.fitting = false
	}
	if d.tolerant && (ratio >= 1 || d.bucket.tokens > 0) {
		// Within the budget, or a burst that the budget accrued before it
		// has paid for: attached on, checked again soon.
		d.plan, d.next, d.planned = dutyPlan{ratio: 1, hi: 1}, dutyPlan{ratio: 1, hi: 1}, false
		d.effective, d.effectiveHi = 1, 1
		d.after(min(d.cfg.Period, recheck))
		return 1, nil
	}
	// A duty-cycled phase ends as planned even when its check fits the
	// budget (it may have run long while this goroutine was busy, or the
	// workloads not been scheduled): the next phase is then attached a
	// whole period, and once checks have fitted for a period the probes
	// stay attached.
	d.tolerant = false
	d.next = d.planFor(libs, ratio)
	if !d.planned {
		// Attached all the time until now: the plan starts here.
		d.plan = d.next
	}
	if d.plan.attended != nil {
		return d.startTail(now, processes, prev, libs)
	}
	return d.detach(now, processes)
}

// planFor is the plan of the next attached phase at ratio, the fraction
// that keeps the cost within the budget: where libs' attention says so
// (overhead.follow_attention), the others at the minimum and the attended
// ones for the rest (planAttention); otherwise every library alike.
func (d *dutyCycle) planFor(libs []dutyLibrary, ratio float64) dutyPlan {
	if ratio < 1 && d.cfg.FollowAttention {
		if plan, others := planAttention(d.cfg, libs, d.rate, d.attRate); others != nil {
			return plan
		}
	}
	return dutyPlan{ratio: ratio, hi: ratio}
}

// startTail detaches the libraries the plan does not favour and leaves
// the attended ones attached for the rest of their share of the period.
// prev is the ratio the others were attached at until now.
func (d *dutyCycle) startTail(now time.Duration, processes int, prev float64, libs []dutyLibrary) (float64, error) {
	others := map[*gil.Library][]uint32{}
	for _, l := range libs {
		if !d.plan.attended[l.lib] {
			others[l.lib] = l.pids
		}
	}
	if err := d.probe.Detach(others); err != nil {
		// Attached as a whole, alike: detach everything.
		d.plan = dutyPlan{ratio: d.plan.ratio, hi: d.plan.ratio}
		_, derr := d.detach(now, processes)
		return d.effective, errors.Join(err, derr)
	}
	off := d.clock()
	d.phases.detached(now, func(l *gil.Library) bool { return !d.plan.attended[l] })
	c, err := d.probe.Counters()
	if err == nil {
		d.bucket.spend(off, c.Hits-d.hitsSince, processes)
		d.hitsSince = c.Hits
	}
	if d.onForHi <= d.onFor {
		// No tail in the last period to measure the attended libraries'
		// share by: theirs is the others' as measured, scaled by plan.
		d.effectiveHi = min(d.effective*d.plan.hi/max(prev, minRatio), 1)
	}
	d.onFor = d.attachedFor(now)
	d.phase, d.tailSince = phaseTail, off
	tail := max(time.Duration(d.plan.hi*float64(d.cfg.Period))-(off-d.since), minAttached)
	if !d.planned {
		for l := range d.plan.attended {
			d.phases.replanned(l, off-d.since+tail)
		}
	}
	d.after(tail)
	return d.effective, err
}

// endTail measures the attended libraries' cost alone and detaches them.
func (d *dutyCycle) endTail(now time.Duration, processes int) (float64, error) {
	c, err := d.probe.Counters()
	if err != nil {
		d.retry()
		return d.effective, err
	}
	d.attRate = ratioCost(d.cfg, float64(c.Hits-d.hitsSince), (now - d.tailSince).Seconds(), processes)
	return d.detach(now, processes)
}

// detach ends an attached phase (tail included) at now and plans the
// detached phase.
func (d *dutyCycle) detach(now time.Duration, processes int) (float64, error) {
	if err := d.probe.SetActive(false); err != nil {
		d.retry()
		return d.effective, err
	}
	d.phases.detached(now, nil)
	// The few hits while the links closed are spent too.
	off := d.clock()
	if c, err := d.probe.Counters(); err == nil {
		d.bucket.spend(off, c.Hits-d.hitsSince, processes)
	}
	d.onForHi = d.attachedFor(now)
	if d.phase != phaseTail {
		d.onFor = d.onForHi
	}
	d.phase, d.since = phaseDetached, now
	// Detached for the rest of the period, at least a tenth of it, and
	// until the budget has accrued what the next attached phase will
	// spend: paid before it is spent, so that the first estimate's cost
	// (at full rate) is not added to the steady state's.
	offFor := max(d.cfg.Period-d.onForHi, d.cfg.Period/10)
	next := d.next.ratio * d.cfg.Period.Seconds() * d.rate
	if d.next.attended != nil {
		next += (d.next.hi - d.next.ratio) * d.cfg.Period.Seconds() * min(d.attRate, d.rate)
	}
	if owed := next - d.bucket.tokens; owed > 0 {
		offFor = max(offFor, time.Duration(owed/d.cfg.Budget*float64(time.Second)))
	}
	total := (d.onForHi + offFor).Seconds()
	d.effective, d.effectiveHi = d.onFor.Seconds()/total, d.onForHi.Seconds()/total
	d.offUntil, d.nextCost = now+offFor, next
	// Checked every recheck for a process to learn (learning).
	d.after(min(d.offUntil-off, recheck))
	return d.effective, nil
}

// attachedFor is how long the attached phase ending at now counts for: a
// phase attached all the time for longer than a period counts as the last
// period of it, so that the ratio reported after it says how much of the
// period around the detach was attached.
func (d *dutyCycle) attachedFor(now time.Duration) time.Duration {
	on := min(now-d.since, d.cfg.Period)
	d.cycle = now - on
	return on
}

// attach ends a detached phase once it is paid for (or to learn a GIL):
// every library is attached, for the others' share of the period.
func (d *dutyCycle) attach(now time.Duration, processes int, libs []dutyLibrary) (float64, error) {
	if now < d.offUntil && !d.learning(now, processes) {
		d.after(min(d.offUntil-now, recheck))
		return d.effective, nil
	}
	if err := d.probe.SetActive(true); err != nil {
		d.retry()
		return d.effective, err
	}
	on := d.clock()
	if total := (on - d.cycle).Seconds(); total > 0 {
		d.effective, d.effectiveHi = d.onFor.Seconds()/total, d.onForHi.Seconds()/total
	}
	d.phase, d.since, d.cycle, d.checked = phaseAttached, on, on, on
	d.plan, d.planned = d.next, true
	if c, err := d.probe.Counters(); err == nil {
		d.hitsSince = c.Hits
	}
	planned := max(time.Duration(d.plan.ratio*float64(d.cfg.Period)), minAttached)
	plannedHi := max(time.Duration(d.plan.hi*float64(d.cfg.Period)), planned+minAttached)
	d.phases.attached(on, libs, func(l *gil.Library) time.Duration {
		if d.plan.attended[l] {
			return plannedHi
		}
		return planned
	})
	d.after(planned)
	return d.effective, nil
}

// learning reports whether a detached phase should end now: waits come
// from the futex tracepoints, some probed process's GIL is not known yet
// (it is learned only while the uprobes are attached, and until then that
// process's waits are not seen at all), and the budget has accrued what
// the next attached phase will spend. A process that starts its Python
// work during a detached phase is then seen from the next paid attached
// phase on, not a whole period later; the cost stays within the budget.
func (d *dutyCycle) learning(now time.Duration, processes int) bool {
	if !d.probe.WaitsFromFutex() || processes == 0 {
		return false
	}
	known, err := d.probe.KnownGILs()
	if err != nil || known >= processes {
		return false
	}
	return d.bucket.accrued(now) >= d.nextCost
}

// monotonicNow reads CLOCK_MONOTONIC, the clock of the probes' events.
func monotonicNow() time.Duration {
	return time.Duration(window.Monotonic())
}
