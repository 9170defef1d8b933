// Package modelrunner is the contract between components that run models on
// telemetry (the inference processor) and the extension that serves them (the
// onnxinference extension).
//
// It holds no implementation and imports no runtime: a processor depends on
// this package, finds a Provider among the host's extensions with Lookup, and
// never sees ONNX Runtime. The split mirrors collector core's storage
// interface, which sits apart from the file_storage extension.
package modelrunner // import "github.com/otelcol-ai/otelcol-ai/pkg/modelrunner"

import (
	"context"
	"fmt"
	"strings"
)

// Provider serves named models. Implementations are safe for concurrent use.
type Provider interface {
	// Signature describes a version of a model: its inputs and outputs as
	// the model declares them. version 0 means the newest version being
	// served. It is answered from a cache, not by reading the model again.
	Signature(model string, version int64) (Signature, error)

	// Run runs a version of a model (req.Version; 0 for the newest served)
	// on req.Inputs and returns the outputs named in req.Outputs (all
	// tensor outputs when empty). An output that is a sequence of maps
	// with numeric values, one per row (scikit-learn's ZipMap of class
	// probabilities), is returned as a float32 tensor [rows, keys] with the
	// keys in ascending order; other non-tensor outputs are refused with
	// ErrUnsupportedOutput. Inputs are validated against the
	// signature of the version that runs: a mismatch in name, element type
	// or shape is an *InputError, never a broadcast or a truncation.
	Run(ctx context.Context, model string, req Request) (Result, error)

	// Watch registers check for a model. The provider calls it with the
	// signature of every version it is about to serve and refuses a
	// version the check rejects, keeping the previous one serving. It also
	// calls check once, synchronously, with the version served now and
	// returns that error, so a caller learns at once whether it can feed
	// the model. The returned function unregisters the check.
	Watch(model string, check func(Signature) error) (unregister func(), err error)
}

// Request is one call of a model.
type Request struct {
	// Version selects the model version; 0 runs the newest one served.
	Version int64
	// Inputs are the input tensors, one per declared input, in any order.
	Inputs []Tensor
	// Outputs names the outputs wanted; empty means every tensor output.
	Outputs []string
}

// Result is what one call of a model produced.
type Result struct {
	// Model and Version name the model version that ran.
	Model   string
	Version int64
	// Outputs holds the outputs in the order requested.
	Outputs []Tensor
}

// Output returns the output named name, or false.
func (r Result) Output(name string) (Tensor, bool) {
	for _, t := range r.Outputs {
		if t.Name == name {
			return t, true
		}
	}
	return Tensor{}, false
}

// Signature is the declared interface of one model version.
type Signature struct {
	Model   string
	Version int64
	Inputs  []ValueInfo
	Outputs []ValueInfo
}

// Input returns the declared input named name, or false.
func (s Signature) Input(name string) (ValueInfo, bool) { return find(s.Inputs, name) }

// Output returns the declared output named name, or false.
func (s Signature) Output(name string) (ValueInfo, bool) { return find(s.Outputs, name) }

func find(infos []ValueInfo, name string) (ValueInfo, bool) {
	for _, v := range infos {
		if v.Name == name {
			return v, true
		}
	}
	return ValueInfo{}, false
}

// ValueKind is the kind of value a model input or output holds.
type ValueKind int

// The kinds of ONNX values. Only tensors can be fed or read through Run;
// the others are described so that a caller can say why it refuses them.
const (
	KindUnknown ValueKind = iota
	KindTensor
	KindSequence
	KindMap
	KindOther
)

// String returns the kind's ONNX name.
func (k ValueKind) String() string {
	switch k {
	case KindTensor:
		return "tensor"
	case KindSequence:
		return "sequence"
	case KindMap:
		return "map"
	case KindOther:
		return "other"
	default:
		return "unknown"
	}
}

// ValueInfo describes one declared input or output.
type ValueInfo struct {
	Name string
	Kind ValueKind
	// Type and Shape are meaningful for tensors only. A dimension below
	// zero is dynamic (any size).
	Type  ElementType
	Shape []int64
}

// String formats the value as `name: float32[-1 4]`.
func (v ValueInfo) String() string {
	if v.Kind != KindTensor {
		return fmt.Sprintf("%q: %s", v.Name, v.Kind)
	}
	return fmt.Sprintf("%q: %s%v", v.Name, v.Type, v.Shape)
}

// ElementType is a tensor's element type.
type ElementType int

// Element types. Tensor.Data holds the Go slice type noted; types without a
// Go equivalent are carried as raw little-endian bytes ([]byte).
const (
	TypeUndefined ElementType = iota
	TypeFloat32               // []float32
	TypeFloat64               // []float64
	TypeInt8                  // []int8
	TypeUint8                 // []uint8
	TypeInt16                 // []int16
	TypeUint16                // []uint16
	TypeInt32                 // []int32
	TypeUint32                // []uint32
	TypeInt64                 // []int64
	TypeUint64                // []uint64
	TypeBool                  // []bool
	TypeFloat16               // []byte, two bytes per element
	TypeBFloat16              // []byte, two bytes per element
	TypeString                // not supported by Run
	TypeOther                 // anything else; not supported by Run
)

var typeNames = [...]string{"undefined", "float32", "float64", "int8", "uint8", "int16", "uint16",
	"int32", "uint32", "int64", "uint64", "bool", "float16", "bfloat16", "string", "other"}

// String returns the type's short name, e.g. "float32".
func (t ElementType) String() string {
	if t < 0 || int(t) >= len(typeNames) {
		return fmt.Sprintf("ElementType(%d)", int(t))
	}
	return typeNames[t]
}

// Tensor is a named, typed, shaped value passed to or returned by Run.
type Tensor struct {
	Name  string
	Type  ElementType
	Shape []int64
	// Data is a slice of the Go type Type names, with as many elements as
	// Shape's product (for byte-carried types, that many elements times the
	// element size).
	Data any
}

// Len returns the number of elements Shape describes.
func (t Tensor) Len() int64 {
	n := int64(1)
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

// Float32s returns the data of a float32 tensor, or nil.
func (t Tensor) Float32s() []float32 { v, _ := t.Data.([]float32); return v }

// Float64At returns element i converted to float64, for any numeric type
// carried as a Go slice. It reports false for other types or an index out of
// range.
func (t Tensor) Float64At(i int) (float64, bool) {
	switch d := t.Data.(type) {
	case []float32:
		if i >= 0 && i < len(d) {
			return float64(d[i]), true
		}
	case []float64:
		if i >= 0 && i < len(d) {
			return d[i], true
		}
	case []int8:
		if i >= 0 && i < len(d) {
			return float64(d[i]), true
		}
	case []uint8:
		if i >= 0 && i < len(d) && t.Type != TypeFloat16 && t.Type != TypeBFloat16 {
			return float64(d[i]), true
		}
	case []int16:
		if i >= 0 && i < len(d) {
			return float64(d[i]), true
		}
	case []uint16:
		if i >= 0 && i < len(d) {
			return float64(d[i]), true
		}
	case []int32:
		if i >= 0 && i < len(d) {
			return float64(d[i]), true
		}
	case []uint32:
		if i >= 0 && i < len(d) {
			return float64(d[i]), true
		}
	case []int64:
		if i >= 0 && i < len(d) {
			return float64(d[i]), true
		}
	case []uint64:
		if i >= 0 && i < len(d) {
			return float64(d[i]), true
		}
	}
	return 0, false
}

// ShapeString formats a shape as [2 -1 4].
func ShapeString(shape []int64) string {
	parts := make([]string, len(shape))
	for i, d := range shape {
		parts[i] = fmt.Sprint(d)
	}
	return "[" + strings.Join(parts, " ") + "]"
}
