package jfr

import (
	"encoding/binary"
	"math"
	"math/bits"
	"strconv"
	"strings"
	"unicode/utf8"
	"unsafe"
)

// ValueKind says what a [Value] holds.
type ValueKind uint8

// Value kinds.
const (
	KindNullValue   ValueKind = iota // a null string, a missing constant, or the zero Value
	KindBoolValue                    // boolean
	KindIntValue                     // byte, short, int, long (signed; see Field.Unsigned)
	KindCharValue                    // char, as a UTF-16 code unit
	KindFloatValue                   // float or double
	KindStringValue                  // java.lang.String
	KindStructValue                  // a struct: Type.Fields in order
	KindArrayValue                   // an array: elements of Type
	kindRef                          // a constant-pool reference (p: its *pool, bits: the key), looked up on access
	kindLazy                         // an array inside a constant, decoded on first access (see lazyArray)
)

// Value is a decoded field value. Constant-pool references resolve on
// access: every accessor (and Kind) looks through them. Values stay valid
// as long as their Chunk is referenced. A Value is 24 bytes and holds one
// pointer, so decoding millions of them stays cheap for the collector.
type Value struct {
	// p is the string's bytes, the *Chunk whose bytes hold a string (see
	// primChunkUTF8), the *pool of a reference, the *lazyArray of an array
	// in a constant, or the *composite of a struct or array.
	p    unsafe.Pointer
	bits uint64 // integer or float bits, string length, chunk offset<<32|length, or pool key
	kind ValueKind
	prim Kind // the primitive type of an integer or float; for strings, String or a chunk encoding
}

// A string field of an event is not converted when the event is decoded:
// its Value points at the encoded string in the chunk (kind String, prim
// one of these), and the string is made when a caller reads it. Reading
// every event thus neither allocates nor hashes strings nobody asks for.
const (
	primChunkUTF16  Kind = 0xfd // compressed UTF-16 units (string encoding 4), not all ASCII
	primChunkUTF8   Kind = 0xfe // UTF-8 bytes (string encoding 3, or ASCII units of encoding 4)
	primChunkLatin1 Kind = 0xff // Latin-1 bytes (string encoding 5)
)

// composite holds a struct's fields or an array's elements.
type composite struct {
	typ   *Type
	elems []Value
}

func (v *Value) resolved() *Value {
	if v.kind < kindRef {
		return v
	}
	if v.kind == kindRef {
		if e := v.entry(); e != nil {
			return e.value()
		}
		return &nullValue
	}
	return (*lazyArray)(v.p).value()
}

// entry looks up the constant a reference names; nil when the pool has no
// such key.
func (v *Value) entry() *poolEntry { return (*pool)(v.p).lookup(v.bits) }

// nullValue is what a reference to a missing constant resolves to; it is
// never written.
var nullValue Value

func (v *Value) comp() *composite {
	if v.kind == KindStructValue || v.kind == KindArrayValue {
		return (*composite)(v.p)
	}
	return nil
}

func (v *Value) elems() []Value {
	if c := v.comp(); c != nil {
		return c.elems
	}
	return nil
}

func (v *Value) str() string {
	if v.kind != KindStringValue || v.p == nil {
		return ""
	}
	if v.prim >= primChunkUTF16 {
		c := (*Chunk)(v.p)
		off, n := int(v.bits>>32), int(uint32(v.bits))
		if v.prim == primChunkUTF16 {
			return c.decoder(off).utf16(n)
		}
		return c.chunkString(c.buf[off:off+n:off+n], v.prim == primChunkLatin1)
	}
	return unsafe.String((*byte)(v.p), int(v.bits))
}

// chunkString converts string bytes left in the chunk, sharing short ones
// through the chunk's interner.
func (c *Chunk) chunkString(b []byte, isLatin1 bool) string {
	if isLatin1 {
		if isASCII(b) {
			return c.strs.get(b)
		}
		return latin1(b)
	}
	if utf8.Valid(b) {
		return c.strs.get(b)
	}
	return string([]rune(string(b))) // replaces invalid sequences
}

// stringField decodes a string field of an event (d.strs is set for
// events, nil for constants). UTF-8, Latin-1 and compressed UTF-16 strings
// stay in the chunk (see primChunkUTF8); null, empty and pooled strings,
// and fixed-width UTF-16, are decoded.
func (c *Chunk) stringField(d *decoder) Value {
	p := uint(d.pos)
	if p >= uint(len(d.buf)) {
		d.short = true
		return Value{}
	}
	e := d.buf[p]
	if d.strs == nil || e != strUTF8 && e != strLatin1 && (e != strUTF16 || !d.compressed) {
		// Constants (no interner) are decoded once per chunk, so they are
		// converted now.
		s, null := d.str(c)
		if null {
			return Value{}
		}
		return stringValue(s)
	}
	var n int
	if q := p + 1; d.compressed && q < uint(len(d.buf)) && d.buf[q] < 0x80 {
		n, d.pos = int(d.buf[q]), int(q)+1 // a one-byte length
	} else {
		d.pos++
		n = d.count(len(d.buf))
	}
	if n <= 0 || n > len(d.buf)-d.pos {
		if n > 0 {
			d.short = true
			d.pos = len(d.buf)
		}
		return Value{kind: KindStringValue, prim: KindString} // "" (or a decode error)
	}
	v := Value{kind: KindStringValue, prim: primChunkUTF8, p: unsafe.Pointer(c), bits: uint64(d.pos)<<32 | uint64(n)}
	switch {
	case e == strLatin1:
		v.prim = primChunkLatin1
	case e == strUTF16 && !isASCII(d.buf[d.pos:d.pos+n]):
		// Units of more than one byte: skip them, decode when read.
		v.prim = primChunkUTF16
		for i := 0; i < n && !d.short; i++ {
			d.skipVarint()
		}
		return v
	}
	// UTF-8 or Latin-1 bytes, or UTF-16 units that are all one-byte
	// varints below 0x80: the bytes are the (ASCII) string.
	d.pos += n
	return v
}

func stringValue(s string) Value {
	return Value{kind: KindStringValue, p: unsafe.Pointer(unsafe.StringData(s)), bits: uint64(len(s)), prim: KindString}
}

// Resolve returns the pooled value a reference points to, or v itself.
func (v Value) Resolve() Value { return *v.resolved() }

// Kind reports the kind of the (resolved) value.
func (v Value) Kind() ValueKind {
	if v.kind < kindRef {
		return v.kind
	}
	return v.refKind()
}

func (v *Value) refKind() ValueKind {
	switch v.kind {
	case kindRef:
		if e := v.entry(); e != nil {
			return e.value().kind
		}
		return KindNullValue
	case kindLazy:
		return KindArrayValue
	}
	return v.kind
}

// Type returns the type of a struct, array (the element type) or
// reference; nil for primitives and strings.
func (v Value) Type() *Type {
	switch v.kind {
	case kindRef:
		if v.entry() == nil {
			return nil
		}
		return (*pool)(v.p).typ
	case kindLazy:
		return (*lazyArray)(v.p).op.typ
	}
	if c := v.comp(); c != nil {
		return c.typ
	}
	return nil
}

// IsNull reports whether the value is null (a null string, or a constant
// that is not in the pool).
func (v Value) IsNull() bool { return v.resolved().kind == KindNullValue }

// PoolKey returns the constant-pool key when the value is a reference.
func (v Value) PoolKey() (uint64, bool) {
	if v.kind == kindRef && (v.bits != 0 || v.entry() != nil) || v.kind == KindNullValue && v.bits != 0 {
		return v.bits, true
	}
	return 0, false
}

// Int returns an integer value (sign-extended), a boolean as 0/1, a char's
// code unit, or a float truncated. Simple types are flattened.
func (v Value) Int() int64 {
	r := v.flat()
	switch r.kind {
	case KindIntValue, KindBoolValue, KindCharValue:
		return int64(r.bits)
	case KindFloatValue:
		return int64(math.Float64frombits(r.bits))
	}
	return 0
}

// Uint returns an integer value reinterpreted as unsigned at its declared
// width (byte 8, short 16, int 32, long 64 bits), as jdk.jfr.Unsigned asks.
func (v Value) Uint() uint64 {
	r := v.flat()
	if r.kind != KindIntValue {
		return uint64(r.Int())
	}
	switch r.prim {
	case KindByte:
		return uint64(uint8(r.bits))
	case KindShort:
		return uint64(uint16(r.bits))
	case KindInt:
		return uint64(uint32(r.bits))
	}
	return r.bits
}

// Float returns a float or double (exactly), or an integer converted.
func (v Value) Float() float64 {
	r := v.flat()
	if r.kind == KindFloatValue {
		return math.Float64frombits(r.bits)
	}
	return float64(r.Int())
}

// Bool returns a boolean value.
func (v Value) Bool() bool { return v.flat().bits != 0 }

// Str returns a string value ("" for null). Simple types (a struct with one
// field, like jdk.types.GCName) are flattened to their field.
func (v Value) Str() string { return v.flat().str() }

// String formats the value for humans, nesting at most 6 levels deep
// (references can form cycles) and showing at most maxFormatValues values
// (references can also fan out: six levels of a hundred references each
// would be a trillion). It is not the JDK's format; the jfrprint package
// writes that.
func (v Value) String() string {
	var b strings.Builder
	budget := maxFormatValues
	v.format(&b, 6, &budget)
	return b.String()
}

const maxFormatValues = 1 << 16

func (v *Value) format(b *strings.Builder, depth int, budget *int) {
	if *budget <= 0 {
		b.WriteString("…")
		return
	}
	*budget--
	r := v.resolved()
	switch r.kind {
	case KindNullValue:
		b.WriteString("null")
		return
	case KindBoolValue:
		b.WriteString(strconv.FormatBool(r.bits != 0))
		return
	case KindIntValue:
		b.WriteString(strconv.FormatInt(int64(r.bits), 10))
		return
	case KindCharValue:
		b.WriteRune(rune(r.bits))
		return
	case KindFloatValue:
		b.WriteString(strconv.FormatFloat(math.Float64frombits(r.bits), 'g', -1, 64))
		return
	case KindStringValue:
		b.WriteString(r.str())
		return
	}
	if depth == 0 {
		b.WriteString("…")
		return
	}
	c := r.comp()
	if r.kind == KindArrayValue {
		b.WriteByte('[')
		for i := range c.elems {
			if i > 0 {
				b.WriteString(", ")
			}
			c.elems[i].format(b, depth-1, budget)
		}
		b.WriteByte(']')
		return
	}
	if c.typ.SimpleType && len(c.elems) == 1 {
		c.elems[0].format(b, depth-1, budget)
		return
	}
	b.WriteByte('{')
	for i := range c.elems {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(c.typ.Fields[i].Name)
		b.WriteByte('=')
		c.elems[i].format(b, depth-1, budget)
	}
	b.WriteByte('}')
}

// flat resolves references and unwraps simple types.
func (v *Value) flat() *Value {
	r := v.resolved()
	for i := 0; i < 8 && r.kind == KindStructValue; i++ {
		c := (*composite)(r.p)
		if !c.typ.SimpleType || len(c.elems) != 1 {
			break
		}
		r = c.elems[0].resolved()
	}
	return r
}

// Len returns the number of elements of an array or fields of a struct.
func (v Value) Len() int { return len(v.resolved().elems()) }

// Index returns element i of an array or field i of a struct.
func (v Value) Index(i int) Value {
	es := v.resolved().elems()
	if i < 0 || i >= len(es) {
		return Value{}
	}
	return es[i]
}

// Field returns the struct field with the given name; a dotted name walks
// nested structs and references ("eventThread.javaThreadId"). A missing
// field is a null Value.
func (v Value) Field(name string) Value {
	r := v.resolved()
	for {
		if r.kind != KindStructValue {
			return Value{}
		}
		head, rest := name, ""
		for i := 0; i < len(name); i++ {
			if name[i] == '.' {
				head, rest = name[:i], name[i+1:]
				break
			}
		}
		c := (*composite)(r.p)
		i := c.typ.FieldIndex(head)
		if i < 0 || i >= len(c.elems) {
			return Value{}
		}
		if rest == "" {
			return c.elems[i]
		}
		r, name = c.elems[i].resolved(), rest
	}
}

// opCode says how to decode one field; fieldOps are compiled per type and
// chunk so that the hot loop is one switch per field.
type opCode uint8

const (
	opBoolean opCode = iota
	opByte
	opChar
	opShort
	opInt
	opLong
	opFloat
	opDouble
	opString
	opStruct
	opPool
	opArray
	// Specialized for chunks with compressed integers (all HotSpot ones).
	opVarInt
	opVarLong
	opVarPool
)

type fieldOp struct {
	code opCode
	elem opCode // opArray: how to decode each element
	typ  *Type
	pool *pool // opPool: the pool of typ, nil when the chunk has none
}

var primOps = [...]opCode{KindBoolean: opBoolean, KindByte: opByte, KindChar: opChar, KindShort: opShort,
	KindInt: opInt, KindLong: opLong, KindFloat: opFloat, KindDouble: opDouble, KindString: opString}

// ops returns the compiled field operations of t.
func (c *Chunk) ops(t *Type) []fieldOp {
	if uint64(t.ID) < uint64(len(c.opsDense)) {
		if o := c.opsDense[t.ID]; o != nil {
			return o
		}
	} else if o, ok := c.opsSparse[t.ID]; ok {
		return o
	}
	compressed := c.Header.CompressedInts()
	o := make([]fieldOp, len(t.Fields))
	for i := range t.Fields {
		f := &t.Fields[i]
		op := fieldOp{typ: f.Type}
		switch {
		case f.ConstantPool:
			op.code = opPool
			op.pool = c.pools.find(f.Type.ID)
		case f.Type.Kind == KindStruct:
			op.code = opStruct
		default:
			op.code = primOps[f.Type.Kind]
		}
		if compressed {
			switch op.code {
			case opInt:
				op.code = opVarInt
			case opLong:
				op.code = opVarLong
			case opPool:
				op.code = opVarPool
			}
		}
		if f.Array {
			op.elem, op.code = op.code, opArray
		}
		o[i] = op
	}
	if uint64(t.ID) < uint64(len(c.opsDense)) {
		c.opsDense[t.ID] = o
	} else {
		if c.opsSparse == nil {
			c.opsSparse = map[int64][]fieldOp{}
		}
		c.opsSparse[t.ID] = o
	}
	return o
}

// resetOps drops compiled operations (metadata or pools changed).
func (c *Chunk) resetOps() {
	if c.Metadata != nil {
		if len(c.opsDense) == len(c.Metadata.dense) {
			clear(c.opsDense) // loading a chunk resets twice: metadata, then pools
		} else {
			c.opsDense = make([][]fieldOp, len(c.Metadata.dense))
		}
	}
	c.opsSparse = nil
}

// decodeType decodes one non-array, non-pooled value of type t. depth < 0
// marks a string inside the String pool, which may not refer to it again.
func (c *Chunk) decodeType(d *decoder, t *Type, depth int, a *arena) Value {
	if t.Kind != KindStruct {
		op := fieldOp{code: primOps[t.Kind], typ: t}
		if depth < 0 && t.Kind == KindString {
			s, null := d.str(nil)
			if null {
				return Value{}
			}
			return stringValue(s)
		}
		return c.decodeOne(d, &op, depth, a)
	}
	return c.decodeStruct(d, t, depth, a)
}

func (c *Chunk) decodeStruct(d *decoder, t *Type, depth int, a *arena) Value {
	comp := a.composite()
	comp.typ = t
	comp.elems = a.values(len(t.Fields))
	c.decodeFields(d, c.ops(t), comp.elems, depth+1, a)
	return Value{kind: KindStructValue, p: unsafe.Pointer(comp)}
}

// decodeFields decodes one value per op into out. It returns the index of
// the field where decoding failed, or -1.
func (c *Chunk) decodeFields(d *decoder, ops []fieldOp, out []Value, depth int, a *arena) int {
	out = out[:len(ops)]
	// The cursor lives in locals so that it stays in registers across the
	// stores to out; d.pos is synchronized around calls.
	buf, pos := d.buf, d.pos
	for i := range ops {
		op := &ops[i]
		switch op.code {
		case opVarLong, opVarInt, opVarPool:
			// Varints inlined by hand: one and two bytes (most values
			// other than timestamps) directly, up to eight a word at a
			// time as in varintLong; the 9-byte form and the chunk's last
			// bytes take the call.
			var v uint64
			if p := uint(pos); p+9 <= uint(len(buf)) {
				b0, b1 := buf[p], buf[p+1]
				if b0 < 0x80 {
					v, pos = uint64(b0), pos+1
				} else if b1 < 0x80 {
					v, pos = uint64(b0&0x7f)|uint64(b1)<<7, pos+2
				} else if w := binary.LittleEndian.Uint64(buf[p:]); ^w&0x8080808080808080 != 0 {
					n := uint(bits.TrailingZeros64(^w&0x8080808080808080)) + 1 // 8..64
					v, pos = pack7(w&(^uint64(0)>>((64-n)&63))), pos+int(n>>3)
				} else {
					d.pos = pos
					v = d.varintLong()
					pos = d.pos
				}
			} else {
				d.pos = pos
				v = d.varintLong()
				pos = d.pos
			}
			switch op.code {
			case opVarLong:
				out[i] = Value{kind: KindIntValue, prim: KindLong, bits: v}
			case opVarInt:
				out[i] = Value{kind: KindIntValue, prim: KindInt, bits: uint64(int64(int32(v)))}
			default:
				out[i] = poolValue(op.pool, v)
			}
		case opBoolean:
			// A byte: past the end it reads as false and the check after
			// the loop reports it, as for integers.
			var b byte
			if p := uint(pos); p < uint(len(buf)) {
				b = buf[p]
				pos++
			} else {
				d.short = true
			}
			out[i] = Value{kind: KindBoolValue, prim: KindBoolean, bits: uint64(b & 1)}
		case opString:
			d.pos = pos
			out[i] = c.stringField(d)
			pos = d.pos
		default:
			d.pos = pos
			out[i] = c.decodeOne(d, op, depth, a)
			pos = d.pos
			if d.failed() {
				return i
			}
		}
	}
	d.pos = pos
	// Reads past the end leave zeros and a sticky flag; integers are
	// checked once here rather than after each field.
	if d.failed() {
		return len(ops) - 1
	}
	return -1
}

// poolValue is a reference to constant key of pool p. The key is looked up
// when the value is read, so that constants nobody reads (the symbols of
// the classes of a stack trace's frames) cost no lookup, and their pools
// are not made into entries.
func poolValue(p *pool, key uint64) Value {
	if p != nil {
		return Value{kind: kindRef, p: unsafe.Pointer(p), bits: key}
	}
	return Value{kind: KindNullValue, bits: key}
}

func (c *Chunk) decodeField(d *decoder, op *fieldOp, depth int, a *arena) Value {
	return c.decodeOne(d, op, depth, a)
}

func (c *Chunk) decodeArray(d *decoder, op *fieldOp, depth int, a *arena) Value {
	n := d.count(d.left())
	if n < 0 {
		return Value{}
	}
	per := int32(1)
	if op.elem == opStruct {
		per = op.typ.nodes
	}
	if !d.charge(n, per) {
		return Value{}
	}
	if d.lazy && n > 0 {
		l := a.lazy()
		*l = lazyArray{chunk: c, off: int32(d.pos), n: int32(n), depth: int32(depth), op: *op}
		if !d.tail {
			skipElements(d, op, n)
		}
		return Value{kind: kindLazy, p: unsafe.Pointer(l)}
	}
	return c.decodeElements(d, op, n, depth, a)
}

// lazyArray is a non-empty array inside a constant's value, decoded when
// first read: a stack trace's frames are most of what a chunk's constants
// hold, and readers that resolve an event's stack trace often never walk
// them. The constant was walked without error when its checkpoint was
// indexed, so decoding it later cannot fail.
type lazyArray struct {
	val     Value
	decoded bool
	off, n  int32 // the first element's offset, the element count
	depth   int32
	chunk   *Chunk
	op      fieldOp
}

func (l *lazyArray) value() *Value {
	if !l.decoded {
		c := l.chunk
		d := &decoder{buf: c.buf, pos: int(l.off), compressed: c.Header.CompressedInts(), lazy: true}
		l.val = c.decodeElements(d, &l.op, int(l.n), int(l.depth), &c.perm)
		if d.failed() {
			l.val = Value{} // cannot happen unless the bytes changed
		}
		l.decoded = true
	}
	return &l.val
}

// skipElements advances past n elements of an array field decoded by op.
func skipElements(d *decoder, op *fieldOp, n int) {
	switch {
	case op.elem == opVarPool || op.elem == opVarInt || op.elem == opVarLong:
		d.skipVarints(n)
	case d.compressed && op.elem == opStruct && op.typ.varintsOnly:
		d.skipVarints(n * int(op.typ.varints))
	default:
		for i := 0; i < n && !d.failed(); i++ {
			if op.elem == opPool {
				d.u64()
			} else {
				skipType(d, op.typ, 0)
			}
		}
	}
}

// decodeElements decodes the n elements of an array whose count was read.
func (c *Chunk) decodeElements(d *decoder, op *fieldOp, n, depth int, a *arena) Value {
	comp := a.composite()
	comp.typ = op.typ
	if n > 0 {
		eop := *op
		eop.code = op.elem
		comp.elems = a.values(n)
		for i := range comp.elems {
			comp.elems[i] = c.decodeOne(d, &eop, depth, a)
			if d.failed() {
				break
			}
		}
	}
	return Value{kind: KindArrayValue, p: unsafe.Pointer(comp)}
}

func (c *Chunk) decodeOne(d *decoder, op *fieldOp, depth int, a *arena) Value {
	switch op.code {
	case opVarLong:
		return Value{kind: KindIntValue, prim: KindLong, bits: d.varint()}
	case opVarInt:
		return Value{kind: KindIntValue, prim: KindInt, bits: uint64(int64(int32(d.varint())))}
	case opVarPool:
		return poolValue(op.pool, d.varint())
	case opArray:
		return c.decodeArray(d, op, depth, a)
	case opLong:
		return Value{kind: KindIntValue, prim: KindLong, bits: d.u64()}
	case opPool:
		return poolValue(op.pool, d.u64())
	case opInt:
		return Value{kind: KindIntValue, prim: KindInt, bits: uint64(int64(int32(d.u32())))}
	case opBoolean:
		return Value{kind: KindBoolValue, prim: KindBoolean, bits: uint64(d.u8() & 1)}
	case opByte:
		return Value{kind: KindIntValue, prim: KindByte, bits: uint64(int64(int8(d.u8())))}
	case opChar:
		return Value{kind: KindCharValue, prim: KindChar, bits: uint64(uint16(d.u16()))}
	case opShort:
		return Value{kind: KindIntValue, prim: KindShort, bits: uint64(int64(int16(d.u16())))}
	case opFloat:
		return Value{kind: KindFloatValue, prim: KindFloat, bits: math.Float64bits(float64(d.f32()))}
	case opDouble:
		return Value{kind: KindFloatValue, prim: KindDouble, bits: math.Float64bits(d.f64())}
	case opString:
		return c.stringField(d)
	}
	return c.decodeStruct(d, op.typ, depth, a)
}

// arena hands out Values and composites from large blocks. The chunk's
// arena is never reset (pool values live as long as the chunk); an
// EventReader's is reset before each event, so reading events allocates
// nothing once its blocks are large enough.
type arena struct {
	vals  []Value
	used  int
	comps []composite
	cused int
	lazys []lazyArray
}

// Arena blocks after the first are of one size, not doubling: a chunk's
// pools are decoded into blocks that live as long as the chunk, and
// doubling left up to half of the last, largest block unused (on a 434 KB
// recording, 1.5 MB allocated for 0.8 MB of values), which the collector
// paid for. The first block is small: a reader's arena, reset for every
// record, needs only the largest record's values, and a small chunk's
// constants few; a 4096-value block (96 KB) for each was most of what
// scanning a small chunk allocated.
const (
	valueBlock          = 4096
	compositeBlock      = 1024
	firstValueBlock     = 256
	firstCompositeBlock = 64
)

func (a *arena) values(n int) []Value {
	if a.used+n > len(a.vals) {
		size := valueBlock
		if a.vals == nil {
			size = firstValueBlock
		}
		a.vals = make([]Value, max(size, n))
		a.used = 0
	}
	v := a.vals[a.used : a.used+n : a.used+n]
	a.used += n
	// Not cleared: decoders assign every element before anyone reads it,
	// and a failed decode is never delivered.
	return v
}

func (a *arena) composite() *composite {
	if a.cused == len(a.comps) {
		size := compositeBlock
		if a.comps == nil {
			size = firstCompositeBlock
		}
		a.comps = make([]composite, size)
		a.cused = 0
	}
	p := &a.comps[a.cused]
	a.cused++
	*p = composite{}
	return p
}

func (a *arena) lazy() *lazyArray {
	if len(a.lazys) == 0 {
		a.lazys = make([]lazyArray, lazyBlock)
	}
	l := &a.lazys[0]
	a.lazys = a.lazys[1:]
	return l
}

// lazyBlock is how many lazy arrays a block holds: a chunk's constants have
// a few hundred stack traces.
const lazyBlock = 64

// reset makes the arena's current blocks reusable. Values handed out
// before are overwritten by later use.
func (a *arena) reset() { a.used, a.cused = 0, 0 }

// Clone deep-copies the structs and arrays of a value that a reader will
// reuse; constant-pool references keep pointing into the chunk.
func (v Value) Clone() Value {
	if c := v.comp(); c != nil {
		nc := &composite{typ: c.typ, elems: make([]Value, len(c.elems))}
		for i := range c.elems {
			nc.elems[i] = c.elems[i].Clone()
		}
		v.p = unsafe.Pointer(nc)
	}
	return v
}

// skipType advances past one non-array, non-pooled value of type t.
func skipType(d *decoder, t *Type, depth int) {
	if d.compressed && t.varintsOnly {
		d.skipVarints(int(t.varints))
		return
	}
	switch t.Kind {
	case KindBoolean, KindByte:
		if d.need(1) {
			d.pos++
		}
	case KindChar, KindShort, KindInt, KindLong:
		if d.compressed {
			d.skipVarint()
		} else if n := fixedWidth(t.Kind); d.need(n) {
			d.pos += n
		}
	case KindFloat:
		if d.need(4) {
			d.pos += 4
		}
	case KindDouble:
		if d.need(8) {
			d.pos += 8
		}
	case KindString:
		d.skipString()
	default:
		for i := range t.Fields {
			skipField(d, &t.Fields[i], depth+1)
			if d.failed() {
				return
			}
		}
	}
}

func skipField(d *decoder, f *Field, depth int) {
	n := 1
	if f.Array {
		n = d.count(d.left())
		if n < 0 {
			d.bad = d.bad || !d.short
			return
		}
		per := int32(1)
		if !f.ConstantPool {
			per = f.Type.nodes
		}
		if !d.charge(n, per) {
			return
		}
		if d.compressed && (f.ConstantPool || f.Type.varintsOnly) {
			each := 1
			if !f.ConstantPool {
				each = int(f.Type.varints)
			}
			d.skipVarints(n * each)
			return
		}
	}
	for i := 0; i < n && !d.failed(); i++ {
		if f.ConstantPool {
			d.u64()
		} else {
			skipType(d, f.Type, depth)
		}
	}
}

func fixedWidth(k Kind) int {
	switch k {
	case KindChar, KindShort:
		return 2
	case KindInt:
		return 4
	}
	return 8
}
