package jfr

import (
	"encoding/binary"
	"math"
)

// HeaderSize is the size in bytes of a chunk header.
const HeaderSize = 68

// Chunk header file states (byte 64).
const (
	// StateFinished is the file state of a chunk that will not change.
	StateFinished = 0
	// StateUpdating is the file state while the JVM rewrites the header.
	StateUpdating = 0xFF
)

const (
	flagCompressedInts = 1 << 0
	flagFinalChunk     = 1 << 1
)

// Header is a chunk header. Offsets are relative to the chunk start.
type Header struct {
	Major, Minor     uint16
	Size             int64 // bytes of the chunk that are valid
	CheckpointOffset int64 // the last checkpoint event; 0 = none yet
	MetadataOffset   int64 // the last metadata event; 0 = not flushed yet
	StartNanos       int64 // chunk start, Unix epoch ns
	DurationNanos    int64
	StartTicks       int64 // chunk start in ticks
	TicksPerSecond   int64
	State            uint8 // StateFinished, StateUpdating or an in-progress generation
	Flags            uint16
}

// ParseHeader decodes a chunk header from the first HeaderSize bytes of b.
// It checks the magic and the version only; callers validate the offsets
// against what they can read.
func ParseHeader(b []byte) (Header, error) {
	var h Header
	if len(b) < HeaderSize {
		return h, detail(ErrTruncated, "header needs %d bytes, have %d", HeaderSize, len(b))
	}
	if b[0] != 'F' || b[1] != 'L' || b[2] != 'R' || b[3] != 0 {
		return h, ErrMagic
	}
	be := binary.BigEndian
	h.Major = be.Uint16(b[4:])
	h.Minor = be.Uint16(b[6:])
	if h.Major != 1 && h.Major != 2 {
		return h, detail(ErrVersion, "%d.%d", h.Major, h.Minor)
	}
	h.Size = int64(be.Uint64(b[8:]))
	h.CheckpointOffset = int64(be.Uint64(b[16:]))
	h.MetadataOffset = int64(be.Uint64(b[24:]))
	h.StartNanos = int64(be.Uint64(b[32:]))
	h.DurationNanos = int64(be.Uint64(b[40:]))
	h.StartTicks = int64(be.Uint64(b[48:]))
	h.TicksPerSecond = int64(be.Uint64(b[56:]))
	h.State = b[64]
	h.Flags = be.Uint16(b[66:])
	return h, nil
}

// CompressedInts reports whether integers in the chunk are LEB128-style
// varints. Version 2 chunks say so in flag bit 0; version 1 chunks always
// use them.
func (h *Header) CompressedInts() bool {
	return h.Major < 2 || h.Flags&flagCompressedInts != 0
}

// Final reports whether the JVM marked this chunk as the last one it wrote
// before exiting.
func (h *Header) Final() bool { return h.Flags&flagFinalChunk != 0 }

// Finished reports whether the chunk is complete (file state 0).
func (h *Header) Finished() bool { return h.State == StateFinished }

// Clock returns the tick clock this header defines.
func (h *Header) Clock() Clock {
	return Clock{StartNanos: h.StartNanos, StartTicks: h.StartTicks, TicksPerSecond: h.TicksPerSecond}
}

// Clock converts tick values to Unix epoch nanoseconds and to durations in
// nanoseconds with the arithmetic of the JDK's own reader (jfr print, the
// jdk.jfr.consumer API): ticks are divided, in double precision, by
// ticksPerSecond/1e9, and the quotient is truncated toward zero, saturating
// as Java's (long) cast does. That differs from exact integer arithmetic
// only by rounding, and only for clocks other than 1 GHz, but it is what the
// JDK prints, to the nanosecond.
type Clock struct {
	StartNanos     int64 // Unix epoch ns at StartTicks
	StartTicks     int64
	TicksPerSecond int64
}

// EpochNanos converts a tick timestamp to Unix epoch nanoseconds:
// StartNanos + Nanos(ticks - StartTicks), wrapping on overflow as Java's
// long arithmetic does.
func (c Clock) EpochNanos(ticks int64) int64 {
	return c.StartNanos + c.Nanos(ticks-c.StartTicks)
}

// Nanos converts a tick duration to nanoseconds.
func (c Clock) Nanos(ticks int64) int64 {
	return javaLong(float64(ticks) / (float64(c.TicksPerSecond) / 1e9))
}

// javaLong is Java's (long) cast of a double: truncation toward zero,
// saturating at the int64 limits, NaN → 0.
func javaLong(x float64) int64 {
	switch {
	case math.IsNaN(x):
		return 0
	case x >= math.MaxInt64:
		return math.MaxInt64
	case x <= math.MinInt64:
		return math.MinInt64
	}
	return int64(x)
}
