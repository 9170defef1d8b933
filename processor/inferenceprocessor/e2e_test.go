package inferenceprocessor_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otelcol-ai/otelcol-ai/internal/e2etest"
)

func copyModel(t *testing.T, repo, model string, version int, src string) {
	t.Helper()
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	writeModel(t, repo, model, version, data)
}

// writeModel writes the file under a temporary name and renames it into
// place, as a careful deployment does; the settle time covers the others.
func writeModel(t *testing.T, repo, model string, version int, data []byte) {
	t.Helper()
	dir := filepath.Join(repo, model, strconv.Itoa(version))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(dir, ".model.onnx.tmp")
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, "model.onnx")); err != nil {
		t.Fatal(err)
	}
}

// overlay adds the extension and the processor to the embedded default
// configuration's traces pipeline.
func overlay(repo, features string) string {
	return fmt.Sprintf(`
extensions:
  onnxinference:
    repository: %s
    poll_interval: 200ms
    settle_time: 300ms
processors:
  inference:
%s
service:
  extensions: [health_check, onnxinference, file_storage, peerport, runtimestate]
  pipelines:
    traces:
      processors: [memory_limiter, inference, batch]
`, repo, features)
}

func send(t *testing.T, c *e2etest.Collector, prefix string, n int) {
	t.Helper()
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "e2e-inference")
	spans := rs.ScopeSpans().AppendEmpty().Spans()
	start := time.Now().Add(-time.Second)
	for i := 0; i < n; i++ {
		s := spans.AppendEmpty()
		s.SetName(fmt.Sprintf("%s-%d", prefix, i))
		s.SetTraceID(pcommon.TraceID([16]byte{7, byte(len(prefix)), prefix[0], byte(i)}))
		s.SetSpanID(pcommon.SpanID([8]byte{7, prefix[0], byte(i)}))
		s.SetStartTimestamp(pcommon.NewTimestampFromTime(start))
		s.SetEndTimestamp(pcommon.NewTimestampFromTime(start.Add(100 * time.Millisecond)))
		// i tenths of the span in a GC pause.
		s.Attributes().PutInt("runtime.overlap.jvm.gc.pause.duration", int64(i)*int64(10*time.Millisecond))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.SendTraces(ctx, td); err != nil {
		t.Fatalf("send %s: %v", prefix, err)
	}
}

// received returns the spans written so far whose name starts with prefix.
func received(t *testing.T, c *e2etest.Collector, prefix string) map[string]ptrace.Span {
	t.Helper()
	batches, err := c.Traces("traces.jsonl")
	if err != nil {
		return nil
	}
	out := map[string]ptrace.Span{}
	for _, td := range batches {
		for i := 0; i < td.ResourceSpans().Len(); i++ {
			sss := td.ResourceSpans().At(i).ScopeSpans()
			for j := 0; j < sss.Len(); j++ {
				for k := 0; k < sss.At(j).Spans().Len(); k++ {
					if s := sss.At(j).Spans().At(k); strings.HasPrefix(s.Name(), prefix+"-") {
						out[s.Name()] = s
					}
				}
			}
		}
	}
	return out
}

// round sends n spans named prefix-i and waits until all come back.
func round(t *testing.T, c *e2etest.Collector, prefix string, n int) map[string]ptrace.Span {
	t.Helper()
	send(t, c, prefix, n)
	var got map[string]ptrace.Span
	if err := c.Eventually(20*time.Second, func() bool {
		got = received(t, c, prefix)
		return len(got) == n
	}); err != nil {
		t.Fatalf("%s: %d of %d spans came back: %v", prefix, len(got), n, err)
	}
	return got
}

func labels(t *testing.T, spans map[string]ptrace.Span) map[int64]int {
	t.Helper()
	out := map[int64]int{}
	for _, s := range spans {
		v, ok := s.Attributes().Get("inference.model.version")
		if !ok {
			out[-1]++
			continue
		}
		out[v.Int()]++
	}
	return out
}

func TestEndToEndVersionsThroughTheBinary(t *testing.T) {
	e2etest.RequireComponents(t, "onnxinference", "inference")
	repo := t.TempDir()
	copyModel(t, repo, "runtime_overlap", 1, filepath.Join("..", "..", "models", "runtime_overlap", "2", "model.onnx"))
	c := e2etest.Start(t, e2etest.Options{Configs: []string{"embedded:default"}, ConfigYAML: overlay(repo, "    {}")})
	if err := c.WaitHealthy(60 * time.Second); err != nil {
		t.Fatal(err)
	}

	// Spans come back annotated by version 1, with values that follow the
	// overlap each carried.
	got := round(t, c, "v1", 10)
	for i := 0; i < 10; i++ {
		s := got[fmt.Sprintf("v1-%d", i)]
		name, _ := s.Attributes().Get("inference.model.name")
		version, _ := s.Attributes().Get("inference.model.version")
		frac, ok := s.Attributes().Get("inference.runtime_overlap.explained_fraction")
		if name.Str() != "runtime_overlap" || version.Int() != 1 || !ok {
			t.Fatalf("span %d: %v", i, s.Attributes().AsRaw())
		}
		if d := frac.Double() - float64(i)/10; d > 1e-5 || d < -1e-5 {
			t.Fatalf("span %d: explained_fraction %v, want %v", i, frac.Double(), float64(i)/10)
		}
	}

	// A new version dropped into the repository changes the label, no restart.
	copyModel(t, repo, "runtime_overlap", 2, filepath.Join("..", "..", "models", "runtime_overlap", "2", "model.onnx"))
	for attempt := 0; ; attempt++ {
		if l := labels(t, round(t, c, "v2."+strconv.Itoa(attempt), 5)); l[2] == 5 {
			break
		}
		if attempt == 50 {
			t.Fatal("version 2 never labelled the spans")
		}
		time.Sleep(200 * time.Millisecond)
	}

	// A corrupt version 3 keeps version 2 serving and the collector healthy.
	writeModel(t, repo, "runtime_overlap", 3, []byte("\x08\x08garbage, not a model"))
	if err := c.Eventually(20*time.Second, func() bool { return strings.Contains(c.Log(), `version 3`) }); err != nil {
		t.Fatalf("the corrupt version 3 was never reported: %v", err)
	}
	if l := labels(t, round(t, c, "corrupt", 5)); l[2] != 5 {
		t.Fatalf("after a corrupt version 3: labels %v, want all 2", l)
	}
	if err := c.WaitHealthy(5 * time.Second); err != nil {
		t.Fatalf("unhealthy after a corrupt version: %v", err)
	}

	// A version whose input has another shape is reported and refused; the
	// spans still arrive, judged by version 2.
	copyModel(t, repo, "runtime_overlap", 4, filepath.Join("testdata", "models", "sklearn_randomforest.onnx"))
	if err := c.Eventually(20*time.Second, func() bool {
		log := c.Log()
		return strings.Contains(log, "version 4") && strings.Contains(log, "features")
	}); err != nil {
		t.Fatalf("the shape mismatch of version 4 was never reported: %v", err)
	}
	if l := labels(t, round(t, c, "mismatch", 5)); l[2] != 5 {
		t.Fatalf("after an unfit version 4: labels %v, want all 2", l)
	}
	if code, err := c.Stop(30 * time.Second); err != nil || code != 0 {
		t.Fatalf("stop: exit %d, %v", code, err)
	}
}

func TestEndToEndWrongConfigFailsAtStartup(t *testing.T) {
	e2etest.RequireComponents(t, "onnxinference", "inference")
	repo := t.TempDir()
	copyModel(t, repo, "runtime_overlap", 1, filepath.Join("..", "..", "models", "runtime_overlap", "2", "model.onnx"))
	// Four features for a model that takes five.
	features := `    features:
      - field: duration
      - field: status
      - field: kind
      - attribute: x
        default: 0`
	c := e2etest.Start(t, e2etest.Options{Configs: []string{"embedded:default"}, ConfigYAML: overlay(repo, features)})
	if err := c.Eventually(60*time.Second, c.Exited); err != nil {
		t.Fatalf("the collector kept running with a model that does not fit: %v", err)
	}
	log := c.Log()
	for _, want := range []string{`model "runtime_overlap"`, "features", "4 features configured"} {
		if !strings.Contains(log, want) {
			t.Errorf("startup error does not mention %q:\n%s", want, log)
		}
	}
}

// A logs pipeline with an OTTL condition: only the selected records are judged.
func TestEndToEndLogs(t *testing.T) {
	e2etest.RequireComponents(t, "onnxinference", "inference")
	repo := t.TempDir()
	copyModel(t, repo, "runtime_overlap", 1, filepath.Join("..", "..", "models", "runtime_overlap", "2", "model.onnx"))
	config := fmt.Sprintf(`
extensions:
  onnxinference:
    repository: %s
processors:
  inference/logs:
    conditions: ['attributes["request.duration_ms"] != nil']
    features:
      - attribute: request.duration_ms
      - attribute: gc_ms
        default: 0
      - attribute: none
        default: 0
      - attribute: none
        default: 0
      - attribute: none
        default: 0
    outputs:
      - output: explained_fraction
        attribute: gc.share
service:
  extensions: [health_check, onnxinference, file_storage, peerport, runtimestate]
  pipelines:
    logs:
      processors: [memory_limiter, inference/logs, batch]
`, repo)
	c := e2etest.Start(t, e2etest.Options{Configs: []string{"embedded:default"}, ConfigYAML: config})
	if err := c.WaitHealthy(60 * time.Second); err != nil {
		t.Fatal(err)
	}
	ld := plog.NewLogs()
	records := ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords()
	for i, attrs := range []map[string]any{
		{"request.duration_ms": 200.0, "gc_ms": 50.0, "n": 0},
		{"request.duration_ms": 100.0, "n": 1},
		{"message": "not a request", "n": 2},
	} {
		r := records.AppendEmpty()
		r.SetTimestamp(pcommon.NewTimestampFromTime(time.Now()))
		r.Body().SetStr(fmt.Sprintf("record %d", i))
		_ = r.Attributes().FromRaw(attrs)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.SendLogs(ctx, ld); err != nil {
		t.Fatal(err)
	}
	var got []plog.LogRecord
	if err := c.Eventually(20*time.Second, func() bool {
		got = got[:0]
		batches, err := c.Logs("logs.jsonl")
		if err != nil {
			return false
		}
		for _, b := range batches {
			for i := 0; i < b.ResourceLogs().Len(); i++ {
				sls := b.ResourceLogs().At(i).ScopeLogs()
				for j := 0; j < sls.Len(); j++ {
					for k := 0; k < sls.At(j).LogRecords().Len(); k++ {
						// Only this test's records: the default config's
						// receivers add the host's own runtime windows.
						r := sls.At(j).LogRecords().At(k)
						if _, ok := r.Attributes().Get("n"); ok && strings.HasPrefix(r.Body().Str(), "record ") {
							got = append(got, r)
						}
					}
				}
			}
		}
		return len(got) == 3
	}); err != nil {
		t.Fatalf("%d of 3 log records came back: %v", len(got), err)
	}
	want := map[int64]float64{0: 0.25, 1: 0, 2: -1} // -1: not judged
	for _, r := range got {
		n, _ := r.Attributes().Get("n")
		share, judged := r.Attributes().Get("gc.share")
		switch w := want[n.Int()]; {
		case w < 0 && judged:
			t.Errorf("record %d judged though no condition matched: %v", n.Int(), r.Attributes().AsRaw())
		case w >= 0 && (!judged || share.Double() != w):
			t.Errorf("record %d: gc.share %v (judged %v), want %v", n.Int(), share.Double(), judged, w)
		}
	}
}
