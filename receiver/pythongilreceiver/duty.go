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
}

// minRatio keeps some observation however expensive the probes are.
const minRatio = 0.01

// firstEstimate is when the first cost estimate is made.
const firstEstimate = 200 * time.Millisecond

// minAttached is the shortest attached phase worth having.
const minAttached = 10 * time.Millisecond

func newDutyCycle(cfg OverheadConfig, probe *gil.Probe) *dutyCycle {
	d := &dutyCycle{cfg: cfg, probe: probe, ratio: 1, effective: 1, on: true, since: time.Now()}
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
	d.hitsSince = c.Hits
	d.ratio = ratioFor(d.cfg, float64(hits), attached, processes)
	if d.ratio >= 1 {
		d.since = now
		d.effective = 1
		d.t.Reset(d.cfg.Period)
		return 1, nil
	}
	if err := d.probe.SetActive(false); err != nil {
		d.t.Reset(d.cfg.Period)
		return d.effective, err
	}
	// The probes fired until the links were closed.
	off := time.Now()
	d.detachLatency = off.Sub(now)
	d.onFor = off.Sub(d.since)
	d.on, d.since = false, off
	offFor := max(d.cfg.Period-d.onFor, d.cfg.Period/10)
	d.effective = d.onFor.Seconds() / (d.onFor + offFor).Seconds()
	d.t.Reset(offFor)
	return d.effective, nil
}

// ratioFor returns the attached fraction that keeps the estimated cost of
// hits probe hits over attached seconds within the budget.
func ratioFor(cfg OverheadConfig, hits, attached float64, processes int) float64 {
	if attached <= 0 || hits <= 0 {
		return 1
	}
	cost := hits / attached * cfg.CostPerHit.Seconds() / float64(max(processes, 1))
	if cost <= cfg.Budget {
		return 1
	}
	return max(cfg.Budget/cost, minRatio)
}
