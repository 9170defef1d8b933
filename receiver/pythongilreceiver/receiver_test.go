package pythongilreceiver

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componentstatus"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/receiver"
	"go.opentelemetry.io/collector/receiver/receivertest"

	"github.com/otelcol-ai/otelcol-ai/internal/procresource"
	"github.com/otelcol-ai/otelcol-ai/internal/sharedcomponent"
	"github.com/otelcol-ai/otelcol-ai/internal/window"
	"github.com/otelcol-ai/otelcol-ai/receiver/pythongilreceiver/internal/gil"
	"github.com/otelcol-ai/otelcol-ai/receiver/pythongilreceiver/internal/metadata"
	"github.com/otelcol-ai/otelcol-ai/receiver/pythongilreceiver/internal/workloadtest"
)

// harness runs one receiver, with both pipelines, on the real probes.
type harness struct {
	t       testing.TB
	logs    *consumertest.LogsSink
	metrics *consumertest.MetricsSink
	faces   []component.Component
	core    *gilReceiver
}

// fastConfig reports quickly and selects pids, so that concurrent tests
// and other python processes on the host stay out of the way.
func fastConfig(pids ...int) *Config {
	cfg := createDefaultConfig().(*Config)
	cfg.DiscoveryInterval = 50 * time.Millisecond
	cfg.FlushInterval = 50 * time.Millisecond
	cfg.CollectionInterval = 100 * time.Millisecond
	cfg.Overhead.Budget = 0
	cfg.Include.PIDs = pids
	return cfg
}

func startReceiver(t testing.TB, cfg *Config, host component.Host) *harness {
	t.Helper()
	return startReceiverWith(t, cfg, host, receivertest.NewNopSettings(metadata.Type))
}

// startReceiverWith is startReceiver with the receiver's settings given,
// to read its own telemetry.
func startReceiverWith(t testing.TB, cfg *Config, host component.Host, set receiver.Settings) *harness {
	t.Helper()
	nf := NewFactory()
	h := &harness{t: t, logs: new(consumertest.LogsSink), metrics: new(consumertest.MetricsSink)}
	lr, err := nf.CreateLogs(context.Background(), set, cfg, h.logs)
	if err != nil {
		t.Fatalf("nf.CreateLogs: %v", err)
	}
	mr, err := nf.CreateMetrics(context.Background(), set, cfg, h.metrics)
	if err != nil {
		t.Fatalf("nf.CreateMetrics: %v", err)
	}
	h.faces = []component.Component{lr, mr}
	h.core = lr.(*sharedcomponent.Face[*gilReceiver]).Value()
	if mr.(*sharedcomponent.Face[*gilReceiver]).Value() != h.core {
		t.Fatalf("logs and metrics share one receiver: got %p, want the same pointer as %p", mr.(*sharedcomponent.Face[*gilReceiver]).Value(), h.core)
	}
	for _, c := range h.faces {
		if err := c.Start(context.Background(), host); err != nil {
			t.Fatalf("c.Start: %v", err)
		}
	}
	t.Cleanup(h.stop)
	return h
}

func (h *harness) stop() {
	for _, c := range h.faces {
		if err := c.Shutdown(context.Background()); err != nil {
			h.t.Errorf("c.Shutdown: %v", err)
		}
	}
	h.faces = nil
}

// waitAttached waits until pid's interpreter is probed, or skips the test
// when eBPF is unavailable.
// slack is how far a window's Unix times may stray from the workload's own
// clock readings: 1 ms, plus the uncertainty of the receiver's monotonic to
// Unix offset (large when every bracketed clock read was preempted).
func (h *harness) slack() int64 {
	h.core.stateMu.Lock()
	defer h.core.stateMu.Unlock()
	s := int64(time.Millisecond)
	if h.core.state != nil {
		s += int64(h.core.state.clock.Uncertainty())
	}
	return s
}

func (h *harness) waitAttached(pid int) {
	h.t.Helper()
	p, err := gil.Load(gil.Options{})
	if errors.Is(err, gil.ErrUnavailable) {
		h.t.Skipf("eBPF unavailable: %v", err)
	}
	if err != nil {
		h.t.Fatalf("gil.Load: %v", err)
	}
	if err := p.Close(); err != nil {
		h.t.Fatalf("p.Close: %v", err)
	}
	waitFor(h.t, "pid "+strconv.Itoa(pid)+" probed", func() bool {
		h.core.stateMu.Lock()
		defer h.core.stateMu.Unlock()
		if h.core.state == nil {
			return false
		}
		for _, l := range h.core.state.libraries {
			if _, ok := l.pids[uint32(pid)]; ok {
				return true
			}
		}
		return false
	})
}

func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// received is one window with its resource.
type received struct {
	w   window.Window
	res pcommon.Map
}

func (h *harness) windows(pid int) []received {
	var out []received
	for _, ld := range h.logs.AllLogs() {
		for _, rl := range ld.ResourceLogs().All() {
			if v, ok := rl.Resource().Attributes().Get(window.ResourcePID); !ok || v.Int() != int64(pid) {
				continue
			}
			for _, sl := range rl.ScopeLogs().All() {
				for _, lr := range sl.LogRecords().All() {
					w, err := window.Decode(lr)
					if err != nil {
						h.t.Fatalf("window.Decode: %v", err)
					}
					out = append(out, received{w: w, res: rl.Resource().Attributes()})
				}
			}
		}
	}
	return out
}

// window returns r's window; matchSleeps and oneWindowPerCall take it.
func (r received) window() window.Window { return r.w }

// A time.sleep call as the workloads report it: time.time_ns() before and
// after, then time.monotonic_ns() before and after.
type sleepCall = [4]int64

// callEdge tells a call's own window from a release after the call: the
// receiver sends no released window shorter than min_duration (100 µs on
// the tests' configurations), so one that ended by the call's end began at
// least that long before it, and a release after the call begins after it.
// Half of that leaves room for the Unix conversion (the clock offset is
// re-measured at every discovery and drifted 1.4 µs in 5 s here). It was
// tol before, which missed the window of a thread preempted for 5 ms
// between time.sleep's deadline and its release (TestManyProcessesAtOnce:
// a 152 µs window starting 5 ms into a 5.15 ms call).
const callEdge = 50 * time.Microsecond

// matchSleeps returns, for each of thread tid's time.sleep calls, the
// released windows among items that belong to it, by the call's clock
// readings rather than by length (a window may be shorter than the sleep:
// time.sleep fixes its absolute deadline before PyEval_SaveThread, and a
// thread preempted in between releases the GIL late; and the thread may
// release the GIL around its calls for reasons of its own: starting up,
// or, embedded, running its host's code between calls). A window belongs
// to a call when, within tol (how far its Unix times may stray; tol must
// stay under half the sleep for the calls to be told apart),
//   - it starts no earlier than the call began, and at least callEdge
//     before the call ended (a window that starts as the call ends is the
//     thread releasing the GIL after the call);
//   - it ends no later than the call ended, and at least the sleep after the
//     call began (clock_nanosleep returns at the deadline, which time.sleep
//     takes from a clock read inside the call).
func matchSleeps[T any](items []T, win func(T) window.Window, tid int64, calls []sleepCall, sleep time.Duration, tol int64) [][]T {
	edge := int64(callEdge)
	out := make([][]T, len(calls))
	for _, it := range items {
		w := win(it)
		if w.Kind != window.KindPythonGILReleased || w.ThreadID != tid {
			continue
		}
		for j, c := range calls {
			if w.Start >= c[0]-tol && w.Start <= c[1]-edge && w.End() <= c[1]+tol && w.End() >= c[0]+int64(sleep)-tol {
				out[j] = append(out[j], it)
			}
		}
	}
	return out
}

// TestMatchSleepsTellsLateReleasesFromLaterOnes: the readings and windows
// of a TestManyProcessesAtOnce run that gave up (thread 8750, three 5 ms
// sleeps): the first call's window began 5 ms into the call, its thread
// preempted between time.sleep's deadline and its release, and is the
// call's; the window before the calls (starting up) is none of them, and
// a window beginning as a call ends is not that call's.
func TestMatchSleepsTellsLateReleasesFromLaterOnes(t *testing.T) {
	calls := []sleepCall{
		{1796538483007492879, 1796538483012647892, 25984938794836, 25984943946079},
		{1796538483012673865, 1796538483034117599, 25984943974172, 25984965416659},
		{1796538483034154954, 1796538483039420847, 25984965455259, 25984970719223},
	}
	released := func(start, end int64) window.Window {
		return window.Window{Kind: window.KindPythonGILReleased, ThreadID: 8750, Start: start, Duration: time.Duration(end - start)}
	}
	windows := []window.Window{
		released(1796538482971197885, 1796538482980785992),
		released(1796538483012488723, 1796538483012640698),
		released(1796538483012676014, 1796538483034111699),
		released(1796538483034156588, 1796538483039411909),
	}
	self := func(w window.Window) window.Window { return w }
	const sleep = 5 * time.Millisecond
	got := matchSleeps(windows, self, 8750, calls, sleep, int64(sleep/2))
	want := [][]window.Window{{windows[1]}, {windows[2]}, {windows[3]}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("matched %v, want %v", got, want)
	}
	// A release that begins 20 µs after the first call's end and lasts
	// 200 µs belongs to no call.
	after := released(calls[0][1]+20_000, calls[0][1]+220_000)
	if got := matchSleeps([]window.Window{after}, self, 8750, calls, sleep, int64(sleep/2)); everyCallMatched(got[:1]) {
		t.Errorf("a release after the first call matched it: %v", got)
	}
}

// everyCallMatched reports whether each call of m has a window.
func everyCallMatched[T any](m [][]T) bool {
	return !slices.ContainsFunc(m, func(ws []T) bool { return len(ws) == 0 })
}

// oneWindowPerCall asserts that each call of m has exactly one window, and
// that it is no longer than the call: its length, and the call's
// time.monotonic_ns() readings, are both CLOCK_MONOTONIC. It returns the
// windows, one a call, and whether all that held.
func oneWindowPerCall[T any](t testing.TB, what string, m [][]T, win func(T) window.Window, calls []sleepCall) ([]T, bool) {
	t.Helper()
	ok := true
	if len(m) != len(calls) {
		t.Errorf("%s: calls: got %d, want %d", what, len(m), len(calls))
		ok = false
	}
	one := make([]T, len(m))
	for j, ws := range m {
		if len(ws) != 1 {
			t.Errorf("%s: windows of call %d: got %d, want 1", what, j, len(ws))
			ok = false
			continue
		}
		one[j] = ws[0]
		d, call := win(ws[0]).Duration, time.Duration(calls[j][3]-calls[j][2])
		if d <= 0 {
			t.Errorf("%s: window of call %d: got %v, want > 0", what, j, d)
			ok = false
		}
		if d > call {
			t.Errorf("%s: window of call %d longer than the call: got %v, want <= %v", what, j, d, call)
			ok = false
		}
	}
	return one, ok
}

// sleepWindows waits until each of thread tid's time.sleep calls in pid has
// a window (matchSleeps), then asserts oneWindowPerCall and returns what
// that returns.
func (h *harness) sleepWindows(pid int, tid int64, calls []sleepCall, sleep time.Duration, tol int64) ([]received, bool) {
	h.t.Helper()
	what := "pid " + strconv.Itoa(pid) + " thread " + strconv.FormatInt(tid, 10)
	match := func() [][]received { return matchSleeps(h.windows(pid), received.window, tid, calls, sleep, tol) }
	deadline := time.Now().Add(30 * time.Second)
	for !everyCallMatched(match()) {
		if time.Now().After(deadline) {
			var released [][2]int64
			for _, r := range h.windows(pid) {
				if r.w.Kind == window.KindPythonGILReleased && r.w.ThreadID == tid {
					released = append(released, [2]int64{r.w.Start, r.w.End()})
				}
			}
			h.t.Fatalf("gave up waiting for the sleep windows of %s: calls %v (Unix and monotonic ns), its released windows %v (Unix ns)", what, calls, released)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return oneWindowPerCall(h.t, what, match(), received.window, calls)
}

// TestSleepWindowsEndToEnd runs five 20 ms sleeps on one thread: each call
// has exactly one released window, matched to it by the workload's clock
// readings (matchSleeps: not by length, since a window may legitimately be
// shorter than the sleep, and the thread may release the GIL before its
// first call while starting up), and the window's Unix times, length and
// resource agree with the call.
func TestSleepWindowsEndToEnd(t *testing.T) {
	w := workloadtest.Start(t, "sleep", "5", "20")
	h := startReceiver(t, fastConfig(w.PID), componenttest.NewNopHost())
	h.waitAttached(w.PID)
	var res struct {
		TID   int64       `json:"tid"`
		N     int         `json:"n"`
		DNS   int64       `json:"d_ns"`
		Calls []sleepCall `json:"calls"`
	}
	w.Run(&res)
	if got := len(res.Calls); got != res.N {
		t.Fatalf("len(res.Calls): got %d, want %d", got, res.N)
	}
	// Matching needs only to tell the calls apart (half a sleep); the
	// Unix times are checked to h.slack() below.
	got, ok := h.sleepWindows(w.PID, res.TID, res.Calls, time.Duration(res.DNS), res.DNS/2)
	if !ok {
		t.Fatalf("one window per call (ok is false)")
	}
	// Durations agree with the calls within 1 ms; on a busy host (other test
	// packages run beside this one) one call of the five may have waited
	// for a CPU around its sleep or before releasing the GIL, so one
	// outlier up to 10 ms is tolerated.
	late, diffs := 0, make([]time.Duration, len(got))
	for i, r := range got {
		// Unix times: the window lies within the workload's own
		// time.time_ns() readings around the call, within 1 ms and the
		// clock offset's uncertainty.
		w0, w1 := res.Calls[i][0], res.Calls[i][1]
		slack := h.slack()
		if r.w.Start < w0-slack {
			t.Errorf("window %d starts before the call: got %v, want >= %v", i, r.w.Start, w0-slack)
		}
		if got := r.w.End(); got > w1+slack {
			t.Errorf("window %d ends after the call: got %v, want <= %v", i, got, w1+slack)
		}
		call := time.Duration(res.Calls[i][3] - res.Calls[i][2])
		if !(math.Abs(float64(call)-float64(r.w.Duration)) <= float64(10*time.Millisecond)) {
			t.Errorf("window %d: got %v, want %v ± %v", i, r.w.Duration, call, float64(10*time.Millisecond))
		}
		if d := call - r.w.Duration; d > time.Millisecond || d < -time.Millisecond {
			late++
		}
		diffs[i] = call - r.w.Duration
		attrs := r.res.AsRaw()
		if got := attrs[window.ResourcePID]; !reflect.DeepEqual(got, int64(w.PID)) {
			t.Errorf("attrs[window.ResourcePID]: got %v, want %v", got, int64(w.PID))
		}
		if got := attrs[window.ResourceRuntimeName]; !reflect.DeepEqual(got, window.RuntimeCPython) {
			t.Errorf("attrs[window.ResourceRuntimeName]: got %v, want %q", got, window.RuntimeCPython)
		}
		if got := attrs[window.ResourceRuntimeVersion]; !reflect.DeepEqual(got, "3.11") {
			t.Errorf("attrs[window.ResourceRuntimeVersion]: got %v, want %q", got, "3.11")
		}
		if name, _ := attrs["process.executable.name"].(string); !strings.Contains(name, "python3") {
			t.Errorf("attrs[\"process.executable.name\"]: got %v, want it to contain %q", attrs["process.executable.name"], "python3")
		}
		if got := attrs[window.ResourceHostName]; !reflect.DeepEqual(got, procresource.LocalNode().HostName) {
			t.Errorf("attrs[window.ResourceHostName]: got %v, want %q", got, procresource.LocalNode().HostName)
		}
		if got := attrs[window.ResourceVPID]; !reflect.DeepEqual(got, int64(w.PID)) {
			t.Errorf("the workload runs in the test's (host) pid namespace: got %v, want %v", got, int64(w.PID))
		}
	}
	if late > 1 {
		t.Errorf("windows differing from their call by more than 1 ms (call minus window: %v): got %v, want <= %v", diffs, late, 1)
	}

	// Metrics: the released-duration histogram of the process counts the
	// 20 ms sleeps in buckets above 10 ms (with the main thread's wait on
	// stdin, hence at least).
	waitFor(t, "released histogram", func() bool {
		return releasedAtLeast(h.metrics.AllMetrics(), w.PID, 10e-3) >= uint64(res.N)
	})
}

// releasedAtLeast returns how many released windows of at least minS
// seconds the latest histogram point for pid counts.
func releasedAtLeast(all []pmetric.Metrics, pid int, minS float64) uint64 {
	var n uint64
	for _, md := range all {
		for _, rm := range md.ResourceMetrics().All() {
			if v, ok := rm.Resource().Attributes().Get(window.ResourcePID); !ok || v.Int() != int64(pid) {
				continue
			}
			for _, sm := range rm.ScopeMetrics().All() {
				for _, m := range sm.Metrics().All() {
					if m.Name() != metricReleasedDuration {
						continue
					}
					for _, dp := range m.Histogram().DataPoints().All() {
						var c uint64
						bounds := dp.ExplicitBounds().AsRaw()
						for i, bc := range dp.BucketCounts().AsRaw() {
							if i > 0 && bounds[i-1] >= minS {
								c += bc
							}
						}
						n = c
					}
				}
			}
		}
	}
	return n
}

// TestManyProcessesAtOnce probes twenty processes through one library: each
// sleeping thread's released windows are matched to its own time.sleep calls
// by the workload's clock readings, not by length. A window may be shorter
// than the sleep (time.sleep fixes its deadline before PyEval_SaveThread,
// and a thread preempted in between enters the probe late; twenty
// processes starting their threads at once on two CPUs make that likely),
// and the thread may release the GIL for milliseconds before its first call
// (starting up, it can block on a lock its creator holds while that one
// waits for the GIL); neither is a receiver error.
func TestManyProcessesAtOnce(t *testing.T) {
	const (
		procs = 20
		sleep = 5 * time.Millisecond
	)
	ws := make([]*workloadtest.Process, procs)
	pids := make([]int, procs)
	var wg sync.WaitGroup
	for i := range procs {
		wg.Go(func() {
			ws[i] = workloadtest.Start(t, "sleep", "3", strconv.Itoa(int(sleep/time.Millisecond)))
			pids[i] = ws[i].PID
		})
	}
	wg.Wait()
	h := startReceiver(t, fastConfig(pids...), componenttest.NewNopHost())
	for _, pid := range pids {
		h.waitAttached(pid)
	}
	type result struct {
		TID   int64       `json:"tid"`
		N     int         `json:"n"`
		Calls []sleepCall `json:"calls"`
	}
	results := make([]result, procs)
	for i, w := range ws {
		wg.Go(func() { w.Run(&results[i]) })
	}
	wg.Wait()
	// Matching within half a sleep: the Unix times are checked to 1 ms by
	// TestSleepWindowsEndToEnd; here the margin only has to tell the calls,
	// and what came before them, apart.
	for i, w := range ws {
		res := results[i]
		if got := len(res.Calls); got != res.N {
			t.Fatalf("pid %d: got %d, want %d", w.PID, got, res.N)
		}
		h.sleepWindows(w.PID, res.TID, res.Calls, sleep, int64(sleep/2))
	}
	// One library file, shared by all twenty processes.
	h.core.stateMu.Lock()
	libs := len(h.core.state.libraries)
	h.core.stateMu.Unlock()
	if libs != 1 {
		t.Errorf("libs: got %v, want %v", libs, 1)
	}
}

func TestProcessExitDetachesAndForgets(t *testing.T) {
	w := workloadtest.Start(t, "sleep", "2", "5", "--exit")
	h := startReceiver(t, fastConfig(w.PID), componenttest.NewNopHost())
	h.waitAttached(w.PID)
	var res struct{}
	w.Run(&res)
	w.Wait()
	waitFor(t, "the library detached and the process forgotten", func() bool {
		h.core.stateMu.Lock()
		defer h.core.stateMu.Unlock()
		_, known := h.core.state.processes[uint32(w.PID)]
		return len(h.core.state.libraries) == 0 && !known
	})
	// Its windows still go out (the batch is flushed on its own timer).
	waitFor(t, "the exited process's windows", func() bool { return len(h.windows(w.PID)) >= 2 })
}

// statusHost records the component statuses reported to it.
type statusHost struct {
	component.Host
	mu     sync.Mutex
	events []*componentstatus.Event
}

func (s *statusHost) Report(e *componentstatus.Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.events = append(s.events, e)
}

func (s *statusHost) last() *componentstatus.Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.events) == 0 {
		return nil
	}
	return s.events[len(s.events)-1]
}

func TestUnavailableEBPFReportsStatusAndKeepsRunning(t *testing.T) {
	cfg := fastConfig()
	cfg.RetryInterval = 20 * time.Millisecond
	set := receivertest.NewNopSettings(metadata.Type)
	r := newReceiver(set, cfg)
	var mu sync.Mutex
	attempts := 0
	r.load = func(gil.Options) (*gil.Probe, error) {
		mu.Lock()
		defer mu.Unlock()
		attempts++
		return nil, &gil.UnavailableError{Op: "load BPF programs", Err: errors.New("operation not permitted")}
	}
	host := &statusHost{Host: componenttest.NewNopHost()}
	f := newCore(r).NewFace(sharedcomponent.Hooks{})
	if err := f.Start(context.Background(), host); err != nil {
		t.Fatalf("Start must not fail the collector: %v", err)
	}
	waitFor(t, "a retry", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return attempts >= 2
	})
	ev := host.last()
	if ev == nil {
		t.Fatalf("ev: got nil, want non-nil")
	}
	if got := ev.Status(); got != componentstatus.StatusRecoverableError {
		t.Errorf("ev.Status(): got %v, want %v", got, componentstatus.StatusRecoverableError)
	}
	if err := ev.Err(); !errors.Is(err, gil.ErrUnavailable) {
		t.Errorf("ev.Err: got error %v, want %v", err, gil.ErrUnavailable)
	}
	if got := ev.Err().Error(); !strings.Contains(got, "CAP_BPF") {
		t.Errorf("ev.Err().Error(): got %q, want it to contain %q", got, "CAP_BPF")
	}
	if got := ev.Err().Error(); !strings.Contains(got, "hostPID") {
		t.Errorf("ev.Err().Error(): got %q, want it to contain %q", got, "hostPID")
	}
	if err := f.Shutdown(context.Background()); err != nil {
		t.Fatalf("f.Shutdown: %v", err)
	}
	if err := f.Shutdown(context.Background()); err != nil {
		t.Fatalf("second Shutdown: %v", err)
	}
}

func TestShutdownWithoutStart(t *testing.T) {
	nf := NewFactory()
	lr, err := nf.CreateLogs(context.Background(), receivertest.NewNopSettings(metadata.Type), createDefaultConfig(), consumertest.NewNop())
	if err != nil {
		t.Fatalf("nf.CreateLogs: %v", err)
	}
	if err := lr.Shutdown(context.Background()); err != nil {
		t.Fatalf("lr.Shutdown: %v", err)
	}
}

// readImage reads the ELF image of path.
func readImage(path string) (*gil.Image, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return gil.ReadFile(f)
}

// TestGCPausesFromUSDTEndToEnd runs the GC workload on a stripped CPython
// built --with-dtrace (Debian's /usr/bin/python3.X: no gc_collect_main,
// gc__start/gc__done notes): discovery finds the static executable, the
// USDT probes give one python.gc.pause window per gc.collect(2), with its
// generation.
func TestGCPausesFromUSDTEndToEnd(t *testing.T) {
	pythons, _ := filepath.Glob("/usr/bin/python3.[0-9]*")
	var py string
	for _, c := range pythons {
		if img, err := readImage(c); err == nil && img.Symbols.HasGIL() && img.Symbols.GC() == "" && len(img.USDT) > 0 {
			py = c
			break
		}
	}
	if py == "" {
		t.Skip("no stripped /usr/bin/python3.X with USDT notes here")
	}
	w := workloadtest.StartWith(t, py, "gc", "4")
	h := startReceiver(t, fastConfig(w.PID), componenttest.NewNopHost())
	h.waitAttached(w.PID)
	var res struct {
		TID int64 `json:"tid"`
		N   int   `json:"n"`
	}
	w.Run(&res)
	pauses := func() []received {
		var out []received
		for _, r := range h.windows(w.PID) {
			if r.w.Kind == window.KindPythonGCPause && r.w.ThreadID == res.TID && r.w.Attributes[window.AttrPythonGCGeneration] == int64(2) {
				out = append(out, r)
			}
		}
		return out
	}
	waitFor(t, "the GC pause windows", func() bool { return len(pauses()) >= res.N })
	got := pauses()
	if got2 := len(got); got2 != res.N {
		t.Fatalf("len(pauses): got %d, want %d", got2, res.N)
	}
	if got2 := got[0].res.AsRaw()["process.executable.name"]; !reflect.DeepEqual(got2, filepath.Base(py)) {
		t.Errorf("got[0].res.AsRaw()[\"process.executable.name\"]: got %v, want %q", got2, filepath.Base(py))
	}
}
