package leak

import (
	"strings"
	"testing"
	"time"
)

const mib = 1 << 20

// Key names a test series as the nvml receiver names its own: a process on
// a device.
type Key struct {
	PID    int
	Device string
}

var testConfig = Config{
	Window:        10 * time.Minute,
	MinGrowthRate: 32 * 1024, // 32 KiB/s
	MinGrowth:     32 * mib,
	MinSamples:    5,
}

// run feeds a scripted series, one reading every step, and returns every
// assessment.
func run(d *Detector[Key], k Key, step time.Duration, values []int64) []Assessment {
	t0 := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	out := make([]Assessment, len(values))
	for i, v := range values {
		out[i] = d.Observe(k, t0.Add(time.Duration(i)*step), v)
	}
	return out
}

// script builds n readings from f(i).
func script(n int, f func(i int) int64) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = f(i)
	}
	return out
}

func TestScriptedSeries(t *testing.T) {
	step := 10 * time.Second
	base := int64(2048 * mib)
	tests := []struct {
		name      string
		values    []int64
		suspected bool // at the last reading
		reports   int  // leak records that would be emitted
		minRate   float64
		maxRate   float64
	}{
		{
			name:      "steady: model loaded, memory flat",
			values:    script(120, func(int) int64 { return base }),
			suspected: false,
			minRate:   0, maxRate: 0,
		},
		{
			name: "steady with jitter of a few MiB",
			values: script(120, func(i int) int64 {
				return base + int64(i%3)*2*mib
			}),
			suspected: false,
			minRate:   -1024, maxRate: 1024,
		},
		{
			name: "leak: 1 MiB per reading (about 100 KiB/s), never freed",
			values: script(120, func(i int) int64 {
				return base + int64(i)*mib
			}),
			suspected: true,
			reports:   2, // onset, then once more a window later
			minRate:   100 * 1024, maxRate: 106 * 1024,
		},
		{
			name: "sawtooth: caching allocator grows 4 GiB over 2 min then empties, troughs stay put",
			values: script(120, func(i int) int64 {
				return base + int64(i%12)*(4096*mib/12)
			}),
			suspected: false,
		},
		{
			name: "leak under a sawtooth: troughs rise 24 MiB per cycle",
			values: script(120, func(i int) int64 {
				return base + int64(i/12)*24*mib + int64(i%12)*(1024*mib/12)
			}),
			suspected: true,
			reports:   2,
		},
		{
			name: "slow growth below the rate threshold",
			values: script(120, func(i int) int64 {
				return base + int64(i)*64*1024 // 6.4 KiB/s
			}),
			suspected: false,
			minRate:   6000, maxRate: 7000,
		},
		{
			name: "warm-up: 4 MiB per reading for 140 s, then level, is never reported",
			values: script(120, func(i int) int64 {
				return base + int64(min(i, 14))*4*mib
			}),
			suspected: false,
		},
		{
			name: "one step up (a second model loaded) is not sustained growth",
			values: script(120, func(i int) int64 {
				if i < 60 {
					return base
				}
				return base + 1024*mib
			}),
			suspected: false,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := New[Key](testConfig)
			as := run(d, Key{PID: 1, Device: "GPU-0"}, step, tt.values)
			last := as[len(as)-1]
			if !last.Ready {
				t.Fatalf("last.Ready is false")
			}
			if last.Suspected != tt.suspected {
				t.Errorf("rate %.0f B/s, floor growth %d B: got %v, want %v", last.GrowthRate, last.FloorGrowth, last.Suspected, tt.suspected)
			}
			reports := 0
			for _, a := range as {
				if a.Report {
					reports++
				}
			}
			if reports != tt.reports {
				t.Errorf("reports: got %v, want %v", reports, tt.reports)
			}
			if tt.minRate != 0 || tt.maxRate != 0 {
				if !(last.GrowthRate >= tt.minRate) {
					t.Errorf("last.GrowthRate: got %v, want >= %v", last.GrowthRate, tt.minRate)
				}
				if !(last.GrowthRate <= tt.maxRate) {
					t.Errorf("last.GrowthRate: got %v, want <= %v", last.GrowthRate, tt.maxRate)
				}
			}
			if last.Samples != 61 {
				t.Errorf("a 10 min window at 10 s holds 61 readings: got %v, want %v", last.Samples, 61)
			}
			if last.Span != 10*time.Minute {
				t.Errorf("last.Span: got %v, want %v", last.Span, 10*time.Minute)
			}
		})
	}
}

func TestNotReadyUntilHalfWindow(t *testing.T) {
	d := New[Key](testConfig)
	as := run(d, Key{PID: 1, Device: "GPU-0"}, 10*time.Second, script(31, func(i int) int64 {
		return int64(i) * 10 * mib
	}))
	for i, a := range as[:30] {
		if a.Ready {
			t.Errorf("reading %d (a.Ready is true)", i)
		}
		if a.Suspected {
			t.Errorf("reading %d (a.Suspected is true)", i)
		}
	}
	if !as[30].Ready {
		t.Errorf("5 minutes of readings is half the window (as[30].Ready is false)")
	}
	if !as[30].Suspected {
		t.Errorf("as[30].Suspected is false")
	}
	if !as[30].Report {
		t.Errorf("as[30].Report is false")
	}
}

func TestSuspicionEndsAndRestarts(t *testing.T) {
	d := New[Key](testConfig)
	k := Key{PID: 7, Device: "GPU-1"}
	// Leak for 10 minutes, flat for 20 (the window forgets the growth),
	// then leak again: two separate onsets.
	values := script(180, func(i int) int64 {
		switch {
		case i < 60:
			return int64(i) * mib
		case i < 120:
			return 60 * mib
		default:
			return int64(60+i-120) * mib
		}
	})
	as := run(d, k, 10*time.Second, values)
	onsets := 0
	for i := 1; i < len(as); i++ {
		if as[i].Suspected && !as[i-1].Suspected {
			onsets++
		}
	}
	if onsets != 2 {
		t.Errorf("onsets: got %v, want %v", onsets, 2)
	}
	if as[119].Suspected {
		t.Errorf("flat for long enough clears the suspicion (as[119].Suspected is true)")
	}
	if !as[179].Suspected {
		t.Errorf("as[179].Suspected is false")
	}
}

func TestSweepForgetsExitedProcesses(t *testing.T) {
	d := New[Key](testConfig)
	now := time.Now()
	d.Observe(Key{PID: 1, Device: "a"}, now, 1)
	d.Observe(Key{PID: 2, Device: "a"}, now, 1)
	d.Sweep()
	if got := d.Len(); got != 2 {
		t.Errorf("d.Len(): got %v, want %v", got, 2)
	}
	// pid 1 keeps reporting; pid 2 is gone. A missed round or three (its
	// device timed out) keeps the history; a fourth forgets it.
	for round := 1; round <= keepMissed; round++ {
		d.Observe(Key{PID: 1, Device: "a"}, now.Add(time.Duration(round)*time.Second), 1)
		d.Sweep()
		if got := d.Len(); got != 2 {
			t.Errorf("round %d: got %v, want %v", round, got, 2)
		}
	}
	d.Observe(Key{PID: 1, Device: "a"}, now.Add(10*time.Second), 1)
	d.Sweep()
	if got := d.Len(); got != 1 {
		t.Errorf("d.Len(): got %v, want %v", got, 1)
	}
}

func TestHistorySurvivesAMissedRound(t *testing.T) {
	d := New[Key](testConfig)
	k := Key{PID: 1, Device: "a"}
	t0 := time.Now()
	var a Assessment
	for i := range 40 {
		if i == 20 {
			d.Sweep() // a round where the device did not answer
			continue
		}
		a = d.Observe(k, t0.Add(time.Duration(i)*10*time.Second), int64(i)*mib)
		d.Sweep()
	}
	if a.Samples != 39 {
		t.Errorf("a.Samples: got %v, want %v", a.Samples, 39)
	}
}

func TestOutOfOrderReadingIgnored(t *testing.T) {
	d := New[Key](testConfig)
	k := Key{PID: 1, Device: "a"}
	now := time.Now()
	d.Observe(k, now, 10)
	a := d.Observe(k, now.Add(-time.Second), 99)
	if a.Samples != 1 {
		t.Errorf("a.Samples: got %v, want %v", a.Samples, 1)
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		mut  func(*Config)
		want string
	}{
		{"valid", func(*Config) {}, ""},
		{"window", func(c *Config) { c.Window = 0 }, "window"},
		{"rate", func(c *Config) { c.MinGrowthRate = -1 }, "min_growth_rate"},
		{"growth", func(c *Config) { c.MinGrowth = 0 }, "min_growth"},
		{"samples", func(c *Config) { c.MinSamples = 2 }, "min_samples"},
		{"span and rises", func(c *Config) { c.MinSpan, c.MinRises = c.Window, 3 }, ""},
		{"span negative", func(c *Config) { c.MinSpan = -time.Second }, "min_span"},
		{"span beyond the window", func(c *Config) { c.MinSpan = c.Window + time.Second }, "min_span"},
		{"one rise", func(c *Config) { c.MinRises = 1 }, "min_rises"},
		{"four rises", func(c *Config) { c.MinRises = 4 }, "min_rises"},
		{"step", func(c *Config) { c.MinStep = c.MinGrowth }, ""},
		{"step negative", func(c *Config) { c.MinStep = -1 }, "min_step"},
		{"step beyond min_growth", func(c *Config) { c.MinStep = c.MinGrowth + 1 }, "min_step"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := testConfig
			tt.mut(&c)
			err := c.Validate()
			if tt.want == "" {
				if err != nil {
					t.Errorf("c.Validate: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("c.Validate: got error %v, want one containing %q", err, tt.want)
			}
		})
	}
}

// TestMinSpanAndMinRises: a fast-tier config (1 min window, assessed from
// 45 s, all three quarter steps rising) waits for 45 s of readings, and
// names a rise once it has lasted three quarters of the window (the floor
// of the second quarter above the first's), where two rising steps name it
// once it has lasted half the window.
func TestMinSpanAndMinRises(t *testing.T) {
	two := Config{Window: time.Minute, MinGrowthRate: 1, MinGrowth: 16 * mib, MinSamples: 4}
	three := two
	three.MinSpan, three.MinRises = 45*time.Second, 3
	// A reading every 5 s; flat to 40 s, then 8 MiB a reading from 45 s.
	values := script(24, func(i int) int64 { return int64(max(i-8, 0)) * 8 * mib })
	first := func(cfg Config) (ready, suspected int) {
		ready, suspected = -1, -1
		for i, a := range run(New[Key](cfg), Key{PID: 1}, 5*time.Second, values) {
			if a.Ready && ready < 0 {
				ready = i
			}
			if a.Suspected && suspected < 0 {
				suspected = i
			}
		}
		return ready, suspected
	}
	if ready, suspected := first(two); ready != 6 || suspected != 15 {
		t.Errorf("two rises: ready at reading %d, suspected at %d; want 6 (30 s) and 15 (75 s: the third quarter [45 s, 60 s) all risen)", ready, suspected)
	}
	if ready, suspected := first(three); ready != 9 || suspected != 18 {
		t.Errorf("three rises from 45 s: ready at reading %d, suspected at %d; want 9 (45 s) and 18 (90 s: the second quarter [45 s, 60 s) all risen)", ready, suspected)
	}
}

// TestMinStep: one step up followed by a slow drift rises in every quarter
// step, and counts as three rises unless a rise must exceed MinStep.
func TestMinStep(t *testing.T) {
	cfg := Config{Window: time.Minute, MinGrowthRate: mib, MinGrowth: 128 * mib, MinSamples: 4, MinRises: 3}
	// A reading every 10 s: 400 MiB in the second, then 64 KiB a reading.
	values := script(4, func(i int) int64 { return int64(min(i, 1))*400*mib + int64(i)*64<<10 })
	last := func(cfg Config) Assessment {
		as := run(New[Key](cfg), Key{PID: 1}, 10*time.Second, values)
		return as[len(as)-1]
	}
	if a := last(cfg); !a.Suspected {
		t.Errorf("any rise counting: not suspected (%+v)", a)
	}
	cfg.MinStep = 16 * mib
	if a := last(cfg); a.Suspected {
		t.Errorf("rises above 16 MiB counting: suspected (%+v)", a)
	}
}
