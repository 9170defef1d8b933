// Package recent keeps the newest values of a stream, bounded both in
// count and in bytes: what the timeline page draws of spans and GPU memory
// after the fact, at a fixed cost whatever the stream's rate.
package recent // import "github.com/otelcol-ai/otelcol-ai/processor/runtimecorrelationprocessor/internal/recent"

// Ring holds the newest values added, oldest first, within MaxCount values
// and MaxBytes bytes as the caller costs them. It grows as values arrive,
// up to MaxCount slots, and never shrinks. It is not safe for concurrent
// use.
type Ring[T any] struct {
	maxCount int
	maxBytes int64
	slots    []slot[T]
	head     int // index of the oldest value
	n        int
	bytes    int64
	evicted  int64
}

type slot[T any] struct {
	v    T
	cost int64
}

// New returns an empty ring for at most maxCount values costing at most
// maxBytes in all; both must be positive.
func New[T any](maxCount int, maxBytes int64) *Ring[T] {
	return &Ring[T]{maxCount: max(maxCount, 1), maxBytes: max(maxBytes, 1)}
}

// Add keeps v, which the caller says costs cost bytes, evicting the oldest
// values until both bounds hold. A value costing more than MaxBytes alone
// is not kept; Add reports whether v was.
func (r *Ring[T]) Add(v T, cost int64) bool {
	if cost > r.maxBytes {
		r.evicted++
		return false
	}
	for r.n > 0 && (r.n == r.maxCount || r.bytes+cost > r.maxBytes) {
		r.dropOldest()
	}
	if r.n == len(r.slots) {
		r.grow()
	}
	r.slots[(r.head+r.n)%len(r.slots)] = slot[T]{v: v, cost: cost}
	r.n++
	r.bytes += cost
	return true
}

// dropOldest evicts the oldest value, clearing its slot so that what it
// refers to can be collected.
func (r *Ring[T]) dropOldest() {
	s := &r.slots[r.head]
	r.bytes -= s.cost
	*s = slot[T]{}
	r.head = (r.head + 1) % len(r.slots)
	r.n--
	r.evicted++
}

// grow doubles the slots (up to maxCount), keeping the values in order.
func (r *Ring[T]) grow() {
	size := min(max(2*len(r.slots), 64), r.maxCount)
	slots := make([]slot[T], size)
	for i := range r.n {
		slots[i] = r.slots[(r.head+i)%len(r.slots)]
	}
	r.slots, r.head = slots, 0
}

// All calls fn with each value, oldest first, until fn returns false.
func (r *Ring[T]) All(fn func(v *T) bool) {
	for i := range r.n {
		if !fn(&r.slots[(r.head+i)%len(r.slots)].v) {
			return
		}
	}
}

// Len is the number of values held.
func (r *Ring[T]) Len() int { return r.n }

// Bytes is the summed cost of the values held.
func (r *Ring[T]) Bytes() int64 { return r.bytes }

// Evicted counts the values dropped since New: pushed out by newer ones,
// or too costly to keep.
func (r *Ring[T]) Evicted() int64 { return r.evicted }
