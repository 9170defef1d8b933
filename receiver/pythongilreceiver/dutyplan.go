package pythongilreceiver

import (
	"time"

	"github.com/otelcol-ai/otelcol-ai/receiver/pythongilreceiver/internal/gil"
)

// minRatio keeps some observation however expensive the probes are.
const minRatio = 0.01

// dutyLibrary is one probed library as the duty cycle sees it: the live
// processes that map it and whether any of them has attention.
type dutyLibrary struct {
	lib      *gil.Library
	pids     []uint32
	attended bool
}

// dutyPlan is how the next attached phase splits the period: ratio is
// every library's attached fraction (the others' under a plan), hi the
// attended libraries' (the tail included); attended nil is no plan, every
// library alike.
type dutyPlan struct {
	ratio    float64
	hi       float64
	attended map[*gil.Library]bool
}

// planAttention chooses, from libs' attention, the libraries to detach
// before the attended ones (nil: none, every library alike) and the
// attached fractions of both: the others at the minimum, the rest of the
// budget to the attended, whose cost is estimated by attRate, the last
// tail's (at first, everyone's rate: the tail then only grows). rate and
// attRate are shares of a CPU per probed process.
func planAttention(cfg OverheadConfig, libs []dutyLibrary, rate, attRate float64) (dutyPlan, map[*gil.Library][]uint32) {
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
		return dutyPlan{}, nil
	}
	att := attRate
	if att <= 0 || att > rate {
		att = rate
	}
	lo, hi := minRatio, minRatio
	if spare := cfg.Budget - lo*rate; spare > 0 && att > 0 {
		hi = min(lo+spare/att, 1)
	}
	if hi >= 1 && rate > att {
		// The attended ones fit attached all period: what is left goes to
		// the others, for whom rate - att is the cost of attaching them too.
		lo = min(max((cfg.Budget-att)/(rate-att), minRatio), 1)
	}
	if time.Duration((hi-lo)*float64(cfg.Period)) < minAttached {
		return dutyPlan{}, nil
	}
	return dutyPlan{ratio: lo, hi: hi, attended: attended}, others
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
