package jfr

import (
	"math"
	"strconv"
	"strings"
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
	kindRef                          // a constant-pool reference, resolved on access
)

// Value is a decoded field value. Constant-pool references resolve on
// access: every accessor (and Kind) looks through them. Values stay valid
// as long as their Chunk is referenced.
type Value struct {
	kind  ValueKind
	typ   *Type
	bits  uint64
	str   string
	elems []Value
	ref   *poolEntry
}

func (v *Value) resolved() *Value {
	if v.kind == kindRef {
		return v.ref.value()
	}
	return v
}

// Resolve returns the pooled value a reference points to, or v itself.
func (v Value) Resolve() Value { return *v.resolved() }

// Kind reports the kind of the (resolved) value.
func (v Value) Kind() ValueKind { return v.resolved().kind }

// Type returns the declared type of the value: for arrays, the element type.
func (v Value) Type() *Type { return v.typ }

// IsNull reports whether the value is null (a null string, or a constant
// that is not in the pool).
func (v Value) IsNull() bool { return v.resolved().kind == KindNullValue }

// PoolKey returns the constant-pool key when the value is a reference.
func (v Value) PoolKey() (uint64, bool) {
	if v.kind == kindRef || (v.kind == KindNullValue && v.bits != 0) {
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
	switch r.typ.Kind {
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
func (v Value) Str() string { return v.flat().str }

// String formats the value for humans, nesting at most 6 levels deep
// (references can form cycles). It is not the JDK's format; the jfrprint
// package writes that.
func (v Value) String() string {
	var b strings.Builder
	v.format(&b, 6)
	return b.String()
}

func (v *Value) format(b *strings.Builder, depth int) {
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
		b.WriteString(r.str)
		return
	}
	if depth == 0 {
		b.WriteString("…")
		return
	}
	if r.kind == KindArrayValue {
		b.WriteByte('[')
		for i := range r.elems {
			if i > 0 {
				b.WriteString(", ")
			}
			r.elems[i].format(b, depth-1)
		}
		b.WriteByte(']')
		return
	}
	if r.typ != nil && r.typ.SimpleType && len(r.elems) == 1 {
		r.elems[0].format(b, depth-1)
		return
	}
	b.WriteByte('{')
	for i := range r.elems {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(r.typ.Fields[i].Name)
		b.WriteByte('=')
		r.elems[i].format(b, depth-1)
	}
	b.WriteByte('}')
}

// flat resolves references and unwraps simple types.
func (v *Value) flat() *Value {
	r := v.resolved()
	for i := 0; i < 8 && r.kind == KindStructValue && r.typ.SimpleType && len(r.elems) == 1; i++ {
		r = r.elems[0].resolved()
	}
	return r
}

// Len returns the number of elements of an array or fields of a struct.
func (v Value) Len() int { return len(v.resolved().elems) }

// Index returns element i of an array or field i of a struct.
func (v Value) Index(i int) Value {
	r := v.resolved()
	if i < 0 || i >= len(r.elems) {
		return Value{}
	}
	return r.elems[i]
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
		i := r.typ.FieldIndex(head)
		if i < 0 || i >= len(r.elems) {
			return Value{}
		}
		if rest == "" {
			return r.elems[i]
		}
		r, name = r.elems[i].resolved(), rest
	}
}

// decodeType decodes one non-array, non-pooled value of type t.
func (c *Chunk) decodeType(d *decoder, t *Type, depth int) Value {
	switch t.Kind {
	case KindBoolean:
		return Value{kind: KindBoolValue, typ: t, bits: uint64(d.u8() & 1)}
	case KindByte:
		return Value{kind: KindIntValue, typ: t, bits: uint64(int64(int8(d.u8())))}
	case KindChar:
		return Value{kind: KindCharValue, typ: t, bits: uint64(uint16(d.u16()))}
	case KindShort:
		return Value{kind: KindIntValue, typ: t, bits: uint64(int64(int16(d.u16())))}
	case KindInt:
		return Value{kind: KindIntValue, typ: t, bits: uint64(int64(int32(d.u32())))}
	case KindLong:
		return Value{kind: KindIntValue, typ: t, bits: d.u64()}
	case KindFloat:
		return Value{kind: KindFloatValue, typ: t, bits: math.Float64bits(float64(d.f32()))}
	case KindDouble:
		return Value{kind: KindFloatValue, typ: t, bits: math.Float64bits(d.f64())}
	case KindString:
		var sp stringPool
		if depth >= 0 { // strings inside the String pool may not refer to it
			sp = c
		}
		s, null := d.str(sp)
		if null {
			return Value{kind: KindNullValue, typ: t}
		}
		return Value{kind: KindStringValue, typ: t, str: s}
	}
	elems := c.alloc(len(t.Fields))
	for i := range t.Fields {
		elems[i] = c.decodeField(d, &t.Fields[i], depth+1)
		if d.failed() {
			break
		}
	}
	return Value{kind: KindStructValue, typ: t, elems: elems}
}

func (c *Chunk) decodeField(d *decoder, f *Field, depth int) Value {
	if f.Array {
		n := d.count(len(d.buf) - d.pos)
		if n <= 0 {
			if n < 0 && d.short {
				return Value{}
			}
			if n < 0 {
				d.bad = true
			}
			return Value{kind: KindArrayValue, typ: f.Type}
		}
		elems := c.alloc(n)
		for i := range elems {
			elems[i] = c.decodeScalar(d, f, depth)
			if d.failed() {
				break
			}
		}
		return Value{kind: KindArrayValue, typ: f.Type, elems: elems}
	}
	return c.decodeScalar(d, f, depth)
}

func (c *Chunk) decodeScalar(d *decoder, f *Field, depth int) Value {
	if f.ConstantPool {
		key := d.u64()
		if p := c.pools.find(f.Type.ID); p != nil {
			if e := p.lookup(key); e != nil {
				return Value{kind: kindRef, typ: f.Type, bits: key, ref: e}
			}
		}
		return Value{kind: KindNullValue, typ: f.Type, bits: key}
	}
	return c.decodeType(d, f.Type, depth)
}

// skipType advances past one non-array, non-pooled value of type t.
func skipType(d *decoder, t *Type, depth int) {
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
		n = d.count(len(d.buf) - d.pos)
		if n < 0 {
			d.bad = d.bad || !d.short
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
