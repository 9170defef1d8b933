package main

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	ort "github.com/yalue/onnxruntime_go"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

func committed(t *testing.T, version string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "models", "runtime_overlap", version, "model.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func shippedForest(t testing.TB) isoForest {
	t.Helper()
	rows, err := readRows(filepath.Join("data", "healthy-train.csv"))
	if err != nil {
		t.Fatal(err)
	}
	return trainForest(pointsOf(rows), defaultForest)
}

func loadRows(t testing.TB, name string) []row {
	t.Helper()
	rows, err := readRows(filepath.Join("data", name))
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

// The committed models are exactly what this program writes.
func TestCommittedModelsAreReproducible(t *testing.T) {
	if got := formulaModel(); !bytes.Equal(got, committed(t, "1")) {
		t.Fatal("models/runtime_overlap/1/model.onnx differs from genmodel's output: run `go run ./cmd/genmodel`")
	}
	if got := forestModel(forestVersion, shippedForest(t)); !bytes.Equal(got, committed(t, "2")) {
		t.Fatal("models/runtime_overlap/2/model.onnx differs from genmodel's output: run `go run ./cmd/genmodel`")
	}
}

func TestWritesTheShippedVersions(t *testing.T) {
	repo := t.TempDir()
	if err := run([]string{"-repository", repo, "-data", filepath.Join("data", "healthy-train.csv")}, nil); err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"1", "2"} {
		data, err := os.ReadFile(filepath.Join(repo, "runtime_overlap", v, "model.onnx"))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(data, committed(t, v)) {
			t.Fatalf("version %s written differs from the committed one", v)
		}
	}
}

// auc is the probability that a random stressed span scores above a random
// healthy one (ties count half).
func auc(healthy, stressed []float64) float64 {
	var wins float64
	for _, s := range stressed {
		for _, h := range healthy {
			switch {
			case s > h:
				wins++
			case s == h:
				wins += 0.5
			}
		}
	}
	return wins / float64(len(healthy)*len(stressed))
}

func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	return s[len(s)/2]
}

// The forest tells the spans of a service under allocation pressure that
// GC storms reached (safepoints and GC pauses inside the request) from spans
// of the same service without that pressure, on spans it was not trained on;
// spans of the pressured run that no JVM pause touched look healthy.
func TestForestDiscriminates(t *testing.T) {
	f := shippedForest(t)
	scores := func(rows []row) []float64 {
		out := make([]float64, len(rows))
		for i, r := range rows {
			out[i] = f.score(fractions(r))
		}
		return out
	}
	healthy := scores(loadRows(t, "healthy-holdout.csv"))
	var hit, missed []row
	for _, r := range loadRows(t, "stressed.csv") {
		if r[1] > 0 || r[2] > 0 {
			hit = append(hit, r)
		} else {
			missed = append(missed, r)
		}
	}
	stressed, untouched := scores(hit), scores(missed)
	a := auc(healthy, stressed)
	mh, ms := median(healthy), median(stressed)
	t.Logf("AUC %.4f (%d healthy spans, %d reached by JVM pauses); median score healthy %.3f, reached %.3f",
		a, len(healthy), len(stressed), mh, ms)
	if len(hit) < (len(hit)+len(missed))/2 {
		t.Fatalf("only %d of %d pressured spans were reached by a JVM pause: the data is not what it says", len(stressed), len(hit)+len(missed))
	}
	if a < 0.97 {
		t.Errorf("AUC %.4f, want at least 0.97", a)
	}
	if mh > 0.5 || ms < 0.7 {
		t.Errorf("median score healthy %.3f (want at most 0.5), reached %.3f (want at least 0.7)", mh, ms)
	}
	if len(untouched) > 0 {
		t.Logf("median score of the %d pressured spans no JVM pause reached: %.3f", len(untouched), median(untouched))
		if m := median(untouched); m > 0.6 {
			t.Errorf("spans no JVM pause reached score %.3f in the median, want at most 0.6 (they look healthy)", m)
		}
	}
	// A span with no overlap at all is the most ordinary of all; one spent
	// entirely in GC pauses the least.
	calm := f.score(fractions(row{20, 0, 0, 0, 0}))
	storm := f.score(fractions(row{20, 20, 20, 0, 0}))
	if calm > 0.5 || storm < 0.7 {
		t.Errorf("score without overlap %.3f (want at most 0.5), inside GC pauses %.3f (want at least 0.7)", calm, storm)
	}
	// Python GC pauses hardly ever reached a healthy span: the trees still
	// split on them, so a span spent in one stands out.
	if py := f.score(fractions(row{20, 0, 0, 0, 20})); py < 0.7 {
		t.Errorf("score of a span inside a Python GC pause %.3f, want at least 0.7", py)
	}
}

func TestForestIsDeterministic(t *testing.T) {
	points := pointsOf(loadRows(t, "healthy-train.csv"))
	a, b := trainForest(points, defaultForest), trainForest(points, defaultForest)
	if !bytes.Equal(forestModel(3, a), forestModel(3, b)) {
		t.Fatal("two trainings on the same data and seed differ")
	}
	other := trainForest(points, forestParams{Trees: 100, SampleSize: 256, Seed: 2})
	if bytes.Equal(forestModel(3, a), forestModel(3, other)) {
		t.Fatal("another seed grew the same forest")
	}
	for _, tree := range a.trees {
		if len(tree) < 3 {
			t.Fatalf("a tree of %d nodes: the trees never split", len(tree))
		}
	}
}

func TestAveragePathLength(t *testing.T) {
	for n, want := range map[int]float64{0: 0, 1: 0, 2: 1, 256: 10.2448} {
		if got := averagePathLength(n); math.Abs(got-want) > 1e-4 {
			t.Errorf("c(%d) = %.4f, want %.4f", n, got, want)
		}
	}
}

// ONNX Runtime computes the same outputs from the encoded model as the Go
// code that grew it.
func TestONNXRuntimeAgrees(t *testing.T) {
	lib := os.Getenv("OTELCOL_AI_ONNXRUNTIME_LIB")
	if lib == "" {
		t.Skip("OTELCOL_AI_ONNXRUNTIME_LIB is not set (make test sets it to the ONNX Runtime library it installs)")
	}
	ort.SetSharedLibraryPath(lib)
	if err := ort.InitializeEnvironment(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ort.DestroyEnvironment() }()

	f := shippedForest(t)
	rows := append(loadRows(t, "healthy-holdout.csv"), loadRows(t, "stressed.csv")...)
	rows = append(rows, row{0, 0, 0, 0, 0}, row{5, 0, 0, 9, 0}, row{3, 1, 2, 0, 0.5})
	data := make([]float32, 0, len(rows)*5)
	for _, r := range rows {
		data = append(data, r[:]...)
	}
	in, err := ort.NewTensor(ort.NewShape(int64(len(rows)), 5), data)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = in.Destroy() }()
	outputs := []string{"explained_fraction", "unexplained_ms", "dominant_cause", "anomaly_score"}
	opts, err := ort.NewSessionOptions()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = opts.Destroy() }()
	_ = opts.SetIntraOpNumThreads(1)
	session, err := ort.NewDynamicAdvancedSession(filepath.Join("..", "..", "models", "runtime_overlap", "2", "model.onnx"),
		[]string{"features"}, outputs, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = session.Destroy() }()
	out := make([]ort.Value, len(outputs))
	if err := session.Run([]ort.Value{in}, out); err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, v := range out {
			_ = v.Destroy()
		}
	}()
	explained := out[0].(*ort.Tensor[float32]).GetData()
	unexplained := out[1].(*ort.Tensor[float32]).GetData()
	cause := out[2].(*ort.Tensor[int64]).GetData()
	score := out[3].(*ort.Tensor[float32]).GetData()
	var mismatches []string
	for i, r := range rows {
		total := r[1] + r[2] + r[3] + r[4]
		wantExplained := min(max(total/max(r[0], minDurationMs), 0), 1)
		wantUnexplained := max(r[0]-total, 0)
		wantCause := int64(-1) // nothing overlapped
		if total > 0 {
			wantCause = 0
			for k := 1; k < 4; k++ {
				if r[k+1] > r[wantCause+1] {
					wantCause = int64(k)
				}
			}
		}
		wantScore := f.score(fractions(r))
		if math.Abs(float64(explained[i]-wantExplained)) > 1e-6 || math.Abs(float64(unexplained[i]-wantUnexplained)) > 1e-4 ||
			cause[i] != wantCause || math.Abs(float64(score[i])-wantScore) > 1e-5 {
			mismatches = append(mismatches, fmt.Sprintf("row %v: onnx %v %v %v %v, go %v %v %v %v", r,
				explained[i], unexplained[i], cause[i], score[i], wantExplained, wantUnexplained, wantCause, wantScore))
		}
	}
	if len(mismatches) > 0 {
		t.Fatalf("%d of %d rows differ, e.g.:\n%s", len(mismatches), len(rows), strings.Join(mismatches[:min(5, len(mismatches))], "\n"))
	}
}

func TestReadRowsRefusesBadData(t *testing.T) {
	dir := t.TempDir()
	for name, tt := range map[string]struct{ text, want string }{
		"header":   {"duration,a,b,c,d\n1,0,0,0,0\n", `column 1 is "duration", want "duration_ms"`},
		"negative": {strings.Join(Features, ",") + "\n1,0,0,0,0\n5,-1,0,0,0\n", `:3: column jvm_safepoint_ms: "-1" is not a non-negative number`},
		"nan":      {strings.Join(Features, ",") + "\n1,0,NaN,0,0\n", `column jvm_gc_pause_ms: "NaN"`},
		"short":    {strings.Join(Features, ",") + "\n1,0,0\n", "wrong number of fields"},
		"empty":    {strings.Join(Features, ",") + "\n", "no rows"},
	} {
		path := filepath.Join(dir, name+".csv")
		if err := os.WriteFile(path, []byte(tt.text), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := readRows(path)
		if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), path) {
			t.Errorf("%s: error %v, want one naming the file and %q", name, err, tt.want)
		}
	}
}

// extract reads the file exporter's spans the way the processor's default
// configuration does, and train turns them into a model that loads.
func TestExtractThenTrain(t *testing.T) {
	dir := t.TempDir()
	td := ptrace.NewTraces()
	spans := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans()
	for i := range 300 {
		s := spans.AppendEmpty()
		s.SetStartTimestamp(pcommon.Timestamp(1_000_000_000))
		s.SetEndTimestamp(pcommon.Timestamp(1_000_000_000 + int64(10+i%20)*1_000_000))
		s.Attributes().PutInt("runtime.overlap.python.gil.wait.duration", int64(i%7)*1_000_000)
		if i%3 == 0 {
			s.Attributes().PutDouble("runtime.overlap.jvm.safepoint.duration", 250_000)
		}
		if i == 0 {
			s.Attributes().PutStr("runtime.overlap.python.gc.pause.duration", "1500000")
		}
	}
	// Garbage left out: a span ending before it starts, a negative overlap.
	bad := spans.AppendEmpty()
	bad.SetStartTimestamp(pcommon.Timestamp(2_000_000_000))
	bad.SetEndTimestamp(pcommon.Timestamp(1_000_000_000))
	bad = spans.AppendEmpty()
	bad.SetStartTimestamp(pcommon.Timestamp(1_000_000_000))
	bad.SetEndTimestamp(pcommon.Timestamp(2_000_000_000))
	bad.Attributes().PutInt("runtime.overlap.jvm.gc.pause.duration", -5)
	line, err := (&ptrace.JSONMarshaler{}).MarshalTraces(td)
	if err != nil {
		t.Fatal(err)
	}
	traces := filepath.Join(dir, "traces.jsonl")
	if err := os.WriteFile(traces, append(append(line, '\n'), append(line, '\n')...), 0o600); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := run([]string{"extract", traces}, &out); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "spans.csv")
	if err := os.WriteFile(data, out.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	rows, err := readRows(data)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 600 || rows[0] != (row{10, 0.25, 0, 0, 1.5}) || rows[1] != (row{11, 0, 0, 1, 0}) {
		t.Fatalf("%d rows, first %v and %v", len(rows), rows[0], rows[1])
	}
	model := filepath.Join(dir, "runtime_overlap", "7", "model.onnx")
	if err := run([]string{"train", "-data", data, "-version", "7", "-out", model, "-trees", "10"}, nil); err != nil {
		t.Fatal(err)
	}
	written, err := os.ReadFile(model)
	if err != nil {
		t.Fatal(err)
	}
	want := forestModel(7, trainForest(pointsOf(rows), forestParams{Trees: 10, SampleSize: 256, Seed: 1}))
	if !bytes.Equal(written, want) {
		t.Fatal("train wrote another model than its forest")
	}
	for _, args := range [][]string{
		{"train", "-data", data, "-out", model},
		{"train", "-version", "2", "-out", model},
		{"train", "-data", data, "-version", "2", "-out", model, "-sample", "1"},
		{"extract"},
		{"extract", filepath.Join(dir, "missing.jsonl")},
	} {
		if err := run(args, &out); err == nil {
			t.Errorf("%v: no error", args)
		}
	}
}
