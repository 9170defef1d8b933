package windowindex

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"
)

// naiveUnion is the specification a Coverage's union must equal: the
// intervals sorted by start in a plain list, each merged into the one
// before when they overlap or touch.
func naiveUnion(ivs []interval) []interval {
	sorted := slices.SortedFunc(slices.Values(ivs), func(a, b interval) int { return cmp.Compare(a.start, b.start) })
	var out []interval
	for _, v := range sorted {
		if v.end <= v.start {
			continue
		}
		if n := len(out); n > 0 && v.start <= out[n-1].end {
			out[n-1].end = max(out[n-1].end, v.end)
			continue
		}
		out = append(out, v)
	}
	return out
}

// overlapsUnion answers Overlaps from a union built by naiveUnion.
func overlapsUnion(u []interval, start, end int64) bool {
	i := sort.Search(len(u), func(i int) bool { return u[i].end > start })
	return end > start && i < len(u) && u[i].start < end
}

// coverageUnion returns the scope's union as the chunks hold it.
func coverageUnion[K comparable](c *Coverage[K], key K) []interval {
	var out []interval
	for _, ch := range c.scopes[key].chunks {
		out = append(out, ch.live()...)
	}
	return out
}

// checkCoverageInvariants asserts what the chunked lists promise: chunks
// not empty and bounded, intervals in order with a gap between each and
// the next, counts exact, and no two neighbouring chunks sparse enough to
// be joined.
func checkCoverageInvariants[K comparable](t *testing.T, c *Coverage[K]) {
	t.Helper()
	for key, l := range c.scopes {
		n := 0
		var prev *interval
		for ci := range l.chunks {
			ch := &l.chunks[ci]
			live := ch.live()
			if len(live) == 0 || cap(ch.e) > chunkSize {
				t.Fatalf("scope %v chunk %d holds %d intervals in room for %d", key, ci, len(live), cap(ch.e))
			}
			if ci > 0 && l.chunks[ci-1].len()+len(live) <= mendBelow {
				t.Fatalf("scope %v chunks %d and %d hold %d intervals together, not joined", key, ci-1, ci, l.chunks[ci-1].len()+len(live))
			}
			for i := range live {
				v := &live[i]
				if v.end <= v.start || prev != nil && v.start <= prev.end {
					t.Fatalf("scope %v chunk %d interval %d %+v after %+v", key, ci, i, *v, *prev)
				}
				prev = v
			}
			n += len(live)
		}
		if n != l.n || n == 0 {
			t.Fatalf("scope %v counts %d intervals, holds %d", key, l.n, n)
		}
	}
}

// coverageArrivals returns n intervals about 1 µs apart in the order named.
// Disjoint ones are up to 500 ns long with a gap after each; mixed ones add
// every fifth touching the one before, every seventh overlapping the next
// few, and one in a hundred spanning up to a few hundred.
func coverageArrivals(n int, mixed bool, order string) []interval {
	rng := rand.New(rand.NewPCG(31, 32))
	ivs := make([]interval, n)
	t := int64(1_700_000_000_000_000_000)
	for i := range ivs {
		t += 1000 + rng.Int64N(1000)
		d := 1 + rng.Int64N(500)
		if mixed {
			switch {
			case i%100 == 0:
				d = rng.Int64N(300_000)
			case i%7 == 0:
				d = 1000 + rng.Int64N(5000)
			case i%5 == 0 && i > 0:
				t = ivs[i-1].end
			}
		}
		ivs[i] = interval{t, t + d}
	}
	switch order {
	case "reverse":
		slices.Reverse(ivs)
	case "random":
		rng.Shuffle(n, func(i, j int) { ivs[i], ivs[j] = ivs[j], ivs[i] })
	case "late tenth": // one in ten arrives 200 places late
		for i := 200; i < n; i += 10 {
			late := ivs[i-200]
			copy(ivs[i-200:i], ivs[i-199:i+1])
			ivs[i] = late
		}
	}
	return ivs
}

func TestCoverageAnyArrivalOrderAnswersLikeANaiveUnion(t *testing.T) {
	const n = 100_000
	for _, mixed := range []bool{false, true} {
		for _, order := range []string{"in-order", "reverse", "random", "late tenth"} {
			name := order
			if mixed {
				name += " mixed"
			}
			t.Run(name, func(t *testing.T) {
				ivs := coverageArrivals(n, mixed, order)
				c := NewCoverage[int](Config{Retention: 1 << 50, MaxEntries: n})
				for _, v := range ivs {
					c.Add(0, v.start, v.end)
				}
				checkCoverageInvariants(t, c)
				want := naiveUnion(ivs)
				if !mixed && len(want) != n {
					t.Fatalf("disjoint input merged into %d intervals", len(want))
				}
				if mixed && len(want) > n*9/10 {
					t.Fatalf("mixed input merged only into %d intervals", len(want))
				}
				if got := coverageUnion(c, 0); !slices.Equal(got, want) {
					t.Fatalf("union of %d intervals, want %d", len(got), len(want))
				}
				if c.Intervals(0) != len(want) || c.Scopes() != 1 {
					t.Fatalf("Intervals %d Scopes %d, want %d and 1", c.Intervals(0), c.Scopes(), len(want))
				}
				first, last := want[0].start, want[len(want)-1].end
				rng := rand.New(rand.NewPCG(33, 34))
				for q := range 20_000 {
					s := first - 10_000 + rng.Int64N(last-first+20_000)
					e := s + rng.Int64N([]int64{1, 300, 1500, 100_000}[q%4])
					if got := c.Overlaps(0, s, e); got != overlapsUnion(want, s, e) {
						t.Fatalf("Overlaps(%d, %d) = %v", s, e, got)
					}
				}
				// A few queries against the intervals as given, unmerged.
				for range 100 {
					s := first + rng.Int64N(last-first)
					e := s + rng.Int64N(2000)
					given := slices.ContainsFunc(ivs, func(v interval) bool { return v.start < e && v.end > s && e > s })
					if got := c.Overlaps(0, s, e); got != given {
						t.Fatalf("Overlaps(%d, %d) = %v, the intervals given say %v", s, e, got, given)
					}
				}
			})
		}
	}
}

// boundedUnion is the specification of a Coverage's bounds: per scope a
// naiveUnion of what was added, less the intervals that ended before the
// retention horizon and the oldest beyond the cap, after each add to the
// scope and for all scopes every sweepEvery adds.
type boundedUnion struct {
	cfg       Config
	scopes    map[int][]interval
	watermark int64
	seen      bool
	adds      int
	// expired and capped count the intervals each bound removed.
	expired, capped int
}

func (b *boundedUnion) add(key int, v interval) {
	if v.end <= v.start {
		return
	}
	if !b.seen || v.end > b.watermark {
		b.watermark, b.seen = v.end, true
	}
	b.scopes[key] = append(naiveUnion(b.scopes[key]), v)
	b.trim(key)
	b.adds++
	if b.adds%sweepEvery == 0 {
		for k := range b.scopes {
			b.trim(k)
		}
	}
}

func (b *boundedUnion) trim(key int) {
	u := naiveUnion(b.scopes[key])
	n := len(u)
	u = slices.DeleteFunc(u, func(v interval) bool { return v.end < b.watermark-b.cfg.Retention })
	b.expired += n - len(u)
	for len(u) > b.cfg.MaxEntries {
		u = u[1:]
		b.capped++
	}
	if len(u) == 0 {
		delete(b.scopes, key)
		return
	}
	b.scopes[key] = u
}

func TestCoverageBoundsMatchABoundedNaiveUnion(t *testing.T) {
	for _, order := range []string{"in-order", "reverse", "random", "late tenth"} {
		for _, mixed := range []bool{false, true} {
			name := order
			if mixed {
				name += " mixed"
			}
			t.Run(name, func(t *testing.T) {
				// The retention spans about 2000 intervals, which mixed
				// ones merge into a few hundred; the cap, a few chunks of
				// disjoint ones, is below both.
				cfg := Config{Retention: 3_000_000, MaxEntries: 700}
				if mixed {
					cfg.MaxEntries = 100
				}
				c := NewCoverage[int](cfg)
				b := &boundedUnion{cfg: cfg, scopes: map[int][]interval{}}
				rng := rand.New(rand.NewPCG(35, 36))
				ivs := coverageArrivals(12_000, mixed, order)
				for i, v := range ivs {
					key := 0
					if i%3 == 0 { // a second scope, left idle halfway
						key = 1 + i/6000
					}
					if i%50 == 0 { // resent
						v = ivs[rng.IntN(i+1)]
					}
					c.Add(key, v.start, v.end)
					b.add(key, v)
					if c.Intervals(key) != len(b.scopes[key]) || c.Scopes() != len(b.scopes) {
						t.Fatalf("after %d: scope %d holds %d intervals in %d scopes, want %d in %d",
							i, key, c.Intervals(key), c.Scopes(), len(b.scopes[key]), len(b.scopes))
					}
					checkCoverageInvariants(t, c)
					if i%97 != 0 {
						continue
					}
					for k, want := range b.scopes {
						if got := coverageUnion(c, k); !slices.Equal(got, want) {
							t.Fatalf("after %d: scope %d union of %d intervals, want %d", i, k, len(got), len(want))
						}
					}
					for range 20 {
						s := v.start - 2_000_000 + rng.Int64N(4_000_000)
						e := s + rng.Int64N(5000)
						if got, want := c.Overlaps(key, s, e), overlapsUnion(b.scopes[key], s, e); got != want {
							t.Fatalf("after %d, Overlaps(%d, %d) = %v, want %v", i, s, e, got, want)
						}
					}
				}
				if b.expired == 0 || b.capped == 0 {
					t.Errorf("%d expired, %d capped: the bounds were not exercised", b.expired, b.capped)
				}
			})
		}
	}
}

func TestCoverageChunksStayDenseAsMergesEmptyThem(t *testing.T) {
	const n = 100_000
	ivs := coverageArrivals(n, false, "random")
	c := NewCoverage[int](Config{Retention: 1 << 50, MaxEntries: n})
	for _, v := range ivs {
		c.Add(0, v.start, v.end)
	}
	checkCoverageInvariants(t, c)
	sorted := naiveUnion(ivs)
	// Merge runs of 200 neighbours into one, in random order, so that
	// most chunks lose most of their intervals.
	runs := rand.New(rand.NewPCG(37, 38)).Perm(n / 200)
	for k, r := range runs {
		c.Add(0, sorted[r*200].start, sorted[r*200+199].end)
		if k%25 == 0 {
			checkCoverageInvariants(t, c)
		}
	}
	checkCoverageInvariants(t, c)
	l := c.scopes[0]
	if l.n != n/200 || len(l.chunks) > 2*l.n/(mendBelow+1)+1 {
		t.Fatalf("%d intervals in %d chunks", l.n, len(l.chunks))
	}
	held := 0
	for _, ch := range l.chunks {
		held += cap(ch.e)
	}
	if held > 4*chunkSize*l.n/mendBelow+chunkSize {
		t.Errorf("%d intervals hold room for %d", l.n, held)
	}
	for r := range n / 200 {
		if !c.Overlaps(0, sorted[r*200+100].start, sorted[r*200+100].start+1) {
			t.Fatalf("run %d not covered", r)
		}
		if g := sorted[r*200+199].end; c.Overlaps(0, g, g+1) {
			t.Fatalf("gap after run %d covered", r)
		}
	}
}

func TestCoverageEvictsFromTheFrontInAnyOrder(t *testing.T) {
	const n, capacity = 20_000, 1000
	for _, order := range []string{"in-order", "reverse", "random"} {
		t.Run(order, func(t *testing.T) {
			ivs := coverageArrivals(n, false, order)
			c := NewCoverage[int](Config{Retention: 1 << 50, MaxEntries: capacity})
			for _, v := range ivs {
				c.Add(0, v.start, v.end)
			}
			checkCoverageInvariants(t, c)
			got := coverageUnion(c, 0)
			if len(got) != capacity {
				t.Fatalf("%d intervals, want %d", len(got), capacity)
			}
			// Disjoint, so the cap alone decides. In order the oldest go
			// as newer ones come; reversed, the first capacity are the
			// newest and each later one goes as it comes, being the oldest.
			newest := naiveUnion(ivs)[n-capacity:]
			if order != "random" && !slices.Equal(got, newest) {
				t.Fatalf("not the newest %d intervals: [%+v, %+v]", capacity, got[0], got[capacity-1])
			}
			if order == "random" && got[capacity-1] != newest[capacity-1] {
				t.Fatalf("the newest interval %+v went, kept %+v last", newest[capacity-1], got[capacity-1])
			}
		})
	}
}

func TestCoverageJoinsChunksThatEvictionsLeaveSparse(t *testing.T) {
	// [10i, 10i+5) for i < 1000 fill chunks of 256, 256, 256 and 232.
	c := NewCoverage[int](Config{Retention: 10_000, MaxEntries: 10_000})
	for i := range int64(1000) {
		c.Add(0, 10*i, 10*i+5)
	}
	if got := len(c.scopes[0].chunks); got != 4 {
		t.Fatalf("%d chunks, want 4", got)
	}
	c.Add(0, 2560, 4555) // merges 256..455, leaving 57 in the second chunk
	c.Add(0, 12490, 12496)
	// The horizon, 2496, evicts 0..249, leaving 6 in the first chunk:
	// with the second's 57, one chunk's worth.
	checkCoverageInvariants(t, c)
	if got := c.Intervals(0); got != 1000-199-250+1 {
		t.Errorf("%d intervals, want %d", got, 1000-199-250+1)
	}
	if got := c.scopes[0].chunks[0].len(); got != 6+57 {
		t.Errorf("first chunk holds %d intervals, want the 63 of the first two", got)
	}
	for _, tt := range []struct {
		s, e int64
		want bool
	}{
		{2490, 2495, false}, {2500, 2501, true}, {3000, 3001, true}, {4555, 4560, false}, {4560, 4561, true}, {12495, 12500, true},
	} {
		if got := c.Overlaps(0, tt.s, tt.e); got != tt.want {
			t.Errorf("Overlaps(%d, %d) = %v, want %v", tt.s, tt.e, got, tt.want)
		}
	}
}
