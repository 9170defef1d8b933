package onnxinferenceextension // import "github.com/otelcol-ai/otelcol-ai/extension/onnxinferenceextension"

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"sync"

	ort "github.com/yalue/onnxruntime_go"
	"go.opentelemetry.io/otel/metric"

	"github.com/otelcol-ai/otelcol-ai/extension/onnxinferenceextension/internal/repository"
	"github.com/otelcol-ai/otelcol-ai/pkg/modelrunner"
)

// version is one loaded model version: its session, its signature (read once
// at load) and the runs in flight on it, which a swap waits for before the
// session is destroyed.
type version struct {
	sig      modelrunner.Signature
	session  *ort.DynamicAdvancedSession
	inputs   []modelrunner.ValueInfo // declared order, which the session was built with
	outputs  []string                // numeric tensor and sequence outputs, which the session was built with
	tensors  []bool                  // whether outputs[i] is a tensor
	inflight sync.WaitGroup
	// file is the fingerprint of the model file the version was read
	// from, and digest the SHA-256 of its bytes: a served version whose
	// file no longer has this fingerprint has changed in place. Both are
	// only used by scans, which are serialised.
	file   repository.Fingerprint
	digest [sha256.Size]byte

	// metrics holds the options that label Run's measurements, made on
	// the first run.
	metricsOnce sync.Once
	metrics     metricOptions
}

// metricOptions are a model's metric attributes as the options of Add and
// Record, so that each measurement passes them without allocating.
type metricOptions struct {
	add    []metric.AddOption
	record []metric.RecordOption
}

// metricOptions returns attrs, the model's metric attributes, as options.
func (v *version) metricOptions(attrs metric.MeasurementOption) *metricOptions {
	v.metricsOnce.Do(func() {
		v.metrics = metricOptions{add: []metric.AddOption{attrs}, record: []metric.RecordOption{attrs}}
	})
	return &v.metrics
}

// loadVersion builds a session for one model version from the model file's
// bytes, refuses models the extension cannot feed or read, and warms the
// session up with one run on zero-valued inputs.
func loadVersion(model string, number int64, data []byte, opts *ort.SessionOptions) (*version, error) {
	ins, outs, err := ort.GetInputOutputInfoWithONNXData(data)
	if err != nil {
		return nil, fmt.Errorf("read model: %w", err)
	}
	v := &version{
		sig: modelrunner.Signature{
			Model: model, Version: number,
			Inputs: valueInfos(ins), Outputs: valueInfos(outs),
		},
	}
	v.inputs = v.sig.Inputs
	inputNames := make([]string, 0, len(ins))
	for _, in := range v.sig.Inputs {
		if in.Kind != modelrunner.KindTensor {
			return nil, fmt.Errorf("input %q is a %s: only tensor inputs can be fed", in.Name, in.Kind)
		}
		if in.Type == modelrunner.TypeString || in.Type == modelrunner.TypeOther {
			return nil, fmt.Errorf("input %q has element type %s, which cannot be fed", in.Name, in.Type)
		}
		inputNames = append(inputNames, in.Name)
	}
	for _, out := range v.sig.Outputs {
		switch {
		case out.Kind == modelrunner.KindTensor && out.Type != modelrunner.TypeString && out.Type != modelrunner.TypeOther:
			v.outputs = append(v.outputs, out.Name)
			v.tensors = append(v.tensors, true)
		case out.Kind == modelrunner.KindSequence:
			// Read as a [rows, keys] tensor when it is a sequence of
			// maps (checked on each run, as the model does not declare
			// what its sequences hold).
			v.outputs = append(v.outputs, out.Name)
			v.tensors = append(v.tensors, false)
		}
	}
	if len(inputNames) == 0 {
		return nil, errors.New("model declares no inputs")
	}
	if len(v.outputs) == 0 {
		return nil, errors.New("model has no numeric output to read")
	}
	v.session, err = ort.NewDynamicAdvancedSessionWithONNXData(data, inputNames, v.outputs, opts)
	if err != nil {
		return nil, fmt.Errorf("create session: %w", err)
	}
	if _, err := v.run(warmupInputs(v.inputs), nil); err != nil {
		v.destroy()
		return nil, fmt.Errorf("warm-up run: %w", err)
	}
	return v, nil
}

// warmupInputs returns zero-valued inputs with every dynamic dimension 1.
func warmupInputs(infos []modelrunner.ValueInfo) []modelrunner.Tensor {
	out := make([]modelrunner.Tensor, len(infos))
	for i, in := range infos {
		shape := make([]int64, len(in.Shape))
		n := 1
		for j, d := range in.Shape {
			if d < 0 {
				d = 1
			}
			shape[j] = d
			n *= int(d)
		}
		out[i] = modelrunner.Tensor{Name: in.Name, Type: in.Type, Shape: shape, Data: zeroData(in.Type, n)}
	}
	return out
}

func zeroData(t modelrunner.ElementType, n int) any {
	switch t {
	case modelrunner.TypeFloat32:
		return make([]float32, n)
	case modelrunner.TypeFloat64:
		return make([]float64, n)
	case modelrunner.TypeInt8:
		return make([]int8, n)
	case modelrunner.TypeUint8:
		return make([]uint8, n)
	case modelrunner.TypeInt16:
		return make([]int16, n)
	case modelrunner.TypeUint16:
		return make([]uint16, n)
	case modelrunner.TypeInt32:
		return make([]int32, n)
	case modelrunner.TypeUint32:
		return make([]uint32, n)
	case modelrunner.TypeInt64:
		return make([]int64, n)
	case modelrunner.TypeUint64:
		return make([]uint64, n)
	case modelrunner.TypeBool:
		return make([]bool, n)
	case modelrunner.TypeFloat16, modelrunner.TypeBFloat16:
		return make([]uint8, 2*n)
	}
	return nil
}

// validate checks a request's inputs against the signature and puts them in
// ordered (len(v.inputs)) in the session's input order.
func (v *version) validate(inputs, ordered []modelrunner.Tensor) error {
	var seen bitset
	if len(v.inputs) > 64*len(seen.small) {
		seen.large = make([]bool, len(v.inputs))
	}
	for _, t := range inputs {
		i := v.inputIndex(t.Name)
		if i < 0 {
			return v.inputError(t.Name, fmt.Sprintf("the model has no such input (it declares %s)", v.inputList()))
		}
		if seen.has(i) {
			return v.inputError(t.Name, "given twice")
		}
		seen.set(i)
		want := v.inputs[i]
		if t.Type != want.Type {
			return v.inputError(t.Name, fmt.Sprintf("element type %s, the model declares %s", t.Type, want.Type))
		}
		if len(t.Shape) != len(want.Shape) {
			return v.inputError(t.Name, fmt.Sprintf("shape %s has rank %d, the model declares %s",
				modelrunner.ShapeString(t.Shape), len(t.Shape), modelrunner.ShapeString(want.Shape)))
		}
		for d := range t.Shape {
			if t.Shape[d] < 0 || (want.Shape[d] >= 0 && t.Shape[d] != want.Shape[d]) {
				return v.inputError(t.Name, fmt.Sprintf("shape %s does not fit the declared %s (dimension %d)",
					modelrunner.ShapeString(t.Shape), modelrunner.ShapeString(want.Shape), d))
			}
		}
		n, ok := dataLen(t.Type, t.Data)
		if !ok {
			return v.inputError(t.Name, fmt.Sprintf("data %T does not carry element type %s", t.Data, t.Type))
		}
		if int64(n) != t.Len() {
			return v.inputError(t.Name, fmt.Sprintf("%d elements for shape %s, which needs %d",
				n, modelrunner.ShapeString(t.Shape), t.Len()))
		}
		if n == 0 {
			return v.inputError(t.Name, "empty tensor")
		}
		ordered[i] = t
	}
	for i := range v.inputs {
		if !seen.has(i) {
			return v.inputError(v.inputs[i].Name, "missing")
		}
	}
	return nil
}

// bitset is a set of small integers that allocates only past 128.
type bitset struct {
	small [2]uint64
	large []bool // when set, used instead of small
}

func (b *bitset) has(i int) bool {
	if b.large != nil {
		return b.large[i]
	}
	return b.small[i/64]&(1<<(i%64)) != 0
}

func (b *bitset) set(i int) {
	if b.large != nil {
		b.large[i] = true
		return
	}
	b.small[i/64] |= 1 << (i % 64)
}

func (v *version) inputIndex(name string) int {
	for i, in := range v.inputs {
		if in.Name == name {
			return i
		}
	}
	return -1
}

func (v *version) inputList() string {
	s := ""
	for i, in := range v.inputs {
		if i > 0 {
			s += ", "
		}
		s += in.String()
	}
	return s
}

func (v *version) inputError(input, reason string) error {
	return &modelrunner.InputError{Model: v.sig.Model, Version: v.sig.Version, Input: input, Reason: reason}
}

// run validates inputs, runs the session and copies the requested outputs
// (all tensor outputs when wanted is empty) into Go memory. A sequence of
// maps comes back as a float32 [rows, keys] tensor.
func (v *version) run(inputs []modelrunner.Tensor, wanted []string) ([]modelrunner.Tensor, error) {
	// Working memory on the stack for models of a few inputs and outputs.
	var (
		orderedBuf [4]modelrunner.Tensor
		pickBuf    [8]int
		valuesBuf  [8]ort.Value
	)
	var ordered []modelrunner.Tensor
	if len(v.inputs) <= len(orderedBuf) {
		ordered = orderedBuf[:len(v.inputs)]
	} else {
		ordered = make([]modelrunner.Tensor, len(v.inputs))
	}
	if err := v.validate(inputs, ordered); err != nil {
		return nil, err
	}
	pick := pickBuf[:0]
	if len(wanted) == 0 {
		for i := range v.outputs {
			if v.tensors[i] {
				pick = append(pick, i)
			}
		}
	}
	for _, name := range wanted {
		i := indexOf(v.outputs, name)
		if i < 0 {
			if info, ok := v.sig.Output(name); ok {
				return nil, fmt.Errorf("model %q version %d: output %q is a %s: %w",
					v.sig.Model, v.sig.Version, name, info.Kind, modelrunner.ErrUnsupportedOutput)
			}
			return nil, fmt.Errorf("model %q version %d: no output %q (it declares %v)",
				v.sig.Model, v.sig.Version, name, v.outputs)
		}
		pick = append(pick, i)
	}

	// The session's inputs then its outputs, destroyed once read.
	values := valuesBuf[:0]
	if n := len(ordered) + len(v.outputs); n <= len(valuesBuf) {
		values = valuesBuf[:n]
	} else {
		values = make([]ort.Value, n)
	}
	defer func() {
		for _, t := range values {
			if t != nil {
				_ = t.Destroy()
			}
		}
	}()
	ortIn, ortOut := values[:len(ordered):len(ordered)], values[len(ordered):]
	for i, t := range ordered {
		var err error
		if ortIn[i], err = newOrtTensor(t); err != nil {
			return nil, v.inputError(t.Name, err.Error())
		}
	}
	if err := v.session.Run(ortIn, ortOut); err != nil {
		return nil, fmt.Errorf("model %q version %d: run: %w", v.sig.Model, v.sig.Version, err)
	}
	result := make([]modelrunner.Tensor, len(pick))
	for j, i := range pick {
		var err error
		if result[j], err = fromOrtValue(v.outputs[i], ortOut[i]); err != nil {
			return nil, fmt.Errorf("model %q version %d: %w", v.sig.Model, v.sig.Version, err)
		}
	}
	return result, nil
}

func (v *version) destroy() {
	if v.session != nil {
		_ = v.session.Destroy()
		v.session = nil
	}
}

func indexOf(list []string, s string) int {
	for i, x := range list {
		if x == s {
			return i
		}
	}
	return -1
}
