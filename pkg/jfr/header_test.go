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
		h         Header
		ticks     int64
		wantEpoch int64
		wantSpan  int64
	}{
		{"nanosecond ticks", Header{StartNanos: 1_000_000_000_000, StartTicks: 500, TicksPerSecond: 1e9}, 1500, 1_000_000_001_000, 1500},
		{"2.8 GHz TSC", Header{StartNanos: 1e18, StartTicks: 0, TicksPerSecond: 2_800_000_000}, 2_800_000_000, 1e18 + 1e9, 1e9},
		{"1.8 GHz, fraction truncated", Header{StartNanos: 0, StartTicks: 0, TicksPerSecond: 1_800_000_000}, 1, 0, 0},
		{"before chunk start", Header{StartNanos: 1e12, StartTicks: 2_300_000_000, TicksPerSecond: 2_300_000_000}, 0, 1e12 - 1e9, 0},
		{"huge tick count does not overflow", Header{StartNanos: 0, StartTicks: 0, TicksPerSecond: 2_000_000_000}, math.MaxInt64, math.MaxInt64 / 2, math.MaxInt64 / 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.h.EpochNanos(tt.ticks); got != tt.wantEpoch {
				t.Errorf("EpochNanos(%d) = %d, want %d", tt.ticks, got, tt.wantEpoch)
			}
			if got := tt.h.Nanos(tt.ticks); got != tt.wantSpan {
				t.Errorf("Nanos(%d) = %d, want %d", tt.ticks, got, tt.wantSpan)
			}
		})
	}
	slow := Header{TicksPerSecond: 1000}
	if got := slow.Nanos(math.MaxInt64); got != math.MaxInt64 {
		t.Errorf("1 kHz clock, MaxInt64 ticks: Nanos = %d, want saturation at MaxInt64", got)
	}
}
