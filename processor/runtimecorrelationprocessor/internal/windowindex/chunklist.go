package windowindex // import "github.com/otelcol-ai/otelcol-ai/processor/runtimecorrelationprocessor/internal/windowindex"

import "slices"

// chunkSize bounds a chunk: the most elements one insert moves.
const chunkSize = 256

// chunkList is the chunked sorted list that an Index scope and a Coverage
// scope keep their elements in: n elements of T in chunks of at most
// chunkSize, each chunk's before the next chunk's. It compares nothing:
// the owners search it (over the chunks' ends, then within one) with
// sort.Search and their own comparison, which inlines there and would not
// through a function value or a type parameter, and pass it the position.
// S is what the owner keeps about each chunk's elements (struct{} for
// nothing): the list moves it with its chunk and makes new chunks with a
// zero one, and the owner brings it up to date after each change.
type chunkList[T, S any] struct {
	chunks []chunk[T, S]
	n      int
}

// chunk is one run of a list's elements, e[head:] in order; room before
// head and after len(e) takes elements without moving the others.
type chunk[T, S any] struct {
	// summary comes first, so that an empty one takes no room.
	summary S
	e       []T
	head    int
}

func (c *chunk[T, S]) live() []T { return c.e[c.head:] }
func (c *chunk[T, S]) first() T  { return c.e[c.head] }
func (c *chunk[T, S]) last() T   { return c.e[len(c.e)-1] }
func (c *chunk[T, S]) len() int  { return len(c.e) - c.head }

// start puts v in a list that has no chunk, in a chunk with room for
// capacity.
func (l *chunkList[T, S]) start(v T, capacity int) {
	l.chunks = append(l.chunks, newChunk[T, S](make([]T, 1, capacity), v, 0))
	l.n = 1
}

// insert puts v at position pos of chunk ci, moving at most one chunk's
// elements: into a neighbour or a new chunk when v goes at an end of a
// full chunk, else splitting it. It returns the chunk v went to and
// whether chunk ci was split into ci and ci+1, whose summaries then
// describe neither.
func (l *chunkList[T, S]) insert(ci, pos int, v T, arrays *chunkArrays[T]) (at int, split bool) {
	l.n++
	if l.chunks[ci].tryInsert(pos, v) {
		return ci, false
	}
	n := l.chunks[ci].len()
	switch {
	case pos == 0 && ci > 0 && l.chunks[ci-1].tryInsert(l.chunks[ci-1].len(), v):
		return ci - 1, false
	case pos == n && ci+1 < len(l.chunks) && l.chunks[ci+1].tryInsert(0, v):
		return ci + 1, false
	case pos == n: // after a full chunk: a new one, filled from its start
		l.chunks = slices.Insert(l.chunks, ci+1, newChunk[T, S](arrays.get(1), v, 0))
		return ci + 1, false
	case pos == 0: // before a full chunk: a new one, filled from its end
		l.chunks = slices.Insert(l.chunks, ci, newChunk[T, S](arrays.get(chunkSize), v, chunkSize-1))
		return ci, false
	}
	right := l.chunks[ci].split(arrays.get(0))
	l.chunks = slices.Insert(l.chunks, ci+1, right)
	if half := n - right.len(); pos > half {
		l.chunks[ci+1].tryInsert(pos-half, v)
		return ci + 1, true
	}
	l.chunks[ci].tryInsert(pos, v)
	return ci, true
}

// deleteBetween removes the elements from position i of chunk ci up to,
// not including, position j of chunk cj (cj > ci, or cj == ci and j >= i),
// whole chunks at once.
func (l *chunkList[T, S]) deleteBetween(ci, i, cj, j int, arrays *chunkArrays[T]) {
	a := &l.chunks[ci]
	if cj == ci {
		a.e = append(a.e[:a.head+i], a.e[a.head+j:]...)
		l.n -= j - i
		return
	}
	l.n -= a.len() - i + j
	a.e = a.e[:a.head+i]
	for k := ci + 1; k < cj; k++ {
		l.n -= l.chunks[k].len()
		arrays.put(l.chunks[k].e)
	}
	b := &l.chunks[cj]
	b.head += j
	gone := cj
	if b.len() == 0 {
		arrays.put(b.e)
		gone++
	}
	l.chunks = slices.Delete(l.chunks, ci+1, gone)
}

// dropFirst removes the list's first k elements (at most n), and reports
// whether the first chunk left lost some of its elements, rather than
// whole chunks going.
func (l *chunkList[T, S]) dropFirst(k int, arrays *chunkArrays[T]) (trimmed bool) {
	if k <= 0 {
		return false
	}
	l.n -= k
	i := 0
	for ; i < len(l.chunks) && k >= l.chunks[i].len(); i++ {
		k -= l.chunks[i].len()
		arrays.put(l.chunks[i].e)
		l.chunks[i] = chunk[T, S]{}
	}
	l.chunks = l.chunks[i:]
	if k > 0 {
		l.chunks[0].head += k
		return true
	}
	return false
}

// popFirst removes the list's first element, and reports whether its
// chunk, holding others, stays. Small enough to inline, for an Index
// evicts one entry at a time.
func (l *chunkList[T, S]) popFirst(arrays *chunkArrays[T]) (kept bool) {
	if c := &l.chunks[0]; c.len() > 1 {
		c.head++
		l.n--
		return true
	}
	return l.dropFirst(1, arrays)
}

// join moves chunk i+1's elements to the end of chunk i, which must have
// room for both in a chunk, and removes chunk i+1.
func (l *chunkList[T, S]) join(i int, arrays *chunkArrays[T]) {
	a, b := &l.chunks[i], &l.chunks[i+1]
	live, n := a.live(), a.len()+b.len()
	switch {
	case cap(a.e)-len(a.e) >= b.len():
	case cap(a.e) >= n:
		copy(a.e, live)
		a.e, a.head = a.e[:len(live)], 0
	default:
		joined := append(arrays.get(0), live...)
		arrays.put(a.e)
		a.e, a.head = joined, 0
	}
	a.e = append(a.e, b.live()...)
	arrays.put(b.e)
	l.chunks = slices.Delete(l.chunks, i+1, i+2)
}

// newChunk returns a chunk in array holding only v, at index at.
func newChunk[T, S any](array []T, v T, at int) chunk[T, S] {
	c := chunk[T, S]{e: array[:at+1], head: at}
	c.e[at] = v
	return c
}

// tryInsert puts v at position pos of the live elements, moving whichever
// side is shorter, and reports false, changing nothing, when the chunk is
// full.
func (c *chunk[T, S]) tryInsert(pos int, v T) bool {
	n := c.len()
	if c.head > 0 && pos <= n/2 {
		copy(c.e[c.head-1:], c.e[c.head:c.head+pos])
		c.head--
		c.e[c.head+pos] = v
		return true
	}
	if len(c.e) == cap(c.e) {
		switch {
		case cap(c.e) < chunkSize:
			grown := make([]T, n, min(2*cap(c.e), chunkSize))
			copy(grown, c.live())
			c.e, c.head = grown, 0
		case c.head >= chunkSize/4:
			// Enough room before head to be worth one move.
			copy(c.e, c.live())
			c.e, c.head = c.e[:n], 0
		default:
			return false
		}
	}
	at := c.head + pos
	c.e = c.e[:len(c.e)+1]
	copy(c.e[at+1:], c.e[at:])
	c.e[at] = v
	return true
}

// split moves the upper half of the live elements to a new chunk in
// array, returned.
func (c *chunk[T, S]) split(array []T) chunk[T, S] {
	live := c.live()
	mid := len(live) / 2
	right := chunk[T, S]{e: array[:len(live)-mid]}
	copy(right.e, live[mid:])
	c.e = c.e[:c.head+mid]
	return right
}

// chunkArrays keeps up to keep (at most maxSpares) emptied full-size chunk
// arrays for the next chunks, so that a steady stream allocates nothing.
type chunkArrays[T any] struct {
	spares [maxSpares][]T
	n      int
	keep   int
}

// maxSpares bounds chunkArrays.keep.
const maxSpares = 4

// get returns an empty chunk array of length n, a spare if there is one.
func (a *chunkArrays[T]) get(n int) []T {
	if a.n > 0 {
		a.n--
		s := a.spares[a.n]
		a.spares[a.n] = nil
		return s[:n]
	}
	return make([]T, n, chunkSize)
}

// put keeps array, which no chunk holds any more, when it is full-size and
// there is room.
func (a *chunkArrays[T]) put(array []T) {
	if cap(array) == chunkSize && a.n < a.keep {
		a.spares[a.n] = array[:0]
		a.n++
	}
}
