package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// The committed default model is exactly what this program writes.
func TestCommittedModelIsReproducible(t *testing.T) {
	committed, err := os.ReadFile(filepath.Join("..", "..", "models", "runtime_overlap", "1", "model.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	if got := runtimeOverlapModel(); !bytes.Equal(got, committed) {
		t.Fatalf("models/runtime_overlap/1/model.onnx (%d bytes) differs from genmodel's output (%d bytes): run `go run ./cmd/genmodel`",
			len(committed), len(got))
	}
}

func TestWritesTheModelWhereAsked(t *testing.T) {
	out := filepath.Join(t.TempDir(), "runtime_overlap", "1", "model.onnx")
	os.Args = []string{"genmodel", "-out", out}
	main()
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(data, runtimeOverlapModel()) {
		t.Fatal("written file differs from the model")
	}
}
