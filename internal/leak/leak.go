// Package leak decides, from a series of readings of one account (a
// process's GPU memory on a device, a JVM's heap, direct buffers, JNI
// references or unaccounted native memory), whether it grows in a way that
// looks like a leak rather than an allocator or a collector at work. The
// nvml and jfr receivers both use it, each with its own key type.
//
// A series is suspected when, over the sliding window,
//
//   - the least-squares slope of the readings is at least MinGrowthRate
//     units (bytes, references) per second, and
//   - the floor rose: the lowest reading in the newest quarter of the window
//     exceeds the lowest reading in the oldest quarter by at least MinGrowth
//     units, and
//   - it rose steadily and still rises: the floor of each quarter is above
//     the previous one's in at least two of the three steps (MinRises), the
//     last step (into the newest quarter) among them, and never falls by
//     more than MinGrowth/16 (jitter). One step up (a second model loaded)
//     is not a leak, nor is a warm-up that has levelled off for the newest
//     quarter; but any rise counts as one (MinStep 0), so a step followed
//     by a drift upward through the later quarters is.
//
// A series is assessed once its readings in the window span half of it
// (MinSpan). A short window with high thresholds (a fast tier, for leaks
// that kill a process in minutes) can ask for all three steps (MinRises),
// each by more than MinStep, so that a rise counts once it has gone on for
// three quarters of the span assessed rather than half: a JVM's start-up
// that rises for a reading or two and levels off does not, whatever it
// drifts after. Alarms merges the verdicts of such tiers into one alarm
// per leak.
//
// The slope alone would flag a caching allocator caught on a rising edge; the
// floor rule does not, as long as the allocator releases memory at least once
// per quarter window (a sawtooth whose troughs stay put). A leak underneath a
// sawtooth still raises the troughs and is caught.
package leak // import "github.com/otelcol-ai/otelcol-ai/internal/leak"

import (
	"fmt"
	"time"
)

// Config holds the thresholds. The zero value is not useful; see Validate.
type Config struct {
	// Window is the length of history assessed.
	Window time.Duration
	// MinGrowthRate is the smallest slope, in units (bytes, references)
	// per second, that counts as growth.
	MinGrowthRate float64
	// MinGrowth is the smallest rise of the floor, in units, over the
	// window.
	MinGrowth int64
	// MinSamples is the fewest readings a series needs before it is
	// assessed at all.
	MinSamples int
	// MinSpan is the least time the readings in the window must cover
	// before the series is assessed; zero means half the window.
	MinSpan time.Duration
	// MinRises is how many of the three quarter-to-quarter steps of the
	// floor must rise, the newest among them: 2 or 3; zero means 2.
	MinRises int
	// MinStep is the least rise of a quarter's floor over the previous
	// quarter's that counts as a rise; zero counts any rise. With it, one
	// step up followed by a drift of a few KiB is one rise, not three.
	MinStep int64
}

// Validate reports the first threshold that cannot work.
func (c Config) Validate() error {
	switch {
	case c.Window <= 0:
		return fmt.Errorf("window must be positive, got %s", c.Window)
	case c.MinGrowthRate <= 0:
		return fmt.Errorf("min_growth_rate must be positive, got %g", c.MinGrowthRate)
	case c.MinGrowth <= 0:
		return fmt.Errorf("min_growth must be positive, got %d", c.MinGrowth)
	case c.MinSamples < 3:
		return fmt.Errorf("min_samples must be at least 3, got %d", c.MinSamples)
	case c.MinSpan < 0 || c.MinSpan > c.Window:
		return fmt.Errorf("min_span must be between 0 and the window (%s), got %s", c.Window, c.MinSpan)
	case c.MinRises != 0 && c.MinRises != 2 && c.MinRises != 3:
		return fmt.Errorf("min_rises must be 2 or 3 (0: 2), got %d", c.MinRises)
	case c.MinStep < 0 || c.MinStep > c.MinGrowth:
		return fmt.Errorf("min_step must be between 0 and min_growth (%d), got %d", c.MinGrowth, c.MinStep)
	}
	return nil
}

func (c Config) minSpan() time.Duration {
	if c.MinSpan == 0 {
		return c.Window / 2
	}
	return c.MinSpan
}

func (c Config) minRises() int {
	if c.MinRises == 0 {
		return 2
	}
	return c.MinRises
}

// Assessment is the state of one series after a reading.
type Assessment struct {
	// Ready is true once the series has MinSamples readings spanning at
	// least MinSpan (half the window); the other fields are zero until
	// then.
	Ready bool
	// GrowthRate is the least-squares slope over the window, units/s.
	GrowthRate float64
	// FloorGrowth is the rise of the low-water mark (newest quarter minus
	// oldest quarter), units; negative when the floor fell.
	FloorGrowth int64
	// Span is the time the readings in the window cover.
	Span time.Duration
	// Samples is the number of readings in the window.
	Samples int
	// Suspected is true while both thresholds are met.
	Suspected bool
	// Report is true when the caller should emit a leak record now: at the
	// onset of a suspicion and then once per window while it lasts.
	Report bool
}

type sample struct {
	at    time.Time
	value int64
}

type series struct {
	samples    []sample
	suspected  bool
	lastReport time.Time
	freshness
}

// freshness is whether a series had a reading since the last Sweep, and
// how many Sweeps in a row it had none; a Detector and an Alarms sweep
// their series by it.
type freshness struct {
	seen   bool
	missed int
}

// stale ends a Sweep round for the series: true once it has had no
// reading for more than keepMissed rounds (its process exited or left the
// device).
func (f *freshness) stale() bool {
	if f.seen {
		f.seen, f.missed = false, 0
		return false
	}
	f.missed++
	return f.missed > keepMissed
}

// keepMissed is how many Sweeps a series survives without a reading, so that
// one scrape in which its device did not answer does not erase its history.
const keepMissed = 3

// Detector tracks many series, each named by a key of type K (the nvml
// receiver's process and device, the jfr receiver's JVM and account). It
// is not safe for concurrent use.
type Detector[K comparable] struct {
	cfg    Config
	series map[K]*series
}

// New returns a detector with the given thresholds (validate them first).
func New[K comparable](cfg Config) *Detector[K] {
	return &Detector[K]{cfg: cfg, series: map[K]*series{}}
}

// Len returns the number of series tracked.
func (d *Detector[K]) Len() int { return len(d.series) }

// Observe adds one reading to a series and assesses it. Readings must come
// in time order per series; an older one is ignored.
func (d *Detector[K]) Observe(k K, at time.Time, value int64) Assessment {
	s, ok := d.series[k]
	if !ok {
		s = &series{}
		d.series[k] = s
	}
	s.seen = true
	if n := len(s.samples); n > 0 && !at.After(s.samples[n-1].at) {
		return d.assess(s, at)
	}
	s.samples = append(s.samples, sample{at: at, value: value})
	cutoff := at.Add(-d.cfg.Window)
	drop := 0
	for drop < len(s.samples) && s.samples[drop].at.Before(cutoff) {
		drop++
	}
	if drop > 0 {
		// Shift in place so the backing array is reused.
		s.samples = s.samples[:copy(s.samples, s.samples[drop:])]
	}
	return d.assess(s, at)
}

// Readings calls f with each reading of k's series in its window, oldest
// first (for a caller that sets the series against others').
func (d *Detector[K]) Readings(k K, f func(at time.Time, value int64)) {
	if s := d.series[k]; s != nil {
		for _, x := range s.samples {
			f(x.at, x.value)
		}
	}
}

// Sweep is called once per round of readings. It forgets series that have
// had no reading for keepMissed rounds: their processes exited or left the
// device.
func (d *Detector[K]) Sweep() {
	for k, s := range d.series {
		if s.stale() {
			delete(d.series, k)
		}
	}
}

func (d *Detector[K]) assess(s *series, now time.Time) Assessment {
	n := len(s.samples)
	if n == 0 {
		return Assessment{}
	}
	first, last := s.samples[0].at, s.samples[n-1].at
	span := last.Sub(first)
	a := Assessment{Span: span, Samples: n}
	if n < d.cfg.MinSamples || span < d.cfg.minSpan() {
		s.suspected = false
		return a
	}
	a.Ready = true
	a.GrowthRate = slope(s.samples)

	floors := quarterFloors(s.samples, span)
	a.FloorGrowth = floors[3] - floors[0]
	a.Suspected = a.GrowthRate >= d.cfg.MinGrowthRate &&
		a.FloorGrowth >= d.cfg.MinGrowth &&
		risesSteadily(floors, d.cfg.minRises(), d.cfg.MinStep, d.cfg.MinGrowth/16)
	switch {
	case a.Suspected && !s.suspected:
		a.Report = true
	case a.Suspected && now.Sub(s.lastReport) >= d.cfg.Window:
		a.Report = true
	}
	if a.Report {
		s.lastReport = now
	}
	s.suspected = a.Suspected
	return a
}

// quarterFloors returns the lowest reading in each quarter of the span. A
// quarter without readings (a gap in scraping) takes the previous floor.
func quarterFloors(ps []sample, span time.Duration) [4]int64 {
	var floors [4]int64
	var have [4]bool
	first := ps[0].at
	for _, p := range ps {
		q := 3
		if span > 0 {
			q = int(4 * p.at.Sub(first) / span)
		}
		q = min(q, 3)
		if !have[q] || p.value < floors[q] {
			floors[q], have[q] = p.value, true
		}
	}
	for q := 1; q < 4; q++ {
		if !have[q] {
			floors[q] = floors[q-1]
		}
	}
	return floors
}

// risesSteadily reports whether the floor rose in at least minRises of the
// three quarter-to-quarter steps, the newest among them, each rise more
// than minStep, and never fell by more than jitter: growth spread over the
// window and still going, not one step up (a second model loaded) nor a
// warm-up that has levelled off.
func risesSteadily(floors [4]int64, minRises int, minStep, jitter int64) bool {
	if floors[3]-floors[2] <= minStep {
		return false
	}
	rises := 0
	for q := 1; q < 4; q++ {
		switch {
		case floors[q]-floors[q-1] > minStep:
			rises++
		case floors[q-1]-floors[q] > jitter:
			return false
		}
	}
	return rises >= minRises
}

// slope is the least-squares slope of the values over time, per second.
func slope(ps []sample) float64 {
	n := float64(len(ps))
	t0 := ps[0].at
	var st, sy float64
	for _, p := range ps {
		st += p.at.Sub(t0).Seconds()
		sy += float64(p.value)
	}
	mt, my := st/n, sy/n
	var num, den float64
	for _, p := range ps {
		dt := p.at.Sub(t0).Seconds() - mt
		num += dt * (float64(p.value) - my)
		den += dt * dt
	}
	if den == 0 {
		return 0
	}
	return num / den
}
