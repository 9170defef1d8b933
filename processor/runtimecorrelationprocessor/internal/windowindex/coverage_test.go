package windowindex

import (
	"math/rand/v2"
	"testing"
)

func TestCoverageAnswersLikeTheIntervalsItWasGiven(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	c := NewCoverage[int](Config{Retention: 1 << 40, MaxEntries: 1 << 20})
	type iv struct{ s, e int64 }
	var added []iv
	for range 400 {
		s := int64(rng.IntN(100_000))
		e := s + int64(rng.IntN(300))
		c.Add(0, s, e)
		added = append(added, iv{s, e})
	}
	for range 5000 {
		s := int64(rng.IntN(100_000))
		e := s + int64(rng.IntN(200))
		want := false
		for _, a := range added {
			if a.s < e && a.e > s && a.e > a.s && e > s {
				want = true
				break
			}
		}
		if got := c.Overlaps(0, s, e); got != want {
			t.Fatalf("Overlaps(%d, %d) = %v, want %v", s, e, got, want)
		}
	}
	if c.Overlaps(1, 0, 1<<40) {
		t.Error("another scope is covered")
	}
}

func TestCoverageMergesAndTrims(t *testing.T) {
	c := NewCoverage[string](Config{Retention: 100, MaxEntries: 3})
	for _, iv := range [][2]int64{{10, 20}, {30, 40}, {20, 30}, {50, 60}, {55, 58}, {0, 5}} {
		c.Add("p", iv[0], iv[1])
	}
	// [0,5) [10,40) [50,60): touching intervals merged, contained absorbed.
	if n := c.Intervals("p"); n != 3 {
		t.Fatalf("%d intervals, want 3", n)
	}
	tests := []struct {
		s, e int64
		want bool
	}{
		{5, 10, false}, {39, 41, true}, {40, 50, false}, {4, 6, true}, {57, 57, false}, {60, 70, false},
	}
	for _, tt := range tests {
		if got := c.Overlaps("p", tt.s, tt.e); got != tt.want {
			t.Errorf("Overlaps(%d, %d) = %v, want %v", tt.s, tt.e, got, tt.want)
		}
	}
	c.Add("p", 80, 90) // cap 3: [0,5) goes
	if c.Overlaps("p", 0, 5) || c.Intervals("p") != 3 {
		t.Errorf("cap: %d intervals, [0,5) covered %v", c.Intervals("p"), c.Overlaps("p", 0, 5))
	}
	c.Add("q", 145, 150) // horizon 50: [10,40) goes from p when p is next trimmed
	c.Add("p", 200, 210) // horizon 110: everything of p before goes
	if c.Intervals("p") != 1 || !c.Overlaps("p", 205, 206) {
		t.Errorf("retention: p holds %d intervals", c.Intervals("p"))
	}
	for range sweepEvery {
		c.Add("r", 1000, 1001)
	}
	if c.Scopes() != 1 {
		t.Errorf("after a sweep %d scopes remain, want only r", c.Scopes())
	}
}
