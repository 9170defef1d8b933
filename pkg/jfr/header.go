package jfr

import (
	"encoding/binary"
	"math/bits"
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

// EpochNanos converts a tick timestamp of this chunk to Unix epoch
// nanoseconds: startNanos + (ticks - startTicks) * 1e9 / ticksPerSecond,
// computed exactly (128-bit intermediate, truncated toward zero).
func (h *Header) EpochNanos(ticks int64) int64 {
	return h.StartNanos + h.Nanos(ticks-h.StartTicks)
}

// Nanos converts a tick duration to nanoseconds, exactly and without
// overflow for any duration that fits in int64 nanoseconds.
func (h *Header) Nanos(ticks int64) int64 {
	tps := h.TicksPerSecond
	if tps == 1_000_000_000 || tps <= 0 {
		return ticks
	}
	neg := ticks < 0
	u := uint64(ticks)
	if neg {
		u = -u
	}
	hi, lo := bits.Mul64(u, 1_000_000_000)
	if hi >= uint64(tps) { // quotient would not fit in 64 bits
		if neg {
			return -1 << 63
		}
		return 1<<63 - 1
	}
	q, _ := bits.Div64(hi, lo, uint64(tps))
	if neg {
		return -int64(q)
	}
	return int64(q)
}
