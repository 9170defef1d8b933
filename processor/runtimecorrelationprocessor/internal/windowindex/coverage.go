package windowindex // import "github.com/otelcol-ai/otelcol-ai/processor/runtimecorrelationprocessor/internal/windowindex"

import (
	"math"
	"slices"
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
	// spare is an emptied chunk's array, kept for the next chunk so that a
	// steady stream allocates nothing.
	spare []interval
}

type interval struct{ start, end int64 }

// intervalList is one scope's union, n intervals in chunks: each chunk's
// intervals end before the next chunk's start.
type intervalList struct {
	chunks []intervalChunk
	n      int
}

// intervalChunk is one run of a scope's intervals, iv[head:] in order; room
// before head and after len(iv) takes intervals without moving the others.
type intervalChunk struct {
	iv   []interval
	head int
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
	return &Coverage[K]{cfg: cfg, scopes: make(map[K]intervalList)}
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
		l.chunks = append(l.chunks, intervalChunk{iv: []interval{v}})
		l.n = 1
		return
	}
	lc := &l.chunks[len(l.chunks)-1]
	if last := &lc.iv[len(lc.iv)-1]; v.start >= last.start {
		// The usual case: only the last interval can touch v.
		if v.start <= last.end {
			last.end = max(last.end, v.end)
			return
		}
		c.place(l, len(l.chunks)-1, len(lc.iv)-lc.head, v)
		return
	}
	// The first interval that ends at or after v starts, which exists
	// since the last one starts after v does.
	ci := sort.Search(len(l.chunks), func(i int) bool { return l.chunks[i].last().end >= v.start })
	live := l.chunks[ci].live()
	pos := sort.Search(len(live), func(i int) bool { return live[i].end >= v.start })
	if live[pos].start > v.end {
		c.place(l, ci, pos, v)
		return
	}
	c.absorb(l, ci, pos, v)
}

// place inserts v, which touches no interval, at position pos of chunk ci,
// splitting or adding a chunk when it is full.
func (c *Coverage[K]) place(l *intervalList, ci, pos int, v interval) {
	l.n++
	if l.chunks[ci].tryInsert(pos, v) {
		return
	}
	n := len(l.chunks[ci].live())
	switch {
	case pos == 0 && ci > 0 && l.chunks[ci-1].tryInsert(len(l.chunks[ci-1].live()), v):
	case pos == n && ci+1 < len(l.chunks) && l.chunks[ci+1].tryInsert(0, v):
	case pos == n: // after a full chunk: a new one, filled from its start
		l.chunks = slices.Insert(l.chunks, ci+1, newIntervalChunk(c.array(1), v, 0))
	case pos == 0: // before a full chunk: a new one, filled from its end
		l.chunks = slices.Insert(l.chunks, ci, newIntervalChunk(c.array(chunkSize), v, chunkSize-1))
	default:
		right := l.chunks[ci].split(c.array(0))
		l.chunks = slices.Insert(l.chunks, ci+1, right)
		if half := n - len(right.live()); pos <= half {
			l.chunks[ci].tryInsert(pos, v)
		} else {
			l.chunks[ci+1].tryInsert(pos-half, v)
		}
	}
}

// absorb merges v into the interval at position pos of chunk ci, which it
// overlaps or touches, and into every later one that starts at or before v
// ends, removing those.
func (c *Coverage[K]) absorb(l *intervalList, ci, pos int, v interval) {
	// The last interval that starts at or before v ends is the one before
	// position q of chunk cj; chunk ci's interval pos is one such.
	cj := sort.Search(len(l.chunks), func(i int) bool { return l.chunks[i].live()[0].start > v.end }) - 1
	lj := l.chunks[cj].live()
	q := sort.Search(len(lj), func(i int) bool { return lj[i].start > v.end })
	first := &l.chunks[ci].live()[pos]
	*first = interval{min(v.start, first.start), max(v.end, lj[q-1].end)}
	a := &l.chunks[ci]
	if cj == ci {
		if q > pos+1 {
			a.iv = append(a.iv[:a.head+pos+1], a.iv[a.head+q:]...)
			l.n -= q - pos - 1
			c.mend(l, ci)
		}
		return
	}
	l.n -= len(a.live()) - pos - 1 + q
	a.iv = a.iv[:a.head+pos+1]
	for k := ci + 1; k < cj; k++ {
		l.n -= len(l.chunks[k].live())
		c.recycle(l.chunks[k].iv)
	}
	b := &l.chunks[cj]
	b.head += q
	gone := cj
	if len(b.live()) == 0 {
		c.recycle(b.iv)
		gone++
	}
	l.chunks = slices.Delete(l.chunks, ci+1, gone)
	c.mend(l, ci+1)
	c.mend(l, ci)
}

// trim stores a scope's intervals less those past the retention and beyond
// the cap, dropping the scope when nothing is left.
func (c *Coverage[K]) trim(key K, l intervalList) {
	c.dropFirst(&l, max(l.expired(c.horizon()), l.n-c.cfg.MaxEntries))
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

// dropFirst removes l's first k intervals.
func (c *Coverage[K]) dropFirst(l *intervalList, k int) {
	if k <= 0 {
		return
	}
	l.n -= k
	i := 0
	for ; i < len(l.chunks) && k >= len(l.chunks[i].live()); i++ {
		k -= len(l.chunks[i].live())
		c.recycle(l.chunks[i].iv)
		l.chunks[i] = intervalChunk{}
	}
	l.chunks = l.chunks[i:]
	if k > 0 {
		l.chunks[0].head += k
		c.mend(l, 0)
	}
}

// mend joins chunk i with a neighbour while the two hold mendBelow
// intervals or fewer, after intervals left it.
func (c *Coverage[K]) mend(l *intervalList, i int) {
	for i < len(l.chunks) {
		switch {
		case i+1 < len(l.chunks) && l.chunks[i].len()+l.chunks[i+1].len() <= mendBelow:
			c.join(l, i)
		case i > 0 && l.chunks[i-1].len()+l.chunks[i].len() <= mendBelow:
			c.join(l, i-1)
			i--
		default:
			return
		}
	}
}

// join moves chunk i+1's intervals to the end of chunk i and removes chunk
// i+1.
func (c *Coverage[K]) join(l *intervalList, i int) {
	a, b := &l.chunks[i], &l.chunks[i+1]
	live, n := a.live(), a.len()+b.len()
	switch {
	case cap(a.iv)-len(a.iv) >= b.len():
	case cap(a.iv) >= n:
		copy(a.iv, live)
		a.iv, a.head = a.iv[:len(live)], 0
	default:
		joined := append(c.array(0), live...)
		c.recycle(a.iv)
		a.iv, a.head = joined, 0
	}
	a.iv = append(a.iv, b.live()...)
	c.recycle(b.iv)
	l.chunks = slices.Delete(l.chunks, i+1, i+2)
}

// array returns an empty chunk array of length n, the spare if there is
// one.
func (c *Coverage[K]) array(n int) []interval {
	if a := c.spare; a != nil {
		c.spare = nil
		return a[:n]
	}
	return make([]interval, n, chunkSize)
}

// recycle keeps a full-size array no chunk holds any more as the spare.
func (c *Coverage[K]) recycle(a []interval) {
	if cap(a) == chunkSize {
		c.spare = a[:0]
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

// newIntervalChunk returns a chunk in array holding only v, at index at.
func newIntervalChunk(array []interval, v interval, at int) intervalChunk {
	ch := intervalChunk{iv: array[:at+1], head: at}
	ch.iv[at] = v
	return ch
}

func (ch *intervalChunk) live() []interval { return ch.iv[ch.head:] }
func (ch *intervalChunk) last() interval   { return ch.iv[len(ch.iv)-1] }
func (ch *intervalChunk) len() int         { return len(ch.iv) - ch.head }

// tryInsert puts v at position pos of the live intervals, moving whichever
// side is shorter, and reports false, changing nothing, when the chunk is
// full.
func (ch *intervalChunk) tryInsert(pos int, v interval) bool {
	n := ch.len()
	if ch.head > 0 && pos <= n/2 {
		copy(ch.iv[ch.head-1:], ch.iv[ch.head:ch.head+pos])
		ch.head--
		ch.iv[ch.head+pos] = v
		return true
	}
	if len(ch.iv) == cap(ch.iv) {
		switch {
		case cap(ch.iv) < chunkSize:
			grown := make([]interval, n, min(2*cap(ch.iv), chunkSize))
			copy(grown, ch.live())
			ch.iv, ch.head = grown, 0
		case ch.head >= chunkSize/4:
			// Enough room before head to be worth one move.
			copy(ch.iv, ch.live())
			ch.iv, ch.head = ch.iv[:n], 0
		default:
			return false
		}
	}
	at := ch.head + pos
	ch.iv = ch.iv[:len(ch.iv)+1]
	copy(ch.iv[at+1:], ch.iv[at:])
	ch.iv[at] = v
	return true
}

// split moves the upper half of the live intervals to a new chunk in
// array, returned.
func (ch *intervalChunk) split(array []interval) intervalChunk {
	live := ch.live()
	mid := len(live) / 2
	right := intervalChunk{iv: array[:len(live)-mid]}
	copy(right.iv, live[mid:])
	ch.iv = ch.iv[:ch.head+mid]
	return right
}
