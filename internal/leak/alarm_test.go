package leak

import (
	"testing"
	"time"
)

// Two tiers as the jfr receiver runs them on its defaults: a slow one
// (15 min, 16 KiB/s, 32 MiB) and a fast one (1 min, 4 MiB/s, 128 MiB, all
// three quarter steps rising by more than 16 MiB), a reading every 10 s.
var (
	slowConfig = Config{Window: 15 * time.Minute, MinGrowthRate: 16 << 10, MinGrowth: 32 * mib, MinSamples: 5}
	fastConfig = Config{Window: time.Minute, MinGrowthRate: 4 * mib, MinGrowth: 128 * mib, MinSamples: 4, MinRises: 3, MinStep: 16 * mib}
)

// report is one record the alarms asked for: when (seconds from the
// series' start) and from which tier.
type report struct {
	at   int
	tier int
}

// runTiers feeds values, one every 10 s, through a slow and a fast
// detector (slow first, as the receiver does) and the alarms, and returns
// the reports and each reading's merged verdict.
func runTiers(values []int64) ([]report, []Verdict) {
	const step = 10 * time.Second
	slow, fast := New[Key](slowConfig), New[Key](fastConfig)
	alarms := NewAlarms[Key](2, slowConfig.Window, slowConfig.Window)
	k := Key{PID: 7}
	t0 := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	var reports []report
	verdicts := make([]Verdict, len(values))
	for i, v := range values {
		at := t0.Add(time.Duration(i) * step)
		for tier, d := range []*Detector[Key]{slow, fast} {
			verdicts[i] = alarms.Assessed(k, tier, at, d.Observe(k, at, v))
			if verdicts[i].Report {
				reports = append(reports, report{at: i * 10, tier: tier})
			}
		}
	}
	return reports, verdicts
}

// leakFrom is a series flat at base, growing rate bytes/s from start to
// stop seconds (stop 0: to the end), every 10 s for n readings.
func leakFrom(n int, base int64, rate float64, start, stop int) []int64 {
	return script(n, func(i int) int64 {
		s := i * 10
		if stop > 0 {
			s = min(s, stop)
		}
		return base + int64(rate*float64(max(s-start, 0)))
	})
}

func TestAlarmsOneRecordPerLeak(t *testing.T) {
	const base = 200 * mib
	tests := []struct {
		name    string
		values  []int64
		reports []report
		// suspectedAt and clearAt are readings (seconds) at which the
		// merged verdict must be suspected and not suspected.
		suspectedAt, clearAt []int
	}{
		{
			name:   "flat: nothing",
			values: leakFrom(360, base, 0, 0, 0),
		},
		{
			// 8 MiB/s from 2 min on: the fast tier names it within
			// its window; the slow tier, suspecting it once it has
			// half its window, does not name it again until a slow
			// window after the first record (a reminder).
			name:        "fast leak: fast tier first, the slow one reminds",
			values:      leakFrom(180, base, 8*mib, 120, 0),
			reports:     []report{{170, 1}, {1070, 0}},
			suspectedAt: []int{170, 600, 1790},
			clearAt:     []int{160},
		},
		{
			// 64 KiB/s: only the slow tier, once its floor has risen
			// 32 MiB (at three quarters of a 683 s span).
			name:        "slow leak: slow tier only",
			values:      leakFrom(180, base, 64<<10, 0, 0),
			reports:     []report{{690, 0}, {1590, 0}},
			suspectedAt: []int{690, 1790},
			clearAt:     []int{680},
		},
		{
			// 8 MiB/s for 2 min from 2 min on, then flat for 20 min,
			// then again: the verdict clears within the fast window,
			// the slow tier (not ready during the first leak) starts
			// suspecting the floor's rise later and stops; the second
			// leak, which starts at 1600 s, a slow window after the
			// last suspicion, is a new record.
			name: "a leak that stops and starts again after a quiet slow window",
			values: func() []int64 {
				first := leakFrom(160, base, 8*mib, 120, 240)
				top := first[len(first)-1]
				return append(first, leakFrom(60, top, 8*mib, 0, 0)...)
			}(),
			reports:     []report{{170, 1}, {1650, 1}},
			suspectedAt: []int{170, 230, 460, 1650},
			clearAt:     []int{300, 500, 1640},
		},
		{
			// 300 MiB over 20 s at 2 min (a warm-up, or a model
			// loaded, that levels off): not the fast tier. (Before
			// the slow tier assesses: a rise whose two readings fall
			// on either side of one of its quarter boundaries counts
			// as two of its steps.)
			name: "a 20 s rise of 300 MiB: nothing",
			values: script(180, func(i int) int64 {
				return base + int64(min(max(i-11, 0), 2))*150*mib
			}),
		},
		{
			// What the fast tier cannot tell from a leak: 300 MiB
			// over 30 s (three readings rising) is named once the
			// rise spans three quarters of its window.
			name: "a 30 s rise of 300 MiB: the fast tier",
			values: script(60, func(i int) int64 {
				return base + int64(min(max(i-29, 0), 3))*100*mib
			}),
			reports:     []report{{340, 1}},
			suspectedAt: []int{340},
			clearAt:     []int{330, 350},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reports, verdicts := runTiers(tt.values)
			if len(reports) != len(tt.reports) {
				t.Fatalf("reports %v, want %v", reports, tt.reports)
			}
			for i, r := range reports {
				if r != tt.reports[i] {
					t.Errorf("report %d: %+v, want %+v", i, r, tt.reports[i])
				}
			}
			for _, s := range tt.suspectedAt {
				if !verdicts[s/10].Suspected {
					t.Errorf("not suspected at %d s: %+v", s, verdicts[s/10])
				}
			}
			for _, s := range tt.clearAt {
				if verdicts[s/10].Suspected {
					t.Errorf("suspected at %d s: %+v", s, verdicts[s/10])
				}
			}
		})
	}
}

// TestAlarmsReadyFromTheFirstReadyTier: the merged verdict is ready as
// soon as one tier is (the fast tier, from 30 s of readings), and a tier
// that is not ready never suspects.
func TestAlarmsReadyFromTheFirstReadyTier(t *testing.T) {
	_, verdicts := runTiers(leakFrom(60, 0, 0, 0, 0))
	for i, v := range verdicts {
		if want := i >= 3; v.Ready != want {
			t.Errorf("reading %d (%d s): ready %v, want %v", i, i*10, v.Ready, want)
		}
	}
	a := NewAlarms[Key](2, time.Minute, time.Minute)
	at := time.Now()
	if v := a.Assessed(Key{}, 1, at, Assessment{Suspected: true}); v.Suspected || v.Report || v.Ready {
		t.Errorf("an assessment not ready: %+v", v)
	}
	if v := a.Assessed(Key{}, 5, at, Assessment{Ready: true, Suspected: true}); v.Suspected || v.Report {
		t.Errorf("a tier out of range: %+v", v)
	}
}

func TestAlarmsSweepForgetsSeriesNotAssessed(t *testing.T) {
	a := NewAlarms[Key](1, time.Minute, time.Minute)
	at := time.Now()
	a.Assessed(Key{PID: 1}, 0, at, Assessment{Ready: true, Suspected: true})
	a.Assessed(Key{PID: 2}, 0, at, Assessment{Ready: true})
	a.Sweep()
	for range keepMissed {
		a.Assessed(Key{PID: 2}, 0, at, Assessment{Ready: true})
		a.Sweep()
	}
	if a.Len() != 2 {
		t.Fatalf("%d series after %d rounds, want 2", a.Len(), keepMissed)
	}
	a.Sweep()
	if a.Len() != 1 {
		t.Fatalf("%d series, want 1", a.Len())
	}
	// A new series for the forgotten key is a new alarm.
	if v := a.Assessed(Key{PID: 1}, 0, at.Add(time.Second), Assessment{Ready: true, Suspected: true}); !v.Report {
		t.Errorf("forgotten series not reported anew: %+v", v)
	}
}
