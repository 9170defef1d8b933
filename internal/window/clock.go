package window

import (
	"fmt"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// Clock maps CLOCK_MONOTONIC nanoseconds, the clock of bpf_ktime_get_ns and
// of the JVM's -Xlog `uptimenanos`/`timenanos` decorators on Linux, to Unix
// epoch nanoseconds.
//
// The mapping is one offset, realtime − monotonic, read from the kernel by
// MeasureOffset. Monotonic time does not jump, but the realtime clock is
// slewed by NTP and stepped by an administrator, so the offset drifts: the
// owner calls Remeasure periodically (every few seconds is plenty: NTP slews
// at most 0.5 ms per second) and after a step. Conversions use the latest
// offset; they are safe for concurrent use with Remeasure.
//
// Two receivers that map their monotonic timestamps through offsets
// measured on one host agree to within the measurement error (Uncertainty,
// typically well under a microsecond) plus the drift since the last
// re-measurement, which keeps cross-runtime windows within the 1 ms the
// window model promises.
type Clock struct {
	offset      atomic.Int64
	uncertainty atomic.Int64
}

// NewClock returns a Clock whose offset has just been measured.
func NewClock() (*Clock, error) {
	c := &Clock{}
	if err := c.Remeasure(); err != nil {
		return nil, err
	}
	return c, nil
}

// NewFixedClock returns a Clock with a given offset that Remeasure never
// changes from outside tests; it is for tests and replays.
func NewFixedClock(offset int64) *Clock {
	c := &Clock{}
	c.offset.Store(offset)
	return c
}

// Remeasure reads the offset again and installs it.
func (c *Clock) Remeasure() error {
	off, unc, err := MeasureOffset()
	if err != nil {
		return err
	}
	c.offset.Store(off)
	c.uncertainty.Store(int64(unc))
	return nil
}

// ToUnixNano converts a CLOCK_MONOTONIC reading in ns to Unix epoch ns.
func (c *Clock) ToUnixNano(monotonic int64) int64 { return monotonic + c.offset.Load() }

// Offset returns the current offset, realtime − monotonic, in ns.
func (c *Clock) Offset() int64 { return c.offset.Load() }

// Uncertainty returns the half-width of the interval in which the last
// measurement read the two clocks; 0 for a fixed clock.
func (c *Clock) Uncertainty() time.Duration { return time.Duration(c.uncertainty.Load()) }

// MeasureOffset returns realtime − monotonic in ns and the uncertainty of
// that figure. It brackets one CLOCK_MONOTONIC read between two
// CLOCK_REALTIME reads, several times, and keeps the tightest bracket, so
// that a preemption between the reads cannot skew the result.
func MeasureOffset() (offset int64, uncertainty time.Duration, err error) {
	const tries = 7
	best := int64(-1)
	for range tries {
		var r1, m, r2 unix.Timespec
		if err := unix.ClockGettime(unix.CLOCK_REALTIME, &r1); err != nil {
			return 0, 0, fmt.Errorf("window: read CLOCK_REALTIME: %w", err)
		}
		if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &m); err != nil {
			return 0, 0, fmt.Errorf("window: read CLOCK_MONOTONIC: %w", err)
		}
		if err := unix.ClockGettime(unix.CLOCK_REALTIME, &r2); err != nil {
			return 0, 0, fmt.Errorf("window: read CLOCK_REALTIME: %w", err)
		}
		width := r2.Nano() - r1.Nano()
		if width < 0 {
			// The realtime clock was stepped back between the reads.
			continue
		}
		if best < 0 || width < best {
			best = width
			offset = r1.Nano() + width/2 - m.Nano()
		}
	}
	if best < 0 {
		return 0, 0, fmt.Errorf("window: CLOCK_REALTIME went backwards in each of %d reads", tries)
	}
	return offset, time.Duration(best / 2), nil
}

// Monotonic returns the current CLOCK_MONOTONIC reading in ns, the clock
// Clock converts from.
func Monotonic() int64 {
	var ts unix.Timespec
	// CLOCK_MONOTONIC cannot fail on Linux for a valid pointer.
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Nano()
}
