//go:build arm64smoke

// The cross-built linux/arm64 collector under qemu-user-static: it starts,
// reports its version, lists the project's components, validates both
// embedded configurations, and runs the shipped runtime_overlap model on a
// span through ONNX Runtime's arm64 library, with the same results as the
// host's binary when $OTELCOL_AI_BIN is set.
//
// Run by `make arm64-smoke` (ARM64_BIN, ARM64_ORT_LIB, ARM64_SYSROOT,
// VERSION); needs qemu-aarch64-static and an aarch64 sysroot with libc and
// libstdc++ (Debian's libc6-arm64-cross, libstdc++6-arm64-cross).

package arm64smoke

import (
	"bytes"
	"context"
	"debug/elf"
	"encoding/json"
	"fmt"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func need(t *testing.T, what string, ok bool) {
	t.Helper()
	if ok {
		return
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("%s (CI is set: this test must not skip)", what)
	}
	t.Skip(what)
}

type target struct {
	bin, ortLib, sysroot, version, qemu string
}

func setup(t *testing.T) target {
	t.Helper()
	tg := target{bin: os.Getenv("ARM64_BIN"), ortLib: os.Getenv("ARM64_ORT_LIB"), sysroot: os.Getenv("ARM64_SYSROOT"), version: os.Getenv("VERSION")}
	need(t, "ARM64_BIN, ARM64_ORT_LIB, ARM64_SYSROOT, VERSION unset: run `make arm64-smoke`", tg.bin != "" && tg.ortLib != "" && tg.sysroot != "" && tg.version != "")
	q, err := exec.LookPath("qemu-aarch64-static")
	need(t, "qemu-aarch64-static not installed (apt-get install qemu-user-static)", err == nil)
	tg.qemu = q
	for _, f := range []string{tg.bin, tg.ortLib} {
		e, err := elf.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		if e.Machine != elf.EM_AARCH64 || e.Class != elf.ELFCLASS64 {
			t.Fatalf("%s is %v %v, not aarch64", f, e.Class, e.Machine)
		}
		e.Close()
	}
	return tg
}

func (tg target) command(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, tg.qemu, append([]string{"-L", tg.sysroot, tg.bin}, args...)...)
	cmd.Env = append(os.Environ(), "OTELCOL_AI_ONNXRUNTIME_LIB="+tg.ortLib)
	return cmd
}

func (tg target) run(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	start := time.Now()
	out, err := tg.command(ctx, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("qemu %s %v: %v\n%s", filepath.Base(tg.bin), args, err, out)
	}
	t.Logf("%v: %v under qemu", args, time.Since(start).Round(time.Millisecond))
	return string(out)
}

func TestVersionComponentsValidate(t *testing.T) {
	tg := setup(t)
	if out := tg.run(t, "--version"); !strings.Contains(out, "otelcol-ai version "+tg.version) {
		t.Errorf("--version: %q, want otelcol-ai version %s", out, tg.version)
	}
	out := tg.run(t, "components")
	for _, name := range []string{"nvml", "jfr", "pythongil", "runtimecorrelation", "inference", "onnxinference", "otlp", "file_storage"} {
		if !strings.Contains(out, "name: "+name+"\n") {
			t.Errorf("components does not list %s", name)
		}
	}
	for _, cfg := range []string{"embedded:default", "embedded:gateway"} {
		tg.run(t, "validate", "--config", cfg)
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

const modelConfig = `
extensions:
  onnxinference:
    repository: ${env:MODELS}
receivers:
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:${env:HTTP_PORT}
processors:
  inference: {}
exporters:
  file:
    path: ${env:OUT}/traces.jsonl
service:
  extensions: [onnxinference]
  telemetry:
    metrics:
      level: none
  pipelines:
    traces:
      receivers: [otlp]
      processors: [inference]
      exporters: [file]
`

// A 250 ms span with a 40 ms GC pause and a 10 ms GIL wait inside it.
const span = `{"resourceSpans":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"arm64-smoke"}}]},
"scopeSpans":[{"spans":[{"traceId":"5b8efff798038103d269b633813fc60c","spanId":"eee19b7ec3c1b174","name":"predict","kind":2,
"startTimeUnixNano":"1764547200000000000","endTimeUnixNano":"1764547200250000000","attributes":[
{"key":"runtime.overlap.jvm.gc.pause.duration","value":{"intValue":"40000000"}},
{"key":"runtime.overlap.python.gil.wait.duration","value":{"intValue":"10000000"}}]}]}]}]}`

// scoreSpan runs the model config with the binary start runs (its command
// carrying its whole environment), sends the span, and
// returns the inference.* attributes of what the file exporter wrote.
func scoreSpan(t *testing.T, start func(ctx context.Context, args ...string) *exec.Cmd, models string) map[string]float64 {
	t.Helper()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfg, []byte(modelConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	port := freePort(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cmd := start(ctx, "--config", cfg)
	cmd.Env = append(cmd.Env, "MODELS="+models, fmt.Sprintf("HTTP_PORT=%d", port), "OUT="+dir)
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	began := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			cancel()
			<-done
		}
		if t.Failed() {
			t.Logf("collector output:\n%s", logs.String())
		}
	}()
	var err error
	for deadline := time.Now().Add(3 * time.Minute); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		var resp *http.Response
		resp, err = http.Post(fmt.Sprintf("http://127.0.0.1:%d/v1/traces", port), "application/json", strings.NewReader(span))
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
			err = fmt.Errorf("POST /v1/traces: %s", resp.Status)
		}
	}
	if err != nil {
		t.Fatalf("the collector took no span within 3 minutes: %v", err)
	}
	t.Logf("accepted a span %v after start", time.Since(began).Round(time.Millisecond))
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		data, _ := os.ReadFile(filepath.Join(dir, "traces.jsonl"))
		if attrs := inferenceAttributes(t, data); len(attrs) > 0 {
			return attrs
		}
	}
	t.Fatal("no span with inference.* attributes written within a minute")
	return nil
}

func inferenceAttributes(t *testing.T, data []byte) map[string]float64 {
	out := map[string]float64{}
	for _, line := range bytes.Split(data, []byte("\n")) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var doc struct {
			ResourceSpans []struct {
				ScopeSpans []struct {
					Spans []struct {
						Attributes []struct {
							Key   string
							Value map[string]any
						}
					}
				}
			}
		}
		if err := json.Unmarshal(line, &doc); err != nil {
			t.Fatalf("traces.jsonl: %v", err)
		}
		for _, rs := range doc.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					for _, a := range s.Attributes {
						if !strings.HasPrefix(a.Key, "inference.runtime_overlap.") {
							continue
						}
						var v float64
						switch x := a.Value["doubleValue"].(type) {
						case float64:
							v = x
						default:
							if s, ok := a.Value["intValue"].(string); ok {
								fmt.Sscan(s, &v)
							} else {
								t.Fatalf("%s: value %v", a.Key, a.Value)
							}
						}
						out[strings.TrimPrefix(a.Key, "inference.runtime_overlap.")] = v
					}
				}
			}
		}
	}
	return out
}

func TestRunsTheShippedModel(t *testing.T) {
	tg := setup(t)
	models, err := filepath.Abs("../../../dist/models")
	if err != nil {
		t.Fatal(err)
	}
	if m := os.Getenv("MODELS_DIR"); m != "" {
		models = m
	}
	if _, err := os.Stat(filepath.Join(models, "runtime_overlap")); err != nil {
		t.Fatalf("model repository: %v", err)
	}
	got := scoreSpan(t, tg.command, models)
	t.Logf("arm64: %v", got)
	// 50 of 250 ms explained by the overlaps, 200 ms not; the GC pause
	// dominates.
	if math.Abs(got["explained_fraction"]-0.2) > 1e-3 || math.Abs(got["unexplained_ms"]-200) > 0.1 || got["dominant_cause"] != 1 {
		t.Errorf("arm64 model results %v, want explained_fraction 0.2, unexplained_ms 200, dominant_cause 1 (JVM GC)", got)
	}
	if s, ok := got["anomaly_score"]; !ok || s < 0 || s > 1 {
		t.Errorf("anomaly_score %v (present %v), want one in [0, 1]", s, ok)
	}
	host := os.Getenv("OTELCOL_AI_BIN")
	if host == "" {
		t.Log("OTELCOL_AI_BIN unset: not comparing with the host's binary")
		return
	}
	want := scoreSpan(t, func(ctx context.Context, args ...string) *exec.Cmd {
		cmd := exec.CommandContext(ctx, host, args...)
		cmd.Env = os.Environ()
		return cmd
	}, models)
	t.Logf("host: %v", want)
	for k, w := range want {
		if math.Abs(got[k]-w) > 1e-5*math.Max(1, math.Abs(w)) {
			t.Errorf("%s: arm64 %v, host %v", k, got[k], w)
		}
	}
}
