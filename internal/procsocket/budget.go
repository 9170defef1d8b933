package procsocket

import (
	"container/list"
	"math"
	"time"
)

// maxScanBudgets bounds the network namespaces that have a scan budget of
// their own: several times the pods a node runs.
const maxScanBudgets = 1024

// unplaced is the key of the budget shared by peers whose address no
// network namespace of the proc root is known to have (see addressBook).
const unplaced = 0

// scanBudgets is a token bucket of full scans per network namespace, so
// that the peers of one namespace spending theirs leaves the others
// theirs. Its memory is bounded: a bucket that has refilled is the same as
// a fresh one and is dropped, and when maxScanBudgets are all in use, a
// namespace without one shares the unplaced peers' bucket until one is
// dropped. It is not safe for concurrent use; Resolver.mu guards it.
type scanBudgets struct {
	perSecond float64
	max       int
	byNetNS   map[uint64]*list.Element // of *scanBudget
	order     *list.List               // front: most recently charged
	unplaced  scanLimiter
}

// scanBudget is one namespace's bucket.
type scanBudget struct {
	netns   uint64
	limiter scanLimiter
}

func newScanBudgets(perSecond float64, max int) *scanBudgets {
	return &scanBudgets{perSecond: perSecond, max: max, byNetNS: make(map[uint64]*list.Element),
		order: list.New(), unplaced: newScanLimiter(perSecond)}
}

// allow takes a scan from netns's bucket (unplaced: the shared one) and
// reports whether there was one.
func (b *scanBudgets) allow(netns uint64, now time.Time) bool {
	if math.IsInf(b.perSecond, 1) {
		return true
	}
	b.dropRefilled(now)
	if netns == unplaced {
		return b.unplaced.allow(now)
	}
	el, ok := b.byNetNS[netns]
	switch {
	case ok:
		b.order.MoveToFront(el)
	case len(b.byNetNS) >= b.max:
		return b.unplaced.allow(now)
	default:
		el = b.order.PushFront(&scanBudget{netns: netns, limiter: newScanLimiter(b.perSecond)})
		b.byNetNS[netns] = el
	}
	return el.Value.(*scanBudget).limiter.allow(now)
}

// dropRefilled drops buckets, least recently charged first, while they
// have refilled by now.
func (b *scanBudgets) dropRefilled(now time.Time) {
	for el := b.order.Back(); el != nil; el = b.order.Back() {
		budget := el.Value.(*scanBudget)
		if !budget.limiter.full(now) {
			return
		}
		b.order.Remove(el)
		delete(b.byNetNS, budget.netns)
	}
}

func (b *scanBudgets) len() int { return len(b.byNetNS) }

// scanLimiter is a token bucket over full scans.
type scanLimiter struct {
	rate, burst, tokens float64
	last                time.Time
}

func newScanLimiter(perSecond float64) scanLimiter {
	burst := math.Max(perSecond, 1)
	return scanLimiter{rate: perSecond, burst: burst, tokens: burst}
}

func (l *scanLimiter) allow(now time.Time) bool {
	if math.IsInf(l.rate, 1) {
		return true
	}
	if l.last.IsZero() || now.After(l.last) {
		if !l.last.IsZero() {
			l.tokens = math.Min(l.burst, l.tokens+now.Sub(l.last).Seconds()*l.rate)
		}
		l.last = now
	}
	if l.tokens < 1 {
		return false
	}
	l.tokens--
	return true
}

// full reports whether the bucket holds its whole burst at now.
func (l *scanLimiter) full(now time.Time) bool {
	if l.last.IsZero() {
		return true
	}
	return l.tokens+now.Sub(l.last).Seconds()*l.rate >= l.burst
}
