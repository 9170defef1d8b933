// Command genmodel writes the distribution's default model, runtime_overlap,
// as ONNX files, and trains new versions of it on a user's own spans. The
// output is byte-for-byte reproducible; a test checks the committed files.
//
//	go run ./cmd/genmodel                       # models/runtime_overlap/{1,2}/model.onnx
//	go run ./cmd/genmodel extract traces.jsonl  # spans → CSV rows (stdout)
//	go run ./cmd/genmodel train -data spans.csv -version 3 -out models/runtime_overlap/3/model.onnx
//
// Input "features", float32[batch, 5], one row per span, in milliseconds:
//
//	0 span duration
//	1 runtime.overlap.jvm.safepoint.duration
//	2 runtime.overlap.jvm.gc.pause.duration
//	3 runtime.overlap.python.gil.wait.duration
//	4 runtime.overlap.python.gc.pause.duration
//
// Outputs of both versions, a fixed arithmetic graph:
//
//	explained_fraction float32[batch, 1]  overlap total / duration, clipped to [0, 1]
//	unexplained_ms     float32[batch, 1]  duration - overlap total, at least 0
//	dominant_cause     int64[batch]       index 0-3 of the largest overlap column (1-4 above);
//	                                      version 2: -1 when nothing overlapped
//
// Version 2 adds a learned output:
//
//	anomaly_score      float32[batch, 1]  isolation-forest score in (0, 1) of the
//	                                      overlap fractions: near 1, unlike the
//	                                      healthy spans the forest was trained on
//
// Version 2's forest is trained on data/healthy-train.csv: spans of the
// hybrid example (examples/hybrid) serving without allocation pressure, as
// extracted from the collector's file exporter by `genmodel extract`.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
)

// Features names the input columns, in order.
var Features = []string{
	"duration_ms",
	"jvm_safepoint_ms",
	"jvm_gc_pause_ms",
	"python_gil_wait_ms",
	"python_gc_pause_ms",
}

// The shipped versions and the data version 2 is trained on, relative to
// the repository root.
const (
	formulaVersion  = 1
	forestVersion   = 2
	defaultTraining = "cmd/genmodel/data/healthy-train.csv"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "genmodel:", err)
		os.Exit(1)
	}
}

func run(args []string, stdout io.Writer) error {
	if len(args) > 0 {
		switch args[0] {
		case "extract":
			return extract(args[1:], stdout)
		case "train":
			return train(args[1:])
		}
	}
	fs := flag.NewFlagSet("genmodel", flag.ContinueOnError)
	repo := fs.String("repository", "models", "the model repository to write runtime_overlap's shipped versions into")
	data := fs.String("data", defaultTraining, "healthy spans (CSV) version 2's forest is trained on")
	if err := fs.Parse(args); err != nil {
		return err
	}
	rows, err := readRows(*data)
	if err != nil {
		return err
	}
	if err := writeModel(filepath.Join(*repo, "runtime_overlap", strconv.Itoa(formulaVersion), "model.onnx"), formulaModel()); err != nil {
		return err
	}
	forest := trainForest(pointsOf(rows), defaultForest)
	return writeModel(filepath.Join(*repo, "runtime_overlap", strconv.Itoa(forestVersion), "model.onnx"), forestModel(forestVersion, forest))
}

// extract prints the rows of the spans in file exporter outputs as CSV.
func extract(args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return errors.New("extract: name one or more traces files (the file exporter's OTLP JSON lines)")
	}
	var all []row
	for _, path := range args {
		f, err := os.Open(path)
		if err != nil {
			return fmt.Errorf("extract: %w", err)
		}
		rows, err := extractSpans(f)
		_ = f.Close()
		if err != nil {
			return fmt.Errorf("extract: %s: %w", path, err)
		}
		all = append(all, rows...)
	}
	return writeRows(stdout, all)
}

// train writes a new version trained on the user's own healthy spans.
func train(args []string) error {
	fs := flag.NewFlagSet("genmodel train", flag.ContinueOnError)
	data := fs.String("data", "", "healthy spans, CSV as `genmodel extract` writes it (required)")
	version := fs.Int64("version", 0, "the model version to write (required, at least 1)")
	out := fs.String("out", "", "where to write the model (required), e.g. models/runtime_overlap/3/model.onnx")
	p := defaultForest
	fs.IntVar(&p.Trees, "trees", p.Trees, "number of trees")
	fs.IntVar(&p.SampleSize, "sample", p.SampleSize, "points each tree is grown on")
	fs.Uint64Var(&p.Seed, "seed", p.Seed, "seed of the random splits")
	if err := fs.Parse(args); err != nil {
		return err
	}
	switch {
	case *data == "" || *out == "":
		return errors.New("train: -data and -out are required")
	case *version < 1:
		return errors.New("train: -version must be at least 1")
	case p.Trees < 1 || p.SampleSize < 2:
		return errors.New("train: -trees must be at least 1 and -sample at least 2")
	}
	rows, err := readRows(*data)
	if err != nil {
		return fmt.Errorf("train: %w", err)
	}
	return writeModel(*out, forestModel(*version, trainForest(pointsOf(rows), p)))
}

func pointsOf(rows []row) [][4]float32 {
	points := make([][4]float32, len(rows))
	for i, r := range rows {
		points[i] = fractions(r)
	}
	return points
}

func writeModel(path string, model []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, model, 0o644)
}

const causes = "0 jvm.safepoint, 1 jvm.gc.pause, 2 python.gil.wait, 3 python.gc.pause"

// formulaModel is version 1: the arithmetic outputs alone.
func formulaModel() []byte {
	g := formulaGraph()
	return modelProto{
		irVersion:       8,
		opsets:          []opset{{domain: "", version: 13}},
		producerName:    "otelcol-ai genmodel",
		producerVersion: "1",
		domain:          "io.github.otelcol-ai",
		modelVersion:    formulaVersion,
		docString:       "runtime_overlap: the share of a span's latency explained by JVM and CPython runtime windows that overlapped it (runtimecorrelation's attributes).",
		graph:           g,
		metadata: [][2]string{
			{"features", fmt.Sprint(Features)},
			{"dominant_cause", causes},
		},
	}.marshal()
}

// forestModel is version 1's graph plus the forest's anomaly_score.
func forestModel(version int64, f isoForest) []byte {
	g := formulaGraph()
	g.docString = "How much of a span's latency the runtime windows overlapping it explain, and how unlike healthy spans its overlaps are."
	noneCause(&g)
	g.nodes = append(g.nodes,
		nodeProto{opType: "Div", name: "fractions", inputs: []string{"overlaps", "denominator_ms"}, outputs: []string{"fractions"}},
		f.node("fractions", "mean_path_length"),
		nodeProto{opType: "Mul", name: "log_score", inputs: []string{"mean_path_length", "score_factor"}, outputs: []string{"log_score"}},
		nodeProto{opType: "Exp", name: "anomaly_score", inputs: []string{"log_score"}, outputs: []string{"anomaly_score"}},
	)
	g.initializers = append(g.initializers, tensorProto{name: "score_factor", dataType: dataTypeFloat, floats: []float32{f.scoreFactor()}})
	g.outputs = append(g.outputs, valueInfo{name: "anomaly_score", elemType: dataTypeFloat, dims: []int64{-1, 1}, params: []string{"batch"},
		docString: "isolation-forest score in (0, 1) of the overlap fractions " + fmt.Sprint(forestFeatures) + ": near 1 is unlike the healthy spans trained on"})
	return modelProto{
		irVersion:       8,
		opsets:          []opset{{domain: "", version: 13}, {domain: "ai.onnx.ml", version: 3}},
		producerName:    "otelcol-ai genmodel",
		producerVersion: "2",
		domain:          "io.github.otelcol-ai",
		modelVersion:    version,
		docString:       "runtime_overlap: the share of a span's latency explained by JVM and CPython runtime windows that overlapped it, and an isolation-forest anomaly score of those overlaps.",
		graph:           g,
		metadata: [][2]string{
			{"features", fmt.Sprint(Features)},
			{"dominant_cause", causesV2},
			{"anomaly_score", fmt.Sprintf("isolation forest, %d trees, %d-point samples, over %v", len(f.trees), f.sampleSize, forestFeatures)},
		},
	}.marshal()
}

// noneCause makes dominant_cause -1 for a span no window overlapped (version
// 1 says 0, jvm.safepoint, there): ArgMax runs over the four overlaps after
// a column 0 holding a floor of 1e-9 ms, which wins only when every overlap
// is 0, and 1 is subtracted.
func noneCause(g *graphProto) {
	n := len(Features)
	w := tensorProto{name: "w_overlaps_or_none", dataType: dataTypeFloat, dims: []int64{int64(n), int64(n)}, floats: make([]float32, n*n)}
	for c := 1; c < n; c++ {
		w.floats[c*n+c] = 1
	}
	floor := tensorProto{name: "none_floor_ms", dataType: dataTypeFloat, dims: []int64{int64(n)}, floats: make([]float32, n)}
	floor.floats[0] = 1e-9
	one := tensorProto{name: "one_i64", dataType: dataTypeInt64, int64s: []int64{1}}
	// Nodes stay in topological order, as ONNX requires: the new inputs
	// of ArgMax before it, the Sub after it.
	var nodes []nodeProto
	for _, node := range g.nodes {
		if node.opType != "ArgMax" {
			nodes = append(nodes, node)
			continue
		}
		node.inputs, node.outputs, node.name = []string{"overlaps_or_none"}, []string{"dominant_column"}, "dominant_column"
		nodes = append(nodes,
			nodeProto{opType: "MatMul", name: "overlaps_after_none", inputs: []string{"features", "w_overlaps_or_none"}, outputs: []string{"overlaps_after_none"}},
			nodeProto{opType: "Add", name: "overlaps_or_none", inputs: []string{"overlaps_after_none", "none_floor_ms"}, outputs: []string{"overlaps_or_none"}},
			node,
			nodeProto{opType: "Sub", name: "dominant_cause", inputs: []string{"dominant_column", "one_i64"}, outputs: []string{"dominant_cause"}},
		)
	}
	g.nodes = nodes
	g.initializers = append(g.initializers, w, floor, one)
	for i, o := range g.outputs {
		if o.name == "dominant_cause" {
			g.outputs[i].docString = causesV2
		}
	}
}

const causesV2 = "-1 none, " + causes

// formulaGraph is the arithmetic part shared by every version.
func formulaGraph() graphProto {
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

	return graphProto{
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
			scalar("min_duration_ms", minDurationMs),
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
				docString: causes},
		},
	}
}
