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

// collect reads every event until the probe is flushed; the returned
// function flushes and returns the starts of each pid's released windows.
func collect(t *testing.T, p *Probe) func() map[uint32][]int64 {
	starts := map[uint32][]int64{}
	var mu sync.Mutex
	done := make(chan struct{})
	go func() {
		defer close(done)
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
				mu.Lock()
				starts[e.PID] = append(starts[e.PID], e.Start)
				mu.Unlock()
			}
		}
	}()
	return func() map[uint32][]int64 {
		if err := p.Flush(); err != nil {
			t.Fatal(err)
		}
		<-done
		return starts
	}
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
// other's coming; SetActive(true) attaches it again.
func TestDetachStopsOnlyItsLibrary(t *testing.T) {
	p := load(t, Options{Futex: true})
	wa := workloadtest.Churn(t, workloadtest.PrivateLibPython(t), 20_000, 40_000)
	wb := workloadtest.Churn(t, workloadtest.PrivateLibPython(t), 20_000, 40_000)
	// Idle: only its file matters, attached below while a is detached.
	wc := workloadtest.Churn(t, workloadtest.PrivateLibPython(t), 1000, 1000)
	la, lb := attach(t, p, wa.PID), attach(t, p, wb.PID)
	if la == lb {
		t.Fatal("both workloads map one library: the copies are not separate files")
	}
	stop := collect(t, p)
	var runs sync.WaitGroup
	for _, w := range []*workloadtest.Process{wa, wb} {
		runs.Go(func() {
			var res struct{}
			w.Run(&res)
		})
	}
	time.Sleep(300 * time.Millisecond)
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
	time.Sleep(400 * time.Millisecond)
	reattach := monotonic(t)
	if err := p.SetActive(true); err != nil {
		t.Fatal(err)
	}
	for name, l := range map[string]*Library{"a": la, "c": lc} {
		if l.Links() == 0 || l.Detached() {
			t.Errorf("after SetActive(true): %s links %d detached %v, want attached", name, l.Links(), l.Detached())
		}
	}
	runs.Wait()
	starts := stop()
	a, b := starts[uint32(wa.PID)], starts[uint32(wb.PID)]
	t.Logf("released windows: a %d (%d while detached, %d after), b %d (%d while a was detached)",
		len(a), within(a, detached, reattach), within(a, reattach, 1<<62), len(b), within(b, detached, reattach))
	if n := within(a, detached, reattach); n != 0 {
		t.Errorf("%d of a's windows began while its library was detached", n)
	}
	if n := within(b, detached, reattach); n < 1000 {
		t.Errorf("b's windows while a was detached: %d, want its releases (20k/s for 400 ms)", n)
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
