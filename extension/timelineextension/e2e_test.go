package timelineextension_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otelcol-ai/otelcol-ai/internal/cdptest"
	"github.com/otelcol-ai/otelcol-ai/internal/e2etest"
	"github.com/otelcol-ai/otelcol-ai/internal/window"
	"github.com/otelcol-ai/otelcol-ai/pkg/timeline"
	"github.com/otelcol-ai/otelcol-ai/pkg/timeline/timelinetest"
)

// skipOrFail skips, or fails under CI, where everything must be present.
func skipOrFail(t *testing.T, format string, args ...any) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatalf(format, args...)
	}
	t.Skipf(format, args...)
}

// jepWorkload compiles and starts internal/e2etest's JepOverlap: one JVM
// embedding CPython through Jep, its young GCs and safepoints overlapping
// three Python threads' GIL waits. It returns the JVM's pid.
func jepWorkload(t *testing.T) int64 {
	t.Helper()
	out, err := exec.Command("python3", "-c", "import importlib.util, os, sysconfig, sys; print(os.path.dirname(importlib.util.find_spec('jep').origin)); print(sysconfig.get_config_var('LIBDIR')); print(sys.base_prefix)").Output()
	if err != nil {
		skipOrFail(t, "timeline e2e: Jep is not installed for python3 (make test-deps): %v", err)
	}
	dirs := strings.Fields(string(out))
	if len(dirs) != 3 {
		t.Fatalf("jep, libpython and prefix folders: %q", out)
	}
	jars, _ := filepath.Glob(filepath.Join(dirs[0], "jep-*.jar"))
	if len(jars) != 1 {
		t.Fatalf("want one jep jar in %s, found %v", dirs[0], jars)
	}
	root, err := e2etest.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	classes := t.TempDir()
	src := filepath.Join(root, "internal", "e2etest", "testdata", "containers", "JepOverlap.java")
	if out, err := exec.Command("javac", "-d", classes, "-cp", jars[0], src).CombinedOutput(); err != nil {
		t.Fatalf("javac: %v\n%s", err, out)
	}
	cmd := exec.Command("java", "-Xmx64m", "-XX:+UseG1GC", "-XX:StartFlightRecording:settings=profile",
		"-Djava.library.path="+dirs[0], "-cp", classes+":"+jars[0], "JepOverlap")
	cmd.Env = append(os.Environ(), "LD_LIBRARY_PATH="+dirs[1], "PYTHONHOME="+dirs[2], "PYTHONPATH="+filepath.Dir(dirs[0]))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = io.WriteString(stdin, "stop\n")
		_ = stdin.Close()
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	// The JVM's own startup lines (JFR's) come first on stdout.
	r := bufio.NewReader(stdout)
	for range 20 {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("JepOverlap: %v\n%s", err, stderr.String())
		}
		var hello struct{ PID int64 }
		if json.Unmarshal([]byte(line), &hello) == nil && hello.PID != 0 {
			go func() { _, _ = io.Copy(io.Discard, r) }()
			return hello.PID
		}
	}
	t.Fatal("JepOverlap printed no pid")
	return 0
}

// spansOf builds one request span of pid ending now, as an SDK in the JVM
// would send it (process.pid and the node's host.name).
func spansOf(pid int64, host string, i int, dur time.Duration) ptrace.Traces {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutInt("process.pid", pid)
	rs.Resource().Attributes().PutStr("host.name", host)
	rs.Resource().Attributes().PutStr("service.name", "jep-overlap")
	sp := rs.ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	end := time.Now()
	sp.SetName("POST /predict")
	sp.SetTraceID(pcommon.TraceID{0xe2, byte(i >> 8), byte(i)})
	sp.SetSpanID(pcommon.SpanID{0xe2, byte(i >> 8), byte(i)})
	sp.SetStartTimestamp(pcommon.NewTimestampFromTime(end.Add(-dur)))
	sp.SetEndTimestamp(pcommon.NewTimestampFromTime(end))
	return td
}

// exportedInRange is what the collector exported for pid in [from, to):
// windows by kind and spans by id.
type exportedInRange struct {
	windows map[string][]window.Window
	spans   map[string]ptrace.Span
}

func exported(t *testing.T, c *e2etest.Collector, pid int64, from, to int64) exportedInRange {
	t.Helper()
	logs, err := c.Logs("logs.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	ex := exportedInRange{windows: map[string][]window.Window{}, spans: map[string]ptrace.Span{}}
	for _, w := range e2etest.WindowsOf(logs, pid) {
		if w.End() > from && w.Start < to {
			ex.windows[string(w.Kind)] = append(ex.windows[string(w.Kind)], w)
		}
	}
	traces, err := c.Traces("traces.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	for _, td := range traces {
		for _, rs := range td.ResourceSpans().All() {
			if p, _ := window.IntAttr(rs.Resource().Attributes(), "process.pid"); p != pid {
				continue
			}
			for _, ss := range rs.ScopeSpans().All() {
				for _, sp := range ss.Spans().All() {
					if int64(sp.EndTimestamp()) > from && int64(sp.StartTimestamp()) < to {
						ex.spans[sp.SpanID().String()] = sp
					}
				}
			}
		}
	}
	return ex
}

// checkAgainstExport: the page drew, in pid's lane, exactly the exported
// windows and spans of its view, each within a pixel of its exported time.
func checkAgainstExport(t *testing.T, what string, d timelinetest.Drawn, lane int, ex exportedInRange) {
	t.Helper()
	drawnKinds := map[string]int{}
	for _, r := range d.Windows {
		if r.Lane != lane {
			continue
		}
		drawnKinds[r.Kind]++
		var match *window.Window
		for i, w := range ex.windows[r.Kind] {
			if x := d.XOf(w.Start); x-r.X < 1 && r.X-x < 1 {
				match = &ex.windows[r.Kind][i]
				break
			}
		}
		if match == nil {
			t.Errorf("%s: drew a %s at x=%.1f where no exported window starts", what, r.Kind, r.X)
		}
	}
	for kind, ws := range ex.windows {
		if drawnKinds[kind] != len(ws) {
			t.Errorf("%s: drew %d %s windows, the collector exported %d in view", what, drawnKinds[kind], kind, len(ws))
		}
	}
	spans := 0
	for _, r := range d.Spans {
		if r.Lane != lane {
			continue
		}
		spans++
		sp, ok := ex.spans[r.Span]
		if !ok {
			t.Errorf("%s: drew span %s, not exported", what, r.Span)
			continue
		}
		if x := d.XOf(int64(sp.StartTimestamp())); x-r.X > 1 || r.X-x > 1 {
			t.Errorf("%s: span %s at x=%.1f, its start says %.1f", what, r.Span, r.X, x)
		}
	}
	if spans != len(ex.spans) {
		t.Errorf("%s: drew %d spans, the collector exported %d in view", what, spans, len(ex.spans))
	}
}

// hoverOverlapped hovers the first drawn span of lane that windows
// overlapped and checks that the tooltip gives its exported totals.
func hoverOverlapped(t *testing.T, b *cdptest.Browser, d timelinetest.Drawn, lane int, ex exportedInRange) {
	t.Helper()
	var tried []string
	for _, r := range d.Spans {
		sp, ok := ex.spans[r.Span]
		if r.Lane != lane || !ok {
			continue
		}
		var wants []string
		for k, v := range sp.Attributes().All() {
			if kind, found := strings.CutSuffix(strings.TrimPrefix(k, "runtime.overlap."), ".count"); found && strings.HasPrefix(k, "runtime.overlap.") {
				wants = append(wants, fmt.Sprintf("%s: %d ×", kind, v.Int()))
			}
		}
		if len(wants) == 0 {
			continue
		}
		// The live page redraws while it follows the node: lanes move when
		// other processes come and go, so the span is found again where it
		// is drawn now, and the tip is given a moment to follow the mouse.
		// A span that scrolls out of view meanwhile is given up for the
		// next one.
		var tip string
		drawn := true
		for try := 0; try < 20 && drawn && !strings.Contains(tip, "overlapped by:"); try++ {
			var x, y float64
			drawn = false
			for _, now := range timelinetest.ReadDrawn(t, b).Spans {
				if now.Span == r.Span {
					x, y, drawn = now.CX, now.CY, true
				}
			}
			if !drawn {
				break
			}
			// The page sees a move only where the mouse moves: from the
			// second try on it goes off the chart first, so that each try
			// is a fresh mousemove (a CI run saw the tip empty through 20
			// tries at one spot).
			if try > 0 {
				if err := b.MoveMouse(1, 1); err != nil {
					t.Fatal(err)
				}
			}
			if err := b.MoveMouse(x, y); err != nil {
				t.Fatal(err)
			}
			time.Sleep(50 * time.Millisecond)
			if err := b.Eval(`document.getElementById("tip").textContent`, &tip); err != nil {
				t.Fatal(err)
			}
		}
		if !drawn {
			tried = append(tried, r.Span+" (left the view)")
			continue
		}
		if !strings.Contains(tip, "overlapped by:") {
			t.Errorf("hover over span %s: %q, want its overlap totals", r.Span, tip)
		}
		for _, w := range wants {
			if !strings.Contains(tip, w) {
				t.Errorf("hover over span %s: %q lacks %q", r.Span, tip, w)
			}
		}
		return
	}
	t.Errorf("no drawn span had overlap totals to hover (tried %v)", tried)
}

func laneOf(t *testing.T, b *cdptest.Browser, pid int64) int {
	t.Helper()
	var lane int
	if err := b.Eval(fmt.Sprintf(`(timeline.snapshot.lanes.find((l) => l.pid === %d) || {id: -1}).id`, pid), &lane); err != nil {
		t.Fatal(err)
	}
	if lane < 0 {
		t.Fatalf("no lane for pid %d", pid)
	}
	return lane
}

// cpuTicks is the collector's user+system CPU time in clock ticks.
func cpuTicks(t *testing.T, pid int) int64 {
	t.Helper()
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+2:]))
	u, _ := strconv.ParseInt(f[11], 10, 64)
	s, _ := strconv.ParseInt(f[12], 10, 64)
	return u + s
}

// startJepScenario skips (or fails, where everything should be there)
// without root, java, javac, python3 or Chromium; then starts the built
// collector on its embedded default and a real JVM embedding CPython, and
// returns a context of 3 minutes, the collector, the JVM's pid and the host
// name. The tests send the JVM's spans themselves, as a forwarding
// collector would: loopback is a trusted peer, whose spans are matched by
// their resource attributes (a workload's would be its connection's).
func startJepScenario(t *testing.T) (context.Context, *e2etest.Collector, int64, string) {
	t.Helper()
	e2etest.RequireComponents(t, "timeline", "runtimecorrelation", "jfr", "pythongil")
	if os.Geteuid() != 0 {
		skipOrFail(t, "timeline e2e: the pythongil receiver's probes need root")
	}
	for _, tool := range []string{"java", "javac", "python3"} {
		if _, err := exec.LookPath(tool); err != nil {
			skipOrFail(t, "timeline e2e: %s not found", tool)
		}
	}
	cdptest.Binary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	c := e2etest.Start(t, e2etest.Options{Configs: []string{"embedded:default",
		`yaml:processors::runtimecorrelation::identity::trusted_peers: [127.0.0.1, "::1"]`}})
	if err := c.WaitHealthy(60 * time.Second); err != nil {
		t.Fatalf("%v\n%s", err, c.Log())
	}
	pid := jepWorkload(t)
	host, _ := os.Hostname()
	return ctx, c, pid, host
}

// TestLivePageAndStaticFileDrawWhatTheCollectorExported runs the built
// collector on its embedded default configuration (timeline on loopback)
// beside a real JVM embedding CPython (JFR, eBPF GIL probes), sends it
// request spans of that process, and loads the page in headless Chromium
// while they run: the lanes, windows and spans drawn are the exported ones
// (counts, and positions within a pixel), a span's hover gives its overlap
// totals, screenshots at two zoom levels, no console errors. Then the same
// checks on the static file cmd/timeline's renderer makes of the output.
// It logs the page's weight, its first paint and the collector's CPU with
// the page polling and without.
func TestLivePageAndStaticFileDrawWhatTheCollectorExported(t *testing.T) {
	ctx, c, pid, host := startJepScenario(t)
	url := "http://" + c.Endpoints.Timeline + "/"

	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	t.Logf("figure: page weight %d bytes (uncompressed, everything inline)", len(page))

	// Idle: nobody looks.
	idle0 := cpuTicks(t, c.Pid())
	time.Sleep(5 * time.Second)
	idle := cpuTicks(t, c.Pid()) - idle0

	b := cdptest.Start(t, 1400, 1000)
	if err := b.Navigate(ctx, url); err != nil {
		t.Fatal(err)
	}
	// The first paint with data: when the first snapshot was drawn.
	if err := b.Until(ctx, `document.getElementById("chart").dataset.mode !== undefined`); err != nil {
		t.Fatal(err)
	}
	var paint struct{ FirstPaint, Load, Drawn float64 }
	if err := b.Eval(`({FirstPaint: (performance.getEntriesByType("paint")[0] || {startTime: -1}).startTime,
		Load: performance.getEntriesByType("navigation")[0].loadEventEnd, Drawn: timeline.firstDrawn})`, &paint); err != nil {
		t.Fatal(err)
	}
	t.Logf("figure: headless Chromium, live page: first paint %.0f ms, load %.0f ms, first snapshot drawn %.0f ms after navigation",
		paint.FirstPaint, paint.Load, paint.Drawn)

	watched0 := cpuTicks(t, c.Pid())
	sendStart := time.Now()
	for i := 0; time.Since(sendStart) < 8*time.Second; i++ {
		if err := c.SendTraces(ctx, spansOf(pid, host, i, 150*time.Millisecond)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	sendEnd := time.Now()
	// Spans wait up to 2 s for their windows, JFR flushes once a second.
	if err := b.Until(ctx, `timeline.snapshot && timeline.snapshot.spans.some((s) => s.overlap)`); err != nil {
		t.Fatalf("%v\n%s", err, c.Log())
	}
	time.Sleep(4 * time.Second)
	watched := cpuTicks(t, c.Pid()) - watched0
	t.Logf("figure: collector CPU %.2f%% of a core idle, %.2f%% with the page polling once a second (and 10 spans/s)",
		float64(idle)/5, float64(watched)/float64(time.Since(sendStart).Seconds()))

	// A fixed view of the middle of the sending, every window of which has
	// long arrived.
	// Whole milliseconds: the view the page is given.
	from, to := time.UnixMilli(sendStart.Add(2*time.Second).UnixMilli()), time.UnixMilli(sendEnd.Add(-time.Second).UnixMilli())
	setView := fmt.Sprintf(`timeline.setView(%d, %d, false)`, from.UnixMilli(), to.UnixMilli())
	if err := b.Eval(setView, nil); err != nil {
		t.Fatal(err)
	}
	if err := b.Until(ctx, fmt.Sprintf(`timeline.snapshot && Math.abs(timeline.snapshot.from - %d) < 1 && document.getElementById("chart").dataset.fromMs == "%d"`, from.UnixMilli(), from.UnixMilli())); err != nil {
		t.Fatal(err)
	}
	d := timelinetest.ReadDrawn(t, b)
	lane := laneOf(t, b, pid)
	// What was indexed is exported after the batch processor (1 s) and the
	// file exporter's flush (1 s): give both time.
	time.Sleep(4 * time.Second)
	ex := exported(t, c, pid, from.UnixNano(), to.UnixNano())
	t.Logf("in view: %v windows and %d spans exported; drawn %d windows, %d spans, %d overlap bands, mode %s",
		counts(ex.windows), len(ex.spans), len(d.Windows), len(d.Spans), d.Overlap, d.Mode)
	if len(ex.windows["jvm.gc.pause"])+len(ex.windows["jvm.safepoint"]) == 0 || len(ex.windows["python.gil.wait"]) == 0 || len(ex.spans) == 0 {
		t.Fatalf("the workload exported too little to check: %v, %d spans", counts(ex.windows), len(ex.spans))
	}
	checkAgainstExport(t, "live", d, lane, ex)
	hoverOverlapped(t, b, d, lane, ex)
	if d.Overlap == 0 {
		t.Errorf("no overlap drawn, though JepOverlap's pauses overlap its GIL waits")
	}
	shots := map[string][]byte{}
	shots["live"], err = b.Screenshot()
	if err != nil {
		t.Fatal(err)
	}
	mid := (from.UnixMilli() + to.UnixMilli()) / 2
	if err := b.Eval(fmt.Sprintf(`timeline.setView(%d, %d, false)`, mid-400, mid+400), nil); err != nil {
		t.Fatal(err)
	}
	if err := b.Until(ctx, fmt.Sprintf(`document.getElementById("chart").dataset.fromMs == "%d"`, mid-400)); err != nil {
		t.Fatal(err)
	}
	zoomed := timelinetest.ReadDrawn(t, b)
	checkAgainstExport(t, "live zoomed", zoomed, laneOf(t, b, pid), exported(t, c, pid, (mid-400)*1e6, (mid+400)*1e6))
	if shots["live-zoomed"], err = b.Screenshot(); err != nil {
		t.Fatal(err)
	}
	if p := b.Problems(); len(p) > 0 {
		t.Errorf("live page console: %q", p)
	}

	// The same output as a static file.
	rec := timeline.NewRecording()
	for _, name := range []string{"logs.jsonl", "traces.jsonl", "metrics.jsonl"} {
		f, err := os.Open(filepath.Join(c.OutputDir, name))
		if err != nil {
			t.Fatal(err)
		}
		switch name {
		case "logs.jsonl":
			err = rec.ReadLogs(f)
		case "traces.jsonl":
			err = rec.ReadTraces(f)
		default:
			err = rec.ReadMetrics(f)
		}
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	var static bytes.Buffer
	if err := timeline.Render(&static, timeline.PageOptions{Title: "recorded", Data: rec.Snapshot("recorded", 0, 0)}); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "timeline.html")
	if err := os.WriteFile(file, static.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	s := cdptest.Start(t, 1400, 1000)
	if err := s.Navigate(ctx, "file://"+file); err != nil {
		t.Fatal(err)
	}
	if err := s.Eval(setView, nil); err != nil {
		t.Fatal(err)
	}
	sd := timelinetest.ReadDrawn(t, s)
	checkAgainstExport(t, "static", sd, laneOf(t, s, pid), ex)
	hoverOverlapped(t, s, sd, laneOf(t, s, pid), ex)
	if shots["static"], err = s.Screenshot(); err != nil {
		t.Fatal(err)
	}
	if p := s.Problems(); len(p) > 0 {
		t.Errorf("static page console: %q", p)
	}
	if dir := os.Getenv("TIMELINE_SCREENSHOT_DIR"); dir != "" {
		for name, png := range shots {
			if err := os.WriteFile(filepath.Join(dir, "timeline-"+name+".png"), png, 0o644); err != nil {
				t.Error(err)
			}
		}
	}
	for name, png := range shots {
		if len(png) < 2000 {
			t.Errorf("screenshot %s: %d bytes", name, len(png))
		}
	}
}

func counts(m map[string][]window.Window) map[string]int {
	out := map[string]int{}
	for k, v := range m {
		out[k] = len(v)
	}
	return out
}

// TestPageOpenedAfterTheFactDrawsTheSpans is how the page is used: something
// happened, then someone opens it. The built collector on its embedded
// default runs beside a real JVM embedding CPython while request spans of
// that process arrive, with no page open and no snapshot asked for; then
// the page is opened on that past range, and it draws the exported windows
// and every exported span, each within a pixel of its time, with its
// exported overlap totals.
func TestPageOpenedAfterTheFactDrawsTheSpans(t *testing.T) {
	ctx, c, pid, host := startJepScenario(t)

	sendStart := time.Now()
	for i := 0; time.Since(sendStart) < 10*time.Second; i++ {
		if err := c.SendTraces(ctx, spansOf(pid, host, i, 150*time.Millisecond)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	sendEnd := time.Now()
	// Spans wait up to 2 s for their windows; the batch processor and the
	// file exporter take a second each.
	time.Sleep(5 * time.Second)

	// The middle 4 s: few enough windows of every process on the machine
	// for the page to draw each (beyond max_windows it draws a summary).
	from, to := time.UnixMilli(sendStart.Add(3*time.Second).UnixMilli()), time.UnixMilli(sendEnd.Add(-3*time.Second).UnixMilli())
	ex := exported(t, c, pid, from.UnixNano(), to.UnixNano())
	if len(ex.spans) == 0 || len(ex.windows["jvm.gc.pause"])+len(ex.windows["jvm.safepoint"]) == 0 {
		t.Fatalf("the workload exported too little to check: %v, %d spans", counts(ex.windows), len(ex.spans))
	}

	b := cdptest.Start(t, 1400, 1000)
	if err := b.Navigate(ctx, "http://"+c.Endpoints.Timeline+"/"); err != nil {
		t.Fatal(err)
	}
	if err := b.Until(ctx, `document.getElementById("chart").dataset.mode !== undefined`); err != nil {
		t.Fatal(err)
	}
	if err := b.Eval(fmt.Sprintf(`timeline.setView(%d, %d, false)`, from.UnixMilli(), to.UnixMilli()), nil); err != nil {
		t.Fatal(err)
	}
	if err := b.Until(ctx, fmt.Sprintf(`timeline.snapshot && document.getElementById("chart").dataset.fromMs == "%d"`, from.UnixMilli())); err != nil {
		t.Fatal(err)
	}
	d := timelinetest.ReadDrawn(t, b)
	lane := laneOf(t, b, pid)
	drawn := 0
	for _, r := range d.Spans {
		if r.Lane == lane {
			drawn++
		}
	}
	t.Logf("figure: page opened %.0f s after the last span: %d of %d exported spans drawn, windows exported %v",
		time.Since(sendEnd).Seconds(), drawn, len(ex.spans), counts(ex.windows))
	checkAgainstExport(t, "opened after the fact", d, lane, ex)
	// Each span's overlap totals, as the page holds them for its hover,
	// are the exported ones.
	var held []struct {
		Span    string
		Overlap map[string]timeline.OverlapTotal
	}
	if err := b.Eval(`timeline.snapshot.spans.map((s) => ({Span: s.span, Overlap: s.overlap || {}}))`, &held); err != nil {
		t.Fatal(err)
	}
	overlapped := 0
	for _, h := range held {
		sp, ok := ex.spans[h.Span]
		if !ok {
			continue
		}
		want := map[string]timeline.OverlapTotal{}
		for k, v := range sp.Attributes().All() {
			rest, ok := strings.CutPrefix(k, "runtime.overlap.")
			if !ok {
				continue
			}
			if kind, ok := strings.CutSuffix(rest, ".count"); ok && window.Kind(kind).Known() {
				o := want[kind]
				o.Count = v.Int()
				want[kind] = o
			} else if kind, ok := strings.CutSuffix(rest, ".duration"); ok && window.Kind(kind).Known() {
				o := want[kind]
				o.Duration = v.Int()
				want[kind] = o
			}
		}
		if len(want) > 0 {
			overlapped++
		}
		if fmt.Sprint(h.Overlap) != fmt.Sprint(want) {
			t.Errorf("span %s: the page holds overlap totals %v, the collector exported %v", h.Span, h.Overlap, want)
		}
	}
	if overlapped == 0 {
		t.Errorf("no span in view was overlapped by a window, though JepOverlap's pauses land in its requests")
	}
	if p := b.Problems(); len(p) > 0 {
		t.Errorf("page console: %q", p)
	}
}

// telemetryValue reads one of the collector's own metrics (unlabelled
// apart from the service's) from its Prometheus endpoint.
func telemetryValue(t *testing.T, c *e2etest.Collector, name string) (float64, bool) {
	t.Helper()
	body, err := e2etest.Get("http://" + c.Endpoints.Telemetry + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(body, "\n") {
		rest, ok := strings.CutPrefix(line, name)
		if !ok || (rest != "" && rest[0] != '{' && rest[0] != ' ') {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err == nil {
			return v, true
		}
	}
	return 0, false
}

// TestRecentSpanRingStaysBoundedUnderAFlood floods the built collector with
// spans whose names are as long as the page keeps, far more than its
// timeline::max_bytes holds: what the ring holds (its own telemetry) stays
// within the bound, the newest spans are the ones kept (the page's API
// returns the last sent and not the first), and the collector's heap is
// logged beside it.
func TestRecentSpanRingStaysBoundedUnderAFlood(t *testing.T) {
	e2etest.RequireComponents(t, "timeline", "runtimecorrelation")
	const maxBytes = 1 << 20
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := e2etest.Start(t, e2etest.Options{Configs: []string{"embedded:default",
		`yaml:processors::runtimecorrelation::identity::trusted_peers: [127.0.0.1, "::1"]`,
		fmt.Sprintf("yaml:processors::runtimecorrelation::timeline::max_bytes: %d", maxBytes)}})
	if err := c.WaitHealthy(60 * time.Second); err != nil {
		t.Fatalf("%v\n%s", err, c.Log())
	}
	// The spans are this test process's: a host process the collector
	// finds in /proc.
	pid := int64(os.Getpid())
	host, _ := os.Hostname()
	name := strings.Repeat("flood ", 60) // 360 bytes, kept as 256
	const batches, perBatch = 100, 500
	first, last := "", ""
	start := time.Now().Add(-time.Minute)
	for i := range batches {
		td := ptrace.NewTraces()
		rs := td.ResourceSpans().AppendEmpty()
		rs.Resource().Attributes().PutInt("process.pid", pid)
		rs.Resource().Attributes().PutStr("host.name", host)
		spans := rs.ScopeSpans().AppendEmpty().Spans()
		for j := range perBatch {
			n := i*perBatch + j
			sp := spans.AppendEmpty()
			sp.SetName(name)
			sp.SetTraceID(pcommon.TraceID{0xf1, byte(n >> 16), byte(n >> 8), byte(n)})
			sp.SetSpanID(pcommon.SpanID{0xf1, byte(n >> 16), byte(n >> 8), byte(n)})
			// A millisecond apart, ending before now: released at once.
			at := start.Add(time.Duration(n) * time.Millisecond / 10)
			sp.SetStartTimestamp(pcommon.NewTimestampFromTime(at))
			sp.SetEndTimestamp(pcommon.NewTimestampFromTime(at.Add(50 * time.Microsecond)))
			switch n {
			case 0:
				first = sp.SpanID().String()
			case batches*perBatch - 1:
				last = sp.SpanID().String()
			}
		}
		if err := c.SendTraces(ctx, td); err != nil {
			t.Fatal(err)
		}
	}
	// The page's API over the whole flood, until the last batch has passed
	// the processor (it may wait the span delay, 2 s).
	snapshot := func() map[string]bool {
		body, err := e2etest.Get(fmt.Sprintf("http://%s/api/snapshot?from=%d&to=%d&kind=span&max_spans=100000",
			c.Endpoints.Timeline, start.Add(-time.Second).UnixNano(), time.Now().UnixNano()))
		if err != nil {
			t.Fatal(err)
		}
		var snap timeline.Snapshot
		if err := json.Unmarshal([]byte(body), &snap); err != nil {
			t.Fatal(err)
		}
		ids := map[string]bool{}
		for _, s := range snap.Spans {
			ids[s.SpanID] = true
		}
		return ids
	}
	ids := snapshot()
	for deadline := time.Now().Add(30 * time.Second); !ids[last] && time.Now().Before(deadline); ids = snapshot() {
		time.Sleep(500 * time.Millisecond)
	}
	held, _ := telemetryValue(t, c, "otelcol_processor_runtimecorrelation_timeline_spans")
	bytes, _ := telemetryValue(t, c, "otelcol_processor_runtimecorrelation_timeline_span_bytes")
	heap, _ := telemetryValue(t, c, "otelcol_process_runtime_heap_alloc_bytes")
	t.Logf("figure: %d spans of %d-byte names sent; the ring holds %.0f spans in %.0f bytes (bound %d); collector heap %.1f MiB",
		batches*perBatch, len(name), held, bytes, maxBytes, heap/(1<<20))
	perSpan := bytes / held
	switch {
	case held == 0:
		t.Fatalf("the ring holds no span after the flood\n%s", c.Log())
	case bytes > maxBytes:
		t.Errorf("the ring holds %.0f bytes, over its bound of %d", bytes, maxBytes)
	case bytes < maxBytes-perSpan:
		t.Errorf("the ring holds %.0f bytes, less than its bound %d less one span (%.0f): the flood should fill it", bytes, maxBytes, perSpan)
	case held >= batches*perBatch:
		t.Errorf("the ring holds all %.0f spans sent", held)
	}
	if len(ids) != int(held) || !ids[last] || ids[first] {
		t.Errorf("snapshot: %d spans (the ring holds %.0f), last sent there: %v, first sent there: %v; want the newest only",
			len(ids), held, ids[last], ids[first])
	}
}
