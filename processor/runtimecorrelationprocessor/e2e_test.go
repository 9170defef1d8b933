package runtimecorrelationprocessor_test

import (
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otelcol-ai/otelcol-ai/internal/e2etest"
	"github.com/otelcol-ai/otelcol-ai/internal/window"
)

// overlay puts the processor into the embedded default configuration's
// three pipelines, with a short delay and metrics every second. This test
// sends the windows itself, as a forwarding collector would: loopback is
// a trusted peer, whose windows are indexed and whose spans are matched by
// their resource attributes.
const overlay = `
processors:
  runtimecorrelation:
    identity:
      trusted_peers: [127.0.0.1, "::1"]
    spans:
      delay: 3s
      events: true
    metrics:
      interval: 1s
service:
  pipelines:
    traces:
      processors: [memory_limiter, runtimecorrelation, batch]
    logs:
      processors: [memory_limiter, runtimecorrelation, batch]
    metrics:
      processors: [memory_limiter, runtimecorrelation, batch]
`

const pid = 4242

func windowsOf(t *testing.T, base int64, ws ...window.Window) plog.Logs {
	t.Helper()
	ld := plog.NewLogs()
	rl := ld.ResourceLogs().AppendEmpty()
	rl.Resource().Attributes().PutStr(window.ResourceHostName, "e2e-node")
	rl.Resource().Attributes().PutInt(window.ResourcePID, pid)
	rl.Resource().Attributes().PutStr(window.ResourceRuntimeName, window.RuntimeJava)
	lrs := rl.ScopeLogs().AppendEmpty().LogRecords()
	for _, w := range ws {
		w.Start += base
		if err := window.Encode(w, lrs.AppendEmpty()); err != nil {
			t.Fatal(err)
		}
	}
	return ld
}

func requestSpans(base int64, names ...string) ptrace.Traces {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "hybrid-inference")
	rs.Resource().Attributes().PutStr(window.ResourceHostName, "e2e-node")
	rs.Resource().Attributes().PutInt(window.ResourcePID, pid)
	spans := rs.ScopeSpans().AppendEmpty().Spans()
	for i, name := range names {
		s := spans.AppendEmpty()
		s.SetName(name)
		s.SetTraceID(pcommon.TraceID{0xe2, byte(i + 1)})
		s.SetSpanID(pcommon.SpanID{0xe2, byte(i + 1)})
		// Each request runs 10 ms from base.
		s.SetStartTimestamp(pcommon.Timestamp(base))
		s.SetEndTimestamp(pcommon.Timestamp(base + 10e6))
	}
	return td
}

func TestEndToEndOverlapsSpansAndMetrics(t *testing.T) {
	e2etest.RequireComponents(t, "runtimecorrelation")
	c := e2etest.Start(t, e2etest.Options{Configs: []string{"embedded:default"}, ConfigYAML: overlay})
	if err := c.WaitHealthy(60 * time.Second); err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	base := time.Now().Add(-2 * time.Second).UnixNano()
	ms := int64(time.Millisecond)
	sp := window.Window{Kind: window.KindJVMSafepoint, Duration: 4 * time.Millisecond, Start: 2 * ms}                  // [2, 6)
	wait := window.Window{Kind: window.KindPythonGILWait, Duration: 6 * time.Millisecond, Start: 4 * ms, ThreadID: 77} // [4, 10)
	gc := window.Window{Kind: window.KindJVMGCPause, Duration: 5 * time.Millisecond, Start: 8 * ms}                    // [8, 13): 2 ms inside the span

	// The span arrives before the safepoint and GC windows (JFR's flush)
	// and waits for them.
	if err := c.SendLogs(ctx, windowsOf(t, base, wait)); err != nil {
		t.Fatal(err)
	}
	if err := c.SendTraces(ctx, requestSpans(base, "infer")); err != nil {
		t.Fatal(err)
	}
	if err := c.SendLogs(ctx, windowsOf(t, base, sp, gc)); err != nil {
		t.Fatal(err)
	}

	var span ptrace.Span
	found := false
	if err := c.Eventually(30*time.Second, func() bool {
		batches, err := c.Traces("traces.jsonl")
		if err != nil {
			t.Fatal(err)
		}
		span, found = findSpan(batches, "infer")
		return found
	}); err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{
		"runtime.overlap.jvm.safepoint.duration":   4 * ms,
		"runtime.overlap.jvm.safepoint.count":      1,
		"runtime.overlap.python.gil.wait.duration": 6 * ms,
		"runtime.overlap.python.gil.wait.count":    1,
		"runtime.overlap.jvm.gc.pause.duration":    2 * ms,
		"runtime.overlap.jvm.gc.pause.count":       1,
	}
	for k, v := range want {
		got, ok := span.Attributes().Get(k)
		if !ok || got.Int() != v {
			t.Errorf("span attribute %s = %v, want %d", k, got.AsRaw(), v)
		}
	}
	if span.Events().Len() != 3 {
		t.Errorf("span has %d events, want 3", span.Events().Len())
	}

	// The overlaps: safepoint × GIL wait [4, 6) and GC × GIL wait [8, 10).
	var overlaps map[string]int64
	if err := c.Eventually(20*time.Second, func() bool {
		batches, err := c.Logs("logs.jsonl")
		if err != nil {
			t.Fatal(err)
		}
		overlaps = overlapDurations(batches)
		return len(overlaps) == 2
	}); err != nil {
		t.Fatalf("%v; overlaps: %v", err, overlaps)
	}
	if overlaps["jvm.safepoint/python.gil.wait"] != 2*ms || overlaps["jvm.gc.pause/python.gil.wait"] != 2*ms {
		t.Errorf("overlaps %v, want 2 ms each", overlaps)
	}

	if err := c.Eventually(20*time.Second, func() bool {
		batches, err := c.Metrics("metrics.jsonl")
		if err != nil {
			t.Fatal(err)
		}
		return overlapCount(batches) == 2
	}); err != nil {
		t.Fatal(err)
	}

	// Spans still waiting at shutdown are flushed, not lost.
	if err := c.SendTraces(ctx, requestSpans(time.Now().UnixNano(), "last-1", "last-2")); err != nil {
		t.Fatal(err)
	}
	if code, err := c.Stop(30 * time.Second); err != nil || code != 0 {
		t.Fatalf("stop: exit %d, %v", code, err)
	}
	batches, err := c.Traces("traces.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"last-1", "last-2"} {
		if _, ok := findSpan(batches, name); !ok {
			t.Errorf("span %s lost at shutdown", name)
		}
	}
}

func findSpan(batches []ptrace.Traces, name string) (ptrace.Span, bool) {
	for _, td := range batches {
		for i := 0; i < td.ResourceSpans().Len(); i++ {
			sss := td.ResourceSpans().At(i).ScopeSpans()
			for j := 0; j < sss.Len(); j++ {
				spans := sss.At(j).Spans()
				for k := 0; k < spans.Len(); k++ {
					if spans.At(k).Name() == name {
						return spans.At(k), true
					}
				}
			}
		}
	}
	return ptrace.Span{}, false
}

// overlapDurations maps "first/second" to the duration of each
// runtime.overlap record.
func overlapDurations(batches []plog.Logs) map[string]int64 {
	out := map[string]int64{}
	for _, ld := range batches {
		for i := 0; i < ld.ResourceLogs().Len(); i++ {
			if !ofTestProcess(ld.ResourceLogs().At(i).Resource().Attributes()) {
				continue
			}
			sls := ld.ResourceLogs().At(i).ScopeLogs()
			for j := 0; j < sls.Len(); j++ {
				lrs := sls.At(j).LogRecords()
				for k := 0; k < lrs.Len(); k++ {
					lr := lrs.At(k)
					if lr.EventName() != "runtime.overlap" {
						continue
					}
					first, _ := lr.Attributes().Get("runtime.overlap.first.kind")
					second, _ := lr.Attributes().Get("runtime.overlap.second.kind")
					d, _ := lr.Attributes().Get("runtime.overlap.duration")
					out[first.Str()+"/"+second.Str()] = d.Int()
				}
			}
		}
	}
	return out
}

// ofTestProcess: the resource is the test's process (pid). The collector on
// the embedded default also measures the host's real JVMs and CPython
// processes, whose overlaps (another test's Jep JVM, when packages run
// side by side) are not this test's.
func ofTestProcess(res pcommon.Map) bool {
	v, ok := res.Get("process.pid")
	return ok && v.Int() == pid
}

// overlapCount returns the latest runtime.overlap.count total.
func overlapCount(batches []pmetric.Metrics) int64 {
	var latest int64
	for _, md := range batches {
		var total int64
		seen := false
		for i := 0; i < md.ResourceMetrics().Len(); i++ {
			if !ofTestProcess(md.ResourceMetrics().At(i).Resource().Attributes()) {
				continue
			}
			sms := md.ResourceMetrics().At(i).ScopeMetrics()
			for j := 0; j < sms.Len(); j++ {
				ms := sms.At(j).Metrics()
				for k := 0; k < ms.Len(); k++ {
					if ms.At(k).Name() != "runtime.overlap.count" {
						continue
					}
					dps := ms.At(k).Sum().DataPoints()
					for l := 0; l < dps.Len(); l++ {
						total += dps.At(l).IntValue()
						seen = true
					}
				}
			}
		}
		if seen {
			latest = total
		}
	}
	return latest
}
