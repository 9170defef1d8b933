package jfr

import (
	"encoding/binary"
	"math"
	"math/bits"
	"unicode/utf16"
	"unicode/utf8"
)

// decoder is a cursor over one chunk's bytes. Reads past the end set a
// sticky flag and return zero values, so hot loops check once per record
// instead of once per field.
type decoder struct {
	buf        []byte
	pos        int
	compressed bool
	short      bool // ran past the end of buf
	bad        bool // malformed encoding (not merely short)
	strs       *interner
	end        int // end of the current record, when decoding one; bounds counts
	// spent counts the array elements, weighted by their types' nodes,
	// decoded or skipped for the current event or constant; whoever starts
	// one resets it. tooLarge (with bad) says it passed maxValueNodes.
	spent    int64
	tooLarge bool
	// lazy says that arrays are left for their first reader (lazyArray):
	// set while decoding a constant, whose bytes were checked already.
	lazy bool
	// tail says that nothing after the current value is read: a lazy
	// array need not be walked past.
	tail bool
}

// charge counts n array elements of a type whose values visit per values
// each against maxValueNodes. Element counts are already bounded by the
// bytes left, but elements of empty structs take no bytes, and a type may
// expand to maxTypeNodes values: without this, a few kilobytes could ask
// for billions of values. It returns false, marking d bad, when over.
func (d *decoder) charge(n int, per int32) bool {
	d.spent += int64(n) * int64(max(per, 1))
	if d.spent > maxValueNodes {
		d.tooLarge, d.bad = true, true
		return false
	}
	return true
}

// left returns the bytes left in the current record (or buffer): the most
// elements an array can have, so a hostile count cannot make us allocate
// more than a small multiple of the record.
func (d *decoder) left() int {
	e := len(d.buf)
	if d.end > 0 && d.end < e {
		e = d.end
	}
	return max(e-d.pos, 0)
}

// interner shares the short strings that repeat across a chunk's events
// (phase names, causes) instead of allocating each occurrence.
type interner struct{ m map[string]string }

const (
	maxInterned    = 8192
	maxInternedLen = 64
)

func (in *interner) get(b []byte) string {
	if in == nil || len(b) > maxInternedLen {
		return string(b)
	}
	if s, ok := in.m[string(b)]; ok {
		return s
	}
	s := string(b)
	if len(in.m) < maxInterned {
		if in.m == nil {
			in.m = make(map[string]string)
		}
		in.m[s] = s
	}
	return s
}

func (d *decoder) failed() bool { return d.short || d.bad }

// varint reads a compressed integer: 7 bits per byte, low group first, at
// most 8 continuation bytes and a 9th byte with a full 8 bits.
func (d *decoder) varint() uint64 {
	// Small enough to inline: the one-byte case is the common one.
	if p := uint(d.pos); p < uint(len(d.buf)) {
		if c := d.buf[p]; c < 0x80 {
			d.pos++
			return uint64(c)
		}
	}
	return d.varintLong()
}

func (d *decoder) varintLong() uint64 {
	b, p := d.buf, d.pos
	if len(b)-p >= 9 {
		// Enough bytes for the longest encoding: read 8 at once, find the
		// last byte (the first without the 0x80 flag) and pack the 7-bit
		// groups without a branch per byte.
		w := binary.LittleEndian.Uint64(b[p:])
		if stops := ^w & 0x8080808080808080; stops != 0 {
			n := uint(bits.TrailingZeros64(stops)) + 1 // bits up to the last byte's flag
			d.pos = p + int(n/8)
			return pack7(w & (^uint64(0) >> (64 - n)))
		}
		d.pos = p + 9
		return pack7(w) | uint64(b[p+8])<<56
	}
	return d.varintSlow()
}

// pack7 packs the low 7 bits of each byte of w (little-endian groups)
// into one 56-bit number.
func pack7(w uint64) uint64 {
	w &= 0x7f7f7f7f7f7f7f7f
	w = w&0x007f007f007f007f | (w&0x7f007f007f007f00)>>1
	w = w&0x00003fff00003fff | (w&0x3fff00003fff0000)>>2
	return w&0x000000000fffffff | (w&0x0fffffff00000000)>>4
}

func (d *decoder) varintSlow() uint64 {
	b, p := d.buf, d.pos
	var v uint64
	for shift := uint(0); shift < 56; shift += 7 {
		if p >= len(b) {
			d.short = true
			d.pos = len(b)
			return 0
		}
		c := b[p]
		p++
		v |= uint64(c&0x7f) << shift
		if c < 0x80 {
			d.pos = p
			return v
		}
	}
	if p >= len(b) {
		d.short = true
		d.pos = len(b)
		return 0
	}
	v |= uint64(b[p]) << 56
	d.pos = p + 1
	return v
}

// skipVarint advances past one compressed integer.
func (d *decoder) skipVarint() {
	b, p := d.buf, d.pos
	for i := 0; i < 8; i++ {
		if p >= len(b) {
			d.short = true
			d.pos = len(b)
			return
		}
		if b[p] < 0x80 {
			d.pos = p + 1
			return
		}
		p++
	}
	if p >= len(b) {
		d.short = true
		d.pos = len(b)
		return
	}
	d.pos = p + 1
}

// skipVarints advances past n compressed integers. While a word (8 bytes)
// is left it counts the integers that end in it (bytes without the 0x80
// flag) and moves past all of them at once; a word that starts an integer
// and has no such byte starts the 9-byte form.
func (d *decoder) skipVarints(n int) {
	b, p := d.buf, d.pos
	for n > 0 && len(b)-p >= 9 {
		stops := ^binary.LittleEndian.Uint64(b[p:]) & 0x8080808080808080
		if stops == 0 {
			p += 9
			n--
			continue
		}
		if k := bits.OnesCount64(stops); k < n {
			p += (63-bits.LeadingZeros64(stops))/8 + 1 // past the word's last integer
			n -= k
			continue
		}
		for ; n > 1; n-- {
			stops &= stops - 1
		}
		p += bits.TrailingZeros64(stops)/8 + 1
		n = 0
	}
	d.pos = p
	for ; n > 0 && !d.short; n-- {
		d.skipVarint()
	}
}

func (d *decoder) need(n int) bool {
	if n < 0 || len(d.buf)-d.pos < n {
		d.short = true
		d.pos = len(d.buf)
		return false
	}
	return true
}

func (d *decoder) u8() uint8 {
	if d.pos >= len(d.buf) {
		d.short = true
		return 0
	}
	c := d.buf[d.pos]
	d.pos++
	return c
}

// u16 reads a Java short or char: varint, or 2 bytes big-endian.
func (d *decoder) u16() uint64 {
	if d.compressed {
		return d.varint()
	}
	if !d.need(2) {
		return 0
	}
	v := binary.BigEndian.Uint16(d.buf[d.pos:])
	d.pos += 2
	return uint64(v)
}

// u32 reads a Java int: varint, or 4 bytes big-endian.
func (d *decoder) u32() uint64 {
	if d.compressed {
		return d.varint()
	}
	return uint64(d.raw32())
}

// u64 reads a Java long: varint, or 8 bytes big-endian.
func (d *decoder) u64() uint64 {
	if d.compressed {
		return d.varint()
	}
	return d.raw64()
}

func (d *decoder) raw32() uint32 {
	if !d.need(4) {
		return 0
	}
	v := binary.BigEndian.Uint32(d.buf[d.pos:])
	d.pos += 4
	return v
}

func (d *decoder) raw64() uint64 {
	if !d.need(8) {
		return 0
	}
	v := binary.BigEndian.Uint64(d.buf[d.pos:])
	d.pos += 8
	return v
}

// int32 reads a Java int used as a count or index (sizes, string lengths):
// a value outside [0, limit] marks the input bad and returns -1.
func (d *decoder) count(limit int) int {
	v := d.u32()
	if d.short {
		return -1
	}
	if v > uint64(limit) {
		d.bad = true
		return -1
	}
	return int(v)
}

// String encodings.
const (
	strNull    = 0
	strEmpty   = 1
	strPool    = 2
	strUTF8    = 3
	strUTF16   = 4
	strLatin1  = 5
	maxStrings = 1 << 28
)

// skipString advances past one encoded string.
func (d *decoder) skipString() {
	switch d.u8() {
	case strNull, strEmpty:
	case strPool:
		d.u64()
	case strUTF8, strLatin1:
		n := d.count(len(d.buf))
		if n > 0 && d.need(n) {
			d.pos += n
		}
	case strUTF16:
		n := d.count(len(d.buf))
		for i := 0; i < n && !d.short; i++ {
			d.u16()
		}
	default:
		d.bad = true
	}
}

// stringPool resolves encoding 2 references; it may be nil.
type stringPool interface {
	lookupString(key uint64) (string, bool)
}

// str decodes one encoded string. null reports encoding 0.
func (d *decoder) str(pool stringPool) (s string, null bool) {
	switch d.u8() {
	case strNull:
		return "", true
	case strEmpty:
		return "", false
	case strPool:
		k := d.u64()
		if pool == nil {
			return "", true
		}
		s, ok := pool.lookupString(k)
		return s, !ok
	case strUTF8:
		n := d.count(len(d.buf))
		if n <= 0 || !d.need(n) {
			return "", false
		}
		b := d.buf[d.pos : d.pos+n]
		d.pos += n
		if utf8.Valid(b) {
			return d.strs.get(b), false
		}
		return string([]rune(string(b))), false // replaces invalid sequences
	case strLatin1:
		n := d.count(len(d.buf))
		if n <= 0 || !d.need(n) {
			return "", false
		}
		b := d.buf[d.pos : d.pos+n]
		d.pos += n
		for _, c := range b {
			if c >= 0x80 {
				return latin1(b), false
			}
		}
		return d.strs.get(b), false
	case strUTF16:
		n := d.count(len(d.buf))
		if n <= 0 {
			return "", false
		}
		return d.utf16(n), false
	default:
		d.bad = true
		return "", true
	}
}

// utf16 decodes n UTF-16 code units (string encoding 4).
func (d *decoder) utf16(n int) string {
	// Every unit takes at least one byte, so n is bounded by the input.
	if n > len(d.buf)-d.pos {
		d.short = true
		d.pos = len(d.buf)
		return ""
	}
	ascii := true
	start := d.pos
	for i := 0; i < n; i++ {
		if d.u16() >= 0x80 {
			ascii = false
		}
	}
	if d.short {
		return ""
	}
	d.pos = start
	if ascii {
		out := make([]byte, n)
		for i := range out {
			out[i] = byte(d.u16())
		}
		return string(out)
	}
	units := make([]uint16, n)
	for i := range units {
		units[i] = uint16(d.u16())
	}
	return string(utf16.Decode(units))
}

// isASCII reports whether every byte of b is below 0x80.
func isASCII(b []byte) bool {
	for len(b) >= 8 {
		if binary.LittleEndian.Uint64(b)&0x8080808080808080 != 0 {
			return false
		}
		b = b[8:]
	}
	for _, c := range b {
		if c >= 0x80 {
			return false
		}
	}
	return true
}

func latin1(b []byte) string {
	for _, c := range b {
		if c >= 0x80 {
			r := make([]rune, len(b))
			for i, c := range b {
				r[i] = rune(c)
			}
			return string(r)
		}
	}
	return string(b)
}

func (d *decoder) f32() float32 { return math.Float32frombits(d.raw32()) }
func (d *decoder) f64() float64 { return math.Float64frombits(d.raw64()) }
