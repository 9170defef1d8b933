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

	ratio     float64
	on        bool
	since     time.Time
	hitsSince uint64
}

// minRatio keeps some observation however expensive the probes are.
const minRatio = 0.01

func newDutyCycle(cfg OverheadConfig, probe *gil.Probe) *dutyCycle {
	d := &dutyCycle{cfg: cfg, probe: probe, ratio: 1, on: true, since: time.Now()}
	if cfg.Budget <= 0 {
		return d
	}
	if c, err := probe.Counters(); err == nil {
		d.hitsSince = c.Hits
	}
	d.t = time.NewTimer(cfg.Period)
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
		if err := d.probe.SetActive(true); err != nil {
			d.t.Reset(d.cfg.Period)
			return d.ratio, err
		}
		d.on, d.since = true, now
		if c, err := d.probe.Counters(); err == nil {
			d.hitsSince = c.Hits
		}
		d.t.Reset(time.Duration(d.ratio * float64(d.cfg.Period)))
		return d.ratio, nil
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
		d.t.Reset(d.cfg.Period)
		return 1, nil
	}
	if err := d.probe.SetActive(false); err != nil {
		d.t.Reset(d.cfg.Period)
		return d.ratio, err
	}
	d.on = false
	d.t.Reset(time.Duration((1 - d.ratio) * float64(d.cfg.Period)))
	return d.ratio, nil
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
