package pythongilreceiver

import (
	"time"

	"github.com/otelcol-ai/otelcol-ai/receiver/pythongilreceiver/internal/gil"
)

// dutyCycle keeps the probes' estimated cost within the overhead budget by
// attaching them for only a fraction of each period. The estimate is the
// kernel's hit count over the attached time times the configured cost per
// hit, averaged over the probed processes. While the estimate fits the
// budget the probes stay attached and the ratio is 1.
//
// What the probes cost is also accounted, as in a token bucket: the budget
// accrues with time and every attached phase spends its hits' cost
// (including the first estimate, at full cost, and the hits while the
// links close). A detached phase lasts until the spending is paid back, so
// that the cost stays within the budget over any stretch of a period or
// more, not only in the steady state.
type dutyCycle struct {
	cfg   OverheadConfig
	probe *gil.Probe
	t     *time.Timer

	// ratio is the attached fraction chosen; effective is the fraction
	// measured over the last period, attach and detach latency included
	// (closing uprobe links waits for the kernel), which is what is
	// reported.
	ratio     float64
	effective float64
	on        bool
	since     time.Time
	onFor     time.Duration
	hitsSince uint64
	// detachLatency is how long the last SetActive(false) took: the probes
	// keep firing until it returns, so the planned attached time is
	// shortened by it.
	detachLatency time.Duration
	// tokens is the budget not spent yet, in CPU seconds (negative: spent
	// ahead), as of tokensAt; it stays within ± budget × period.
	tokens   float64
	tokensAt time.Time
	// offUntil is when the current detached phase is planned to end, and
	// nextCost what the next attached phase is estimated to spend: a
	// detached phase ends early, once paid for, while a probed process's
	// GIL is not known yet (learning).
	offUntil time.Time
	nextCost float64
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
	d := &dutyCycle{cfg: cfg, probe: probe, ratio: 1, effective: 1, on: true, since: now, tokensAt: now}
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

// step ends the current phase: after an attached phase it re-estimates the
// cost and chooses the ratio; it returns the ratio now in effect.
func (d *dutyCycle) step(processes int) (float64, error) {
	now := time.Now()
	if !d.on {
		if now.Before(d.offUntil) && !d.learning(now, processes) {
			d.t.Reset(min(d.offUntil.Sub(now), recheck))
			return d.effective, nil
		}
		// End of a detached phase: attach for ratio × period.
		offFor := now.Sub(d.since)
		if err := d.probe.SetActive(true); err != nil {
			d.t.Reset(d.cfg.Period)
			return d.effective, err
		}
		if total := d.onFor + offFor; total > 0 {
			d.effective = d.onFor.Seconds() / total.Seconds()
		}
		d.on, d.since = true, now
		if c, err := d.probe.Counters(); err == nil {
			d.hitsSince = c.Hits
		}
		d.t.Reset(max(time.Duration(d.ratio*float64(d.cfg.Period))-d.detachLatency, minAttached))
		return d.effective, nil
	}
	c, err := d.probe.Counters()
	if err != nil {
		d.t.Reset(d.cfg.Period)
		return d.ratio, err
	}
	attached := now.Sub(d.since).Seconds()
	hits := c.Hits - d.hitsSince
	rate := ratioCost(d.cfg, float64(hits), attached, processes)
	d.ratio = ratioFor(d.cfg, float64(hits), attached, processes)
	if d.ratio >= 1 {
		d.hitsSince = c.Hits
		d.spend(now, hits, processes)
		d.since = now
		d.effective = 1
		d.t.Reset(min(d.cfg.Period, recheck))
		return 1, nil
	}
	if err := d.probe.SetActive(false); err != nil {
		d.t.Reset(d.cfg.Period)
		return d.effective, err
	}
	// The probes fired until the links were closed.
	off := time.Now()
	if c, err := d.probe.Counters(); err == nil {
		hits = c.Hits - d.hitsSince
	}
	d.spend(off, hits, processes)
	d.detachLatency = off.Sub(now)
	d.onFor = off.Sub(d.since)
	d.on, d.since = false, off
	// Detached for the rest of the period, at least a tenth of it, and
	// until the budget has accrued what the next attached phase will
	// spend: paid before it is spent, so that the first estimate's cost
	// (at full rate) is not added to the steady state's.
	offFor := max(d.cfg.Period-d.onFor, d.cfg.Period/10)
	next := d.ratio * d.cfg.Period.Seconds() * rate
	if owed := next - d.tokens; owed > 0 {
		offFor = max(offFor, time.Duration(owed/d.cfg.Budget*float64(time.Second)))
	}
	d.effective = d.onFor.Seconds() / (d.onFor + offFor).Seconds()
	d.offUntil, d.nextCost = off.Add(offFor), next
	// Checked every recheck for a process to learn (learning).
	d.t.Reset(min(offFor, recheck))
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
