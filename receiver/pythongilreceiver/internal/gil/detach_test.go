//go:build linux && (amd64 || arm64)

package gil

import (
	"errors"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/otelcol-ai/otelcol-ai/receiver/pythongilreceiver/internal/workloadtest"
)

// monotonic is CLOCK_MONOTONIC in ns, the clock of Event.Start.
func monotonic(t *testing.T) int64 {
	t.Helper()
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		t.Fatal(err)
	}
	return ts.Nano()
}

// releasedStarts reads every event of a probe until it is flushed, keeping
// the starts of each pid's released windows.
type releasedStarts struct {
	t      *testing.T
	p      *Probe
	mu     sync.Mutex
	starts map[uint32][]int64
	done   chan struct{}
}

func collect(t *testing.T, p *Probe) *releasedStarts {
	c := &releasedStarts{t: t, p: p, starts: map[uint32][]int64{}, done: make(chan struct{})}
	go func() {
		defer close(c.done)
		for {
			e, err := p.ReadEvent()
			if errors.Is(err, ErrFlushed) || errors.Is(err, ErrClosed) {
				return
			}
			if err != nil {
				t.Error(err)
				return
			}
			if e.Kind == KindReleased {
				c.mu.Lock()
				c.starts[e.PID] = append(c.starts[e.PID], e.Start)
				c.mu.Unlock()
			}
		}
	}()
	return c
}

// since is how many of pid's released windows read so far began after from.
func (c *releasedStarts) since(pid int, from int64) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return within(c.starts[uint32(pid)], from, 1<<62)
}

// waitSince waits until n of pid's released windows that began after from
// are read, or the workload's run is over (ran closed); it reports whether
// they were.
func (c *releasedStarts) waitSince(pid int, from int64, n int, ran <-chan struct{}) bool {
	for c.since(pid, from) < n {
		select {
		case <-ran:
			return c.since(pid, from) >= n
		case <-time.After(10 * time.Millisecond):
		}
	}
	return true
}

// stop flushes the probe and returns the starts of each pid's released
// windows.
func (c *releasedStarts) stop() map[uint32][]int64 {
	if err := c.p.Flush(); err != nil {
		c.t.Fatal(err)
	}
	<-c.done
	return c.starts
}

func within(starts []int64, from, to int64) int {
	n := 0
	for _, s := range starts {
		if s > from && s < to {
			n++
		}
	}
	return n
}

// TestDetachStopsOnlyItsLibrary: two CPython processes on their own copies
// of libpython release the GIL 20k times a second; detaching one library
// stops its windows (none begins while it is detached) and leaves the
// other's coming; SetActive(true) attaches it again. Each phase lasts until
// the windows it expects are read, not a fixed time: on a loaded host
// (load average 20 on 2 CPUs) a workload went 90-210 ms without a release,
// and one a whole 400 ms detached phase.
func TestDetachStopsOnlyItsLibrary(t *testing.T) {
	p := load(t, Options{Futex: true})
	// 5 s each at their pace: long enough that both still run when each
	// phase has seen what it waits for.
	wa := workloadtest.Churn(t, workloadtest.PrivateLibPython(t), 20_000, 100_000)
	wb := workloadtest.Churn(t, workloadtest.PrivateLibPython(t), 20_000, 100_000)
	// Idle: only its file matters, attached below while a is detached.
	wc := workloadtest.Churn(t, workloadtest.PrivateLibPython(t), 1000, 1000)
	la, lb := attach(t, p, wa.PID), attach(t, p, wb.PID)
	if la == lb {
		t.Fatal("both workloads map one library: the copies are not separate files")
	}
	c := collect(t, p)
	var runs sync.WaitGroup
	ran := map[int]chan struct{}{}
	for _, w := range []*workloadtest.Process{wa, wb} {
		ran[w.PID] = make(chan struct{})
		runs.Go(func() {
			defer close(ran[w.PID])
			var res struct{}
			w.Run(&res)
		})
	}
	if !c.waitSince(wa.PID, 0, 1000, ran[wa.PID]) || !c.waitSince(wb.PID, 0, 1000, ran[wb.PID]) {
		t.Fatal("the workloads ended before 1000 releases each were read")
	}
	if err := p.Detach(map[*Library][]uint32{la: {uint32(wa.PID)}}); err != nil {
		t.Fatal(err)
	}
	detached := monotonic(t)
	if la.Links() != 0 || !la.Detached() || lb.Links() == 0 || lb.Detached() || !p.Active() {
		t.Errorf("after Detach(a): a links %d detached %v, b links %d detached %v, probe active %v; want a alone detached",
			la.Links(), la.Detached(), lb.Links(), lb.Detached(), p.Active())
	}
	// A file found meanwhile waits, detached, for every library's attach.
	lc := attach(t, p, wc.PID)
	if lc.Links() != 0 || !lc.Detached() {
		t.Errorf("a library attached while another is detached alone: links %d detached %v, want it detached too", lc.Links(), lc.Detached())
	}
	if !c.waitSince(wb.PID, detached, 1000, ran[wb.PID]) {
		t.Errorf("b ended before 1000 of its releases were read while a was detached")
	}
	reattach := monotonic(t)
	if err := p.SetActive(true); err != nil {
		t.Fatal(err)
	}
	for name, l := range map[string]*Library{"a": la, "c": lc} {
		if l.Links() == 0 || l.Detached() {
			t.Errorf("after SetActive(true): %s links %d detached %v, want attached", name, l.Links(), l.Detached())
		}
	}
	if !c.waitSince(wa.PID, reattach, 1000, ran[wa.PID]) {
		t.Errorf("a ended before 1000 of its releases were read once attached again")
	}
	runs.Wait()
	starts := c.stop()
	a, b := starts[uint32(wa.PID)], starts[uint32(wb.PID)]
	t.Logf("released windows: a %d (%d while detached, %d after), b %d (%d while a was detached)",
		len(a), within(a, detached, reattach), within(a, reattach, 1<<62), len(b), within(b, detached, reattach))
	if n := within(a, detached, reattach); n != 0 {
		t.Errorf("%d of a's windows began while its library was detached", n)
	}
	if n := within(b, detached, reattach); n < 1000 {
		t.Errorf("b's windows while a was detached: %d, want at least 1000 of its releases", n)
	}
	if n := within(a, reattach, 1<<62); n < 1000 {
		t.Errorf("a's windows once attached again: %d, want its releases", n)
	}
}

// TestFutexJepThreadsWaitWhileTheirLibraryIsDetached: as
// TestFutexJepThreadsWaitWhileDetached, with only the JVM's libpython
// detached (Detach) while another library stays attached: the kernel's
// detached_pids tells the futex tracepoints that the JVM's threads are not
// seen by the uprobes, and their waits are found within the workload's
// own clock readings.
func TestFutexJepThreadsWaitWhileTheirLibraryIsDetached(t *testing.T) {
	p := load(t, futexDefaults)
	w := workloadtest.StartCommand(t, workloadtest.Jep(t, "GilJepWait.java", "4", "2", "20"))
	jvm := attach(t, p, w.PID)
	// Another interpreter's file, which stays attached.
	other := workloadtest.Churn(t, workloadtest.PrivateLibPython(t), 1000, 1000)
	if attach(t, p, other.PID) == jvm {
		t.Fatal("the other process maps the JVM's libpython")
	}
	for _, phase := range []string{"attached", "detached alone"} {
		t.Run(phase, func(t *testing.T) {
			if phase == "detached alone" {
				if _, _, ok := p.GIL(uint32(w.PID)); !ok {
					t.Fatal("the JVM's GIL was not learned while the uprobes were attached")
				}
				if err := p.Detach(map[*Library][]uint32{jvm: {uint32(w.PID)}}); err != nil {
					t.Fatal(err)
				}
				if jvm.Links() != 0 || !p.Active() {
					t.Fatalf("JVM's library links %d, probe active %v: want it alone detached", jvm.Links(), p.Active())
				}
			}
			checkJepWaits(t, p, w, phase, 0)
		})
	}
}
