package window

import (
	"testing"
	"time"
)

func TestClockMapsMonotonicToWallTime(t *testing.T) {
	c, err := NewClock()
	if err != nil {
		t.Fatal(err)
	}
	if u := c.Uncertainty(); u <= 0 || u > 5*time.Millisecond {
		t.Errorf("Uncertainty = %s, want (0, 5ms]", u)
	}
	// A monotonic reading taken between two wall-clock readings maps
	// inside them, give or take the measurement's uncertainty.
	before := time.Now().UnixNano()
	got := c.ToUnixNano(Monotonic())
	after := time.Now().UnixNano()
	slack := int64(c.Uncertainty()) + int64(time.Millisecond)
	if got < before-slack || got > after+slack {
		t.Errorf("ToUnixNano(now) = %d, want within [%d, %d] ± %d", got, before, after, slack)
	}
}

func TestClockRemeasureAgrees(t *testing.T) {
	c, err := NewClock()
	if err != nil {
		t.Fatal(err)
	}
	first := c.Offset()
	if err := c.Remeasure(); err != nil {
		t.Fatal(err)
	}
	// Without a clock step the two offsets differ by NTP slew only.
	if d := c.Offset() - first; d < -int64(time.Millisecond) || d > int64(time.Millisecond) {
		t.Errorf("offset moved by %d ns between two measurements", d)
	}
}

func TestFixedClock(t *testing.T) {
	c := NewFixedClock(1_000)
	if got := c.ToUnixNano(234); got != 1_234 {
		t.Fatalf("ToUnixNano = %d, want 1234", got)
	}
	if c.Uncertainty() != 0 {
		t.Fatalf("Uncertainty = %s, want 0", c.Uncertainty())
	}
}
