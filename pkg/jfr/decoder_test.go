package jfr

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestVarint(t *testing.T) {
	tests := []struct {
		name  string
		in    []byte
		want  uint64
		n     int
		short bool
	}{
		{"one byte", []byte{0x05}, 5, 1, false},
		{"two bytes", []byte{0x96, 0x01}, 150, 2, false},
		{"padded to four bytes", []byte{0x81, 0x80, 0x80, 0x00}, 1, 4, false},
		{"eight bytes", []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f}, 1<<56 - 1, 8, false},
		{"minus one takes nine bytes", []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, math.MaxUint64, 9, false},
		{"64-bit pool key", []byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01}, 1 << 56, 9, false},
		{"truncated", []byte{0x80, 0x80}, 0, 2, true},
		{"empty", nil, 0, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := &decoder{buf: tt.in, compressed: true}
			got := d.varint()
			if got != tt.want || d.pos != tt.n || d.short != tt.short {
				t.Errorf("varint(% x) = %d, pos %d, short %v; want %d, %d, %v", tt.in, got, d.pos, d.short, tt.want, tt.n, tt.short)
			}
			s := &decoder{buf: tt.in, compressed: true}
			s.skipVarint()
			if s.pos != tt.n || s.short != tt.short {
				t.Errorf("skipVarint(% x): pos %d short %v; want %d %v", tt.in, s.pos, s.short, tt.n, tt.short)
			}
		})
	}
}

func TestFixedWidthIntegers(t *testing.T) {
	d := &decoder{buf: []byte{0x01, 0x02, 0x00, 0x00, 0x01, 0x00, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfe}}
	if got := d.u16(); got != 0x0102 {
		t.Errorf("u16 = %#x, want 0x102", got)
	}
	if got := d.u32(); got != 0x100 {
		t.Errorf("u32 = %#x, want 0x100", got)
	}
	if got := int64(d.u64()); got != -2 {
		t.Errorf("u64 = %d, want -2", got)
	}
	if d.failed() || d.pos != 14 {
		t.Errorf("pos %d failed %v, want 14 false", d.pos, d.failed())
	}
}

type mapPool map[uint64]string

func (m mapPool) lookupString(k uint64) (string, bool) { s, ok := m[k]; return s, ok }

func TestStringEncodings(t *testing.T) {
	pool := mapPool{1 << 40: "pooled"}
	tests := []struct {
		name     string
		in       []byte
		want     string
		wantNull bool
	}{
		{"0 null", []byte{0}, "", true},
		{"1 empty", []byte{1}, "", false},
		{"2 pool reference with 64-bit key", []byte{2, 0x80, 0x80, 0x80, 0x80, 0x80, 0x20}, "pooled", false},
		{"2 missing pool key is null", []byte{2, 7}, "", true},
		{"3 UTF-8", []byte{3, 4, 'j', 0xc3, 0xa9, 'r'}, "jér", false},
		{"4 UTF-16 units as varints", []byte{4, 3, 'a', 0xe9, 0x01, 0xad, 0x9c, 0x01}, "aé中", false},
		{"4 UTF-16 surrogate pair", []byte{4, 2, 0xbd, 0xb0, 0x03, 0x80, 0xbc, 0x03}, "\U0001F600", false},
		{"5 Latin-1", []byte{5, 3, 'c', 0xe9, 'z'}, "céz", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := &decoder{buf: tt.in, compressed: true}
			got, null := d.str(pool)
			if got != tt.want || null != tt.wantNull || d.failed() || d.pos != len(tt.in) {
				t.Errorf("str = %q null=%v pos=%d failed=%v; want %q null=%v pos=%d", got, null, d.pos, d.failed(), tt.want, tt.wantNull, len(tt.in))
			}
			s := &decoder{buf: tt.in, compressed: true}
			s.skipString()
			if s.pos != len(tt.in) || s.failed() {
				t.Errorf("skipString: pos %d failed %v, want %d", s.pos, s.failed(), len(tt.in))
			}
		})
	}
	for _, bad := range [][]byte{{9}, {3, 200}, {4, 5, 'a'}, {3}} {
		d := &decoder{buf: bad, compressed: true}
		d.str(pool)
		if !d.failed() {
			t.Errorf("str(% x) did not fail", bad)
		}
	}
}

func TestFloatsAreRawIEEE(t *testing.T) {
	d := &decoder{buf: []byte{0x3f, 0xc0, 0, 0, 0x40, 0x09, 0x21, 0xfb, 0x54, 0x44, 0x2d, 0x18}, compressed: true}
	if got := d.f32(); got != 1.5 {
		t.Errorf("f32 = %v, want 1.5", got)
	}
	if got := d.f64(); got != math.Pi {
		t.Errorf("f64 = %v, want pi", got)
	}
}

// The word-at-a-time varint decoder must agree with the byte loop on every
// length, padded encodings included, and near the end of the buffer.
func TestVarintWordAtATime(t *testing.T) {
	vals := []uint64{0, 1, 0x7f, 0x80, 0x3fff, 0x4000, 1<<21 - 1, 1 << 21, 1<<28 - 1, 1 << 28, 1<<35 + 5,
		1<<42 - 1, 1 << 49, 1<<56 - 1, 1 << 56, 1<<63 + 12345, ^uint64(0)}
	for i := 0; i < 64; i++ {
		vals = append(vals, uint64(1)<<i, uint64(1)<<i-1, 0x9e3779b97f4a7c15>>i)
	}
	enc := func(v uint64, pad int) []byte {
		var b []byte
		for i := 0; i < 8; i++ {
			if v < 0x80 && len(b)+1 >= pad {
				return append(b, byte(v))
			}
			b = append(b, byte(v)|0x80)
			v >>= 7
		}
		return append(b, byte(v))
	}
	for _, v := range vals {
		for pad := 1; pad <= 9; pad++ {
			e := enc(v, pad)
			for _, tail := range []int{0, 3, 12} {
				buf := append(append([]byte{}, e...), make([]byte, tail)...)
				for i := len(e); i < len(buf); i++ {
					buf[i] = 0xff // continuation bytes after the value must not be read
				}
				d := decoder{buf: buf, compressed: true}
				got := d.varint()
				if got != v && len(e) < 9 || d.pos != len(e) || d.failed() {
					t.Errorf("%#x padded to %d (%d bytes, %d after): got %#x at %d, failed %v", v, pad, len(e), tail, got, d.pos, d.failed())
				}
				if len(e) == 9 && got != v {
					t.Errorf("%#x in 9 bytes: got %#x", v, got)
				}
			}
		}
	}
}

// TestSkipVarints: skipping n integers a word at a time ends where n
// one-by-one skips do, over integers of every length (the 9-byte form
// included, whose last byte may carry the 0x80 flag) and at the end of the
// buffer.
func TestSkipVarints(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := 0; round < 2000; round++ {
		var buf []byte
		for range rng.IntN(40) {
			l := 1 + rng.IntN(9)
			if rng.IntN(3) > 0 {
				l = 1 + rng.IntN(2)
			}
			for i := 0; i < l-1; i++ {
				buf = append(buf, 0x80|byte(rng.IntN(256)))
			}
			if l == 9 {
				buf = append(buf, byte(rng.IntN(256)))
			} else {
				buf = append(buf, byte(rng.IntN(128)))
			}
		}
		for range rng.IntN(3) {
			buf = append(buf, 0x80|byte(rng.IntN(256))) // cut short
		}
		for n := 0; n <= 45; n++ {
			want := decoder{buf: buf, compressed: true}
			for i := 0; i < n && !want.short; i++ {
				want.skipVarint()
			}
			got := decoder{buf: buf, compressed: true}
			got.skipVarints(n)
			if got.pos != want.pos || got.short != want.short {
				t.Fatalf("round %d, % x: skipping %d ends at %d (short %v), one by one at %d (short %v)", round, buf, n, got.pos, got.short, want.pos, want.short)
			}
		}
	}
}
