// Package windowindex keeps time intervals (runtime windows, or the time
// ranges of spans) per scope in a bounded, time-ordered index and answers
// which of them overlap a given interval.
//
// Each scope holds its entries in a slice sorted by start, so that the usual
// case, an entry no earlier than the last one, is an append, and an
// out-of-order entry is a binary search and a short copy. A query is a binary
// search for the first entry that can reach the queried interval (its start
// at most the scope's longest duration before it) and a scan while entries
// start before the interval ends: O(log n + k), the sorted-slice variant of
// an interval index.
//
// Memory is bounded two ways, both evicting the oldest entries first (the
// smallest start across all scopes, found through a heap of scopes keyed by
// their oldest entry): entries that started more than Retention before the
// newest start seen are evicted, and the total never exceeds MaxEntries.
// An Index is not safe for concurrent use.
//
// Coverage, beside it, keeps only the union of intervals per scope, for the
// question "did anything cover part of this interval", under the same
// bounds.
package windowindex // import "github.com/otelcol-ai/otelcol-ai/processor/runtimecorrelationprocessor/internal/windowindex"

import (
	"container/heap"
	"errors"
	"fmt"
	"math"
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

// Config bounds an Index.
type Config struct {
	// Retention is how long, in ns, an entry is kept after the newest
	// start seen in the whole index; entries that start earlier than that
	// are evicted, and refused when they arrive.
	Retention int64
	// MaxEntries is the most entries kept across all scopes.
	MaxEntries int
}

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
}

type scope[K comparable] struct {
	key K
	// entries[head:] are live, sorted by Start.
	entries []Entry
	head    int
	// maxDur is at least the longest live entry's duration: a query need
	// look no further back than this before its start.
	maxDur int64
	// heapIdx is the scope's position in Index.oldest.
	heapIdx int
}

func (s *scope[K]) live() []Entry { return s.entries[s.head:] }

// New returns an empty Index. A MaxEntries below 1 is taken as 1 and a
// negative Retention as 0.
func New[K comparable](cfg Config) *Index[K] {
	cfg.MaxEntries = max(cfg.MaxEntries, 1)
	cfg.Retention = max(cfg.Retention, 0)
	return &Index[K]{cfg: cfg, scopes: make(map[K]*scope[K])}
}

// Len returns the number of entries in the index.
func (x *Index[K]) Len() int { return x.total }

// ScopeLen returns the number of entries in one scope.
func (x *Index[K]) ScopeLen(key K) int {
	if s, ok := x.scopes[key]; ok {
		return len(s.live())
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

// Insert adds e to the scope key, then evicts what the bounds require
// (possibly e itself, when the index is full of newer entries).
func (x *Index[K]) Insert(key K, e Entry) (Result, error) {
	if e.End < e.Start {
		return 0, fmt.Errorf("%w: [%d, %d)", ErrInvalidEntry, e.Start, e.End)
	}
	if e.Start < x.Horizon() {
		return TooOld, nil
	}
	s, ok := x.scopes[key]
	if !ok {
		s = &scope[K]{key: key}
		x.scopes[key] = s
	}
	live := s.live()
	// Upper bound: entries with an equal start stay before e, so that
	// arrival order is kept among them and duplicates sit just before pos.
	pos := len(live)
	if pos > 0 && e.Start < live[pos-1].Start {
		pos = sort.Search(len(live), func(i int) bool { return live[i].Start > e.Start })
	}
	for i := pos - 1; i >= 0 && live[i].Start == e.Start; i-- {
		if live[i] == e {
			return Duplicate, nil
		}
	}
	at := s.head + pos
	s.entries = append(s.entries, Entry{})
	if at < len(s.entries)-1 {
		copy(s.entries[at+1:], s.entries[at:])
	}
	s.entries[at] = e
	s.maxDur = max(s.maxDur, e.Duration())
	x.total++
	switch {
	case !ok:
		heap.Push(&x.oldest, s)
	case pos == 0:
		heap.Fix(&x.oldest, s.heapIdx)
	}
	if !x.seen || e.Start > x.watermark {
		x.watermark, x.seen = e.Start, true
	}
	x.evict()
	return Inserted, nil
}

// evict drops entries past the retention, then the oldest ones beyond the
// cap.
func (x *Index[K]) evict() {
	horizon := x.Horizon()
	for len(x.oldest) > 0 && x.oldest[0].live()[0].Start < horizon {
		x.popOldest()
		x.stats.EvictedRetention++
	}
	for x.total > x.cfg.MaxEntries {
		x.popOldest()
		x.stats.EvictedCap++
	}
}

// popOldest removes the entry with the smallest start in the index.
func (x *Index[K]) popOldest() {
	s := x.oldest[0]
	s.head++
	x.total--
	if s.head == len(s.entries) {
		heap.Pop(&x.oldest)
		delete(x.scopes, s.key)
		return
	}
	// Reclaim the evicted prefix once it is half the slice; the longest
	// duration is recomputed then, so that one long entry long gone does
	// not widen queries for ever.
	if s.head >= 32 && 2*s.head >= len(s.entries) {
		n := copy(s.entries, s.entries[s.head:])
		clear(s.entries[n:])
		s.entries = s.entries[:n]
		s.head = 0
		s.maxDur = 0
		for _, e := range s.entries {
			s.maxDur = max(s.maxDur, e.Duration())
		}
	}
	heap.Fix(&x.oldest, 0)
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
	live := s.live()
	from := start - s.maxDur
	if from > start { // underflow
		from = math.MinInt64
	}
	i := sort.Search(len(live), func(i int) bool { return live[i].Start >= from })
	for ; i < len(live) && live[i].Start < end; i++ {
		if live[i].End > start && live[i].End > live[i].Start {
			dst = append(dst, live[i])
		}
	}
	return dst
}

// scopeHeap orders scopes by their oldest live entry.
type scopeHeap[K comparable] []*scope[K]

func (h scopeHeap[K]) Len() int { return len(h) }
func (h scopeHeap[K]) Less(i, j int) bool {
	return h[i].entries[h[i].head].Start < h[j].entries[h[j].head].Start
}

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
