//go:build linux && amd64

package gil

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/otelcol-ai/otelcol-ai/receiver/pythongilreceiver/internal/workloadtest"
)

// load loads a probe or skips the test when eBPF is unavailable here.
func load(t *testing.T, opts Options) *Probe {
	t.Helper()
	p, err := Load(opts)
	if errors.Is(err, ErrUnavailable) {
		t.Skipf("eBPF unavailable: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return p
}

func attach(t *testing.T, p *Probe, pid int) *Library {
	t.Helper()
	path, err := workloadtest.LibPython(pid)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	// The Library holds its own descriptor: the caller's is closed at once.
	l, err := p.Attach(f)
	_ = f.Close()
	if errors.Is(err, ErrUnavailable) {
		t.Skipf("uprobes unavailable: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// drain returns the pending events of pid, each wait's continuations
// joined to it (Join).
func drain(t *testing.T, p *Probe, pid int) []Event {
	t.Helper()
	return drainPIDs(t, p)[uint32(pid)]
}

// drainPIDs returns the pending events by pid, each wait's continuations
// joined to it.
func drainPIDs(t *testing.T, p *Probe) map[uint32][]Event {
	t.Helper()
	p.SetDeadline(time.Now())
	defer p.SetDeadline(time.Time{})
	out := map[uint32][]Event{}
	last := map[uint32]int{}
	for {
		e, err := p.ReadEvent()
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		evs := out[e.PID]
		if i, ok := last[e.TID]; ok && Join(&evs[i], e) {
			continue
		}
		if e.Kind == KindWait {
			last[e.TID] = len(evs)
		}
		out[e.PID] = append(evs, e)
	}
}

var defaults = Options{MinDuration: 100 * time.Microsecond, SwitchProbes: true, GC: true}

func TestSleepReleasesGILOncePerCall(t *testing.T) {
	p := load(t, defaults)
	w := workloadtest.Start(t, "sleep", "5", "20")
	attach(t, p, w.PID)
	var res struct {
		TID    uint32     `json:"tid"`
		N      int        `json:"n"`
		DNS    int64      `json:"d_ns"`
		Calls  [][4]int64 `json:"calls"`
		Delays []int64    `json:"run_delays_ns"`
	}
	w.Run(&res)
	if len(res.Calls) != res.N || len(res.Delays) != res.N {
		t.Fatalf("%d calls and %d run delays reported, want %d", len(res.Calls), len(res.Delays), res.N)
	}
	released := oneReleasePerCall(t, drain(t, p, w.PID), res.TID, monotonicSpans(res.Calls), time.Duration(res.DNS))
	if t.Failed() {
		t.FailNow()
	}
	// Each window lies inside the workload's own monotonic readings around
	// time.sleep, and is as long as the call within 1 ms plus the time the
	// thread stood runnable in the call (its schedstat run delay): the rest
	// of the call is the interpreter's own work around the sleep, and on a
	// loaded host a preemption there (10.8 ms seen beside two busy loops,
	// load average 20 on 2 CPUs).
	for i, e := range released {
		m0, m1 := res.Calls[i][2], res.Calls[i][3]
		if e.Start < m0 || e.Start+int64(e.Duration) > m1 {
			t.Errorf("window %d [%d, +%s] not inside the call [%d, %d]", i, e.Start, e.Duration, m0, m1)
		}
		d, late := time.Duration(m1-m0)-e.Duration, time.Duration(res.Delays[i])
		if d < 0 || d > time.Millisecond+late {
			t.Errorf("window %d lasts %s, the call %s (the thread stood runnable %s in the call)", i, e.Duration, time.Duration(m1-m0), late)
		}
	}
}

func aggregatesOf(t *testing.T, p *Probe, pid int) map[AggregateKey]Aggregate {
	t.Helper()
	all, err := p.Aggregates()
	if err != nil {
		t.Fatal(err)
	}
	out := map[AggregateKey]Aggregate{}
	for k, v := range all {
		if int(k.PID) == pid {
			out[k] = v
		}
	}
	return out
}

// hashResult is what the hash workload reports: its threads, and the
// hashlib calls each made.
type hashResult struct {
	TIDs []uint32 `json:"tids"`
	N    uint64   `json:"n"`
}

// releasedCount is the number of released windows of thread tid of pid:
// those summed in the kernel and those that came as events.
func releasedCount(aggs map[AggregateKey]Aggregate, events []Event, pid int, tid uint32) uint64 {
	n := aggs[AggregateKey{PID: uint32(pid), TID: tid, Kind: KindReleased}].Count
	for _, e := range events {
		if e.TID == tid && e.Kind == KindReleased {
			n++
		}
	}
	return n
}

func TestHashlibReleasesCountedPerThread(t *testing.T) {
	p := load(t, defaults)
	w := workloadtest.Start(t, "hash", "3", "2000", "65536")
	attach(t, p, w.PID)
	var res hashResult
	w.Run(&res)
	events := drain(t, p, w.PID)
	aggs := aggregatesOf(t, p, w.PID)
	for _, tid := range res.TIDs {
		// Short releases are summed in the kernel, long ones come as
		// events: together one per hashlib call. The thread's own start
		// and exit add none (a new thread acquires, an exiting one drops
		// without PyEval_SaveThread).
		if n := releasedCount(aggs, events, w.PID, tid); n != res.N {
			t.Errorf("thread %d: %d released windows, want %d", tid, n, res.N)
		}
		if held := aggs[AggregateKey{PID: uint32(w.PID), TID: tid, Kind: KindHeld}]; held.Count < res.N {
			t.Errorf("thread %d: GIL taken %d times, want at least %d", tid, held.Count, res.N)
		}
	}
}

func TestContendingThreadsWaitOnSwitchInterval(t *testing.T) {
	p := load(t, defaults)
	w := workloadtest.Start(t, "spin", "3", "0.5")
	attach(t, p, w.PID)
	var res struct {
		Threads []struct {
			TID   uint32 `json:"tid"`
			CPUNS int64  `json:"cpu_ns"`
		} `json:"threads"`
		WallNS   int64   `json:"wall_ns"`
		Interval float64 `json:"switch_interval_s"`
	}
	w.Run(&res)
	events := drain(t, p, w.PID)
	aggs := aggregatesOf(t, p, w.PID)
	interval := time.Duration(res.Interval * float64(time.Second))
	wall := time.Duration(res.WallNS)
	var held time.Duration
	for _, th := range res.Threads {
		var waits []time.Duration
		for _, e := range events {
			if e.TID == th.TID && e.Kind == KindWait && e.Cause == CauseSwitch {
				waits = append(waits, e.Duration)
			}
		}
		switches := aggs[AggregateKey{PID: uint32(w.PID), TID: th.TID, Kind: KindSwitch}].Count
		if len(waits) == 0 || switches == 0 {
			t.Errorf("thread %d: %d switch waits, %d forced switches, want some of each", th.TID, len(waits), switches)
			continue
		}
		// A thread forced off waits while another runs its interval; only
		// the last waits, when the others exit, may be shorter.
		slices.Sort(waits)
		if median := waits[len(waits)/2]; median < interval/2 {
			t.Errorf("thread %d: median switch wait %s, shorter than half the %s interval (waits %v)", th.TID, median, interval, waits)
		}
		h := aggs[AggregateKey{PID: uint32(w.PID), TID: th.TID, Kind: KindHeld}].Sum
		if h <= 0 || h > wall {
			t.Errorf("thread %d: held %s, want within (0, %s]", th.TID, h, wall)
		}
		held += h
	}
	// Only one thread holds the GIL at a time, and in this workload one
	// almost always does: the gaps are hand-offs, which take longer on a
	// loaded machine (a woken thread must be scheduled).
	if held > wall || held < wall/2 {
		t.Errorf("GIL held %s in total over %s of contention, want between 50%% and 100%%", held, wall)
	}
}

// checkGCPauses runs the gc workload w, its libpython probed by p, and
// checks that each of its full collections came as one generation-2 GC
// window inside the gc.collect call.
func checkGCPauses(t *testing.T, p *Probe, w *workloadtest.Process) {
	t.Helper()
	var res struct {
		TID   uint32     `json:"tid"`
		N     int        `json:"n"`
		Calls [][2]int64 `json:"calls"`
	}
	w.Run(&res)
	var gcs []Event
	for _, e := range drain(t, p, w.PID) {
		if e.Kind == KindGC && e.TID == res.TID && e.Generation == 2 {
			gcs = append(gcs, e)
		}
	}
	if len(gcs) != res.N {
		t.Fatalf("%d generation-2 GC windows, want %d: %+v", len(gcs), res.N, gcs)
	}
	for i, e := range gcs {
		m0, m1 := res.Calls[i][0], res.Calls[i][1]
		if e.Start < m0 || e.Start+int64(e.Duration) > m1 {
			t.Errorf("gc %d [%d, +%s] outside gc.collect [%d, %d]", i, e.Start, e.Duration, m0, m1)
		}
	}
}

func TestGCPausesWithGeneration(t *testing.T) {
	p := load(t, defaults)
	w := workloadtest.Start(t, "gc", "4")
	l := attach(t, p, w.PID)
	if l.Symbols().GC() == "" {
		t.Skipf("libpython of pid %d has no gc_collect_main", w.PID)
	}
	checkGCPauses(t, p, w)
}

// TestShortGCPausesKeepGeneration: GC pauses shorter than the minimum are
// summed in the kernel under their generation, so that collections can be
// counted per generation however short they are. The minimum here is an
// hour: every pause is short.
func TestShortGCPausesKeepGeneration(t *testing.T) {
	opts := defaults
	opts.MinDuration = time.Hour
	p := load(t, opts)
	w := workloadtest.Start(t, "gc", "4")
	l := attach(t, p, w.PID)
	if l.Symbols().GC() == "" {
		t.Skipf("libpython of pid %d has no gc_collect_main", w.PID)
	}
	var res struct {
		TID uint32 `json:"tid"`
		N   int    `json:"n"`
	}
	w.Run(&res)
	for _, e := range drain(t, p, w.PID) {
		if e.Kind == KindGC {
			t.Errorf("GC pause sent as a window under a minimum of an hour: %+v", e)
		}
	}
	aggs := aggregatesOf(t, p, w.PID)
	gen2 := aggs[AggregateKey{PID: uint32(w.PID), TID: res.TID, Kind: KindGC, Generation: 2}]
	if gen2.Count != uint64(res.N) || gen2.Sum <= 0 {
		t.Errorf("short generation-2 pauses of thread %d: %+v, want %d with a positive sum (all: %+v)", res.TID, gen2, res.N, aggs)
	}
	for k, a := range aggs {
		if k.Kind == KindGC && (k.Generation < 0 || k.Generation > 2) {
			t.Errorf("short GC pauses without a generation: %+v %+v", k, a)
		}
		if k.Kind != KindGC && k.Generation != 0 {
			t.Errorf("%+v: a generation on a kind other than GC", k)
		}
	}
}

func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

func TestAttachDetachCyclesLeakNothing(t *testing.T) {
	p := load(t, defaults)
	w := workloadtest.Start(t, "sleep", "1", "1")
	path, err := workloadtest.LibPython(w.PID)
	if err != nil {
		t.Fatal(err)
	}
	f := openELF(t, path)
	before := openFDs(t)
	for i := range 100 {
		l, err := p.Attach(f)
		if err != nil {
			t.Fatalf("cycle %d: %v", i, err)
		}
		if l.Links() == 0 {
			t.Fatalf("cycle %d: no links", i)
		}
		if i%10 == 0 {
			// Duty cycling detaches and re-attaches in place.
			if err := p.SetActive(false); err != nil {
				t.Fatal(err)
			}
			if l.Links() != 0 {
				t.Fatalf("cycle %d: %d links while inactive", i, l.Links())
			}
			if err := p.SetActive(true); err != nil {
				t.Fatal(err)
			}
		}
		if err := l.Close(); err != nil {
			t.Fatalf("cycle %d close: %v", i, err)
		}
	}
	if after := openFDs(t); after != before {
		t.Fatalf("%d fds open after 100 attach/detach cycles, %d before", after, before)
	}
}

func TestProcessExitingWhileProbed(t *testing.T) {
	p := load(t, defaults)
	before := openFDs(t)
	w := workloadtest.Start(t, "sleep", "3", "5", "--exit")
	l := attach(t, p, w.PID)
	var res struct {
		TID uint32 `json:"tid"`
	}
	w.Run(&res)
	w.Wait()
	if n := len(drain(t, p, w.PID)); n < 3 {
		t.Errorf("%d windows from the exited process, want at least its 3 sleeps", n)
	}
	if err := p.Forget(uint32(w.PID)); err != nil {
		t.Fatal(err)
	}
	if n := len(aggregatesOf(t, p, w.PID)); n != 0 {
		t.Errorf("%d aggregates left for the exited process", n)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if after := openFDs(t); after != before {
		t.Fatalf("%d fds open after the exit, %d before", after, before)
	}
}

func TestInactiveProbeSeesNothing(t *testing.T) {
	p := load(t, defaults)
	w := workloadtest.Start(t, "sleep", "3", "5")
	attach(t, p, w.PID)
	if err := p.SetActive(false); err != nil {
		t.Fatal(err)
	}
	var res struct{}
	w.Run(&res)
	if ev := drain(t, p, w.PID); len(ev) != 0 {
		t.Fatalf("%d windows while detached: %+v", len(ev), ev)
	}
}

func TestCloseTwiceAndUseAfterClose(t *testing.T) {
	p, err := Load(defaults)
	if errors.Is(err, ErrUnavailable) {
		t.Skipf("eBPF unavailable: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := p.ReadEvent(); !errors.Is(err, ErrClosed) {
		t.Fatalf("ReadEvent after Close = %v, want ErrClosed", err)
	}
	if err := p.SetActive(false); !errors.Is(err, ErrClosed) {
		t.Fatalf("SetActive after Close = %v, want ErrClosed", err)
	}
}

// TestPythonVersions runs the sleep and GC workloads on every CPython 3.9+
// installed with pyenv: the same probes, through the same symbols.
func TestPythonVersions(t *testing.T) {
	pythons, _ := filepath.Glob("/root/.pyenv/versions/3.*/bin/python3")
	var tested int
	for _, py := range pythons {
		version := filepath.Base(filepath.Dir(filepath.Dir(py)))
		var major, minor int
		if _, err := fmt.Sscanf(version, "%d.%d", &major, &minor); err != nil || minor < 9 {
			continue
		}
		tested++
		t.Run(version, func(t *testing.T) {
			p := load(t, defaults)
			w := workloadtest.StartWith(t, py, "sleep", "3", "10")
			l := attach(t, p, w.PID)
			var res struct {
				TID   uint32     `json:"tid"`
				N     int        `json:"n"`
				Calls [][4]int64 `json:"calls"`
			}
			w.Run(&res)
			if len(res.Calls) != res.N {
				t.Fatalf("%d calls reported, want %d", len(res.Calls), res.N)
			}
			oneReleasePerCall(t, drain(t, p, w.PID), res.TID, monotonicSpans(res.Calls), 10*time.Millisecond)
			s := l.Symbols()
			if !s.Switch() || s.GC() == "" {
				t.Logf("symbols: %v", s)
			}
			g := workloadtest.StartWith(t, py, "gc", "2")
			attach(t, p, g.PID)
			var gres struct {
				TID uint32 `json:"tid"`
				N   int    `json:"n"`
			}
			g.Run(&gres)
			gcs := 0
			for _, e := range drain(t, p, g.PID) {
				if e.Kind == KindGC && e.TID == gres.TID && e.Generation == 2 {
					gcs++
				}
			}
			if gcs != gres.N {
				t.Errorf("%d generation-2 GC windows, want %d (GC symbol %q)", gcs, gres.N, s.GC())
			}
		})
	}
	if tested == 0 {
		t.Skip("no pyenv CPython 3.9+ installed")
	}
}

// TestOneLinkPerPointFallback covers kernels without uprobe-multi links:
// the same windows through one link per probe point, and nothing leaked.
func TestOneLinkPerPointFallback(t *testing.T) {
	forceSingleLinks = true
	defer func() { forceSingleLinks = false }()
	p := load(t, defaults)
	before := openFDs(t)
	w := workloadtest.Start(t, "sleep", "3", "10")
	l := attach(t, p, w.PID)
	if n := l.Links(); n < 6 {
		t.Fatalf("%d links, want one per probe point (at least 6)", n)
	}
	var res struct {
		TID   uint32     `json:"tid"`
		N     int        `json:"n"`
		Calls [][4]int64 `json:"calls"`
	}
	w.Run(&res)
	if len(res.Calls) != res.N {
		t.Fatalf("%d calls reported, want %d", len(res.Calls), res.N)
	}
	oneReleasePerCall(t, drain(t, p, w.PID), res.TID, monotonicSpans(res.Calls), 10*time.Millisecond)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	w.Stop()
	if after := openFDs(t); after != before {
		t.Fatalf("%d fds open after detaching, %d before", after, before)
	}
}

func TestUSDTCookie(t *testing.T) {
	for _, tc := range []struct {
		arg  USDTArg
		want uint64
	}{
		// rdi is pt_regs[14], rsp pt_regs[19].
		{USDTArg{Size: 4, Signed: true, Loc: ArgRegister, Reg: "rdi"}, pointGCStartUSDT | 2<<8 | 14<<16 | 4<<24},
		{USDTArg{Size: 4, Signed: true, Loc: ArgMemory, Reg: "rsp", Offset: 112}, pointGCStartUSDT | 3<<8 | 19<<16 | 4<<24 | 112<<32},
		{USDTArg{Size: 8, Loc: ArgMemory, Reg: "rbp", Offset: -16}, pointGCStartUSDT | 3<<8 | 4<<16 | 8<<24 | 0xfffffff0<<32},
		{USDTArg{Size: 4, Loc: ArgConstant, Offset: 2}, pointGCStartUSDT | 1<<8 | 4<<24 | 2<<32},
	} {
		got, err := usdtCookie(pointGCStartUSDT, tc.arg)
		if err != nil || got != tc.want {
			t.Errorf("usdtCookie(%+v) = %#x, %v; want %#x", tc.arg, got, err, tc.want)
		}
	}
	if _, err := usdtCookie(pointGCStartUSDT, USDTArg{Size: 8, Loc: ArgMemory, Reg: "rax", Offset: 1 << 40}); !errors.Is(err, ErrUnsupportedArg) {
		t.Errorf("64-bit displacement: %v, want ErrUnsupportedArg", err)
	}
}

// TestGCFromUSDTWhereNoGCSymbol attaches to the fixtures of
// testdata/usdt: the one with gc_collect_main is probed there, the one
// without through its USDT probes, whose semaphores the kernel raises so
// that a run of the fixture reaches them: one GC window with the
// generation the fixture passes (its argc).
func TestGCFromUSDTWhereNoGCSymbol(t *testing.T) {
	for _, single := range []bool{false, true} {
		t.Run(fmt.Sprintf("single links %v", single), func(t *testing.T) {
			forceSingleLinks = single
			defer func() { forceSingleLinks = false }()
			p := load(t, Options{SwitchProbes: true, GC: true})
			withMain, err := p.Attach(openELF(t, "testdata/usdt/usdt-gcmain.elf"))
			if errors.Is(err, ErrUnavailable) {
				t.Skipf("uprobes unavailable: %v", err)
			}
			if err != nil {
				t.Fatal(err)
			}
			if gc, err := withMain.GC(); gc != SymGCCollectMain || err != nil {
				t.Errorf("GC() with gc_collect_main = %q, %v; want %q", gc, err, SymGCCollectMain)
			}
			path, err := filepath.Abs("testdata/usdt/usdt.elf")
			if err != nil {
				t.Fatal(err)
			}
			l, err := p.Attach(openELF(t, path))
			if err != nil {
				t.Fatal(err)
			}
			if gc, err := l.GC(); gc != GCUSDT || err != nil {
				t.Fatalf("GC() without gc_collect_main = %q, %v; want %q", gc, err, GCUSDT)
			}
			cmd := exec.Command(path, "a", "b", "c")
			if err := cmd.Run(); err != nil {
				var exit *exec.ExitError
				if !errors.As(err, &exit) {
					t.Fatal(err)
				}
			}
			var gcs []Event
			for _, e := range drain(t, p, cmd.Process.Pid) {
				if e.Kind == KindGC {
					gcs = append(gcs, e)
				}
			}
			if len(gcs) != 1 || gcs[0].Generation != 4 {
				t.Fatalf("GC windows %+v, want one of generation 4", gcs)
			}
		})
	}
}

// TestGCPausesFromUSDTOnSystemPython runs the GC workload on a CPython
// built with --with-dtrace and stripped (Debian's /usr/bin/python3.X has
// gc__start/gc__done notes and no gc_collect_main): its pauses come from
// the USDT probes, one window per gc.collect(2), inside the call.
func TestGCPausesFromUSDTOnSystemPython(t *testing.T) {
	pythons, _ := filepath.Glob("/usr/bin/python3.[0-9]*")
	var py string
	for _, c := range pythons {
		if img, err := ReadFile(openELF(t, c)); err == nil && len(img.USDT) > 0 {
			py = c
			break
		}
	}
	if py == "" {
		t.Skip("no /usr/bin/python3.X with USDT notes here")
	}
	p := load(t, defaults)
	w := workloadtest.StartWith(t, py, "gc", "4")
	l := attach(t, p, w.PID)
	gc, err := l.GC()
	if err != nil {
		t.Fatal(err)
	}
	if gc != GCUSDT {
		t.Skipf("%s: GC pauses come from %q, not USDT", py, gc)
	}
	checkGCPauses(t, p, w)
}
