package pythongilreceiver

import (
	"errors"
	"time"

	"github.com/otelcol-ai/otelcol-ai/internal/attention"
	"github.com/otelcol-ai/otelcol-ai/receiver/pythongilreceiver/internal/gil"
)

// dutyCycle keeps the probes' estimated cost within the overhead budget by
// attaching them for only a fraction of each period. The estimate is the
// kernel's hit count since the last check (at most recheck apart while the
// ratio is 1; a whole attached phase otherwise) over that time, times the
// configured cost per hit, averaged over the probed processes.
//
// What the probes cost is also accounted, as in a token bucket: the budget
// accrues with time and every check spends its hits' cost (including the
// first estimate, at full cost, and the hits while the links close). While
// the probes are attached all the time, they stay so as long as the last
// check's rate fits the budget or the bucket still holds what was spent: a
// burst (a process starting up, importing its modules: 2,400 hits in 100 ms
// seen) is paid from the budget accrued before it, not answered by
// detaching for a period. A detached phase lasts until the spending is paid
// back, so that the cost stays within the budget over any stretch of a
// period or more, not only in the steady state.
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
// ratio, or more when the attended ones are attached all period. Both
// parts are measured apart, which tells the attended libraries' cost from
// everyone's. Every library attaches at once, at the start of an attached
// phase, so that what a thread did before it is stale for all alike.
type dutyCycle struct {
	cfg   OverheadConfig
	probe *gil.Probe
	t     *time.Timer

	// ratio is the attached fraction chosen (the others' under a plan);
	// effective is the fraction measured over the last period, which is
	// what is reported.
	ratio     float64
	effective float64
	on        bool
	// since is when the current phase began: attached (the tail is part
	// of it) or detached; cycle is when the last attached phase began;
	// checked is when the attached phase's hits were last read.
	since   time.Time
	cycle   time.Time
	checked time.Time
	// onFor is how long every library was attached in the last attached
	// phase, onForHi how long the attended ones were (the tail included).
	onFor, onForHi time.Duration
	hitsSince      uint64
	// tolerant says bursts over budget are paid from the bucket: from the
	// start, and once every check fitted the budget for a period (since
	// fitSince, zero while one did not), never within a duty-cycled phase,
	// where a check with few hits (the workloads not scheduled for a
	// while) says nothing of the cost.
	tolerant bool
	fitSince time.Time
	// tokens is the budget not spent yet, in CPU seconds (negative: spent
	// ahead), as of tokensAt; it stays within ± budget × period.
	tokens   float64
	tokensAt time.Time
	// spent is every check's cumulative estimated cost (CPU-s per probed
	// process) within the last period, oldest first: periodCost.
	spent      []spentAt
	spentTotal float64
	// offUntil is when the current detached phase is planned to end, and
	// nextCost what the next attached phase is estimated to spend: a
	// detached phase ends early, once paid for, while a probed process's
	// GIL is not known yet (learning).
	offUntil time.Time
	nextCost float64

	// follow is overhead.follow_attention.
	follow bool
	// attended are the libraries the current plan favours (nil: none,
	// every library alike), hi their planned attached fraction and
	// effectiveHi the one measured over the last period.
	attended    map[*gil.Library]bool
	hi          float64
	effectiveHi float64
	// tail is on while only the attended libraries are attached, since
	// tailSince.
	tail      bool
	tailSince time.Time
	// rate is the cost measured with every library attached, attRate with
	// only the attended ones (0: not measured yet), as shares of a CPU per
	// probed process.
	rate, attRate float64
}

// spentAt is the cumulative estimated cost at a check.
type spentAt struct {
	at    time.Time
	total float64
}

// periodCost is the estimated cost over the last period, in shares of a
// CPU per probed process: what the budget is held to (detached phases
// count as costing nothing), unlike rate, the last check's alone.
func (d *dutyCycle) periodCost() float64 {
	if len(d.spent) < 2 {
		return 0
	}
	first, last := d.spent[0], d.spent[len(d.spent)-1]
	if secs := last.at.Sub(first.at).Seconds(); secs > 0 {
		return (last.total - first.total) / secs
	}
	return 0
}

// dutyLibrary is one probed library as the duty cycle sees it: the live
// processes that map it and whether any of them has attention.
type dutyLibrary struct {
	lib      *gil.Library
	pids     []uint32
	attended bool
}

// minRatio keeps some observation however expensive the probes are.
const minRatio = 0.01

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

func newDutyCycle(cfg OverheadConfig, probe *gil.Probe) *dutyCycle {
	now := time.Now()
	d := &dutyCycle{cfg: cfg, probe: probe, ratio: 1, effective: 1, hi: 1, effectiveHi: 1, on: true, since: now, cycle: now,
		checked: now, tokensAt: now, follow: cfg.FollowAttention, tolerant: true}
	if cfg.Budget <= 0 {
		return d
	}
	if c, err := probe.Counters(); err == nil {
		d.hitsSince = c.Hits
	}
	// The first estimate comes early, so that an expensive workload is not
	// probed at full cost for a whole period.
	d.t = time.NewTimer(min(cfg.Period, firstEstimate))
	return d
}

// timer fires when the next step is due; never without a budget.
func (d *dutyCycle) timer() <-chan time.Time {
	if d.t == nil {
		return nil
	}
	return d.t.C
}

func (d *dutyCycle) stop() {
	if d.t != nil {
		d.t.Stop()
	}
}

// ratioOf is the share of l's released windows, GC pauses and held time
// that the probes keep: its attached fraction over the last period.
func (d *dutyCycle) ratioOf(l *gil.Library) float64 {
	if d.attended[l] {
		return d.effectiveHi
	}
	return d.effective
}

// step ends the current phase: after an attached phase it re-estimates the
// cost and chooses the ratio, and where libs' attention says so the tail;
// it returns the others' ratio now in effect (ratioOf: each library's).
func (d *dutyCycle) step(processes int, libs []dutyLibrary) (float64, error) {
	now := time.Now()
	switch {
	case !d.on:
		return d.attach(now, processes)
	case d.tail:
		return d.endTail(now, processes)
	}
	c, err := d.probe.Counters()
	if err != nil {
		d.t.Reset(d.cfg.Period)
		return d.ratio, err
	}
	attached := now.Sub(d.checked).Seconds()
	hits := c.Hits - d.hitsSince
	d.rate = ratioCost(d.cfg, float64(hits), attached, processes)
	prev := d.ratio
	ratio := ratioFor(d.cfg, float64(hits), attached, processes)
	d.spend(now, hits, processes)
	d.hitsSince, d.checked = c.Hits, now
	if ratio >= 1 {
		if d.fitSince.IsZero() {
			d.fitSince = now
		}
		d.tolerant = d.tolerant || now.Sub(d.fitSince) >= d.cfg.Period
	} else {
		d.fitSince = time.Time{}
	}
	if d.tolerant && (ratio >= 1 || d.tokens > 0) {
		// Within the budget, or a burst that the budget accrued before it
		// has paid for: attached on, checked again soon.
		d.ratio = 1
		d.effective, d.effectiveHi, d.hi, d.attended = 1, 1, 1, nil
		d.t.Reset(min(d.cfg.Period, recheck))
		return 1, nil
	}
	// A duty-cycled phase ends as planned even when its check fits the
	// budget (it may have run long while this goroutine was busy, or the
	// workloads not been scheduled): the next phase is then attached a
	// whole period, and once checks have fitted for a period the probes
	// stay attached.
	d.ratio = ratio
	d.tolerant = false
	if ratio < 1 {
		if others := d.plan(libs); others != nil {
			return d.startTail(now, processes, prev, others)
		}
	}
	d.attended, d.hi = nil, d.ratio
	return d.detach(now, processes)
}

// plan chooses, from libs' attention, the libraries to detach before the
// attended ones (nil: none, every library alike) and the attached
// fractions of both (ratio, hi): the others at the minimum, the rest of
// the budget to the attended, whose cost is estimated by the last tail's
// (at first, everyone's: the tail then only grows).
func (d *dutyCycle) plan(libs []dutyLibrary) map[*gil.Library][]uint32 {
	if !d.follow {
		return nil
	}
	attended := map[*gil.Library]bool{}
	others := map[*gil.Library][]uint32{}
	for _, l := range libs {
		if l.attended {
			attended[l.lib] = true
		} else {
			others[l.lib] = l.pids
		}
	}
	if len(attended) == 0 || len(others) == 0 {
		return nil
	}
	budget, all := d.cfg.Budget, d.rate
	att := d.attRate
	if att <= 0 || att > all {
		att = all
	}
	lo, hi := minRatio, minRatio
	if spare := budget - lo*all; spare > 0 && att > 0 {
		hi = min(lo+spare/att, 1)
	}
	if hi >= 1 && all > att {
		// The attended ones fit attached all period: what is left goes to
		// the others, for whom all - att is the cost of attaching them too.
		lo = min(max((budget-att)/(all-att), minRatio), 1)
	}
	if time.Duration((hi-lo)*float64(d.cfg.Period)) < minAttached {
		return nil
	}
	d.attended, d.ratio, d.hi = attended, lo, hi
	return others
}

// startTail detaches the others and leaves the attended libraries attached
// for the rest of their share of the period. prev is the ratio the others
// were attached at until now.
func (d *dutyCycle) startTail(now time.Time, processes int, prev float64, others map[*gil.Library][]uint32) (float64, error) {
	if err := d.probe.Detach(others); err != nil {
		// Attached as a whole, alike: detach everything.
		d.attended, d.hi = nil, d.ratio
		_, derr := d.detach(now, processes)
		return d.effective, errors.Join(err, derr)
	}
	off := time.Now()
	c, err := d.probe.Counters()
	if err == nil {
		d.spend(off, c.Hits-d.hitsSince, processes)
		d.hitsSince = c.Hits
	}
	if d.onForHi <= d.onFor {
		// No tail in the last period to measure the attended libraries'
		// share by: theirs is the others' as measured, scaled by plan.
		d.effectiveHi = min(d.effective*d.hi/max(prev, minRatio), 1)
	}
	d.onFor = d.attachedFor(now)
	d.tail, d.tailSince = true, off
	d.t.Reset(max(time.Duration(d.hi*float64(d.cfg.Period))-off.Sub(d.since), minAttached))
	return d.effective, err
}

// endTail measures the attended libraries' cost alone and detaches them.
func (d *dutyCycle) endTail(now time.Time, processes int) (float64, error) {
	c, err := d.probe.Counters()
	if err != nil {
		d.t.Reset(d.cfg.Period)
		return d.effective, err
	}
	d.attRate = ratioCost(d.cfg, float64(c.Hits-d.hitsSince), now.Sub(d.tailSince).Seconds(), processes)
	return d.detach(now, processes)
}

// detach ends an attached phase (tail included) at now and plans the
// detached phase.
func (d *dutyCycle) detach(now time.Time, processes int) (float64, error) {
	if err := d.probe.SetActive(false); err != nil {
		d.t.Reset(d.cfg.Period)
		return d.effective, err
	}
	// The few hits while the links closed are spent too.
	off := time.Now()
	if c, err := d.probe.Counters(); err == nil {
		d.spend(off, c.Hits-d.hitsSince, processes)
	}
	d.onForHi = d.attachedFor(now)
	if !d.tail {
		d.onFor = d.onForHi
	}
	d.on, d.tail, d.since = false, false, now
	// Detached for the rest of the period, at least a tenth of it, and
	// until the budget has accrued what the next attached phase will
	// spend: paid before it is spent, so that the first estimate's cost
	// (at full rate) is not added to the steady state's.
	offFor := max(d.cfg.Period-d.onForHi, d.cfg.Period/10)
	next := d.ratio * d.cfg.Period.Seconds() * d.rate
	if d.attended != nil {
		next += (d.hi - d.ratio) * d.cfg.Period.Seconds() * min(d.attRate, d.rate)
	}
	if owed := next - d.tokens; owed > 0 {
		offFor = max(offFor, time.Duration(owed/d.cfg.Budget*float64(time.Second)))
	}
	total := (d.onForHi + offFor).Seconds()
	d.effective, d.effectiveHi = d.onFor.Seconds()/total, d.onForHi.Seconds()/total
	d.offUntil, d.nextCost = now.Add(offFor), next
	// Checked every recheck for a process to learn (learning).
	d.t.Reset(min(d.offUntil.Sub(off), recheck))
	return d.effective, nil
}

// attachedFor is how long the attached phase ending at now counts for: a
// phase attached all the time for longer than a period counts as the last
// period of it, so that the ratio reported after it says how much of the
// period around the detach was attached.
func (d *dutyCycle) attachedFor(now time.Time) time.Duration {
	on := min(now.Sub(d.since), d.cfg.Period)
	d.cycle = now.Add(-on)
	return on
}

// attach ends a detached phase once it is paid for (or to learn a GIL):
// every library is attached, for the others' share of the period.
func (d *dutyCycle) attach(now time.Time, processes int) (float64, error) {
	if now.Before(d.offUntil) && !d.learning(now, processes) {
		d.t.Reset(min(d.offUntil.Sub(now), recheck))
		return d.effective, nil
	}
	if err := d.probe.SetActive(true); err != nil {
		d.t.Reset(d.cfg.Period)
		return d.effective, err
	}
	on := time.Now()
	if total := on.Sub(d.cycle).Seconds(); total > 0 {
		d.effective, d.effectiveHi = d.onFor.Seconds()/total, d.onForHi.Seconds()/total
	}
	d.on, d.since, d.cycle, d.checked = true, on, on, on
	if c, err := d.probe.Counters(); err == nil {
		d.hitsSince = c.Hits
	}
	d.t.Reset(max(time.Duration(d.ratio*float64(d.cfg.Period)), minAttached))
	return d.effective, nil
}

// learning reports whether a detached phase should end now: waits come
// from the futex tracepoints, some probed process's GIL is not known yet
// (it is learned only while the uprobes are attached, and until then that
// process's waits are not seen at all), and the budget has accrued what
// the next attached phase will spend. A process that starts its Python
// work during a detached phase is then seen from the next paid attached
// phase on, not a whole period later; the cost stays within the budget.
func (d *dutyCycle) learning(now time.Time, processes int) bool {
	if !d.probe.WaitsFromFutex() || processes == 0 {
		return false
	}
	known, err := d.probe.KnownGILs()
	if err != nil || known >= processes {
		return false
	}
	return d.accrued(now) >= d.nextCost
}

// accrued is the budget not spent as of now (spend's accrual, capped at a
// period's budget), without taking it.
func (d *dutyCycle) accrued(now time.Time) float64 {
	return min(d.tokens+d.cfg.Budget*now.Sub(d.tokensAt).Seconds(), d.cfg.Budget*d.cfg.Period.Seconds())
}

// spend accrues the budget up to now and takes the estimated cost of hits
// from it. Debt is capped at one period's budget: beyond it (a cost per hit
// far above the configured one) the 1% floor of the ratio rules.
func (d *dutyCycle) spend(now time.Time, hits uint64, processes int) {
	limit := d.cfg.Budget * d.cfg.Period.Seconds()
	cost := float64(hits) * d.cfg.CostPerHit.Seconds() / float64(max(processes, 1))
	d.tokens += d.cfg.Budget*now.Sub(d.tokensAt).Seconds() - cost
	d.tokens = min(max(d.tokens, -limit), limit)
	d.tokensAt = now
	d.spentTotal += cost
	d.spent = append(d.spent, spentAt{at: now, total: d.spentTotal})
	// Kept: the last check at least a period old, and those since.
	i := 0
	for i+1 < len(d.spent) && now.Sub(d.spent[i+1].at) >= d.cfg.Period {
		i++
	}
	d.spent = d.spent[i:]
}

// ratioFor returns the attached fraction that keeps the estimated cost of
// hits probe hits over attached seconds within the budget.
func ratioFor(cfg OverheadConfig, hits, attached float64, processes int) float64 {
	if attached <= 0 || hits <= 0 {
		return 1
	}
	cost := ratioCost(cfg, hits, attached, processes)
	if cost <= cfg.Budget {
		return 1
	}
	return max(cfg.Budget/cost, minRatio)
}

// ratioCost is the estimated cost, as a share of a CPU per probed process,
// of hits probe hits over attached seconds.
func ratioCost(cfg OverheadConfig, hits, attached float64, processes int) float64 {
	if attached <= 0 {
		return 0
	}
	return hits / attached * cfg.CostPerHit.Seconds() / float64(max(processes, 1))
}

// dutyLibraries are the probed libraries with their live processes, each
// attended when one of them is in reg.
func (st *runState) dutyLibraries(reg *attention.Registry, now time.Time) []dutyLibrary {
	out := make([]dutyLibrary, 0, len(st.libraries))
	for _, l := range st.libraries {
		dl := dutyLibrary{lib: l.lib, pids: make([]uint32, 0, len(l.pids))}
		for pid := range l.pids {
			p, ok := st.processes[pid]
			if !ok || p.exited {
				continue
			}
			dl.pids = append(dl.pids, pid)
			id := p.res.Identity()
			dl.attended = dl.attended || reg.Attended(attention.Process{PID: int(pid), StartTicks: id.StartTicks, PodUID: id.PodUID}, now)
		}
		out = append(out, dl)
	}
	return out
}

// setSampling gives every probed process its library's ratio.
func (st *runState) setSampling(d *dutyCycle) {
	for _, l := range st.libraries {
		r := d.ratioOf(l.lib)
		for pid := range l.pids {
			if p, ok := st.processes[pid]; ok {
				p.sampling = r
			}
		}
	}
}

// attendedProcesses counts the live processes of the files d's plan
// favours.
func (st *runState) attendedProcesses(d *dutyCycle) int64 {
	var n int64
	for _, l := range st.libraries {
		if !d.attended[l.lib] {
			continue
		}
		for pid := range l.pids {
			if p, ok := st.processes[pid]; ok && !p.exited {
				n++
			}
		}
	}
	return n
}

// samplingOf is the share of p's sampled windows the probes keep.
func (st *runState) samplingOf(p *process) float64 {
	if p.sampling > 0 {
		return p.sampling
	}
	return st.sampling
}

// withoutFutex is opts with waits from the uprobes.
func withoutFutex(opts gil.Options) gil.Options {
	opts.Futex = false
	return opts
}

// keptRatio is the share of kind's windows and short-window totals that
// reach the receiver while the duty cycle attaches the uprobes for
// sampling of the time. With wait_source futex the tracepoints stay
// attached: every wait that blocked, and every forced switch seen, is
// kept (1), however long the uprobes were detached; the rest is sampled.
func keptRatio(cfg *Config, kind gil.Kind, sampling float64) float64 {
	if cfg.WaitSource == waitSourceFutex && (kind == gil.KindWait || kind == gil.KindSwitch) {
		return 1
	}
	return sampling
}
