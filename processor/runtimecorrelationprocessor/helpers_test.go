package runtimecorrelationprocessor

import (
	"context"
	"errors"
	"regexp"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor"

	"github.com/otelcol-ai/otelcol-ai/internal/window"
	"github.com/otelcol-ai/otelcol-ai/processor/runtimecorrelationprocessor/internal/metadata"
	"github.com/otelcol-ai/otelcol-ai/processor/runtimecorrelationprocessor/internal/metadatatest"
)

// t0 is a Unix time in ns that the tests' windows and spans start from.
const t0 = int64(1_750_000_000_000_000_000)

const (
	ms = int64(time.Millisecond)
	us = int64(time.Microsecond)
)

// fakeClock is a settable clock.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (f *fakeClock) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

func (f *fakeClock) Advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = f.now.Add(d)
}

// harness is one component ID's processors on a fake clock, with sinks
// behind them and the telemetry they report.
type harness struct {
	t      *testing.T
	set    processor.Settings
	cfg    *Config
	clock  *fakeClock
	tel    *componenttest.Telemetry
	c      *correlator
	logs   processor.Logs
	traces *tracesProcessor

	logSink   *consumertest.LogsSink
	traceSink *consumertest.TracesSink
}

var unsafeIDChars = regexp.MustCompile(`[^a-zA-Z0-9_.-]`)

// newHarness builds the logs processor through the factory and the traces
// processor directly (so that tests release waiting spans themselves);
// both share one correlator whose clock reads t0 + 1 s until advanced.
func newHarness(t *testing.T, configure func(*Config)) *harness {
	t.Helper()
	cfg := createDefaultConfig().(*Config)
	cfg.Spans.Delay = 0
	if configure != nil {
		configure(cfg)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("config: %v", err)
	}
	tel := componenttest.NewTelemetry()
	t.Cleanup(func() { _ = tel.Shutdown(context.Background()) })
	set := metadatatest.NewSettings(tel)
	set.ID = component.NewIDWithName(metadata.Type, unsafeIDChars.ReplaceAllString(t.Name(), "_"))
	h := &harness{
		t: t, set: set, cfg: cfg, tel: tel,
		clock:     &fakeClock{now: time.Unix(0, t0+int64(time.Second))},
		logSink:   new(consumertest.LogsSink),
		traceSink: new(consumertest.TracesSink),
	}
	var err error
	h.logs, err = NewFactory().CreateLogs(context.Background(), set, cfg, h.logSink)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := acquire(set, cfg)
	if err != nil {
		t.Fatal(err)
	}
	h.c = ref.Value()
	h.c.now = h.clock.Now
	h.traces = newTracesProcessor(ref, h.traceSink)
	t.Cleanup(func() {
		_ = h.traces.shutdown(context.Background())
		_ = h.logs.Shutdown(context.Background())
	})
	return h
}

// sendWindows sends a batch of windows of one process through the logs
// processor and returns what came out.
func (h *harness) sendWindows(res resource, ws ...window.Window) plog.Logs {
	h.t.Helper()
	ld := windowLogs(h.t, res, ws...)
	before := len(h.logSink.AllLogs())
	if err := h.logs.ConsumeLogs(measured(context.Background()), ld); err != nil {
		h.t.Fatal(err)
	}
	all := h.logSink.AllLogs()
	if len(all) != before+1 {
		h.t.Fatalf("logs sink got %d batches, want %d", len(all), before+1)
	}
	return all[before]
}

// sendSpans hands a batch to the traces processor as the pipeline does,
// forwarding what it returns.
func (h *harness) sendSpans(td ptrace.Traces) {
	h.t.Helper()
	h.sendSpansCtx(context.Background(), td)
}

// sendSpansCtx is sendSpans with the receiver's context (its client.Info).
func (h *harness) sendSpansCtx(ctx context.Context, td ptrace.Traces) {
	h.t.Helper()
	out, err := h.traces.processTraces(ctx, td)
	switch {
	case err == nil:
		if err := h.traceSink.ConsumeTraces(context.Background(), out); err != nil {
			h.t.Fatal(err)
		}
	case !errors.Is(err, errSkip):
		h.t.Fatal(err)
	}
}

// resource is the resource of a batch of windows or spans.
type resource struct {
	host      string
	pid       int64
	pod       string
	vpid      int64
	container string
}

func (r resource) put(attrs pcommon.Map) {
	if r.host != "" {
		attrs.PutStr(window.ResourceHostName, r.host)
	}
	if r.pid != 0 {
		attrs.PutInt(window.ResourcePID, r.pid)
	}
	if r.pod != "" {
		attrs.PutStr(window.ResourceK8sPodUID, r.pod)
	}
	if r.vpid != 0 {
		attrs.PutInt(window.ResourceVPID, r.vpid)
	}
	if r.container != "" {
		attrs.PutStr(window.ResourceContainerID, r.container)
	}
}

var proc = resource{host: "node-1", pid: 4242}

func windowLogs(t testing.TB, res resource, ws ...window.Window) plog.Logs {
	t.Helper()
	ld := plog.NewLogs()
	rl := ld.ResourceLogs().AppendEmpty()
	res.put(rl.Resource().Attributes())
	lrs := rl.ScopeLogs().AppendEmpty().LogRecords()
	for _, w := range ws {
		if err := window.Encode(w, lrs.AppendEmpty()); err != nil {
			t.Fatal(err)
		}
	}
	return ld
}

// win is a window of kind from t0+start for dur, both in ns.
func win(kind window.Kind, start, dur int64, thread int64) window.Window {
	return window.Window{Kind: kind, Start: t0 + start, Duration: time.Duration(dur), ThreadID: thread}
}

// spanAt is a span from t0+start to t0+end.
type spanAt struct {
	name       string
	start, end int64
}

func spanTraces(res resource, spans ...spanAt) ptrace.Traces {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	res.put(rs.Resource().Attributes())
	ss := rs.ScopeSpans().AppendEmpty().Spans()
	for i, s := range spans {
		span := ss.AppendEmpty()
		span.SetName(s.name)
		span.SetTraceID(pcommon.TraceID{1, byte(i + 1)})
		span.SetSpanID(pcommon.SpanID{2, byte(i + 1)})
		span.SetStartTimestamp(pcommon.Timestamp(t0 + s.start))
		span.SetEndTimestamp(pcommon.Timestamp(t0 + s.end))
	}
	return td
}

// overlapRecords returns the runtime.overlap records of ld, as maps of
// their attributes plus "resource" and "timestamp".
func overlapRecords(ld plog.Logs) []map[string]any {
	var out []map[string]any
	for i := 0; i < ld.ResourceLogs().Len(); i++ {
		rl := ld.ResourceLogs().At(i)
		for j := 0; j < rl.ScopeLogs().Len(); j++ {
			lrs := rl.ScopeLogs().At(j).LogRecords()
			for k := 0; k < lrs.Len(); k++ {
				lr := lrs.At(k)
				if lr.EventName() != overlapEventName {
					continue
				}
				m := lr.Attributes().AsRaw()
				m["resource"] = rl.Resource().Attributes().AsRaw()
				m["timestamp"] = int64(lr.Timestamp())
				out = append(out, m)
			}
		}
	}
	return out
}

// spansByName collects every span of the batches.
func spansByName(batches []ptrace.Traces) map[string]ptrace.Span {
	out := map[string]ptrace.Span{}
	for _, td := range batches {
		for i := 0; i < td.ResourceSpans().Len(); i++ {
			sss := td.ResourceSpans().At(i).ScopeSpans()
			for j := 0; j < sss.Len(); j++ {
				spans := sss.At(j).Spans()
				for k := 0; k < spans.Len(); k++ {
					out[spans.At(k).Name()] = spans.At(k)
				}
			}
		}
	}
	return out
}

// measured marks ctx as the jfr receiver's, whose windows the correlator
// indexes (a workload's over OTLP it does not).
func measured(ctx context.Context) context.Context {
	return window.Measured(ctx, component.MustNewID("jfr"))
}
