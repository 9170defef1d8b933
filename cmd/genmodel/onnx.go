package main

// A minimal writer for the parts of ONNX's protobuf schema (onnx/onnx.proto,
// IR version 8) that a small inference graph needs. Field numbers are the
// schema's; messages are encoded in field-number order, so the output is
// byte-for-byte reproducible.

import (
	"math"

	"google.golang.org/protobuf/encoding/protowire"
)

// ONNX TensorProto.DataType values.
const (
	dataTypeFloat = 1
	dataTypeInt64 = 7
)

// ONNX AttributeProto.AttributeType values.
const (
	attrInt     = 2
	attrString  = 3
	attrFloats  = 6
	attrInts    = 7
	attrStrings = 8
)

type modelProto struct {
	irVersion       int64
	opsets          []opset
	producerName    string
	producerVersion string
	domain          string
	modelVersion    int64
	docString       string
	graph           graphProto
	metadata        [][2]string
}

type opset struct {
	domain  string
	version int64
}

type graphProto struct {
	nodes        []nodeProto
	name         string
	initializers []tensorProto
	docString    string
	inputs       []valueInfo
	outputs      []valueInfo
}

type nodeProto struct {
	inputs, outputs []string
	name, opType    string
	attributes      []attribute
	domain          string // "" is the default ONNX domain
}

// attribute is a node attribute of one of the kinds above (attrInt when
// kind is zero).
type attribute struct {
	name    string
	kind    int64
	i       int64
	s       string
	ints    []int64
	floats  []float32
	strings []string
}

type tensorProto struct {
	dims     []int64
	dataType int32
	floats   []float32 // for dataTypeFloat
	int64s   []int64   // for dataTypeInt64
	name     string
}

type valueInfo struct {
	name     string
	elemType int32
	// dims: a value >= 0 is fixed; a dimension is symbolic where its
	// param is set.
	dims      []int64
	params    []string
	docString string
}

func bytesField(b []byte, num protowire.Number, v []byte) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendBytes(b, v)
}

func stringField(b []byte, num protowire.Number, s string) []byte {
	if s == "" {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendString(b, s)
}

func varintField(b []byte, num protowire.Number, v int64) []byte {
	b = protowire.AppendTag(b, num, protowire.VarintType)
	return protowire.AppendVarint(b, uint64(v))
}

func (m modelProto) marshal() []byte {
	var b []byte
	b = varintField(b, 1, m.irVersion)
	b = stringField(b, 2, m.producerName)
	b = stringField(b, 3, m.producerVersion)
	b = stringField(b, 4, m.domain)
	b = varintField(b, 5, m.modelVersion)
	b = stringField(b, 6, m.docString)
	b = bytesField(b, 7, m.graph.marshal())
	for _, o := range m.opsets {
		var ob []byte
		ob = stringField(ob, 1, o.domain)
		ob = varintField(ob, 2, o.version)
		b = bytesField(b, 8, ob)
	}
	for _, kv := range m.metadata {
		var eb []byte
		eb = stringField(eb, 1, kv[0])
		eb = stringField(eb, 2, kv[1])
		b = bytesField(b, 14, eb)
	}
	return b
}

func (g graphProto) marshal() []byte {
	var b []byte
	for _, n := range g.nodes {
		b = bytesField(b, 1, n.marshal())
	}
	b = stringField(b, 2, g.name)
	for _, t := range g.initializers {
		b = bytesField(b, 5, t.marshal())
	}
	b = stringField(b, 10, g.docString)
	for _, v := range g.inputs {
		b = bytesField(b, 11, v.marshal())
	}
	for _, v := range g.outputs {
		b = bytesField(b, 12, v.marshal())
	}
	return b
}

func (n nodeProto) marshal() []byte {
	var b []byte
	for _, in := range n.inputs {
		b = protowire.AppendTag(b, 1, protowire.BytesType)
		b = protowire.AppendString(b, in) // an empty name is a skipped optional input
	}
	for _, out := range n.outputs {
		b = stringField(b, 2, out)
	}
	b = stringField(b, 3, n.name)
	b = stringField(b, 4, n.opType)
	for _, a := range n.attributes {
		b = bytesField(b, 5, a.marshal())
	}
	b = stringField(b, 7, n.domain)
	return b
}

// marshal encodes the attribute; repeated values are written unpacked, the
// proto2 default of onnx.proto.
func (a attribute) marshal() []byte {
	var b []byte
	b = stringField(b, 1, a.name)
	kind := a.kind
	switch kind {
	case 0, attrInt:
		kind = attrInt
		b = varintField(b, 3, a.i)
	case attrString:
		b = bytesField(b, 4, []byte(a.s))
	case attrFloats:
		for _, f := range a.floats {
			b = protowire.AppendTag(b, 7, protowire.Fixed32Type)
			b = protowire.AppendFixed32(b, math.Float32bits(f))
		}
	case attrInts:
		for _, v := range a.ints {
			b = varintField(b, 8, v)
		}
	case attrStrings:
		for _, s := range a.strings {
			b = bytesField(b, 9, []byte(s))
		}
	}
	return varintField(b, 20, kind)
}

func (t tensorProto) marshal() []byte {
	var b []byte
	var dims []byte
	for _, d := range t.dims {
		dims = protowire.AppendVarint(dims, uint64(d))
	}
	if len(dims) > 0 {
		b = bytesField(b, 1, dims) // a scalar has no dims
	}
	b = varintField(b, 2, int64(t.dataType))
	if t.dataType == dataTypeInt64 {
		var ints []byte
		for _, v := range t.int64s {
			ints = protowire.AppendVarint(ints, uint64(v))
		}
		b = bytesField(b, 7, ints)
	} else {
		var floats []byte
		for _, f := range t.floats {
			floats = protowire.AppendFixed32(floats, math.Float32bits(f))
		}
		b = bytesField(b, 4, floats)
	}
	b = stringField(b, 8, t.name)
	return b
}

func (v valueInfo) marshal() []byte {
	var shape []byte
	for i, d := range v.dims {
		var dim []byte
		if i < len(v.params) && v.params[i] != "" {
			dim = stringField(dim, 2, v.params[i])
		} else {
			dim = varintField(dim, 1, d)
		}
		shape = bytesField(shape, 1, dim)
	}
	var tensor []byte
	tensor = varintField(tensor, 1, int64(v.elemType))
	tensor = bytesField(tensor, 2, shape)
	var typ []byte
	typ = bytesField(typ, 1, tensor)
	var b []byte
	b = stringField(b, 1, v.name)
	b = bytesField(b, 2, typ)
	b = stringField(b, 3, v.docString)
	return b
}
