package gil

import "testing"

// TestWritableRange: the writable mappings of the file, and the anonymous
// mapping right after them (its bss), not another file's or a gap's.
func TestWritableRange(t *testing.T) {
	maps := []byte(`7f0000000000-7f0000100000 r--p 00000000 08:01 42 /usr/lib/libpython3.11.so.1.0
7f0000100000-7f0000200000 r-xp 00100000 08:01 42 /usr/lib/libpython3.11.so.1.0
7f0000300000-7f0000310000 r--p 00300000 08:01 42 /usr/lib/libpython3.11.so.1.0
7f0000310000-7f0000340000 rw-p 00310000 08:01 42 /usr/lib/libpython3.11.so.1.0
7f0000340000-7f0000360000 rw-p 00000000 00:00 0
7f0000360000-7f0000370000 rw-p 00000000 00:00 0
7f0000400000-7f0000410000 rw-p 00010000 08:01 43 /usr/lib/libc.so.6
`)
	lo, hi, ok := WritableRange(maps, "08:01", 42)
	if !ok || lo != 0x7f0000310000 || hi != 0x7f0000360000 {
		t.Errorf("WritableRange: got %#x-%#x %v, want 0x7f0000310000-0x7f0000360000 true", lo, hi, ok)
	}
	if _, _, ok := WritableRange(maps, "08:01", 44); ok {
		t.Error("WritableRange of a file not mapped: ok is true")
	}
	// A gap before the anonymous mapping: not the file's bss.
	gap := []byte(`7f0000310000-7f0000340000 rw-p 00310000 08:01 42 /usr/lib/libpython3.11.so.1.0
7f0000350000-7f0000360000 rw-p 00000000 00:00 0
`)
	if lo, hi, _ := WritableRange(gap, "08:01", 42); lo != 0x7f0000310000 || hi != 0x7f0000340000 {
		t.Errorf("WritableRange with a gap: got %#x-%#x, want 0x7f0000310000-0x7f0000340000", lo, hi)
	}
}
