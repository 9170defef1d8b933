package onnxinferenceextension // import "github.com/otelcol-ai/otelcol-ai/extension/onnxinferenceextension"

import (
	"errors"
	"fmt"
	"sort"

	ort "github.com/yalue/onnxruntime_go"

	"github.com/otelcol-ai/otelcol-ai/pkg/modelrunner"
)

// elementType maps ONNX Runtime's element types to modelrunner's.
func elementType(t ort.TensorElementDataType) modelrunner.ElementType {
	switch t {
	case ort.TensorElementDataTypeFloat:
		return modelrunner.TypeFloat32
	case ort.TensorElementDataTypeDouble:
		return modelrunner.TypeFloat64
	case ort.TensorElementDataTypeInt8:
		return modelrunner.TypeInt8
	case ort.TensorElementDataTypeUint8:
		return modelrunner.TypeUint8
	case ort.TensorElementDataTypeInt16:
		return modelrunner.TypeInt16
	case ort.TensorElementDataTypeUint16:
		return modelrunner.TypeUint16
	case ort.TensorElementDataTypeInt32:
		return modelrunner.TypeInt32
	case ort.TensorElementDataTypeUint32:
		return modelrunner.TypeUint32
	case ort.TensorElementDataTypeInt64:
		return modelrunner.TypeInt64
	case ort.TensorElementDataTypeUint64:
		return modelrunner.TypeUint64
	case ort.TensorElementDataTypeBool:
		return modelrunner.TypeBool
	case ort.TensorElementDataTypeFloat16:
		return modelrunner.TypeFloat16
	case ort.TensorElementDataTypeBFloat16:
		return modelrunner.TypeBFloat16
	case ort.TensorElementDataTypeString:
		return modelrunner.TypeString
	default:
		return modelrunner.TypeOther
	}
}

func valueKind(t ort.ONNXType) modelrunner.ValueKind {
	switch t {
	case ort.ONNXTypeTensor:
		return modelrunner.KindTensor
	case ort.ONNXTypeSequence:
		return modelrunner.KindSequence
	case ort.ONNXTypeMap:
		return modelrunner.KindMap
	case ort.ONNXTypeUnknown:
		return modelrunner.KindUnknown
	default:
		return modelrunner.KindOther
	}
}

func valueInfos(infos []ort.InputOutputInfo) []modelrunner.ValueInfo {
	out := make([]modelrunner.ValueInfo, len(infos))
	for i, in := range infos {
		out[i] = modelrunner.ValueInfo{Name: in.Name, Kind: valueKind(in.OrtValueType)}
		if out[i].Kind == modelrunner.KindTensor {
			out[i].Type = elementType(in.DataType)
			out[i].Shape = append([]int64(nil), in.Dimensions...)
		}
	}
	return out
}

// byteWidth is the element size of types carried as raw bytes.
func byteWidth(t modelrunner.ElementType) int {
	switch t {
	case modelrunner.TypeFloat16, modelrunner.TypeBFloat16:
		return 2
	default:
		return 0
	}
}

// dataLen returns the number of elements in data, when data is the Go slice
// type t is carried as.
func dataLen(t modelrunner.ElementType, data any) (int, bool) {
	switch d := data.(type) {
	case []float32:
		return len(d), t == modelrunner.TypeFloat32
	case []float64:
		return len(d), t == modelrunner.TypeFloat64
	case []int8:
		return len(d), t == modelrunner.TypeInt8
	case []uint8:
		if w := byteWidth(t); w > 0 {
			return len(d) / w, len(d)%w == 0
		}
		return len(d), t == modelrunner.TypeUint8
	case []int16:
		return len(d), t == modelrunner.TypeInt16
	case []uint16:
		return len(d), t == modelrunner.TypeUint16
	case []int32:
		return len(d), t == modelrunner.TypeInt32
	case []uint32:
		return len(d), t == modelrunner.TypeUint32
	case []int64:
		return len(d), t == modelrunner.TypeInt64
	case []uint64:
		return len(d), t == modelrunner.TypeUint64
	case []bool:
		return len(d), t == modelrunner.TypeBool
	}
	return 0, false
}

// newOrtTensor wraps a validated modelrunner tensor for ONNX Runtime. The
// ORT value points at t.Data, which must stay alive until it is destroyed.
func newOrtTensor(t modelrunner.Tensor) (ort.Value, error) {
	shape := ort.NewShape(t.Shape...)
	switch d := t.Data.(type) {
	case []float32:
		return ort.NewTensor(shape, d)
	case []float64:
		return ort.NewTensor(shape, d)
	case []int8:
		return ort.NewTensor(shape, d)
	case []uint8:
		switch t.Type {
		case modelrunner.TypeFloat16:
			return ort.NewCustomDataTensor(shape, d, ort.TensorElementDataTypeFloat16)
		case modelrunner.TypeBFloat16:
			return ort.NewCustomDataTensor(shape, d, ort.TensorElementDataTypeBFloat16)
		}
		return ort.NewTensor(shape, d)
	case []int16:
		return ort.NewTensor(shape, d)
	case []uint16:
		return ort.NewTensor(shape, d)
	case []int32:
		return ort.NewTensor(shape, d)
	case []uint32:
		return ort.NewTensor(shape, d)
	case []int64:
		return ort.NewTensor(shape, d)
	case []uint64:
		return ort.NewTensor(shape, d)
	case []bool:
		return ort.NewTensor(shape, d)
	}
	return nil, fmt.Errorf("unsupported tensor data %T", t.Data)
}

// fromOrtValue copies an output of ONNX Runtime into Go memory.
func fromOrtValue(name string, v ort.Value) (modelrunner.Tensor, error) {
	out := modelrunner.Tensor{Name: name}
	switch t := v.(type) {
	case *ort.Tensor[float32]:
		out.Type, out.Data = modelrunner.TypeFloat32, clone(t.GetData())
	case *ort.Tensor[float64]:
		out.Type, out.Data = modelrunner.TypeFloat64, clone(t.GetData())
	case *ort.Tensor[int8]:
		out.Type, out.Data = modelrunner.TypeInt8, clone(t.GetData())
	case *ort.Tensor[uint8]:
		out.Type, out.Data = modelrunner.TypeUint8, clone(t.GetData())
	case *ort.Tensor[int16]:
		out.Type, out.Data = modelrunner.TypeInt16, clone(t.GetData())
	case *ort.Tensor[uint16]:
		out.Type, out.Data = modelrunner.TypeUint16, clone(t.GetData())
	case *ort.Tensor[int32]:
		out.Type, out.Data = modelrunner.TypeInt32, clone(t.GetData())
	case *ort.Tensor[uint32]:
		out.Type, out.Data = modelrunner.TypeUint32, clone(t.GetData())
	case *ort.Tensor[int64]:
		out.Type, out.Data = modelrunner.TypeInt64, clone(t.GetData())
	case *ort.Tensor[uint64]:
		out.Type, out.Data = modelrunner.TypeUint64, clone(t.GetData())
	case *ort.Tensor[bool]:
		out.Type, out.Data = modelrunner.TypeBool, clone(t.GetData())
	case *ort.CustomDataTensor:
		out.Type, out.Data = elementType(ort.TensorElementDataType(t.DataType())), clone(t.GetData())
	case *ort.Sequence:
		return fromSequenceOfMaps(name, t)
	default:
		return out, fmt.Errorf("output %q: %w (%s)", name, modelrunner.ErrUnsupportedOutput, v.GetONNXType())
	}
	// A tensor's GetShape already returns a copy of its shape: keep it.
	out.Shape = v.GetShape()
	return out, nil
}

func clone[T any](s []T) []T { return append([]T(nil), s...) }

// fromSequenceOfMaps turns a sequence of maps with numeric values, one map
// per row (scikit-learn's ZipMap: class -> probability), into a float32
// tensor [rows, keys], keys in ascending order. Every row must have the same
// keys; anything else is refused.
func fromSequenceOfMaps(name string, seq *ort.Sequence) (modelrunner.Tensor, error) {
	refuse := func(format string, args ...any) (modelrunner.Tensor, error) {
		return modelrunner.Tensor{}, fmt.Errorf("output %q: %w: %s", name, modelrunner.ErrUnsupportedOutput, fmt.Sprintf(format, args...))
	}
	elems, err := seq.GetValues()
	if err != nil {
		return refuse("read sequence: %v", err)
	}
	var keys []string // the first row's keys, in order, as text
	var data []float32
	for row, elem := range elems {
		m, ok := elem.(*ort.Map)
		if !ok {
			return refuse("a sequence of %s, not of maps", elem.GetONNXType())
		}
		k, v, err := m.GetKeysAndValues()
		if err != nil {
			return refuse("read map: %v", err)
		}
		entries, err := mapEntries(k, v)
		if err != nil {
			return refuse("row %d: %v", row, err)
		}
		if row == 0 {
			for _, e := range entries {
				keys = append(keys, e.key)
			}
			data = make([]float32, 0, len(elems)*len(keys))
		}
		if len(entries) != len(keys) {
			return refuse("row %d has %d keys, row 0 has %d", row, len(entries), len(keys))
		}
		for i, e := range entries {
			if e.key != keys[i] {
				return refuse("row %d has key %s where row 0 has %s", row, e.key, keys[i])
			}
			data = append(data, e.value)
		}
	}
	return modelrunner.Tensor{Name: name, Type: modelrunner.TypeFloat32,
		Shape: []int64{int64(len(elems)), int64(len(keys))}, Data: data}, nil
}

type mapEntry struct {
	key   string
	order float64
	value float32
}

// mapEntries returns a map's entries sorted by key: numeric keys by value,
// string keys as text.
func mapEntries(keys, values ort.Value) ([]mapEntry, error) {
	var entries []mapEntry
	switch k := keys.(type) {
	case *ort.Tensor[int64]:
		for _, key := range k.GetData() {
			entries = append(entries, mapEntry{key: fmt.Sprint(key), order: float64(key)})
		}
	case *ort.StringTensor:
		texts, err := k.GetContents()
		if err != nil {
			return nil, err
		}
		for _, key := range texts {
			entries = append(entries, mapEntry{key: key})
		}
	default:
		return nil, fmt.Errorf("map keys of type %T", keys)
	}
	switch v := values.(type) {
	case *ort.Tensor[float32]:
		if len(v.GetData()) != len(entries) {
			return nil, errors.New("map has more keys than values")
		}
		for i, x := range v.GetData() {
			entries[i].value = x
		}
	case *ort.Tensor[float64]:
		if len(v.GetData()) != len(entries) {
			return nil, errors.New("map has more keys than values")
		}
		for i, x := range v.GetData() {
			entries[i].value = float32(x)
		}
	default:
		return nil, fmt.Errorf("map values of type %T", values)
	}
	sort.SliceStable(entries, func(i, j int) bool {
		if entries[i].order != entries[j].order {
			return entries[i].order < entries[j].order
		}
		return entries[i].key < entries[j].key
	})
	return entries, nil
}
