package windowindex // import "github.com/otelcol-ai/otelcol-ai/processor/runtimecorrelationprocessor/internal/windowindex"

import (
	"math"
	"sort"
)

// Coverage is the union of intervals per scope: it answers whether any
// interval added to a scope overlaps a given one, without keeping the
// intervals themselves. Concurrent requests cover overlapping time, so the
// union of a busy service's spans is a handful of intervals however many
// spans there were; spans that never overlap (or a sender that makes them
// so) leave one interval each.
//
// A scope's union is a chunked sorted list, as an Index's entries are:
// disjoint intervals in order, none touching the next, in chunks of at most
// chunkSize. An interval after the last one is an append to the last chunk;
// any other is a binary search over the chunks and within one, then a copy
// within at most one chunk (splitting it when full); an interval that
// merges others removes them, whole chunks at once, which each add pays for
// once: O(log n + chunkSize) amortized whatever the arrival order, where a
// single sorted slice costs O(n) for each interval that lands before the
// end and O(n²) for spans sent newest first. Making or removing a chunk
// also shifts the slice of chunk headers, n/64 at most. Evictions
// advance the first chunk's head, so a scope at its cap evicts in O(1). A
// tree would take a node per interval; chunks keep an interval at 16
// bytes, 32 when they are half full (as random order leaves them), and
// after merges or evictions two neighbouring chunks holding mendBelow or
// fewer are joined, so that chunks are a quarter full on average whatever
// was removed from them.
//
// Intervals that ended more than Retention before the newest end seen are
// forgotten; each scope holds at most MaxEntries disjoint intervals (the
// oldest go first). A Coverage is not safe for concurrent use.
type Coverage[K comparable] struct {
	cfg       Config
	scopes    map[K]intervalList
	watermark int64
	seen      bool
	adds      int
	// arrays keeps one emptied chunk's array for the next chunk.
	arrays chunkArrays[interval]
}

type interval struct{ start, end int64 }

// intervalList is one scope's union, its intervals in order: each ends
// before the next starts.
type intervalList struct {
	chunkList[interval, struct{}]
}

const (
	// sweepEvery is how many adds pass between sweeps of all scopes for
	// intervals past the retention, so that scopes no longer added to go
	// too.
	sweepEvery = 1024
	// mendBelow is the most intervals two neighbouring chunks may hold
	// together before they are joined. A split leaves more (its half and
	// a neighbour), and a joined chunk takes half a chunk before it splits.
	mendBelow = chunkSize / 2
)

// NewCoverage returns an empty Coverage, bounded as New bounds an Index.
func NewCoverage[K comparable](cfg Config) *Coverage[K] {
	cfg.MaxEntries = max(cfg.MaxEntries, 1)
	cfg.Retention = max(cfg.Retention, 0)
	return &Coverage[K]{cfg: cfg, scopes: make(map[K]intervalList), arrays: chunkArrays[interval]{keep: 1}}
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
	l := c.scopes[key]
	c.add(&l, interval{start, end})
	c.trim(key, l)
	c.adds++
	if c.adds%sweepEvery == 0 {
		for k, v := range c.scopes {
			c.trim(k, v)
		}
	}
}

// add merges v into l.
func (c *Coverage[K]) add(l *intervalList, v interval) {
	if len(l.chunks) == 0 {
		l.start(v, 1)
		return
	}
	lc := &l.chunks[len(l.chunks)-1]
	if last := &lc.e[len(lc.e)-1]; v.start >= last.start {
		// The usual case: only the last interval can touch v.
		if v.start <= last.end {
			last.end = max(last.end, v.end)
			return
		}
		l.insert(len(l.chunks)-1, lc.len(), v, &c.arrays)
		return
	}
	// The first interval that ends at or after v starts, which exists
	// since the last one starts after v does.
	ci := sort.Search(len(l.chunks), func(i int) bool { return l.chunks[i].last().end >= v.start })
	live := l.chunks[ci].live()
	pos := sort.Search(len(live), func(i int) bool { return live[i].end >= v.start })
	if live[pos].start > v.end {
		l.insert(ci, pos, v, &c.arrays)
		return
	}
	c.absorb(l, ci, pos, v)
}

// absorb merges v into the interval at position pos of chunk ci, which it
// overlaps or touches, and into every later one that starts at or before v
// ends, removing those.
func (c *Coverage[K]) absorb(l *intervalList, ci, pos int, v interval) {
	// The last interval that starts at or before v ends is the one before
	// position q of chunk cj; chunk ci's interval pos is one such.
	cj := sort.Search(len(l.chunks), func(i int) bool { return l.chunks[i].first().start > v.end }) - 1
	lj := l.chunks[cj].live()
	q := sort.Search(len(lj), func(i int) bool { return lj[i].start > v.end })
	first := &l.chunks[ci].live()[pos]
	*first = interval{min(v.start, first.start), max(v.end, lj[q-1].end)}
	if cj == ci && q == pos+1 {
		return
	}
	l.deleteBetween(ci, pos+1, cj, q, &c.arrays)
	if cj == ci {
		c.mend(l, ci)
		return
	}
	c.mend(l, ci+1)
	c.mend(l, ci)
}

// trim stores a scope's intervals less those past the retention and beyond
// the cap, dropping the scope when nothing is left.
func (c *Coverage[K]) trim(key K, l intervalList) {
	if l.dropFirst(max(l.expired(c.horizon()), l.n-c.cfg.MaxEntries), &c.arrays) {
		c.mend(&l, 0)
	}
	if l.n == 0 {
		delete(c.scopes, key)
		return
	}
	c.scopes[key] = l
}

// expired returns how many intervals end before h. Its cost is that of
// the chunks they fill, which are dropped next.
func (l *intervalList) expired(h int64) int {
	n := 0
	for i := range l.chunks {
		live := l.chunks[i].live()
		if live[len(live)-1].end >= h {
			return n + sort.Search(len(live), func(j int) bool { return live[j].end >= h })
		}
		n += len(live)
	}
	return n
}

// mend joins chunk i with a neighbour while the two hold mendBelow
// intervals or fewer, after intervals left it.
func (c *Coverage[K]) mend(l *intervalList, i int) {
	for i < len(l.chunks) {
		switch {
		case i+1 < len(l.chunks) && l.chunks[i].len()+l.chunks[i+1].len() <= mendBelow:
			l.join(i, &c.arrays)
		case i > 0 && l.chunks[i-1].len()+l.chunks[i].len() <= mendBelow:
			l.join(i-1, &c.arrays)
			i--
		default:
			return
		}
	}
}

// Overlaps reports whether [start, end) and the scope's union share a
// non-empty interval.
func (c *Coverage[K]) Overlaps(key K, start, end int64) bool {
	if end <= start {
		return false
	}
	chunks := c.scopes[key].chunks
	ci := sort.Search(len(chunks), func(i int) bool { return chunks[i].last().end > start })
	if ci == len(chunks) {
		return false
	}
	live := chunks[ci].live()
	i := sort.Search(len(live), func(i int) bool { return live[i].end > start })
	return live[i].start < end
}

// Intervals returns how many disjoint intervals the scope holds.
func (c *Coverage[K]) Intervals(key K) int { return c.scopes[key].n }

// Scopes returns how many scopes hold any interval.
func (c *Coverage[K]) Scopes() int { return len(c.scopes) }
