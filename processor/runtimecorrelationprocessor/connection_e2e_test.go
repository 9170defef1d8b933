package runtimecorrelationprocessor_test

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otelcol-ai/otelcol-ai/internal/e2etest"
	"github.com/otelcol-ai/otelcol-ai/internal/window"
)

// EnvPythonOTelVenv names a venv with the OpenTelemetry Python SDK and its
// OTLP/gRPC exporter; by default the module's .cache/e2e-containers/venv,
// which `make test-deps` fills for the containers end-to-end test (this
// test uses none of its container-id detector).
const EnvPythonOTelVenv = "OTELCOL_AI_PYOTEL_VENV"

// otelPython returns the venv's python, skipping the test when the venv
// or its packages are missing.
func otelPython(t *testing.T) string {
	t.Helper()
	venv := os.Getenv(EnvPythonOTelVenv)
	if venv == "" {
		root, err := e2etest.ModuleRoot()
		if err != nil {
			t.Fatal(err)
		}
		venv = filepath.Join(root, ".cache", "e2e-containers", "venv")
	}
	python := filepath.Join(venv, "bin", "python")
	if _, err := os.Stat(python); err != nil {
		t.Skipf("needs a venv with opentelemetry-sdk and opentelemetry-exporter-otlp-proto-grpc at %s (make test-deps, or set %s): %v", venv, EnvPythonOTelVenv, err)
	}
	if out, err := exec.Command(python, "-c", "import opentelemetry.sdk, opentelemetry.exporter.otlp.proto.grpc").CombinedOutput(); err != nil {
		t.Skipf("the venv %s lacks the OpenTelemetry packages (make test-deps): %v\n%s", venv, err, out)
	}
	return python
}

// TestEndToEndPythonSpansFoundByTheirConnection runs the embedded default
// configuration and a 4-thread Python service traced with the OpenTelemetry
// Python SDK on its defaults, whose spans name no process: the correlator
// finds the service through its OTLP connection, and its spans get the GIL
// waits the pythongil receiver saw in that process.
//
// This test process is the attacker, another process on the same host: while
// the service serves it sends 5-second "GC pauses" claiming the service's
// pid and the node's host.name, and spans claiming the same. The service's
// spans carry only the windows this collector measured, and the attacker's
// spans none of the service's: they are mismatches.
func TestEndToEndPythonSpansFoundByTheirConnection(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the pythongil receiver's eBPF probes and other processes' sockets")
	}
	e2etest.RequireComponents(t, "runtimecorrelation", "pythongil", "inference")
	python := otelPython(t)
	c := e2etest.Start(t, e2etest.Options{Configs: []string{"embedded:default"}})
	if err := c.WaitHealthy(60 * time.Second); err != nil {
		t.Fatal(err)
	}

	svc := exec.Command(python, filepath.Join("testdata", "gilservice.py"))
	svc.Env = append(os.Environ(),
		"OTEL_EXPORTER_OTLP_ENDPOINT=http://"+c.Endpoints.OTLPGRPC,
		"OTEL_SERVICE_NAME=gilservice",
		"OTEL_BSP_SCHEDULE_DELAY=500")
	stdin, err := svc.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := svc.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	svc.Stderr = os.Stderr
	if err := svc.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = svc.Process.Kill()
		_ = svc.Wait()
	})
	lines := bufio.NewScanner(stdout)
	if !lines.Scan() || lines.Text() != "ready" {
		t.Fatalf("service did not start: %q %v", lines.Text(), lines.Err())
	}

	// Spans only once the receiver probes the service: its GIL waits are
	// exported as windows of its pid.
	pid := int64(svc.Process.Pid)
	if err := c.Eventually(90*time.Second, func() bool {
		batches, err := c.Logs("logs.jsonl")
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range e2etest.WindowsOf(batches, pid) {
			if w.Kind == window.KindPythonGILWait {
				return true
			}
		}
		return false
	}); err != nil {
		t.Fatalf("no GIL wait window of the service (pid %d): %v", pid, err)
	}
	if _, err := io.WriteString(stdin, "serve\n"); err != nil {
		t.Fatal(err)
	}
	// Serve at least 4 s, and until the receiver (which duty-cycles its
	// probes within its overhead budget) exported GIL waits of the
	// serving time.
	serving := time.Now().UnixNano()
	claimed := claimedSpans(pid, 0xa7)
	// The same claims over OTLP/HTTP: the peerport extension keeps the
	// client's port, so the connection names this process (a mismatch),
	// not every process connected from 127.0.0.1 (ambiguous).
	claimedHTTP := claimedSpans(pid, 0xa8)
	for range 8 {
		if err := c.SendLogs(t.Context(), forgedPause(pid)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(500 * time.Millisecond)
	}
	if err := c.SendTraces(t.Context(), claimed); err != nil {
		t.Fatal(err)
	}
	if err := c.SendTracesHTTP(t.Context(), claimedHTTP); err != nil {
		t.Fatal(err)
	}
	if err := c.Eventually(60*time.Second, func() bool {
		batches, err := c.Logs("logs.jsonl")
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, w := range e2etest.WindowsOf(batches, pid) {
			if w.Kind == window.KindPythonGILWait && w.Start > serving {
				n++
			}
		}
		return n >= 20
	}); err != nil {
		t.Fatalf("no GIL waits of the service exported while it served: %v", err)
	}
	if _, err := io.WriteString(stdin, "stop\n"); err != nil {
		t.Fatal(err)
	}
	if !lines.Scan() {
		t.Fatalf("service did not report its spans: %v", lines.Err())
	}
	sent, err := strconv.Atoi(strings.TrimSpace(lines.Text()))
	if err != nil || sent == 0 {
		t.Fatalf("service reported %q spans", lines.Text())
	}

	// A span whose process.pid is not its connection's process (this test
	// process sends it) is not matched, and not judged.
	bogus := ptrace.NewTraces()
	rs := bogus.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "bogus")
	rs.Resource().Attributes().PutInt(window.ResourcePID, 1)
	rs.Resource().Attributes().PutStr(window.ResourceContainerID, strings.Repeat("d", 64))
	s := rs.ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	s.SetName("bogus")
	s.SetTraceID(pcommon.TraceID{0xb0})
	s.SetSpanID(pcommon.SpanID{0xb0})
	now := time.Now()
	s.SetStartTimestamp(pcommon.NewTimestampFromTime(now.Add(-10 * time.Millisecond)))
	s.SetEndTimestamp(pcommon.NewTimestampFromTime(now))
	if err := c.SendTraces(t.Context(), bogus); err != nil {
		t.Fatal(err)
	}

	var got []spanOf
	if err := c.Eventually(30*time.Second, func() bool {
		batches, err := c.Traces("traces.jsonl")
		if err != nil {
			t.Fatal(err)
		}
		got = spansOfService(batches)
		return len(got) >= sent+1+claimed.SpanCount()+claimedHTTP.SpanCount()
	}); err != nil {
		t.Fatalf("%d of %d spans exported: %v", len(got), sent+1+claimed.SpanCount()+claimedHTTP.SpanCount(), err)
	}

	// The GIL waits the receiver exported for the service (it duty-cycles
	// its probes within its overhead budget, so not every wait is there):
	// each span must carry exactly the ones that overlap it.
	logs, err := c.Logs("logs.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	var waits []window.Window
	for _, w := range e2etest.WindowsOf(logs, pid) {
		if w.Kind == window.KindPythonGILWait {
			waits = append(waits, w)
		}
	}
	waited, exact, expected, mismatched := 0, 0, 0, 0
	for _, sp := range got {
		attrs := sp.span.Attributes()
		if _, ok := attrs.Get("runtime.overlap.jvm.gc.pause.duration"); ok {
			t.Errorf("span %s of %s carries the forged GC pauses", sp.span.SpanID(), sp.service)
		}
		if sp.service == "attacker" {
			if v, _ := attrs.Get("runtime.overlap.unmatched"); v.Str() == "mismatch" {
				mismatched++
			} else {
				t.Errorf("attacker span claiming the service's pid: runtime.overlap.unmatched = %q, want mismatch", v.Str())
			}
			if _, ok := attrs.Get("runtime.overlap.python.gil.wait.duration"); ok {
				t.Errorf("attacker span %s got the service's GIL waits", sp.span.SpanID())
			}
			continue
		}
		if sp.service == "bogus" {
			if v, _ := attrs.Get("runtime.overlap.unmatched"); v.Str() != "mismatch" {
				t.Errorf("bogus span: runtime.overlap.unmatched = %q, want mismatch", v.Str())
			}
			if _, ok := attrs.Get("inference.model.name"); ok {
				t.Error("bogus span was judged by the default model")
			}
			continue
		}
		if sp.identity != "connection" {
			t.Errorf("span %s: runtime.correlation.identity = %q, want connection", sp.span.SpanID(), sp.identity)
		}
		if v, ok := attrs.Get("runtime.overlap.unmatched"); ok {
			t.Errorf("span %s marked unmatched: %s", sp.span.SpanID(), v.Str())
		}
		if _, ok := attrs.Get("inference.model.name"); !ok {
			t.Errorf("span %s not judged by the default model", sp.span.SpanID())
		}
		start, end := int64(sp.span.StartTimestamp()), int64(sp.span.EndTimestamp())
		var want int64
		for _, w := range waits {
			if lo, hi := max(w.Start, start), min(w.End(), end); hi > lo {
				want += hi - lo
			}
		}
		v, _ := attrs.Get("runtime.overlap.python.gil.wait.duration")
		if v.Int() > 0 {
			waited++
		}
		if want > 0 {
			expected++
		}
		if v.Int() == want {
			exact++
		} else if v.Int() > want {
			t.Errorf("span %s: GIL wait %d ns, more than the %d ns its process's exported windows overlap", sp.span.SpanID(), v.Int(), want)
		}
	}
	t.Logf("%d of %d service spans overlapped by their own GIL waits (%d by the exported windows); %d exact; %d of %d attacker spans mismatched",
		waited, sent, expected, exact, mismatched, claimed.SpanCount()+claimedHTTP.SpanCount())
	if expected == 0 {
		t.Fatal("no exported GIL wait overlapped a span")
	}
	// Windows that reach the processor after a span's delay are late (and
	// counted), so a few spans may miss some; none may get another's.
	if exact*10 < sent*9 {
		t.Errorf("%d of %d spans carry exactly their exported GIL waits, want at least 90%%", exact, sent)
	}
}

// spanOf is an exported span with its resource's service and identity.
type spanOf struct {
	service, identity string
	span              ptrace.Span
}

func spansOfService(batches []ptrace.Traces) []spanOf {
	var out []spanOf
	for _, td := range batches {
		for _, rs := range td.ResourceSpans().All() {
			res := rs.Resource().Attributes()
			svc, _ := res.Get("service.name")
			if svc.Str() != "gilservice" && svc.Str() != "bogus" && svc.Str() != "attacker" {
				continue
			}
			id, _ := res.Get("runtime.correlation.identity")
			for _, ss := range rs.ScopeSpans().All() {
				for _, s := range ss.Spans().All() {
					out = append(out, spanOf{service: svc.Str(), identity: id.Str(), span: s})
				}
			}
		}
	}
	return out
}

// forgedPause is a 5-second "GC pause" ending now that claims the process
// pid on this node, as a workload can send it over OTLP.
func forgedPause(pid int64) plog.Logs {
	ld := plog.NewLogs()
	rl := ld.ResourceLogs().AppendEmpty()
	host, _ := os.Hostname()
	rl.Resource().Attributes().PutStr(window.ResourceHostName, host)
	rl.Resource().Attributes().PutInt(window.ResourcePID, pid)
	rl.Resource().Attributes().PutInt(window.ResourceVPID, pid)
	rl.Resource().Attributes().PutStr(window.ResourceRuntimeName, window.RuntimeJava)
	w := window.Window{Kind: window.KindJVMGCPause, Start: time.Now().Add(-5 * time.Second).UnixNano(), Duration: 5 * time.Second}
	if err := window.Encode(w, rl.ScopeLogs().AppendEmpty().LogRecords().AppendEmpty()); err != nil {
		panic(err)
	}
	return ld
}

// claimedSpans are five 1-second spans ending now whose resource claims the
// process pid on this node, their ids tagged.
func claimedSpans(pid int64, tag byte) ptrace.Traces {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	host, _ := os.Hostname()
	rs.Resource().Attributes().PutStr("service.name", "attacker")
	rs.Resource().Attributes().PutStr(window.ResourceHostName, host)
	rs.Resource().Attributes().PutInt(window.ResourcePID, pid)
	now := time.Now()
	for i := range 5 {
		s := rs.ScopeSpans().AppendEmpty().Spans().AppendEmpty()
		s.SetName("stolen")
		s.SetTraceID(pcommon.TraceID{tag, byte(i + 1)})
		s.SetSpanID(pcommon.SpanID{tag, byte(i + 1)})
		end := now.Add(-time.Duration(i) * 500 * time.Millisecond)
		s.SetStartTimestamp(pcommon.NewTimestampFromTime(end.Add(-time.Second)))
		s.SetEndTimestamp(pcommon.NewTimestampFromTime(end))
	}
	return td
}
