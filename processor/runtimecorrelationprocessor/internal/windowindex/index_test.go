package windowindex

import (
	"errors"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"
)

func entry(start, end int64, kind uint8) Entry { return Entry{Start: start, End: end, Kind: kind} }

// heldCapacity is how many entries a scope's slices have room for.
func heldCapacity[K comparable](s *scope[K]) int {
	n := cap(s.long)
	for _, c := range s.chunks {
		n += cap(c.e)
	}
	return n
}

func starts(es []Entry) []int64 {
	out := make([]int64, len(es))
	for i, e := range es {
		out[i] = e.Start
	}
	return out
}

func TestOverlappingReturnsExactlyTheIntersectingEntries(t *testing.T) {
	x := New[string](Config{Retention: 1e12, MaxEntries: 100})
	for _, e := range []Entry{
		entry(100, 200, 0),
		entry(150, 150, 1), // empty: overlaps nothing
		entry(190, 400, 2),
		entry(300, 310, 3),
		entry(10, 1000, 4), // long, inserted out of order
		entry(500, 600, 5),
	} {
		if r, err := x.Insert("p", e); err != nil || r != Inserted {
			t.Fatalf("insert %v: %v %v", e, r, err)
		}
	}
	tests := []struct {
		name       string
		start, end int64
		want       []int64
	}{
		{"inside the first", 120, 130, []int64{10, 100}},
		{"touching an end is not overlapping", 200, 300, []int64{10, 190}},
		{"touching a start is not overlapping", 400, 500, []int64{10}},
		{"spanning several", 0, 2000, []int64{10, 100, 190, 300, 500}},
		{"after everything", 1000, 2000, nil},
		{"before everything", 0, 10, nil},
		{"empty query", 150, 150, nil},
		{"reversed query", 300, 150, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := starts(x.AppendOverlapping(nil, "p", tt.start, tt.end))
			if !slices.Equal(got, tt.want) && (len(got) != 0 || len(tt.want) != 0) {
				t.Errorf("overlapping [%d,%d) = %v, want %v", tt.start, tt.end, got, tt.want)
			}
		})
	}
	if got := x.AppendOverlapping(nil, "other", 0, 2000); len(got) != 0 {
		t.Errorf("another scope sees %v", got)
	}
}

func TestInsertKeepsStartOrderWhateverTheArrivalOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	x := New[int](Config{Retention: 1 << 40, MaxEntries: 10000})
	var want []int64
	for i := range 2000 {
		s := int64(rng.IntN(100000) + 1)
		if _, err := x.Insert(i%3, Entry{Start: s, End: s + 5, ThreadID: int64(i)}); err != nil {
			t.Fatal(err)
		}
		if i%3 == 1 {
			want = append(want, s)
		}
	}
	sort.Slice(want, func(i, j int) bool { return want[i] < want[j] })
	got := starts(x.AppendOverlapping(nil, 1, 0, 1<<40))
	if !slices.Equal(got, want) {
		t.Fatalf("scope 1 holds %d entries out of order or lost (want %d)", len(got), len(want))
	}
	if x.Len() != 2000 {
		t.Errorf("Len = %d, want 2000", x.Len())
	}
}

func TestDuplicatesAreRefused(t *testing.T) {
	x := New[string](Config{Retention: 1e12, MaxEntries: 100})
	e := Entry{Start: 100, End: 200, ThreadID: 7, PID: 42, Kind: 1}
	for i, want := range []Result{Inserted, Duplicate} {
		if r, _ := x.Insert("p", e); r != want {
			t.Fatalf("insert #%d: %v, want %v", i, r, want)
		}
	}
	// Same start, any other field different: a distinct entry.
	for _, other := range []Entry{
		{Start: 100, End: 201, ThreadID: 7, PID: 42, Kind: 1},
		{Start: 100, End: 200, ThreadID: 8, PID: 42, Kind: 1},
		{Start: 100, End: 200, ThreadID: 7, PID: 43, Kind: 1},
		{Start: 100, End: 200, ThreadID: 7, PID: 42, Kind: 2},
	} {
		if r, _ := x.Insert("p", other); r != Inserted {
			t.Errorf("insert %+v: %v, want inserted", other, r)
		}
	}
	// A duplicate arriving out of order is found too.
	if _, err := x.Insert("p", entry(500, 600, 0)); err != nil {
		t.Fatal(err)
	}
	if r, _ := x.Insert("p", e); r != Duplicate {
		t.Errorf("out-of-order duplicate: %v", r)
	}
	if x.Len() != 6 {
		t.Errorf("Len = %d, want 6", x.Len())
	}
}

func TestRetentionEvictsAndRefusesOldEntries(t *testing.T) {
	x := New[string](Config{Retention: 1000, MaxEntries: 100})
	for _, s := range []int64{100, 500, 900} {
		if _, err := x.Insert("a", entry(s, s+10, 0)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := x.Insert("b", entry(1200, 1210, 0)); err != nil { // horizon 200: evicts 100
		t.Fatal(err)
	}
	if got := starts(x.AppendOverlapping(nil, "a", 0, 1<<40)); !slices.Equal(got, []int64{500, 900}) {
		t.Errorf("scope a after horizon 200: %v", got)
	}
	if r, _ := x.Insert("a", entry(150, 160, 0)); r != TooOld {
		t.Errorf("entry before the horizon: %v, want too_old", r)
	}
	if _, err := x.Insert("b", entry(2000, 2010, 0)); err != nil { // horizon 1000: a is gone
		t.Fatal(err)
	}
	if x.Has("a") {
		t.Errorf("scope a still present with %d entries", x.ScopeLen("a"))
	}
	if got, want := x.Stats(), (Stats{EvictedRetention: 3}); got != want {
		t.Errorf("stats %+v, want %+v", got, want)
	}
	if x.Len() != 2 || x.Horizon() != 1000 {
		t.Errorf("Len %d horizon %d, want 2 and 1000", x.Len(), x.Horizon())
	}
}

func TestCapEvictsTheOldestAcrossScopes(t *testing.T) {
	x := New[string](Config{Retention: 1 << 40, MaxEntries: 4})
	ins := func(k string, s int64) {
		t.Helper()
		if _, err := x.Insert(k, entry(s, s+1, 0)); err != nil {
			t.Fatal(err)
		}
	}
	ins("a", 10)
	ins("b", 5)
	ins("a", 30)
	ins("b", 20)
	ins("a", 40) // evicts b@5
	ins("b", 1)  // out of order and the oldest: evicted at once
	ins("b", 50) // evicts a@10
	if got := starts(x.AppendOverlapping(nil, "a", 0, 100)); !slices.Equal(got, []int64{30, 40}) {
		t.Errorf("a: %v", got)
	}
	if got := starts(x.AppendOverlapping(nil, "b", 0, 100)); !slices.Equal(got, []int64{20, 50}) {
		t.Errorf("b: %v", got)
	}
	if got := x.Stats(); got.EvictedCap != 3 || got.EvictedRetention != 0 {
		t.Errorf("stats %+v, want 3 evicted by the cap", got)
	}
}

func TestBurstBeyondTheCapStaysBounded(t *testing.T) {
	const maxEntries = 1000
	x := New[int](Config{Retention: 1 << 40, MaxEntries: maxEntries})
	for i := range 100 * maxEntries {
		if _, err := x.Insert(i%7, entry(int64(i), int64(i)+3, 0)); err != nil {
			t.Fatal(err)
		}
		if x.Len() > maxEntries {
			t.Fatalf("after %d inserts Len = %d > cap", i+1, x.Len())
		}
	}
	if got := x.Stats().EvictedCap; got != 99*maxEntries {
		t.Errorf("evicted %d, want %d", got, 99*maxEntries)
	}
	// The newest entries are the ones kept.
	total := 0
	for k := range 7 {
		for _, e := range x.AppendOverlapping(nil, k, 0, 1<<40) {
			if e.Start < 99*maxEntries {
				t.Fatalf("kept an old entry %d", e.Start)
			}
			total++
		}
	}
	if total != maxEntries {
		t.Errorf("queries see %d entries, want %d", total, maxEntries)
	}
	// Evicted room was given back: no scope holds much more than its share.
	for _, s := range x.scopes {
		if c := heldCapacity(s); c > 4*maxEntries {
			t.Errorf("scope %d keeps room for %d entries", s.key, c)
		}
	}
}

func TestLongEntryGoneNoLongerWidensQueries(t *testing.T) {
	x := New[string](Config{Retention: 1 << 40, MaxEntries: 64})
	if _, err := x.Insert("p", entry(0, 1_000_000, 0)); err != nil {
		t.Fatal(err)
	}
	for i := int64(1); i < 200; i++ {
		if _, err := x.Insert("p", entry(i*10, i*10+5, 0)); err != nil {
			t.Fatal(err)
		}
	}
	if s := x.scopes["p"]; s.maxDur != 5 {
		t.Errorf("maxDur %d after the long entry was evicted, want 5", s.maxDur)
	}
	if got := starts(x.AppendOverlapping(nil, "p", 1992, 1994)); !slices.Equal(got, []int64{1990}) {
		t.Errorf("got %v", got)
	}
}

func TestInvalidEntryIsAnError(t *testing.T) {
	x := New[string](Config{Retention: 10, MaxEntries: 10})
	if _, err := x.Insert("p", entry(10, 5, 0)); !errors.Is(err, ErrInvalidEntry) {
		t.Errorf("err = %v, want ErrInvalidEntry", err)
	}
	if x.Len() != 0 {
		t.Errorf("Len = %d", x.Len())
	}
}

func TestOverlappingMatchesBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	x := New[int](Config{Retention: 1 << 40, MaxEntries: 1 << 20})
	var all []Entry
	for i := range 3000 {
		s := int64(rng.IntN(1_000_000))
		e := Entry{Start: s, End: s + int64(rng.ExpFloat64()*2000), ThreadID: int64(i)}
		if _, err := x.Insert(0, e); err != nil {
			t.Fatal(err)
		}
		all = append(all, e)
	}
	for range 500 {
		s := int64(rng.IntN(1_000_000))
		end := s + int64(rng.IntN(20000))
		var want []int64
		for _, e := range all {
			if e.Start < end && e.End > s && e.End > e.Start {
				want = append(want, e.ThreadID)
			}
		}
		var got []int64
		for _, e := range x.AppendOverlapping(nil, 0, s, end) {
			got = append(got, e.ThreadID)
		}
		slices.Sort(want)
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Fatalf("[%d,%d): got %d entries, want %d", s, end, len(got), len(want))
		}
	}
}
