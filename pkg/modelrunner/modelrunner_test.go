package modelrunner

import (
	"context"
	"errors"
	"testing"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
)

type fakeProvider struct{ component.Component }

func (fakeProvider) Signature(string, int64) (Signature, error) { return Signature{}, nil }
func (fakeProvider) Run(context.Context, string, Request) (Result, error) {
	return Result{}, nil
}
func (fakeProvider) Watch(string, func(Signature) error) (func(), error) { return func() {}, nil }

type host struct {
	component.Host
	ext map[component.ID]component.Component
}

func (h host) GetExtensions() map[component.ID]component.Component { return h.ext }

func TestLookup(t *testing.T) {
	models := component.MustNewID("onnxinference")
	other := component.MustNewID("health_check")
	h := host{Host: componenttest.NewNopHost(), ext: map[component.ID]component.Component{
		models: fakeProvider{},
		other:  struct{ component.Component }{},
	}}
	if p, err := Lookup(h, models); err != nil || p == nil {
		t.Fatalf("Lookup(models) = %v, %v", p, err)
	}
	var le *LookupError
	if _, err := Lookup(h, component.MustNewID("missing")); !errors.As(err, &le) || !le.Missing {
		t.Fatalf("Lookup(missing) = %v, want a LookupError with Missing", err)
	}
	if _, err := Lookup(h, other); !errors.As(err, &le) || le.Missing || le.ID != other {
		t.Fatalf("Lookup(health_check) = %v, want a LookupError naming it", err)
	}
}

func TestInputErrorNamesModelVersionAndInput(t *testing.T) {
	err := error(&InputError{Model: "m", Version: 3, Input: "X", Reason: "rank 1"})
	if !errors.Is(err, ErrInputMismatch) || err.Error() != `model "m" version 3: input "X": rank 1` {
		t.Fatalf("%v", err)
	}
}

func TestTensorHelpers(t *testing.T) {
	tensor := Tensor{Name: "y", Type: TypeInt64, Shape: []int64{2, 3}, Data: []int64{1, 2, 3, 4, 5, 6}}
	if tensor.Len() != 6 {
		t.Fatalf("Len %d", tensor.Len())
	}
	if v, ok := tensor.Float64At(5); !ok || v != 6 {
		t.Fatalf("Float64At(5) = %v, %v", v, ok)
	}
	if _, ok := tensor.Float64At(6); ok {
		t.Fatal("Float64At past the end succeeded")
	}
	half := Tensor{Type: TypeBFloat16, Shape: []int64{1}, Data: []byte{0, 0x40}}
	if _, ok := half.Float64At(0); ok {
		t.Fatal("raw bfloat16 bytes read as numbers")
	}
	r := Result{Outputs: []Tensor{tensor}}
	if got, ok := r.Output("y"); !ok || got.Name != "y" {
		t.Fatal("Output(y) not found")
	}
	info := ValueInfo{Name: "features", Kind: KindTensor, Type: TypeFloat32, Shape: []int64{-1, 5}}
	if info.String() != `"features": float32[-1 5]` {
		t.Fatalf("String() = %s", info)
	}
	if s := (ValueInfo{Name: "p", Kind: KindSequence}).String(); s != `"p": sequence` {
		t.Fatalf("String() = %s", s)
	}
}
