package pythongilreceiver

import "time"

// budgetBucket accounts what the probes cost, as a token bucket: the budget
// accrues with time and every check spends its hits' estimated cost. Times
// are CLOCK_MONOTONIC readings (dutyCycle.clock).
type budgetBucket struct {
	budget     float64       // shares of a CPU per probed process
	period     time.Duration // credit and debt stay within a period's budget
	costPerHit time.Duration
	// tokens is the budget not spent yet, in CPU seconds (negative: spent
	// ahead), as of tokensAt; it stays within ± budget × period.
	tokens   float64
	tokensAt time.Duration
	// spent is every check's cumulative estimated cost (CPU-s per probed
	// process) within the last period, oldest first: periodCost.
	spent      []spentAt
	spentTotal float64
}

// spentAt is the cumulative estimated cost at a check.
type spentAt struct {
	at    time.Duration
	total float64
}

func newBudgetBucket(cfg OverheadConfig, now time.Duration) budgetBucket {
	return budgetBucket{budget: cfg.Budget, period: cfg.Period, costPerHit: cfg.CostPerHit, tokensAt: now}
}

// limit is a period's budget: the most credit or debt the bucket holds.
func (b *budgetBucket) limit() float64 {
	return b.budget * b.period.Seconds()
}

// spend accrues the budget up to now and takes the estimated cost of hits
// from it. Debt is capped at one period's budget: beyond it (a cost per hit
// far above the configured one) the 1% floor of the ratio rules.
func (b *budgetBucket) spend(now time.Duration, hits uint64, processes int) {
	cost := float64(hits) * b.costPerHit.Seconds() / float64(max(processes, 1))
	b.tokens += b.budget*(now-b.tokensAt).Seconds() - cost
	b.tokens = min(max(b.tokens, -b.limit()), b.limit())
	b.tokensAt = now
	b.spentTotal += cost
	b.spent = append(b.spent, spentAt{at: now, total: b.spentTotal})
	// Kept: the last check at least a period old, and those since.
	i := 0
	for i+1 < len(b.spent) && now-b.spent[i+1].at >= b.period {
		i++
	}
	b.spent = b.spent[i:]
}

// accrued is the budget not spent as of now (spend's accrual, capped at a
// period's budget), without taking it.
func (b *budgetBucket) accrued(now time.Duration) float64 {
	return min(b.tokens+b.budget*(now-b.tokensAt).Seconds(), b.limit())
}

// periodCost is the estimated cost over the last period, in shares of a
// CPU per probed process: what the budget is held to (detached phases
// count as costing nothing), unlike the last check's rate alone.
func (b *budgetBucket) periodCost() float64 {
	if len(b.spent) < 2 {
		return 0
	}
	first, last := b.spent[0], b.spent[len(b.spent)-1]
	if secs := (last.at - first.at).Seconds(); secs > 0 {
		return (last.total - first.total) / secs
	}
	return 0
}
