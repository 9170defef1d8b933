package timeline // import "github.com/otelcol-ai/otelcol-ai/pkg/timeline"

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otelcol-ai/otelcol-ai/internal/window"
)

// Names read from resources, spans and metrics.
const (
	attrExecutable    = "process.executable.name"
	attrPodName       = "k8s.pod.name"
	attrContainerName = "k8s.container.name"
	attrServiceName   = "service.name"
	// AttrGPUDevice is the GPU (or MIG device) a per-process GPU memory
	// point is about, as the nvml receiver names it.
	AttrGPUDevice = "hw.id"
	// MetricGPUProcessMemory is the nvml receiver's per-process GPU memory.
	MetricGPUProcessMemory = "gpu.process.memory.usage"
	overlapPrefix          = "runtime.overlap."
	// ScorePrefix starts the span attributes the page shows as scores.
	ScorePrefix = "inference."
)

// MaxLineBytes is the longest JSON line a recording may hold (the file
// exporter writes one batch per line).
const MaxLineBytes = 64 << 20

// Recording builds a snapshot from the file exporter's OTLP JSON lines
// (traces.jsonl, metrics.jsonl, logs.jsonl as `make run` writes them).
// Windows are laned by their process (node and host pid); spans join the
// lane of the process their resource names, else a lane of their service.
type Recording struct {
	lanes   []Lane
	byProc  map[procKey]int
	byOther map[string]int
	windows []absWindow
	spans   []absSpan
	gpu     []absGPU
	accts   []absAccount
	// Skipped counts records that were not windows of a known kind or
	// were malformed.
	Skipped int
}

type procKey struct {
	node string
	pid  int64
}

type absWindow struct {
	w     Window
	start int64
}

type absSpan struct {
	s     Span
	start int64
}

type absGPU struct {
	p GPUPoint
	t int64
}

type absAccount struct {
	p AccountPoint
	t int64
}

// NewRecording returns an empty recording.
func NewRecording() *Recording {
	return &Recording{byProc: map[procKey]int{}, byOther: map[string]int{}}
}

// eachLine calls fn with every non-empty line of r; lines longer than
// MaxLineBytes are an error naming the line.
func eachLine(r io.Reader, what string, fn func(line []byte) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 1<<20), MaxLineBytes)
	n := 0
	for sc.Scan() {
		n++
		line := sc.Bytes()
		if len(strings.TrimSpace(string(line))) == 0 {
			continue
		}
		if err := fn(line); err != nil {
			return fmt.Errorf("timeline: %s line %d: %w", what, n, err)
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("timeline: %s after line %d: %w", what, n, err)
	}
	return nil
}

// ReadLogs adds the windows among r's OTLP JSON log lines.
func (rec *Recording) ReadLogs(r io.Reader) error {
	var u plog.JSONUnmarshaler
	return eachLine(r, "logs", func(line []byte) error {
		ld, err := u.UnmarshalLogs(line)
		if err != nil {
			return err
		}
		rec.AddLogs(ld)
		return nil
	})
}

// ReadTraces adds the spans of r's OTLP JSON trace lines.
func (rec *Recording) ReadTraces(r io.Reader) error {
	var u ptrace.JSONUnmarshaler
	return eachLine(r, "traces", func(line []byte) error {
		td, err := u.UnmarshalTraces(line)
		if err != nil {
			return err
		}
		rec.AddTraces(td)
		return nil
	})
}

// ReadMetrics adds the GPU memory points of r's OTLP JSON metric lines.
func (rec *Recording) ReadMetrics(r io.Reader) error {
	var u pmetric.JSONUnmarshaler
	return eachLine(r, "metrics", func(line []byte) error {
		md, err := u.UnmarshalMetrics(line)
		if err != nil {
			return err
		}
		rec.AddMetrics(md)
		return nil
	})
}

// procLane returns the lane of a window or metric resource's process,
// false when it names none.
func (rec *Recording) procLane(res pcommon.Resource) (int, bool) {
	attrs := res.Attributes()
	pid, ok := window.IntAttr(attrs, window.ResourcePID)
	if !ok || pid <= 0 {
		return 0, false
	}
	k := procKey{window.StrAttr(attrs, window.ResourceHostName), pid}
	if i, ok := rec.byProc[k]; ok {
		FillLane(&rec.lanes[i], attrs)
		return i, true
	}
	i := len(rec.lanes)
	l := Lane{ID: i, Node: k.node, PID: pid}
	FillLane(&l, attrs)
	rec.lanes = append(rec.lanes, l)
	rec.byProc[k] = i
	return i, true
}

// AddLogs adds ld's windows; other records are skipped.
func (rec *Recording) AddLogs(ld plog.Logs) {
	for _, rl := range ld.ResourceLogs().All() {
		lane, ok := -1, false
		for _, sl := range rl.ScopeLogs().All() {
			for _, lr := range sl.LogRecords().All() {
				w, err := window.Decode(lr)
				if err != nil {
					if !errors.Is(err, window.ErrNotWindow) {
						rec.Skipped++
					}
					continue
				}
				if lane < 0 {
					if lane, ok = rec.procLane(rl.Resource()); !ok {
						lane = -1
					}
				}
				if !ok {
					rec.Skipped++
					continue
				}
				if w.ThreadName != "" && w.ThreadID != 0 {
					if rec.lanes[lane].Threads == nil {
						rec.lanes[lane].Threads = map[int64]string{}
					}
					rec.lanes[lane].Threads[w.ThreadID] = w.ThreadName
				}
				detail, cause := WindowDetail(w)
				rec.windows = append(rec.windows, absWindow{start: w.Start, w: Window{
					Lane: lane, Kind: string(w.Kind), Dur: int64(w.Duration), TID: w.ThreadID, Detail: detail, Cause: cause,
				}})
			}
		}
	}
}

// WindowDetail is what the page shows of a window beside its kind and
// thread: the VM operation of a safepoint, the collector and cause of a
// GC pause, the cause of a GIL wait, the generation of a Python GC.
func WindowDetail(w window.Window) (detail, cause string) {
	str := func(k string) string { s, _ := w.Attributes[k].(string); return s }
	switch w.Kind {
	case window.KindJVMSafepoint:
		return Clip(str(window.AttrJVMVMOperation)), ""
	case window.KindJVMGCPause:
		return Clip(str(window.AttrJVMGCName)), Clip(str(window.AttrJVMGCCause))
	case window.KindPythonGILWait:
		return Clip(str(window.AttrPythonGILWaitCause)), ""
	case window.KindPythonGCPause:
		if g, ok := w.Attributes[window.AttrPythonGCGeneration].(int64); ok {
			return "generation " + strconv.FormatInt(g, 10), ""
		}
	}
	return "", ""
}

// spanLane finds the lane of a span resource's process: the one whose
// container and in-container pid, pod and pid, or node and host pid it
// names; else a lane of its own per service.
func (rec *Recording) spanLane(res pcommon.Resource) int {
	attrs := res.Attributes()
	pid, _ := window.IntAttr(attrs, window.ResourcePID)
	cid := window.StrAttr(attrs, window.ResourceContainerID)
	pod := window.StrAttr(attrs, window.ResourceK8sPodUID)
	host := window.StrAttr(attrs, window.ResourceHostName)
	if pid > 0 {
		for i, l := range rec.lanes {
			vpid := l.VPID
			if vpid == 0 {
				vpid = l.PID
			}
			switch {
			case cid != "" && l.ContainerID == cid && vpid == pid,
				cid == "" && pod != "" && l.PodUID == pod && vpid == pid,
				cid == "" && pod == "" && l.ContainerID == "" && l.PID == pid && (host == "" || l.Node == host):
				return i
			}
		}
	}
	name := window.StrAttr(attrs, attrServiceName)
	key := name + "\x00" + cid + "\x00" + pod + "\x00" + strconv.FormatInt(pid, 10)
	if i, ok := rec.byOther[key]; ok {
		return i
	}
	i := len(rec.lanes)
	l := Lane{ID: i, PID: pid, ContainerID: cid, PodUID: pod}
	FillLane(&l, attrs)
	rec.lanes = append(rec.lanes, l)
	rec.byOther[key] = i
	return i
}

// AddTraces adds td's spans.
func (rec *Recording) AddTraces(td ptrace.Traces) {
	for _, rs := range td.ResourceSpans().All() {
		lane := -1
		for _, ss := range rs.ScopeSpans().All() {
			for _, sp := range ss.Spans().All() {
				start, end := int64(sp.StartTimestamp()), int64(sp.EndTimestamp())
				if end < start || start <= 0 {
					rec.Skipped++
					continue
				}
				if lane < 0 {
					lane = rec.spanLane(rs.Resource())
				}
				s := SpanOf(sp)
				s.Lane, s.Dur = lane, end-start
				rec.spans = append(rec.spans, absSpan{start: start, s: s})
			}
		}
	}
}

// SpanOf copies what the page shows of a span: ids, name, and its
// runtime.overlap.<kind>.duration/.count and inference.* attributes.
// Lane, Start and Dur are left to the caller.
func SpanOf(sp ptrace.Span) Span {
	s := Span{TraceID: sp.TraceID().String(), SpanID: sp.SpanID().String(), Name: Clip(sp.Name())}
	for k, v := range sp.Attributes().All() {
		switch {
		case strings.HasPrefix(k, overlapPrefix):
			rest := k[len(overlapPrefix):]
			var kind, field string
			if kind, field = cutLast(rest); kind == "" || !window.Kind(kind).Known() || v.Type() != pcommon.ValueTypeInt {
				continue
			}
			if s.Overlap == nil {
				s.Overlap = map[string]OverlapTotal{}
			}
			t := s.Overlap[kind]
			switch field {
			case "duration":
				t.Duration = v.Int()
			case "count":
				t.Count = v.Int()
			default:
				continue
			}
			s.Overlap[kind] = t
		case strings.HasPrefix(k, ScorePrefix):
			if len(k) > MaxText || len(s.Scores) >= MaxScores {
				continue
			}
			if s.Scores == nil {
				s.Scores = map[string]any{}
			}
			switch v.Type() {
			case pcommon.ValueTypeDouble:
				if f := v.Double(); !math.IsNaN(f) && !math.IsInf(f, 0) {
					s.Scores[k] = f
				}
			case pcommon.ValueTypeInt:
				s.Scores[k] = v.Int()
			default:
				s.Scores[k] = Clip(v.AsString())
			}
		}
	}
	return s
}

func cutLast(s string) (string, string) {
	i := strings.LastIndexByte(s, '.')
	if i < 0 {
		return "", ""
	}
	return s[:i], s[i+1:]
}

// AddMetrics adds md's per-process GPU memory points and JVM accounts.
func (rec *Recording) AddMetrics(md pmetric.Metrics) {
	for _, rm := range md.ResourceMetrics().All() {
		for _, sm := range rm.ScopeMetrics().All() {
			for _, m := range sm.Metrics().All() {
				AccountPoints(m, func(account string, t, v int64) {
					if lane, ok := rec.procLane(rm.Resource()); ok {
						rec.accts = append(rec.accts, absAccount{t: t, p: AccountPoint{Lane: lane, Account: account, Value: v}})
					}
				})
				pts, ok := GPUMemoryPoints(m)
				if !ok {
					continue
				}
				lane, ok := rec.procLane(rm.Resource())
				if !ok {
					continue
				}
				for _, dp := range pts.All() {
					rec.gpu = append(rec.gpu, absGPU{t: int64(dp.Timestamp()), p: GPUPoint{
						Lane: lane, Device: Clip(window.StrAttr(dp.Attributes(), AttrGPUDevice)), Bytes: dp.IntValue(),
					}})
				}
			}
		}
	}
}

// GPUMemoryPoints returns m's points when m is the per-process GPU memory.
func GPUMemoryPoints(m pmetric.Metric) (pmetric.NumberDataPointSlice, bool) {
	if m.Name() != MetricGPUProcessMemory {
		return pmetric.NumberDataPointSlice{}, false
	}
	switch m.Type() {
	case pmetric.MetricTypeSum:
		return m.Sum().DataPoints(), true
	case pmetric.MetricTypeGauge:
		return m.Gauge().DataPoints(), true
	}
	return pmetric.NumberDataPointSlice{}, false
}

// Snapshot returns everything recorded, the range from the first to the
// last time seen (padded a little), windows summarised beyond maxWindows
// (0: never; the page then summarises what is in view itself).
func (rec *Recording) Snapshot(source string, maxWindows, buckets int) *Snapshot {
	lo, hi := int64(math.MaxInt64), int64(math.MinInt64)
	see := func(a, b int64) { lo, hi = min(lo, a), max(hi, b) }
	for _, w := range rec.windows {
		see(w.start, w.start+w.w.Dur)
	}
	for _, s := range rec.spans {
		see(s.start, s.start+s.s.Dur)
	}
	for _, g := range rec.gpu {
		see(g.t, g.t)
	}
	for _, a := range rec.accts {
		see(a.t, a.t)
	}
	s := &Snapshot{Source: source, Lanes: rec.lanes, Windows: []Window{}, Spans: []Span{}, GPU: []GPUPoint{}, Accounts: []AccountPoint{}}
	if s.Lanes == nil {
		s.Lanes = []Lane{}
	}
	if lo > hi {
		return s
	}
	pad := max((hi-lo)/50, 1)
	s.SetBase(lo - pad)
	s.From = lo - pad - s.Base
	s.To = hi + pad - s.Base
	for _, w := range rec.windows {
		w.w.Start = w.start - s.Base
		s.Windows = append(s.Windows, w.w)
	}
	for _, sp := range rec.spans {
		sp.s.Start = sp.start - s.Base
		s.Spans = append(s.Spans, sp.s)
	}
	for _, g := range rec.gpu {
		g.p.T = g.t - s.Base
		s.GPU = append(s.GPU, g.p)
	}
	for _, a := range rec.accts {
		a.p.T = a.t - s.Base
		s.Accounts = append(s.Accounts, a.p)
	}
	if maxWindows > 0 {
		s.Summarize(maxWindows, buckets)
	} else {
		s.WindowsInRange = len(s.Windows)
	}
	return s
}

// FillLane sets a lane's names and identity from a resource, keeping what
// it already has where the resource says nothing.
func FillLane(l *Lane, attrs pcommon.Map) {
	set := func(dst *string, key string) {
		if v := window.StrAttr(attrs, key); v != "" {
			*dst = Clip(v)
		}
	}
	set(&l.Node, window.ResourceHostName)
	set(&l.ContainerID, window.ResourceContainerID)
	set(&l.PodUID, window.ResourceK8sPodUID)
	set(&l.PodName, attrPodName)
	set(&l.ContainerName, attrContainerName)
	set(&l.Executable, attrExecutable)
	set(&l.Runtime, window.ResourceRuntimeName)
	set(&l.Service, attrServiceName)
	if v, ok := window.IntAttr(attrs, window.ResourceVPID); ok {
		l.VPID = v
	}
	l.Name = LaneName(*l)
}

// Bounds on what a tenant's strings cost the page: a span's or thread's
// name, a pod's, a GC cause — each is written by a workload that may send
// megabytes of it.
const (
	// MaxText is the most bytes kept of one string.
	MaxText = 256
	// MaxScores is the most inference.* attributes kept of one span.
	MaxScores = 16
)

// Clip returns s cut to at most MaxText bytes, on a UTF-8 boundary, with
// "…" where it was cut.
func Clip(s string) string {
	if len(s) <= MaxText {
		return s
	}
	const ellipsis = "…"
	cut := MaxText - len(ellipsis)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + ellipsis
}

// LaneName is pod/container/executable as far as they are known, else the
// service, and the pid.
func LaneName(l Lane) string {
	var parts []string
	for _, p := range []string{l.PodName, l.ContainerName} {
		if p != "" {
			parts = append(parts, p)
		}
	}
	exe := l.Executable
	if exe == "" {
		exe = l.Service
	}
	if exe == "" && l.Runtime != "" {
		exe = l.Runtime
	}
	if exe != "" {
		parts = append(parts, exe)
	}
	name := strings.Join(parts, "/")
	if l.PID != 0 {
		if name != "" {
			name += " "
		}
		name += "pid " + strconv.FormatInt(l.PID, 10)
	}
	if name == "" {
		name = "unknown process"
	}
	return name
}
