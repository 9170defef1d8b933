package pythongilreceiver

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/otelcol-ai/otelcol-ai/receiver/pythongilreceiver/internal/gil"
)

// simProbe stands for gil.Probe in a simulated run: libraries attach and
// detach as the duty cycle says, and each attached library's process makes
// probe hits at its rate of simulated time.
type simProbe struct {
	now      *time.Duration
	last     time.Duration
	hits     float64
	rates    map[*gil.Library]float64 // hits per second while attached
	attached map[*gil.Library]bool
}

func (p *simProbe) advance() {
	dt := (*p.now - p.last).Seconds()
	for lib, on := range p.attached {
		if on {
			p.hits += p.rates[lib] * dt
		}
	}
	p.last = *p.now
}

func (p *simProbe) Counters() (gil.Counters, error) {
	p.advance()
	return gil.Counters{Hits: uint64(p.hits)}, nil
}

func (p *simProbe) SetActive(active bool) error {
	p.advance()
	for lib := range p.rates {
		p.attached[lib] = active
	}
	return nil
}

func (p *simProbe) Detach(libs map[*gil.Library][]uint32) error {
	p.advance()
	for lib := range libs {
		p.attached[lib] = false
	}
	return nil
}

func (p *simProbe) WaitsFromFutex() bool    { return false }
func (p *simProbe) KnownGILs() (int, error) { return len(p.rates), nil }

// simBatch is the releases one library made in one tick, kept because it
// was attached, waiting for the reader.
type simBatch struct {
	lib    *gil.Library
	at     time.Duration // when they ended
	readAt time.Duration
	n      float64
}

// TestWeightsStandForTheReleasesMade simulates two processes releasing the
// GIL at a steady rate, one attended, under a budget they exceed, with the
// duty cycle's steps late and the reader behind as on a loaded host: the
// kept releases, each weighed by its phase (phaseLog), stand for the
// releases made. Weighing each by the ratio in effect when it is read
// instead (what the receiver did before) is logged beside it.
func TestWeightsStandForTheReleasesMade(t *testing.T) {
	const (
		release = 40_000.0 // releases a second, each process
		hitsPer = 2.0      // probe hits a release
		tick    = time.Millisecond
		run     = 60 * time.Second
	)
	for _, tt := range []struct {
		name          string
		late, readLag time.Duration // the most, drawn uniformly
		attend        bool
		// flip turns the attention on and off every flip.
		flip time.Duration
	}{
		{"on time, no attention", 0, 0, false, 0},
		{"late steps, reader behind, no attention", 300 * time.Millisecond, 2 * time.Second, false, 0},
		{"on time, one attended", 0, 0, true, 0},
		{"late steps, reader behind, one attended", 300 * time.Millisecond, 2 * time.Second, true, 0},
		{"very late steps, one attended", time.Second, 3 * time.Second, true, 0},
		{"attention on and off, reader behind", 300 * time.Millisecond, 2 * time.Second, true, 3 * time.Second},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, 2))
			a, b := &gil.Library{}, &gil.Library{}
			var now time.Duration = 1000 * time.Second
			start := now
			probe := &simProbe{now: &now, last: now, rates: map[*gil.Library]float64{a: release * hitsPer, b: release * hitsPer},
				attached: map[*gil.Library]bool{a: true, b: true}}
			cfg := OverheadConfig{Budget: 0.02, Period: time.Second, CostPerHit: time.Microsecond, FollowAttention: true}
			d := newDutyCycle(cfg, probe, func() time.Duration { return now })
			libs := []dutyLibrary{{lib: a, pids: []uint32{1}, attended: tt.attend}, {lib: b, pids: []uint32{2}}}
			nextStep := now + d.wait
			var queue []simBatch
			est := map[*gil.Library]float64{}
			old := map[*gil.Library]float64{} // weighed by the ratio when read
			kept := map[*gil.Library]float64{}
			for now < start+run {
				now += tick
				if tt.flip > 0 {
					libs[0].attended = (now-start)/tt.flip%2 == 0
				}
				if now >= nextStep {
					if _, err := d.step(2, libs); err != nil {
						t.Fatal(err)
					}
					nextStep = now + d.wait
					if tt.late > 0 {
						nextStep += time.Duration(rng.Int64N(int64(tt.late)))
					}
				}
				for _, lib := range []*gil.Library{a, b} {
					if probe.attached[lib] {
						lag := time.Duration(0)
						if tt.readLag > 0 {
							lag = time.Duration(rng.Int64N(int64(tt.readLag)))
						}
						queue = append(queue, simBatch{lib: lib, at: now, readAt: now + lag, n: release * tick.Seconds()})
					}
				}
				rest := queue[:0]
				for _, q := range queue {
					if q.readAt > now {
						rest = append(rest, q)
						continue
					}
					r, ok := d.phases.weight(q.lib, q.at)
					if !ok {
						r = d.ratioOf(q.lib)
					}
					est[q.lib] += q.n / r
					old[q.lib] += q.n / d.ratioOf(q.lib)
					kept[q.lib] += q.n
				}
				queue = rest
			}
			made := release * run.Seconds()
			for name, lib := range map[string]*gil.Library{"a": a, "b": b} {
				off := est[lib]/made - 1
				t.Logf("library %s: kept %.0f of %.0f releases; weighed by phase they stand for %.0f (%+.1f%%), by the ratio when read %.0f (%+.1f%%)",
					name, kept[lib], made, est[lib], 100*off, old[lib], 100*(old[lib]/made-1))
				// The last cycle's detached part stands for nothing yet: up
				// to a period (and a late step) short at the end.
				if lo := -(cfg.Period + tt.late).Seconds() / run.Seconds() * 1.5; off < lo-0.05 || off > 0.05 {
					t.Errorf("library %s: weights stand for %.0f releases, want %.0f within 5%% (and up to a period short)", name, est[lib], made)
				}
			}
			// Steps late by up to a period leave the others attached far
			// past their share: attention then buys less.
			if tt.attend && tt.flip == 0 && tt.late < cfg.Period/2 && !(kept[a] > 3*kept[b]) {
				t.Errorf("attended library kept %.0f releases, the other %.0f: want at least three times", kept[a], kept[b])
			}
			// Steps late by up to a period run phases past what the bucket
			// can owe (a period's budget): the cost is then logged only.
			cost := probe.hits * cfg.CostPerHit.Seconds() / 2 / run.Seconds()
			t.Logf("probes cost %.2f%% of a CPU per process", 100*cost)
			if tt.late < cfg.Period/2 && cost > cfg.Budget*1.1 {
				t.Errorf("probes cost %.2f%% of a CPU per process, budget %.0f%%", 100*cost, 100*cfg.Budget)
			}
			if math.IsNaN(est[a]) {
				t.Fatal("NaN estimate")
			}
		})
	}
}
