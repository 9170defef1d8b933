package windowindex

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// bruteForce is the specification an Index must answer like: its entries
// in a plain slice, scanned in full.
type bruteForce []Entry

func (b bruteForce) overlapping(start, end int64) []Entry {
	var out []Entry
	for _, e := range b {
		if e.Start < end && e.End > start && e.End > e.Start && end > start {
			out = append(out, e)
		}
	}
	slices.SortFunc(out, compareEntries)
	return out
}

// arrivals returns n entries of one scope, 1 ms apart on average with
// some sharing a start, mostly up to 2 ms long with one in a hundred up to
// a second, in the order named.
func arrivals(n int, order string) []Entry {
	rng := rand.New(rand.NewPCG(21, 22))
	es := make([]Entry, n)
	t := int64(1_700_000_000_000_000_000)
	for i := range es {
		if i%7 != 0 { // every seventh shares the previous start
			t += 1 + rng.Int64N(2_000_000)
		}
		d := rng.Int64N(2_000_000)
		if i%100 == 0 {
			d = rng.Int64N(1_000_000_000)
		}
		es[i] = Entry{Start: t, End: t + d, ThreadID: int64(i % 16), Kind: uint8(i % 5)}
	}
	switch order {
	case "reverse":
		slices.Reverse(es)
	case "random":
		rng.Shuffle(n, func(i, j int) { es[i], es[j] = es[j], es[i] })
	case "reverse batches": // batches of 50 in order, the batches newest first
		for i := 0; i < n; i += 50 {
			slices.Reverse(es[i:min(i+50, n)])
		}
		slices.Reverse(es)
	case "late tenth": // one in ten arrives 200 places late
		for i := 200; i < n; i += 10 {
			late := es[i-200]
			copy(es[i-200:i], es[i-199:i+1])
			es[i] = late
		}
	}
	return es
}

// checkInvariants asserts what the index's structure promises: chunks
// bounded and in order, long entries apart, counts and the lookback exact
// or conservative.
func checkInvariants[K comparable](t *testing.T, x *Index[K]) {
	t.Helper()
	total := 0
	for _, s := range x.scopes {
		n := 0
		var prev *Entry
		for ci := range s.chunks {
			c := &s.chunks[ci]
			live := c.live()
			if len(live) == 0 || cap(c.e) > chunkSize {
				t.Fatalf("chunk %d holds %d entries in room for %d", ci, len(live), cap(c.e))
			}
			for i := range live {
				e := &live[i]
				if prev != nil && compareEntries(*prev, *e) >= 0 {
					t.Fatalf("chunk %d entry %d out of order: %+v after %+v", ci, i, *e, *prev)
				}
				if e.Duration() > c.summary.maxDur || c.summary.maxDur > s.maxDur || e.Duration() > x.cfg.LongDuration {
					t.Fatalf("entry of %d ns in a chunk with maxDur %d, scope %d, long %d", e.Duration(), c.summary.maxDur, s.maxDur, x.cfg.LongDuration)
				}
				prev = e
			}
			n += len(live)
		}
		if n != s.n {
			t.Fatalf("scope counts %d entries in chunks, holds %d", s.n, n)
		}
		if !slices.IsSortedFunc(s.long, compareEntries) || len(s.long) > x.cfg.MaxLongPerScope {
			t.Fatalf("long entries unsorted or %d > %d", len(s.long), x.cfg.MaxLongPerScope)
		}
		for _, e := range s.long {
			if e.Duration() <= x.cfg.LongDuration || e.Duration() > x.cfg.Retention {
				t.Fatalf("long entry of %d ns", e.Duration())
			}
		}
		if s.len() > x.cfg.MaxPerScope || s.len() == 0 {
			t.Fatalf("scope holds %d entries, cap %d", s.len(), x.cfg.MaxPerScope)
		}
		if x.oldest[s.heapIdx] != s || s.oldest != s.first().Start {
			t.Fatalf("scope not at its heap index")
		}
		total += s.len()
	}
	if total != x.total || len(x.oldest) != len(x.scopes) {
		t.Fatalf("index counts %d entries in %d heap slots, holds %d in %d scopes", x.total, len(x.oldest), total, len(x.scopes))
	}
	for i := 1; i < len(x.oldest); i++ {
		if x.oldest[(i-1)/2].first().Start > x.oldest[i].first().Start {
			t.Fatalf("heap out of order at %d", i)
		}
	}
}

func TestAnyArrivalOrderAnswersLikeBruteForce(t *testing.T) {
	const n = 100_000
	for _, order := range []string{"in-order", "reverse", "random", "reverse batches", "late tenth"} {
		t.Run(order, func(t *testing.T) {
			es := arrivals(n, order)
			// One in a hundred entries is long, and all of them are kept.
			x := New[int](Config{Retention: 1 << 50, MaxEntries: n, LongDuration: 2_000_000, MaxLongPerScope: n})
			for _, e := range es {
				if r, err := x.Insert(0, e); err != nil || r != Inserted {
					t.Fatalf("insert %+v: %v %v", e, r, err)
				}
			}
			checkInvariants(t, x)
			if x.Len() != n || x.Stats() != (Stats{}) {
				t.Fatalf("Len %d stats %+v, want %d and nothing evicted", x.Len(), x.Stats(), n)
			}
			if long := len(x.scopes[0].long); long < n/200 || long > n/100 {
				t.Errorf("%d long entries kept apart, want about %d", long, n/100)
			}
			// Every entry is found again as a duplicate.
			for _, i := range []int{0, n / 3, n / 2, n - 1} {
				if r, _ := x.Insert(0, es[i]); r != Duplicate {
					t.Errorf("re-inserting entry %d: %v", i, r)
				}
			}
			oracle := bruteForce(es)
			sorted := slices.SortedFunc(slices.Values(es), compareEntries)
			first, last := sorted[0].Start, sorted[n-1].Start
			rng := rand.New(rand.NewPCG(23, 24))
			for q := range 300 {
				s := first - 10_000_000 + rng.Int64N(last-first+20_000_000)
				end := s + rng.Int64N([]int64{1, 100_000, 20_000_000, 2_000_000_000}[q%4])
				got := x.AppendOverlapping(nil, 0, s, end)
				if want := oracle.overlapping(s, end); !slices.Equal(got, want) {
					t.Fatalf("[%d, %d): %d entries, want %d (in order)", s, end, len(got), len(want))
				}
			}
			if got := x.AppendOverlapping(nil, 0, first, last+1); !slices.Equal(got, oracle.overlapping(first, last+1)) {
				t.Fatalf("whole range: %d entries", len(got))
			}
		})
	}
}

func TestChunksStayDenseWhateverTheOrder(t *testing.T) {
	const n = 100_000
	tests := []struct {
		order string
		// room is the most entries' room held per entry kept.
		room float64
	}{
		{"in-order", 1.01},
		{"reverse", 1.01},
		{"random", 2.05},
	}
	for _, tt := range tests {
		t.Run(tt.order, func(t *testing.T) {
			x := New[int](Config{Retention: 1 << 50, MaxEntries: n})
			for i, e := range ordered(n, tt.order) {
				// Distinct starts ordered as arrivals' order would.
				if _, err := x.Insert(0, e); err != nil {
					t.Fatalf("insert %d: %v", i, err)
				}
			}
			checkInvariants(t, x)
			if got := float64(heldCapacity(x.scopes[0])) / n; got > tt.room {
				t.Errorf("room for %.2f entries per entry, want at most %.2f", got, tt.room)
			}
		})
	}
}

func TestEqualStartsAreFoundAsDuplicatesInAnyOrder(t *testing.T) {
	// Many windows of one start (threads stopped by one safepoint): a
	// duplicate is still one binary search away, whatever their order.
	rng := rand.New(rand.NewPCG(25, 26))
	x := New[string](Config{Retention: 1e12, MaxEntries: 10_000})
	var es []Entry
	for i := range 3000 {
		es = append(es, Entry{Start: 1000, End: 2000 + int64(i%3), ThreadID: int64(i)})
	}
	rng.Shuffle(len(es), func(i, j int) { es[i], es[j] = es[j], es[i] })
	for i, want := range []Result{Inserted, Duplicate} {
		for _, e := range es {
			if r, _ := x.Insert("p", e); r != want {
				t.Fatalf("pass %d, %+v: %v, want %v", i, e, r, want)
			}
		}
	}
	checkInvariants(t, x)
	if got := x.AppendOverlapping(nil, "p", 1999, 2000); len(got) != 3000 || !slices.IsSortedFunc(got, compareEntries) {
		t.Errorf("%d entries overlap, want 3000 in order", len(got))
	}
}

// boundedOracle is a one-scope index as a plain slice, with the same bounds:
// clipping, refusal before the horizon, duplicates, eviction of the smallest.
type boundedOracle struct {
	cfg       Config
	es        bruteForce
	watermark int64
	seen      bool
}

func (o *boundedOracle) insert(e Entry) Result {
	if o.seen && e.Start < o.watermark-o.cfg.Retention {
		return TooOld
	}
	e.End = min(e.End, e.Start+o.cfg.Retention)
	if slices.Contains(o.es, e) {
		return Duplicate
	}
	o.es = append(o.es, e)
	if !o.seen || e.Start > o.watermark {
		o.watermark, o.seen = e.Start, true
	}
	o.es = slices.DeleteFunc(o.es, func(x Entry) bool { return x.Start < o.watermark-o.cfg.Retention })
	for len(o.es) > o.cfg.MaxEntries {
		oldest := slices.Index(o.es, slices.MinFunc(o.es, compareEntries))
		o.es = slices.Delete(o.es, oldest, oldest+1)
	}
	return Inserted
}

func TestBoundsMatchABoundedBruteForce(t *testing.T) {
	for _, order := range []string{"in-order", "reverse", "random", "late tenth"} {
		t.Run(order, func(t *testing.T) {
			cfg := Config{Retention: 2_000_000_000, MaxEntries: 700, LongDuration: 100_000_000}
			x := New[int](cfg)
			o := &boundedOracle{cfg: cfg}
			rng := rand.New(rand.NewPCG(27, 28))
			es := arrivals(6000, order)
			for i, e := range es {
				if i%10 == 0 { // resent: a duplicate, or too old by now
					e = es[rng.IntN(i+1)]
				}
				if i%500 == 0 { // far longer than the retention
					e.End = e.Start + 10*cfg.Retention
				}
				want := o.insert(e)
				if got, err := x.Insert(0, e); err != nil || got != want {
					t.Fatalf("insert %d %+v: %v %v, want %v", i, e, got, err, want)
				}
				if i%97 != 0 {
					continue
				}
				checkInvariants(t, x)
				if x.Len() != len(o.es) {
					t.Fatalf("after %d: Len %d, want %d", i, x.Len(), len(o.es))
				}
				for range 20 {
					s := e.Start - 50_000_000 + rng.Int64N(100_000_000)
					end := s + rng.Int64N(50_000_000)
					if got, want := x.AppendOverlapping(nil, 0, s, end), o.es.overlapping(s, end); !slices.Equal(got, want) {
						t.Fatalf("after %d, [%d, %d): %d entries, want %d", i, s, end, len(got), len(want))
					}
				}
			}
			if st := x.Stats(); st.Clipped == 0 || st.EvictedCap+st.EvictedScopeCap == 0 {
				t.Errorf("stats %+v: the bounds were not exercised", st)
			}
		})
	}
}

func TestLongWindowIsClippedAndDoesNotWidenLaterQueries(t *testing.T) {
	const n = 20_000
	const retention = int64(n) * 1_000_000
	es := ordered(n, "in-order") // 100 µs windows, 1 ms apart
	tests := []struct {
		name string
		long Entry
	}{
		{"as long as the retention", Entry{Start: es[0].Start, End: es[0].Start + retention, Kind: 1}},
		{"ten retentions long, clipped", Entry{Start: es[0].Start, End: es[0].Start + 10*retention, Kind: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			plain := New[int](Config{Retention: retention, MaxEntries: n + 1})
			withLong := New[int](Config{Retention: retention, MaxEntries: n + 1})
			if _, err := withLong.Insert(0, tt.long); err != nil {
				t.Fatal(err)
			}
			for _, e := range es {
				for _, x := range []*Index[int]{plain, withLong} {
					if _, err := x.Insert(0, e); err != nil {
						t.Fatal(err)
					}
				}
			}
			wantClipped := uint64(0)
			if tt.long.Duration() > retention {
				wantClipped = 1
			}
			if st := withLong.Stats(); st.Clipped != wantClipped {
				t.Errorf("clipped %d, want %d", st.Clipped, wantClipped)
			}
			if got := withLong.scopes[0].maxDur; got != plain.scopes[0].maxDur || got != 100_000 {
				t.Errorf("lookback %d ns with the long window, %d without; want 100000", got, plain.scopes[0].maxDur)
			}
			clippedLong := Entry{Start: tt.long.Start, End: tt.long.Start + retention, Kind: 1}
			rng := rand.New(rand.NewPCG(29, 30))
			const queries = 1000
			for range queries {
				s := es[0].Start + rng.Int64N(retention-20_000_000)
				got := withLong.AppendOverlapping(nil, 0, s, s+20_000_000)
				want := plain.AppendOverlapping(nil, 0, s, s+20_000_000)
				// The long window is in every answer, in its place, cut to the retention.
				want = append([]Entry{clippedLong}, want...)
				slices.SortFunc(want, compareEntries)
				if !slices.Equal(got, want) {
					t.Fatalf("[%d, +20ms): %d entries, want %d", s, len(got), len(want))
				}
			}
			// Each query looked at one entry more: the long window, not the scope.
			if withLong.visited != plain.visited+queries {
				t.Errorf("queries visited %d entries with the long window, %d without; want exactly %d more",
					withLong.visited, plain.visited, queries)
			}
			if per := plain.visited / queries; per > 25 {
				t.Errorf("%d entries visited per 20 ms query, want about 20", per)
			}
		})
	}
}

func TestLongEntriesAreCappedPerScope(t *testing.T) {
	x := New[string](Config{Retention: 1 << 40, MaxEntries: 1000, LongDuration: 100, MaxLongPerScope: 4})
	for i := range int64(10) {
		if _, err := x.Insert("p", entry(i*10, i*10+1000, 1)); err != nil { // long
			t.Fatal(err)
		}
		if _, err := x.Insert("p", entry(i*10+5, i*10+6, 0)); err != nil { // short
			t.Fatal(err)
		}
		if _, err := x.Insert("q", entry(i*10, i*10+1000, 1)); err != nil {
			t.Fatal(err)
		}
	}
	checkInvariants(t, x)
	var long, short []int64
	for _, e := range x.AppendOverlapping(nil, "p", 0, 1<<30) {
		if e.Kind == 1 {
			long = append(long, e.Start)
		} else {
			short = append(short, e.Start)
		}
	}
	if want := []int64{60, 70, 80, 90}; !slices.Equal(long, want) {
		t.Errorf("long entries kept %v, want the newest %v", long, want)
	}
	if len(short) != 10 || x.ScopeLen("q") != 4 {
		t.Errorf("%d short entries kept, want 10; q holds %d, want 4", len(short), x.ScopeLen("q"))
	}
	if got := x.Stats(); got != (Stats{EvictedLongCap: 12}) {
		t.Errorf("stats %+v, want 12 evicted by the long cap", got)
	}
}

func TestScopeCapKeepsOtherScopesIntact(t *testing.T) {
	const capPerScope = 100
	for _, order := range []string{"in-order", "reverse", "random"} {
		t.Run(order, func(t *testing.T) {
			x := New[string](Config{Retention: 1 << 62, MaxEntries: 1000, MaxPerScope: capPerScope})
			// Two quiet scopes hold older entries than anything the flood sends.
			for i := range int64(50) {
				for _, k := range []string{"a", "b"} {
					if _, err := x.Insert(k, entry(i, i+1, 0)); err != nil {
						t.Fatal(err)
					}
				}
			}
			flood := ordered(10*capPerScope, order)
			for _, e := range flood {
				if r, err := x.Insert("flood", e); err != nil || r != Inserted {
					t.Fatalf("insert %+v: %v %v", e, r, err)
				}
			}
			checkInvariants(t, x)
			for _, k := range []string{"a", "b"} {
				if got := starts(x.AppendOverlapping(nil, k, 0, 50)); len(got) != 50 || got[0] != 0 {
					t.Errorf("scope %s keeps %d entries from %v, want all 50", k, len(got), got[:min(1, len(got))])
				}
			}
			// The flood keeps its own newest entries.
			newest := starts(slices.SortedFunc(slices.Values(flood), compareEntries)[9*capPerScope:])
			if got := starts(x.AppendOverlapping(nil, "flood", 0, 1<<62)); !slices.Equal(got, newest) {
				t.Errorf("flood keeps %d entries, want its newest %d", len(got), len(newest))
			}
			if got, want := x.Stats(), (Stats{EvictedScopeCap: 9 * capPerScope}); got != want {
				t.Errorf("stats %+v, want %+v", got, want)
			}
		})
	}
}
