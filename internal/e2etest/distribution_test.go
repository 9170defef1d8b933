package e2etest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.yaml.in/yaml/v3"
)

// makeTraces builds n spans named "<prefix>-<i>" in one resource, each with
// an attribute carrying i.
func makeTraces(prefix string, n int) ptrace.Traces {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "e2e-inference")
	spans := rs.ScopeSpans().AppendEmpty().Spans()
	start := time.Now().Add(-time.Second)
	for i := range n {
		s := spans.AppendEmpty()
		s.SetName(fmt.Sprintf("%s-%d", prefix, i))
		s.SetTraceID(pcommon.TraceID([16]byte{1, 2, 3, byte(i >> 8), byte(i)}))
		s.SetSpanID(pcommon.SpanID([8]byte{9, byte(i >> 8), byte(i)}))
		s.SetStartTimestamp(pcommon.NewTimestampFromTime(start))
		s.SetEndTimestamp(pcommon.NewTimestampFromTime(start.Add(time.Duration(i+1) * time.Millisecond)))
		s.Attributes().PutInt("request.index", int64(i))
	}
	return td
}

// spanIndexes returns, per span name, the request.index attribute seen.
func spanIndexes(batches []ptrace.Traces) map[string]int64 {
	seen := map[string]int64{}
	forEachSpan(batches, func(s ptrace.Span) {
		v, _ := s.Attributes().Get("request.index")
		seen[s.Name()] = v.Int()
	})
	return seen
}

func forEachSpan(batches []ptrace.Traces, f func(ptrace.Span)) {
	for _, td := range batches {
		for i := 0; i < td.ResourceSpans().Len(); i++ {
			ss := td.ResourceSpans().At(i).ScopeSpans()
			for j := 0; j < ss.Len(); j++ {
				spans := ss.At(j).Spans()
				for k := 0; k < spans.Len(); k++ {
					f(spans.At(k))
				}
			}
		}
	}
}

func TestDefaultConfigRoundTrip(t *testing.T) {
	c := Start(t, Options{Configs: []string{"embedded:default"}})
	if err := c.WaitHealthy(60 * time.Second); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// Traces over gRPC come back from the file exporter with their attributes.
	if err := c.SendTraces(ctx, makeTraces("infer", 50)); err != nil {
		t.Fatalf("send traces: %v", err)
	}
	var seen map[string]int64
	if err := c.Eventually(20*time.Second, func() bool {
		batches, err := c.Traces("traces.jsonl")
		if err != nil {
			t.Fatal(err)
		}
		seen = spanIndexes(batches)
		return len(seen) >= 50
	}); err != nil {
		t.Fatalf("traces: got %d of 50 spans: %v", len(seen), err)
	}
	for i := range 50 {
		if got, ok := seen[fmt.Sprintf("infer-%d", i)]; !ok || got != int64(i) {
			t.Errorf("span infer-%d: request.index = %d (present %v), want %d", i, got, ok, i)
		}
	}
	// The default traces pipeline scores every span with the shipped model.
	batches, err := c.Traces("traces.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	forEachSpan(batches, func(s ptrace.Span) {
		name, _ := s.Attributes().Get("inference.model.name")
		version, _ := s.Attributes().Get("inference.model.version")
		if name.AsString() != "runtime_overlap" || version.AsString() != "2" {
			t.Errorf("span %s: inference.model.name=%q version=%q, want runtime_overlap 2 (the latest shipped)", s.Name(), name.AsString(), version.AsString())
		}
		if score, ok := s.Attributes().Get("inference.runtime_overlap.anomaly_score"); !ok || score.Double() <= 0 || score.Double() >= 1 {
			t.Errorf("span %s: inference.runtime_overlap.anomaly_score %v (present %v), want a score in (0, 1)", s.Name(), score.AsString(), ok)
		}
	})

	// Logs over HTTP.
	ld := plog.NewLogs()
	lr := ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords().AppendEmpty()
	lr.SetEventName("jvm.safepoint")
	lr.Body().SetStr("safepoint from e2e")
	lr.Attributes().PutInt("runtime.window.duration", 1_500_000)
	if err := c.SendLogsHTTP(ctx, ld); err != nil {
		t.Fatalf("send logs: %v", err)
	}
	if err := c.Eventually(20*time.Second, func() bool {
		batches, err := c.Logs("logs.jsonl")
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range batches {
			rl := b.ResourceLogs()
			for i := 0; i < rl.Len(); i++ {
				recs := rl.At(i).ScopeLogs().At(0).LogRecords()
				for j := 0; j < recs.Len(); j++ {
					r := recs.At(j)
					d, _ := r.Attributes().Get("runtime.window.duration")
					if r.EventName() == "jvm.safepoint" && r.Body().Str() == "safepoint from e2e" && d.Int() == 1_500_000 {
						return true
					}
				}
			}
		}
		return false
	}); err != nil {
		t.Fatalf("logs: %v", err)
	}

	// A gauge over gRPC shows on the Prometheus endpoint and in the file.
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	rm.Resource().Attributes().PutStr("service.name", "e2e-inference")
	m := rm.ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
	m.SetName("e2e.queue.depth")
	dp := m.SetEmptyGauge().DataPoints().AppendEmpty()
	dp.SetIntValue(42)
	dp.SetTimestamp(pcommon.NewTimestampFromTime(time.Now()))
	if err := c.SendMetrics(ctx, md); err != nil {
		t.Fatalf("send metrics: %v", err)
	}
	if err := c.Eventually(20*time.Second, func() bool {
		body, err := Get("http://" + c.Endpoints.Prometheus + "/metrics")
		return err == nil && strings.Contains(body, `e2e_queue_depth{`) && strings.Contains(body, `service_name="e2e-inference"`) && containsSampleValue(body, "e2e_queue_depth", "42")
	}); err != nil {
		t.Fatalf("prometheus: %v", err)
	}
	// The collector's own telemetry is served too.
	if body, err := Get("http://" + c.Endpoints.Telemetry + "/metrics"); err != nil || !strings.Contains(body, "otelcol_receiver_accepted_spans") {
		t.Errorf("self-telemetry: err=%v, has otelcol_receiver_accepted_spans=%v", err, strings.Contains(body, "otelcol_receiver_accepted_spans"))
	}
	if rss, err := c.RSS(); err == nil {
		t.Logf("collector RSS on the default config after traffic: %.1f MiB", float64(rss)/(1<<20))
	}

	// Spans accepted just before SIGTERM are not lost: batch and file
	// exporter flush on shutdown.
	if err := c.SendTraces(ctx, makeTraces("last", 200)); err != nil {
		t.Fatalf("send last traces: %v", err)
	}
	code, err := c.Stop(30 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if code != 0 {
		t.Fatalf("exit code %d after SIGTERM, want 0", code)
	}
	batches, err = c.Traces("traces.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	seen = spanIndexes(batches)
	for i := range 200 {
		if _, ok := seen[fmt.Sprintf("last-%d", i)]; !ok {
			t.Fatalf("span last-%d accepted before SIGTERM is missing from the file exporter output (%d spans there)", i, len(seen))
		}
	}
	if !strings.Contains(c.Log(), "Shutdown complete") {
		t.Errorf("collector log has no clean shutdown message")
	}
	// The shipped configuration uses current component names.
	for _, line := range strings.Split(c.Log(), "\n") {
		if strings.Contains(line, "is deprecated") {
			t.Errorf("default config logs a deprecation: %s", line)
		}
	}
}

func containsSampleValue(body, metric, value string) bool {
	for _, line := range strings.Split(body, "\n") {
		if strings.HasPrefix(line, metric+"{") && strings.HasSuffix(strings.TrimSpace(line), " "+value) {
			return true
		}
	}
	return false
}

// expectedComponents are the component types the distribution bundles; a
// component added to builder-config.yaml is added here.
var expectedComponents = map[string][]string{
	"receivers":  {"nvml", "pythongil", "jfr", "otlp", "prometheus", "host_metrics", "file_log"},
	"processors": {"inference", "runtimecorrelation", "batch", "memory_limiter", "resource", "resource_detection", "k8s_attributes", "transform", "filter"},
	"exporters":  {"otlp_grpc", "otlp_http", "debug", "file", "prometheus", "load_balancing"},
	"extensions": {"onnxinference", "timeline", "peerport", "runtimestate", "zpages", "health_check", "pprof", "file_storage"},
	"connectors": {"span_metrics"},
	"providers":  {"env", "file", "yaml", "embedded"},
}

func TestComponentsListsEveryBundledComponent(t *testing.T) {
	res := Run(t, nil, "components")
	if res.ExitCode != 0 {
		t.Fatalf("components exited %d: %s", res.ExitCode, res.Stderr)
	}
	var out map[string]any
	if err := yaml.Unmarshal([]byte(res.Stdout), &out); err != nil {
		t.Fatalf("components output is not YAML: %v\n%s", err, res.Stdout)
	}
	for kind, want := range expectedComponents {
		got := map[string]bool{}
		list, _ := out[kind].([]any)
		for _, item := range list {
			entry, _ := item.(map[string]any)
			if name, ok := entry["name"].(string); ok {
				got[name] = true
			} else if scheme, ok := entry["scheme"].(string); ok {
				got[scheme] = true
			}
		}
		for _, w := range want {
			if !got[w] {
				t.Errorf("%s: %q not listed (have %v)", kind, w, got)
			}
		}
	}
	// The builder config and this test list the same number of components.
	root, err := ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(root, "builder-config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var manifest map[string]any
	if err := yaml.Unmarshal(raw, &manifest); err != nil {
		t.Fatal(err)
	}
	for kind, want := range expectedComponents {
		entries, _ := manifest[kind].([]any)
		if len(entries) != len(want) {
			t.Errorf("builder-config.yaml lists %d %s, this test expects %d: keep them in step", len(entries), kind, len(want))
		}
	}
}

func TestVersion(t *testing.T) {
	res := Run(t, nil, "--version")
	if res.ExitCode != 0 || !strings.Contains(res.Stdout, "otelcol-ai version") {
		t.Fatalf("--version: exit %d, stdout %q, stderr %q", res.ExitCode, res.Stdout, res.Stderr)
	}
}

// TestInvalidConfigFailsNamingComponentAndKey runs `validate` on broken
// configurations: each must fail and the message must name the component and
// the key, so a user can find the line to fix.
func TestInvalidConfigFailsNamingComponentAndKey(t *testing.T) {
	tests := []struct {
		name    string
		overlay string
		want    []string
	}{
		{
			name:    "unknown key",
			overlay: "receivers:\n  otlp:\n    protocols:\n      grpc:\n        endpont: 127.0.0.1:4317\n",
			want:    []string{"otlp", "endpont"},
		},
		{
			name:    "bad value",
			overlay: "processors:\n  batch:\n    timeout: soon\n",
			want:    []string{"batch", "timeout"},
		},
		{
			name:    "missing extension reference",
			overlay: "service:\n  extensions: [health_check, peerport, file_storage/missing]\n",
			want:    []string{"file_storage/missing", "extension"},
		},
		{
			name:    "unknown embedded configuration",
			overlay: "",
			want:    []string{"embedded", "nope"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := []string{"validate", "--config", "embedded:default"}
			if tt.overlay == "" {
				args = []string{"validate", "--config", "embedded:nope"}
			} else {
				path := filepath.Join(t.TempDir(), "overlay.yaml")
				if err := os.WriteFile(path, []byte(tt.overlay), 0o600); err != nil {
					t.Fatal(err)
				}
				args = append(args, "--config", path)
			}
			res := Run(t, nil, args...)
			if res.ExitCode == 0 {
				t.Fatalf("validate accepted a broken config\nstdout: %s\nstderr: %s", res.Stdout, res.Stderr)
			}
			msg := res.Stdout + res.Stderr
			for _, w := range tt.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error message does not name %q:\n%s", w, msg)
				}
			}
		})
	}
}

func TestShippedConfigsValidate(t *testing.T) {
	for _, name := range []string{"embedded:default", "embedded:gateway"} {
		res := Run(t, nil, "validate", "--config", name)
		if res.ExitCode != 0 {
			t.Errorf("validate %s: exit %d\n%s%s", name, res.ExitCode, res.Stdout, res.Stderr)
		}
	}
}
