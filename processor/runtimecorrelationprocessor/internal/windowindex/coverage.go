package windowindex // import "github.com/otelcol-ai/otelcol-ai/processor/runtimecorrelationprocessor/internal/windowindex"

import (
	"math"
	"sort"
)

// Coverage is the union of intervals per scope: it answers whether any
// interval added to a scope overlaps a given one, without keeping the
// intervals themselves. Concurrent requests cover overlapping time, so the
// union of a busy service's spans is a handful of intervals however many
// spans there were, and an out-of-order add merges into its neighbours
// instead of shifting a long slice.
//
// Intervals that ended more than Retention before the newest end seen are
// forgotten; each scope holds at most MaxEntries disjoint intervals (the
// oldest go first). A Coverage is not safe for concurrent use.
type Coverage[K comparable] struct {
	cfg       Config
	scopes    map[K][]interval
	watermark int64
	seen      bool
	adds      int
}

type interval struct{ start, end int64 }

// sweepEvery is how many adds pass between sweeps of all scopes for
// intervals past the retention, so that scopes no longer added to go too.
const sweepEvery = 1024

// NewCoverage returns an empty Coverage, bounded as New bounds an Index.
func NewCoverage[K comparable](cfg Config) *Coverage[K] {
	cfg.MaxEntries = max(cfg.MaxEntries, 1)
	cfg.Retention = max(cfg.Retention, 0)
	return &Coverage[K]{cfg: cfg, scopes: make(map[K][]interval)}
}

func (c *Coverage[K]) horizon() int64 {
	if !c.seen || c.watermark < math.MinInt64+c.cfg.Retention {
		return math.MinInt64
	}
	return c.watermark - c.cfg.Retention
}

// Add merges [start, end) into the scope's union. Empty intervals add
// nothing.
func (c *Coverage[K]) Add(key K, start, end int64) {
	if end <= start {
		return
	}
	if !c.seen || end > c.watermark {
		c.watermark, c.seen = end, true
	}
	ivs := c.scopes[key]
	// [i, j) are the intervals that overlap or touch [start, end).
	i := sort.Search(len(ivs), func(n int) bool { return ivs[n].end >= start })
	j := i
	for j < len(ivs) && ivs[j].start <= end {
		start, end = min(start, ivs[j].start), max(end, ivs[j].end)
		j++
	}
	if i == j { // overlaps nothing: insert
		ivs = append(ivs, interval{})
		copy(ivs[i+1:], ivs[i:])
		ivs[i] = interval{start, end}
	} else { // merged [i, j) into one
		ivs[i] = interval{start, end}
		ivs = append(ivs[:i+1], ivs[j:]...)
	}
	c.trim(key, ivs)
	c.adds++
	if c.adds%sweepEvery == 0 {
		for k, v := range c.scopes {
			c.trim(k, v)
		}
	}
}

// trim stores a scope's intervals less those past the retention and beyond
// the cap, dropping the scope when nothing is left.
func (c *Coverage[K]) trim(key K, ivs []interval) {
	h := c.horizon()
	drop := sort.Search(len(ivs), func(n int) bool { return ivs[n].end >= h })
	drop = max(drop, len(ivs)-c.cfg.MaxEntries)
	if drop > 0 {
		ivs = append(ivs[:0], ivs[drop:]...)
	}
	if len(ivs) == 0 {
		delete(c.scopes, key)
		return
	}
	c.scopes[key] = ivs
}

// Overlaps reports whether [start, end) and the scope's union share a
// non-empty interval.
func (c *Coverage[K]) Overlaps(key K, start, end int64) bool {
	if end <= start {
		return false
	}
	ivs := c.scopes[key]
	i := sort.Search(len(ivs), func(n int) bool { return ivs[n].end > start })
	return i < len(ivs) && ivs[i].start < end
}

// Intervals returns how many disjoint intervals the scope holds.
func (c *Coverage[K]) Intervals(key K) int { return len(c.scopes[key]) }

// Scopes returns how many scopes hold any interval.
func (c *Coverage[K]) Scopes() int { return len(c.scopes) }
