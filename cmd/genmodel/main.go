// Command genmodel writes the distribution's default model, runtime_overlap,
// as an ONNX file: a small fixed graph (no training) that says how much of a
// span's latency the runtime windows overlapping it explain, and which kind
// of window dominates. The output is byte-for-byte reproducible; a test
// checks that the committed models/runtime_overlap/1/model.onnx matches.
//
//	go run ./cmd/genmodel -out models/runtime_overlap/1/model.onnx
//
// Input "features", float32[batch, 5], one row per span, in milliseconds:
//
//	0 span duration
//	1 runtime.overlap.jvm.safepoint.duration
//	2 runtime.overlap.jvm.gc.pause.duration
//	3 runtime.overlap.python.gil.wait.duration
//	4 runtime.overlap.python.gc.pause.duration
//
// Outputs:
//
//	explained_fraction float32[batch, 1]  overlap total / duration, clipped to [0, 1]
//	unexplained_ms     float32[batch, 1]  duration - overlap total, at least 0
//	dominant_cause     int64[batch]       index 0-3 of the largest overlap column (1-4 above)
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
)

// ModelVersion is the version written into the model and the directory it
// belongs in.
const ModelVersion = 1

// Features names the input columns, in order.
var Features = []string{
	"duration_ms",
	"jvm_safepoint_ms",
	"jvm_gc_pause_ms",
	"python_gil_wait_ms",
	"python_gc_pause_ms",
}

func main() {
	out := flag.String("out", "models/runtime_overlap/1/model.onnx", "where to write the model")
	flag.Parse()
	if err := os.MkdirAll(filepath.Dir(*out), 0o755); err != nil {
		fmt.Fprintln(os.Stderr, "genmodel:", err)
		os.Exit(1)
	}
	if err := os.WriteFile(*out, runtimeOverlapModel(), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "genmodel:", err)
		os.Exit(1)
	}
}

// runtimeOverlapModel returns the encoded ONNX model.
func runtimeOverlapModel() []byte {
	n := len(Features)
	column := func(name string, cols ...int) tensorProto {
		t := tensorProto{name: name, dataType: dataTypeFloat, dims: []int64{int64(n), int64(len(cols))}}
		t.floats = make([]float32, n*len(cols))
		for j, c := range cols {
			t.floats[c*len(cols)+j] = 1
		}
		return t
	}
	overlapSum := tensorProto{name: "w_overlap_sum", dataType: dataTypeFloat, dims: []int64{int64(n), 1},
		floats: []float32{0, 1, 1, 1, 1}}
	scalar := func(name string, v float32) tensorProto {
		return tensorProto{name: name, dataType: dataTypeFloat, floats: []float32{v}}
	}
	node := func(op string, inputs []string, outputs ...string) nodeProto {
		return nodeProto{opType: op, name: outputs[0], inputs: inputs, outputs: outputs}
	}
	argmax := node("ArgMax", []string{"overlaps"}, "dominant_cause")
	argmax.attributes = []attribute{{name: "axis", i: 1}, {name: "keepdims", i: 0}}

	graph := graphProto{
		name:      "runtime_overlap",
		docString: "How much of a span's latency the runtime windows overlapping it explain.",
		nodes: []nodeProto{
			node("MatMul", []string{"features", "w_duration"}, "duration_ms"),
			node("MatMul", []string{"features", "w_overlap_sum"}, "overlap_ms"),
			node("Max", []string{"duration_ms", "min_duration_ms"}, "denominator_ms"),
			node("Div", []string{"overlap_ms", "denominator_ms"}, "ratio"),
			node("Clip", []string{"ratio", "zero", "one"}, "explained_fraction"),
			node("Sub", []string{"duration_ms", "overlap_ms"}, "difference_ms"),
			node("Relu", []string{"difference_ms"}, "unexplained_ms"),
			node("MatMul", []string{"features", "w_overlaps"}, "overlaps"),
			argmax,
		},
		initializers: []tensorProto{
			column("w_duration", 0),
			overlapSum,
			column("w_overlaps", 1, 2, 3, 4),
			scalar("min_duration_ms", 0.001),
			scalar("zero", 0),
			scalar("one", 1),
		},
		inputs: []valueInfo{{name: "features", elemType: dataTypeFloat, dims: []int64{-1, int64(n)}, params: []string{"batch"},
			docString: "one row per span, in milliseconds: " + fmt.Sprint(Features)}},
		outputs: []valueInfo{
			{name: "explained_fraction", elemType: dataTypeFloat, dims: []int64{-1, 1}, params: []string{"batch"},
				docString: "overlap total / duration, clipped to [0, 1]"},
			{name: "unexplained_ms", elemType: dataTypeFloat, dims: []int64{-1, 1}, params: []string{"batch"},
				docString: "duration - overlap total, at least 0"},
			{name: "dominant_cause", elemType: dataTypeInt64, dims: []int64{-1}, params: []string{"batch"},
				docString: "0 jvm.safepoint, 1 jvm.gc.pause, 2 python.gil.wait, 3 python.gc.pause"},
		},
	}
	return modelProto{
		irVersion:       8,
		opsets:          []opset{{domain: "", version: 13}},
		producerName:    "otelcol-ai genmodel",
		producerVersion: "1",
		domain:          "io.github.otelcol-ai",
		modelVersion:    ModelVersion,
		docString:       "runtime_overlap: the share of a span's latency explained by JVM and CPython runtime windows that overlapped it (runtimecorrelation's attributes).",
		graph:           graph,
		metadata: [][2]string{
			{"features", fmt.Sprint(Features)},
			{"dominant_cause", "0 jvm.safepoint, 1 jvm.gc.pause, 2 python.gil.wait, 3 python.gc.pause"},
		},
	}.marshal()
}
