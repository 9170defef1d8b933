// Package windowindex keeps time intervals (runtime windows, or the time
// ranges of spans) per scope in a bounded, time-ordered index and answers
// which of them overlap a given interval.
//
// Arrival order is the sender's to choose, so no order may make the index
// slow. Each scope holds its entries in order (by start, then by the other
// fields, so that equal entries are neighbours) in a chunked sorted list:
// sorted chunks of at most 256 entries, themselves in a sorted slice. The
// usual case, an entry after the last one, is an append to the last chunk;
// any other is a binary search over the chunks and within one, then a copy
// of at most one chunk, splitting it when full: O(log n + 256) whatever the
// order, where a single sorted slice costs O(n) per late entry and O(n²) for
// reversed input. Chunks keep free room at both ends, so that a run of ever
// earlier entries fills a chunk from its end and packs as densely as a run
// of ever later ones (40 bytes an entry); random order leaves chunks at
// least half full. A balanced tree would need a node per entry, and an
// append-only run with an overflow merged in would make each merge O(n).
//
// A query is a binary search for the first entry that can reach the queried
// interval (its start at most the longest live duration before it) and a
// scan while entries start before the interval ends: O(log n + k). So that
// one long entry cannot widen every query to the whole scope, an entry is
// cut to the retention when it arrives, and entries longer than
// LongDuration are kept apart, at most MaxLongPerScope per scope, and
// scanned on their own: a query costs O(log n + k + long entries), and the
// longest duration of the rest falls again as long ones leave.
//
// Memory is bounded three ways, all evicting the oldest entries first:
// entries that started more than Retention before the newest start seen are
// evicted, a scope never holds more than MaxPerScope (its own oldest go),
// and the total never exceeds MaxEntries (the smallest start across all
// scopes goes, found through a heap of scopes keyed by their oldest entry).
// The per-scope cap keeps one sender that floods the index from evicting
// everyone else's windows. An Index is not safe for concurrent use.
//
// Coverage, beside it, keeps only the union of intervals per scope, for the
// question "did anything cover part of this interval", under the same
// bounds.
package windowindex // import "github.com/otelcol-ai/otelcol-ai/processor/runtimecorrelationprocessor/internal/windowindex"

import (
	"cmp"
	"container/heap"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
)

// Entry is one interval [Start, End) in Unix epoch ns with what the caller
// needs to report it. Two entries are duplicates when every field is equal.
type Entry struct {
	// Start and End bound the interval; End >= Start.
	Start, End int64
	// ThreadID is the thread the interval concerns, 0 when none.
	ThreadID int64
	// PID is the process the interval concerns, 0 when none.
	PID int64
	// Kind is the caller's small integer for what the interval is.
	Kind uint8
}

// Duration returns End − Start in ns.
func (e Entry) Duration() int64 { return e.End - e.Start }

// compareEntries orders entries by start, then by every other field, so
// that duplicates are neighbours and found by one binary search.
func compareEntries(a, b Entry) int {
	switch {
	case a.Start != b.Start:
		return cmp.Compare(a.Start, b.Start)
	case a.End != b.End:
		return cmp.Compare(a.End, b.End)
	case a.ThreadID != b.ThreadID:
		return cmp.Compare(a.ThreadID, b.ThreadID)
	case a.PID != b.PID:
		return cmp.Compare(a.PID, b.PID)
	}
	return cmp.Compare(a.Kind, b.Kind)
}

// Config bounds an Index.
type Config struct {
	// Retention is how long, in ns, an entry is kept after the newest
	// start seen in the whole index; entries that start earlier than that
	// are evicted, and refused when they arrive. It also bounds an
	// entry's length: a longer one is cut to it.
	Retention int64
	// MaxEntries is the most entries kept across all scopes.
	MaxEntries int
	// MaxPerScope is the most entries kept in one scope; 0 (or more than
	// MaxEntries) means MaxEntries.
	MaxPerScope int
	// LongDuration is the length beyond which an entry is kept apart from
	// its scope's others; 0 means Retention/64.
	LongDuration int64
	// MaxLongPerScope is the most entries longer than LongDuration kept in
	// one scope; 0 means 256.
	MaxLongPerScope int
}

// Defaults of Config's optional bounds.
const (
	defaultLongFraction    = 64
	defaultMaxLongPerScope = 256
)

// Result says what Insert did with an entry.
type Result uint8

// The results of Insert.
const (
	// Inserted: the entry is in the index.
	Inserted Result = iota
	// Duplicate: an equal entry is already in the index; nothing changed.
	Duplicate
	// TooOld: the entry started before the retention horizon; refused.
	TooOld
)

// String names the result.
func (r Result) String() string {
	switch r {
	case Inserted:
		return "inserted"
	case Duplicate:
		return "duplicate"
	case TooOld:
		return "too_old"
	}
	return fmt.Sprintf("Result(%d)", uint8(r))
}

// Stats are an Index's cumulative counters.
type Stats struct {
	// EvictedRetention counts entries evicted because they fell out of
	// the retention.
	EvictedRetention uint64
	// EvictedCap counts entries evicted to stay within MaxEntries.
	EvictedCap uint64
	// EvictedScopeCap counts entries evicted to keep their scope within
	// MaxPerScope.
	EvictedScopeCap uint64
	// EvictedLongCap counts long entries evicted to keep their scope
	// within MaxLongPerScope.
	EvictedLongCap uint64
	// Clipped counts entries inserted with their end cut to Start +
	// Retention.
	Clipped uint64
}

// ErrInvalidEntry is returned by Insert for an entry that ends before it
// starts.
var ErrInvalidEntry = errors.New("windowindex: entry ends before it starts")

// Index is a bounded, time-ordered index of entries per scope K.
type Index[K comparable] struct {
	cfg       Config
	scopes    map[K]*scope[K]
	oldest    scopeHeap[K]
	total     int
	watermark int64
	seen      bool
	stats     Stats
	// arrays keeps emptied chunks' arrays for the next chunks.
	arrays chunkArrays[Entry]
	// visited counts the entries queries looked at, for tests of their
	// cost.
	visited uint64
}

type scope[K comparable] struct {
	key K
	// The chunks hold the entries no longer than LongDuration, in order.
	chunkList[Entry, lookback]
	// long holds the longer entries, in order.
	long []Entry
	// maxDur is at least the longest duration in chunks: a query need look
	// no further back than this before its start.
	maxDur int64
	// oldest is the smallest start in the scope, the heap's key.
	oldest int64
	// heapIdx is the scope's position in Index.oldest.
	heapIdx int
}

// New returns an empty Index. A MaxEntries below 1 is taken as 1 and a
// negative Retention as 0; the optional bounds take their defaults.
func New[K comparable](cfg Config) *Index[K] {
	cfg.MaxEntries = max(cfg.MaxEntries, 1)
	cfg.Retention = max(cfg.Retention, 0)
	if cfg.MaxPerScope <= 0 || cfg.MaxPerScope > cfg.MaxEntries {
		cfg.MaxPerScope = cfg.MaxEntries
	}
	if cfg.LongDuration <= 0 {
		cfg.LongDuration = cfg.Retention / defaultLongFraction
	}
	if cfg.MaxLongPerScope <= 0 {
		cfg.MaxLongPerScope = defaultMaxLongPerScope
	}
	return &Index[K]{cfg: cfg, scopes: make(map[K]*scope[K]), arrays: chunkArrays[Entry]{keep: maxSpares}}
}

// Len returns the number of entries in the index.
func (x *Index[K]) Len() int { return x.total }

// ScopeLen returns the number of entries in one scope.
func (x *Index[K]) ScopeLen(key K) int {
	if s, ok := x.scopes[key]; ok {
		return s.len()
	}
	return 0
}

// Has reports whether the scope holds any entry.
func (x *Index[K]) Has(key K) bool {
	_, ok := x.scopes[key]
	return ok
}

// Stats returns the cumulative counters.
func (x *Index[K]) Stats() Stats { return x.stats }

// Horizon returns the earliest start the index accepts now: the newest
// start seen minus the retention (math.MinInt64 before the first entry).
func (x *Index[K]) Horizon() int64 {
	if !x.seen {
		return math.MinInt64
	}
	if x.watermark < math.MinInt64+x.cfg.Retention {
		return math.MinInt64
	}
	return x.watermark - x.cfg.Retention
}

// Insert adds e to the scope key, its end cut to Start + Retention, then
// evicts what the bounds require (possibly e itself, when its scope or the
// index is full of newer entries).
func (x *Index[K]) Insert(key K, e Entry) (Result, error) {
	if e.End < e.Start {
		return 0, fmt.Errorf("%w: [%d, %d)", ErrInvalidEntry, e.Start, e.End)
	}
	if e.Start < x.Horizon() {
		return TooOld, nil
	}
	// In uint64 the difference cannot overflow, and Start + Retention is
	// then at most End.
	clipped := uint64(e.End)-uint64(e.Start) > uint64(x.cfg.Retention)
	if clipped {
		e.End = e.Start + x.cfg.Retention
	}
	s, ok := x.scopes[key]
	if !ok {
		s = &scope[K]{key: key, oldest: e.Start}
		x.scopes[key] = s
	}
	long := e.Duration() > x.cfg.LongDuration
	if long && !s.insertLong(e) || !long && !x.insert(s, e) {
		return Duplicate, nil
	}
	x.total++
	if clipped {
		x.stats.Clipped++
	}
	switch {
	case !ok:
		heap.Push(&x.oldest, s)
	case e.Start < s.oldest:
		s.oldest = e.Start
		heap.Fix(&x.oldest, s.heapIdx)
	}
	if !x.seen || e.Start > x.watermark {
		x.watermark, x.seen = e.Start, true
	}
	if len(s.long) > x.cfg.MaxLongPerScope {
		x.remove(s, true)
		x.stats.EvictedLongCap++
	}
	// At MaxEntries the scope is all there is, and the cap below counts it.
	if s.len() > x.cfg.MaxPerScope && x.cfg.MaxPerScope < x.cfg.MaxEntries {
		x.remove(s, false)
		x.stats.EvictedScopeCap++
	}
	x.evict()
	return Inserted, nil
}

// evict drops entries past the retention, then the oldest ones beyond the
// cap.
func (x *Index[K]) evict() {
	horizon := x.Horizon()
	for len(x.oldest) > 0 && x.oldest[0].oldest < horizon {
		x.popOldest()
		x.stats.EvictedRetention++
	}
	for x.total > x.cfg.MaxEntries {
		x.popOldest()
		x.stats.EvictedCap++
	}
}

// popOldest removes the entry with the smallest start in the index.
func (x *Index[K]) popOldest() { x.remove(x.oldest[0], false) }

// remove takes s's smallest entry, or its smallest long one, and keeps
// the total, s's place in the heap and the scopes up to date.
func (x *Index[K]) remove(s *scope[K], long bool) {
	if long {
		s.long = s.long[1:]
	} else {
		x.popFirst(s)
	}
	x.total--
	if s.len() == 0 {
		heap.Remove(&x.oldest, s.heapIdx)
		delete(x.scopes, s.key)
		return
	}
	before := s.oldest
	if len(s.long) == 0 {
		s.oldest = s.chunks[0].live()[0].Start
	} else {
		s.oldest = s.first().Start
	}
	if s.oldest != before {
		heap.Fix(&x.oldest, s.heapIdx)
	}
}

// AppendOverlapping appends to dst the entries of scope key whose
// intersection with [start, end) is not empty — e.Start < end and
// e.End > start, so that an empty entry or query overlaps nothing — in start
// order, and returns dst.
func (x *Index[K]) AppendOverlapping(dst []Entry, key K, start, end int64) []Entry {
	s, ok := x.scopes[key]
	if !ok || end <= start {
		return dst
	}
	n0 := len(dst)
	from := start - s.maxDur
	if from > start { // underflow
		from = math.MinInt64
	}
	visited := 0
	ci := sort.Search(len(s.chunks), func(i int) bool { return s.chunks[i].last().Start >= from })
	for first := true; ci < len(s.chunks); ci, first = ci+1, false {
		live := s.chunks[ci].live()
		i := 0
		if first {
			i = sort.Search(len(live), func(i int) bool { return live[i].Start >= from })
		}
		for ; i < len(live) && live[i].Start < end; i++ {
			visited++
			if live[i].End > start && live[i].End > live[i].Start {
				dst = append(dst, live[i])
			}
		}
		if i < len(live) {
			break
		}
	}
	dst, scanned := s.mergeLong(dst, n0, start, end)
	x.visited += uint64(visited + scanned)
	return dst
}

// mergeLong merges into dst[n0:], in order, the long entries that overlap
// [start, end), and returns dst and how many long entries it looked at.
func (s *scope[K]) mergeLong(dst []Entry, n0 int, start, end int64) ([]Entry, int) {
	matches, scanned := 0, 0
	for _, e := range s.long {
		if e.Start >= end {
			break
		}
		scanned++
		if e.End > start {
			matches++
		}
	}
	if matches == 0 {
		return dst, scanned
	}
	// Merge from the back, so that each entry moves once.
	i := len(dst) - 1
	dst = slices.Grow(dst, matches)[:len(dst)+matches]
	w := len(dst) - 1
	for j := scanned - 1; j >= 0; j-- {
		l := s.long[j]
		if l.End <= start {
			continue
		}
		for ; i >= n0 && compareEntries(dst[i], l) > 0; i-- {
			dst[w] = dst[i]
			w--
		}
		dst[w] = l
		w--
	}
	return dst, scanned
}

func (s *scope[K]) len() int { return s.n + len(s.long) }

// first returns the scope's smallest entry; the scope is not empty.
func (s *scope[K]) first() Entry {
	switch {
	case s.n == 0:
		return s.long[0]
	case len(s.long) == 0:
		return s.chunks[0].first()
	}
	if l, c := s.long[0], s.chunks[0].first(); compareEntries(l, c) < 0 {
		return l
	}
	return s.chunks[0].first()
}

// insertLong adds a long entry, false when an equal one is there.
func (s *scope[K]) insertLong(e Entry) bool {
	pos, found := slices.BinarySearchFunc(s.long, e, compareEntries)
	if found {
		return false
	}
	s.long = slices.Insert(s.long, pos, e)
	return true
}

// insert adds an entry to s's chunks, false when an equal one is there.
func (x *Index[K]) insert(s *scope[K], e Entry) bool {
	var ci, pos int
	if len(s.chunks) > 0 {
		ci = len(s.chunks) - 1
		last := &s.chunks[ci]
		pos = last.len()
		c := compareEntries(e, last.e[len(last.e)-1])
		if c > 0 && len(last.e) < cap(last.e) { // the usual case: an append
			last.e = append(last.e, e)
			last.summary.widen(e)
			s.n++
			s.maxDur = max(s.maxDur, e.Duration())
			return true
		}
		if c == 0 {
			return false
		}
		if c < 0 {
			// The last chunk whose first entry is at most e, or the first.
			ci = max(sort.Search(len(s.chunks), func(i int) bool {
				return compareEntries(s.chunks[i].first(), e) > 0
			})-1, 0)
			var found bool
			if pos, found = slices.BinarySearchFunc(s.chunks[ci].live(), e, compareEntries); found {
				return false
			}
		}
	}
	x.place(s, ci, pos, e)
	s.maxDur = max(s.maxDur, e.Duration())
	return true
}

// place puts e at position pos of s's chunk ci (in a first chunk when
// there is none) and brings the lookback of the chunks it changed up to
// date.
func (x *Index[K]) place(s *scope[K], ci, pos int, e Entry) {
	if len(s.chunks) == 0 {
		s.start(e, firstChunkSize)
		s.chunks[0].summary.widen(e)
		return
	}
	at, split := s.insert(ci, pos, e, &x.arrays)
	if !split {
		s.chunks[at].summary.widen(e)
		return
	}
	for i := ci; i <= ci+1; i++ {
		s.chunks[i].summary.recompute(s.chunks[i].live())
	}
}

// popFirst removes s's smallest entry; s is not empty.
func (x *Index[K]) popFirst(s *scope[K]) {
	if len(s.long) > 0 && (s.n == 0 || compareEntries(s.long[0], s.chunks[0].live()[0]) < 0) {
		s.long = s.long[1:]
		return
	}
	c := &s.chunks[0]
	if c.live()[0].Duration() >= c.summary.maxDur {
		c.summary.stale = true
	}
	c.summary.evicted++
	if !s.popFirst(&x.arrays) { // the chunk went
		s.recomputeMaxDur()
		return
	}
	if b := &c.summary; b.stale && b.evicted >= recomputeEvery {
		// So that a long entry gone no longer widens queries.
		before := b.maxDur
		b.recompute(c.live())
		if b.maxDur < before && before == s.maxDur {
			s.recomputeMaxDur()
		}
	}
}

func (s *scope[K]) recomputeMaxDur() {
	s.maxDur = 0
	for i := range s.chunks {
		s.maxDur = max(s.maxDur, s.chunks[i].summary.maxDur)
	}
}

const (
	// firstChunkSize is a scope's first chunk's capacity, doubled up to
	// chunkSize, so that a scope of a few entries holds little.
	firstChunkSize = 8
	// recomputeEvery is how many evictions from a chunk pass, at least,
	// between recomputations of its longest duration, which are made only
	// once an entry that may have been the longest left: O(1) amortized.
	recomputeEvery = 32
)

// lookback is what a scope keeps about each chunk's entries: how long they
// are, so that a query knows how far before its start to look.
type lookback struct {
	// maxDur is at least the longest live duration.
	maxDur int64
	// evicted counts evictions since maxDur was computed, and stale says
	// whether one of them may have been the longest.
	evicted int
	stale   bool
}

func (b *lookback) widen(e Entry) { b.maxDur = max(b.maxDur, e.Duration()) }

func (b *lookback) recompute(live []Entry) {
	b.maxDur, b.evicted, b.stale = 0, 0, false
	for _, e := range live {
		b.maxDur = max(b.maxDur, e.Duration())
	}
}

// scopeHeap orders scopes by their oldest live entry.
type scopeHeap[K comparable] []*scope[K]

func (h scopeHeap[K]) Len() int           { return len(h) }
func (h scopeHeap[K]) Less(i, j int) bool { return h[i].oldest < h[j].oldest }

func (h scopeHeap[K]) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].heapIdx, h[j].heapIdx = i, j
}

func (h *scopeHeap[K]) Push(v any) {
	s := v.(*scope[K])
	s.heapIdx = len(*h)
	*h = append(*h, s)
}

func (h *scopeHeap[K]) Pop() any {
	old := *h
	s := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return s
}
