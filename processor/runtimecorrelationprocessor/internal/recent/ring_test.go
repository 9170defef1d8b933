package recent

import (
	"slices"
	"testing"
)

func values(r *Ring[int]) []int {
	var out []int
	r.All(func(v *int) bool { out = append(out, *v); return true })
	return out
}

// TestRingKeepsTheNewestWithinBothBounds: whichever bound binds, the ring
// holds the newest values in order, their cost within MaxBytes.
func TestRingKeepsTheNewestWithinBothBounds(t *testing.T) {
	tests := []struct {
		name      string
		maxCount  int
		maxBytes  int64
		costs     []int64 // value i costs costs[i]
		want      []int
		wantBytes int64
	}{
		{"under both", 4, 100, []int64{10, 10, 10}, []int{0, 1, 2}, 30},
		{"count binds", 3, 100, []int64{10, 10, 10, 10, 10}, []int{2, 3, 4}, 30},
		{"bytes bind", 10, 25, []int64{10, 10, 10, 10}, []int{2, 3}, 20},
		{"a big value pushes out several", 10, 30, []int64{10, 10, 10, 25}, []int{3}, 25},
		{"a value over the whole bound is not kept", 10, 30, []int64{10, 31, 10}, []int{0, 2}, 20},
		{"past the growth step", 100, 1 << 20, repeat(1, 150), span(50, 150), 100},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := New[int](tt.maxCount, tt.maxBytes)
			for i, c := range tt.costs {
				r.Add(i, c)
			}
			if got := values(r); !slices.Equal(got, tt.want) {
				t.Errorf("held %v, want %v", got, tt.want)
			}
			if r.Len() != len(tt.want) || r.Bytes() != tt.wantBytes {
				t.Errorf("Len %d Bytes %d, want %d and %d", r.Len(), r.Bytes(), len(tt.want), tt.wantBytes)
			}
			if got, want := r.Evicted(), int64(len(tt.costs)-len(tt.want)); got != want {
				t.Errorf("Evicted %d, want %d", got, want)
			}
		})
	}
}

// TestRingClearsWhatItEvicts: an evicted value's slot no longer refers to
// it, so what it held can be collected.
func TestRingClearsWhatItEvicts(t *testing.T) {
	r := New[*[1 << 10]byte](2, 1<<20)
	for range 5 {
		r.Add(new([1 << 10]byte), 1)
	}
	nonNil := 0
	for _, s := range r.slots {
		if s.v != nil {
			nonNil++
		}
	}
	if nonNil != 2 {
		t.Errorf("%d slots still refer to a value, want the 2 held", nonNil)
	}
}

// TestRingAllStopsWhenAsked: All ends at the first false.
func TestRingAllStopsWhenAsked(t *testing.T) {
	r := New[int](8, 100)
	for i := range 5 {
		r.Add(i, 1)
	}
	var seen []int
	r.All(func(v *int) bool { seen = append(seen, *v); return *v < 2 })
	if !slices.Equal(seen, []int{0, 1, 2}) {
		t.Errorf("saw %v, want 0 1 2", seen)
	}
}

func repeat(c int64, n int) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = c
	}
	return out
}

func span(from, to int) []int {
	var out []int
	for i := from; i < to; i++ {
		out = append(out, i)
	}
	return out
}
