package jfr

import (
	"encoding/binary"
	"errors"
	"math"
	"testing"
)

func headerBytes(h Header) []byte {
	b := make([]byte, HeaderSize)
	copy(b, "FLR\x00")
	be := binary.BigEndian
	be.PutUint16(b[4:], h.Major)
	be.PutUint16(b[6:], h.Minor)
	be.PutUint64(b[8:], uint64(h.Size))
	be.PutUint64(b[16:], uint64(h.CheckpointOffset))
	be.PutUint64(b[24:], uint64(h.MetadataOffset))
	be.PutUint64(b[32:], uint64(h.StartNanos))
	be.PutUint64(b[40:], uint64(h.DurationNanos))
	be.PutUint64(b[48:], uint64(h.StartTicks))
	be.PutUint64(b[56:], uint64(h.TicksPerSecond))
	b[64] = h.State
	be.PutUint16(b[66:], h.Flags)
	return b
}

func TestParseHeader(t *testing.T) {
	good := Header{Major: 2, Minor: 1, Size: 700000, CheckpointOffset: 699000, MetadataOffset: 8092,
		StartNanos: 1795945303712000000, DurationNanos: 3e9, StartTicks: 2803000000, TicksPerSecond: 1e9, State: 0, Flags: 3}
	wrongMagic := headerBytes(good)
	wrongMagic[0] = 'X'
	v3 := good
	v3.Major = 3
	tests := []struct {
		name    string
		in      []byte
		want    Header
		wantErr error
	}{
		{"finished 2.1 chunk", headerBytes(good), good, nil},
		{"version 1.0 is accepted", headerBytes(Header{Major: 1, Size: 100, TicksPerSecond: 1e9}), Header{Major: 1, Size: 100, TicksPerSecond: 1e9}, nil},
		{"wrong magic", wrongMagic, Header{}, ErrMagic},
		{"version 3", headerBytes(v3), Header{}, ErrVersion},
		{"short", headerBytes(good)[:40], Header{}, ErrTruncated},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, err := ParseHeader(tt.in)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if err == nil && h != tt.want {
				t.Fatalf("header = %+v, want %+v", h, tt.want)
			}
		})
	}
	h, _ := ParseHeader(headerBytes(good))
	if !h.CompressedInts() || !h.Final() || !h.Finished() {
		t.Errorf("flags 3, state 0: compressed=%v final=%v finished=%v, want all true", h.CompressedInts(), h.Final(), h.Finished())
	}
	h.Flags, h.State = 0, 7
	if h.CompressedInts() || h.Final() || h.Finished() {
		t.Errorf("flags 0, state 7: compressed=%v final=%v finished=%v, want all false", h.CompressedInts(), h.Final(), h.Finished())
	}
}

func TestTickConversion(t *testing.T) {
	tests := []struct {
		name      string
		c         Clock
		ticks     int64
		wantEpoch int64
		wantSpan  int64
	}{
		{"nanosecond ticks", Clock{StartNanos: 1_000_000_000_000, StartTicks: 500, TicksPerSecond: 1e9}, 1500, 1_000_000_001_000, 1500},
		{"2.8 GHz TSC", Clock{StartNanos: 1e18, StartTicks: 0, TicksPerSecond: 2_800_000_000}, 2_800_000_000, 1e18 + 1e9, 1e9},
		{"1.8 GHz, fraction truncated", Clock{StartNanos: 0, StartTicks: 0, TicksPerSecond: 1_800_000_000}, 1, 0, 0},
		{"before chunk start, truncated toward zero", Clock{StartNanos: 1e12, StartTicks: 2_300_000_000, TicksPerSecond: 2_300_000_000}, 1, 1e12 - 999_999_999, 0},
		// The JDK divides in double precision: past 2^53 ticks the tick
		// count itself rounds (2^53+1 → 2^53), and so does the quotient.
		{"past 2^53 ticks at 1 GHz, rounded as a double", Clock{TicksPerSecond: 1e9}, 1<<53 + 1, 1 << 53, 1 << 53},
		{"past 2^53 ticks at 3 GHz, not the exact quotient", Clock{TicksPerSecond: 3e9}, 1<<53 + 1, 3002399751580330, 3002399751580330},
		{"huge tick count saturates instead of overflowing", Clock{TicksPerSecond: 1000}, math.MaxInt64, math.MaxInt64, math.MaxInt64},
		{"huge tick count at 2 GHz", Clock{TicksPerSecond: 2_000_000_000}, math.MaxInt64, 1 << 62, 1 << 62},
		{"no clock rate: infinite, saturated", Clock{StartTicks: 0}, 100, math.MaxInt64, math.MaxInt64},
		{"no clock rate, no ticks: NaN is 0", Clock{StartNanos: 7}, 0, 7, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.c.EpochNanos(tt.ticks); got != tt.wantEpoch {
				t.Errorf("EpochNanos(%d) = %d, want %d", tt.ticks, got, tt.wantEpoch)
			}
			if got := tt.c.Nanos(tt.ticks); got != tt.wantSpan {
				t.Errorf("Nanos(%d) = %d, want %d", tt.ticks, got, tt.wantSpan)
			}
		})
	}
	h := Header{StartNanos: 5, StartTicks: 6, TicksPerSecond: 7}
	if got := h.Clock(); got != (Clock{StartNanos: 5, StartTicks: 6, TicksPerSecond: 7}) {
		t.Errorf("Header.Clock() = %+v", got)
	}
}
