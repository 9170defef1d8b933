package procdiscovery

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/otelcol-ai/otelcol-ai/internal/procdiscovery/procdiscoverytest"
	"github.com/otelcol-ai/otelcol-ai/internal/procevents"
	"github.com/otelcol-ai/otelcol-ai/internal/procresource"
)

// processes is what a test's Inspect knows: the inspection (1, 2, ...) at
// which each pid becomes the receiver's (absent: never), and how many
// times each was inspected.
type processes struct {
	mu      sync.Mutex
	foundAt map[int]int
	tries   map[int]int
}

func newProcesses(foundAt map[int]int) *processes {
	return &processes{foundAt: foundAt, tries: map[int]int{}}
}

func (p *processes) inspect(pid int) (int, bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.tries[pid]++
	at, ok := p.foundAt[pid]
	return pid, ok && p.tries[pid] >= at, nil
}

func (p *processes) triesOf(pid int) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.tries[pid]
}

// eventsTest runs Events over a Feed with the processes p and policy.
type eventsTest struct {
	t      *testing.T
	feed   *procdiscoverytest.Feed
	events *Events[int]
	got    Arrivals[int]
}

func startEvents(t *testing.T, p *processes, policy Policy[int]) *eventsTest {
	// The proc root is empty: refusals are not remembered, which these
	// tests do not need.
	s := NewScanner(procresource.NewReader(t.TempDir(), 0), p.inspect)
	et := &eventsTest{t: t, feed: procdiscoverytest.NewFeed()}
	et.events = NewEvents(s, et.feed, policy)
	t.Cleanup(et.events.Close)
	return et
}

func execEvent(pid int) procevents.Event { return procevents.Event{Kind: procevents.Exec, PID: pid} }
func exitEvent(pid int) procevents.Event { return procevents.Event{Kind: procevents.Exit, PID: pid} }

// until takes what Events hands over until done says it has all it
// waits for, failing after 10 s.
func (et *eventsTest) until(done func(a Arrivals[int]) bool) {
	et.t.Helper()
	deadline := time.After(10 * time.Second)
	for !done(et.got) {
		select {
		case <-et.events.Ready():
			a := et.events.Take()
			et.got.Found = append(et.got.Found, a.Found...)
			et.got.Refused = append(et.got.Refused, a.Refused...)
			et.got.Exited = append(et.got.Exited, a.Exited...)
			et.got.Overflow = et.got.Overflow || a.Overflow
		case <-deadline:
			et.t.Fatalf("after 10 s, Events handed over %+v", et.got)
		}
	}
}

func count(pids []int, pid int) int {
	n := 0
	for _, p := range pids {
		if p == pid {
			n++
		}
	}
	return n
}

// settle lets Events run a while with nothing to wait for: what it does
// then is checked to have not happened (no more inspections, no more
// announcements).
func settle() { time.Sleep(50 * time.Millisecond) }

// TestEventsInspectOnTheBackoffUntilFound: a process that becomes the
// receiver's at its third inspection is found then, and not inspected
// again; one that never does is inspected once per Backoff delay, then
// left to the scans.
func TestEventsInspectOnTheBackoffUntilFound(t *testing.T) {
	p := newProcesses(map[int]int{10: 3})
	et := startEvents(t, p, Policy[int]{Backoff: []time.Duration{0, time.Millisecond, 2 * time.Millisecond, 4 * time.Millisecond}, MaxTracked: 10, AllExits: true})
	et.feed.Send(false, execEvent(10), execEvent(20))
	et.until(func(a Arrivals[int]) bool { return slices.Contains(a.Found, 10) })
	for p.triesOf(20) < 4 {
		time.Sleep(time.Millisecond)
	}
	settle()
	if n, m := p.triesOf(10), p.triesOf(20); n != 3 || m != 4 {
		t.Errorf("inspected pid 10 %d times, pid 20 %d; want 3 (found at the third) and 4 (one per delay)", n, m)
	}
	if len(et.got.Found) != 1 {
		t.Errorf("found %v, want pid 10 once", et.got.Found)
	}
}

// TestEventsReportExitsAsThePolicySays: with AllExits every exit is
// reported; without, only those of the processes found after their exec,
// with the Exited hook called, even when the exit comes in the batch of
// the exec (a process shorter than a batch is still found).
func TestEventsReportExitsAsThePolicySays(t *testing.T) {
	t.Run("all", func(t *testing.T) {
		et := startEvents(t, newProcesses(map[int]int{10: 1}), Policy[int]{MaxTracked: 10, AllExits: true})
		et.feed.Send(false, execEvent(10), exitEvent(10), exitEvent(30))
		et.until(func(a Arrivals[int]) bool { return len(a.Exited) == 2 })
		if !slices.Equal(et.got.Found, []int{10}) || !slices.Equal(et.got.Exited, []int{10, 30}) {
			t.Errorf("found %v, exited %v; want [10], [10 30]", et.got.Found, et.got.Exited)
		}
	})
	t.Run("found only", func(t *testing.T) {
		var hooked []int
		et := startEvents(t, newProcesses(map[int]int{10: 1, 11: 1}), Policy[int]{MaxTracked: 10,
			Exited: func(pid int) { hooked = append(hooked, pid) }})
		et.feed.Send(false, execEvent(10), execEvent(20), exitEvent(10), exitEvent(20), exitEvent(30))
		et.until(func(a Arrivals[int]) bool { return len(a.Exited) > 0 })
		et.feed.Send(false, execEvent(11))
		et.until(func(a Arrivals[int]) bool { return slices.Contains(a.Found, 11) })
		et.feed.Send(false, exitEvent(11))
		et.until(func(a Arrivals[int]) bool { return len(a.Exited) == 2 })
		settle()
		if !slices.Equal(et.got.Exited, []int{10, 11}) || !slices.Equal(hooked, []int{10, 11}) {
			t.Errorf("exited %v, hook called with %v; want [10 11] both", et.got.Exited, hooked)
		}
	})
}

// TestEventsExecAgainEndsTheImageFound: a found process that execs again
// has left the image that was found: its exit is reported then, and the
// new image is inspected.
func TestEventsExecAgainEndsTheImageFound(t *testing.T) {
	p := newProcesses(map[int]int{10: 1})
	et := startEvents(t, p, Policy[int]{MaxTracked: 10})
	et.feed.Send(false, execEvent(10))
	et.until(func(a Arrivals[int]) bool { return len(a.Found) == 1 })
	et.feed.Send(false, execEvent(10))
	et.until(func(a Arrivals[int]) bool { return len(a.Found) == 2 })
	if !slices.Equal(et.got.Exited, []int{10}) || p.triesOf(10) != 2 {
		t.Errorf("exited %v, inspected %d times; want [10], 2", et.got.Exited, p.triesOf(10))
	}
}

// TestEventsCommFilter: an exec whose command name the policy refuses is
// not inspected; one without a name (the proc connector's) is.
func TestEventsCommFilter(t *testing.T) {
	p := newProcesses(map[int]int{10: 1, 11: 1, 12: 1})
	et := startEvents(t, p, Policy[int]{MaxTracked: 10, Comm: func(comm string) bool { return comm == "java" }})
	et.feed.Send(false,
		procevents.Event{Kind: procevents.Exec, PID: 10, Comm: "bash"},
		procevents.Event{Kind: procevents.Exec, PID: 11, Comm: "java"},
		procevents.Event{Kind: procevents.Exec, PID: 12})
	et.until(func(a Arrivals[int]) bool { return len(a.Found) == 2 })
	if p.triesOf(10) != 0 || !slices.Equal(et.got.Found, []int{11, 12}) {
		t.Errorf("bash's exec inspected %d times, found %v; want 0, [11 12]", p.triesOf(10), et.got.Found)
	}
}

// TestEventsAnnounceAgainWhileYoung: a process whose Found hook asks for
// it is announced again every Every until For after it was found, then no
// more (its exit is still reported); one whose hook does not is announced
// once. Announcements are not inspections.
func TestEventsAnnounceAgainWhileYoung(t *testing.T) {
	const every, window = 5 * time.Millisecond, 40 * time.Millisecond
	p := newProcesses(map[int]int{10: 1, 11: 1})
	et := startEvents(t, p, Policy[int]{MaxTracked: 10, Every: every, For: window,
		Found: func(_ *Batch, pid int) bool { return pid == 10 }})
	et.feed.Send(false, execEvent(10), execEvent(11))
	et.until(func(a Arrivals[int]) bool { return count(a.Found, 10) >= 3 })
	// Long past For: announcements that went on would show.
	time.Sleep(window + 20*every)
	et.feed.Send(false, exitEvent(10))
	et.until(func(a Arrivals[int]) bool { return len(a.Exited) == 1 })
	// Each announcement comes Every after the one before, all within For
	// of the exec's.
	if n := count(et.got.Found, 10); n > 1+int(window/every) {
		t.Errorf("pid 10 announced %d times, want at most %d (every %v for %v)", n, 1+int(window/every), every, window)
	}
	if count(et.got.Found, 11) != 1 || p.triesOf(10) != 1 {
		t.Errorf("pid 11 announced %d times (want 1); pid 10 inspected %d times (want 1)", count(et.got.Found, 11), p.triesOf(10))
	}
}

// TestEventsPastMaxTrackedInspectAtTheExec: past MaxTracked a new process
// is still inspected at its exec, once, and found if it is the receiver's.
func TestEventsPastMaxTrackedInspectAtTheExec(t *testing.T) {
	p := newProcesses(map[int]int{20: 1, 30: 2})
	et := startEvents(t, p, Policy[int]{Backoff: []time.Duration{0, time.Millisecond}, MaxTracked: 1, AllExits: true,
		Found: func(*Batch, int) bool { t.Error("Found called for a process past MaxTracked"); return false }})
	et.feed.Send(false, execEvent(10)) // tracked, waiting for its retry
	et.feed.Send(false, execEvent(20), execEvent(30))
	et.until(func(a Arrivals[int]) bool { return slices.Contains(a.Found, 20) })
	for p.triesOf(10) < 2 {
		time.Sleep(time.Millisecond)
	}
	settle()
	if p.triesOf(20) != 1 || p.triesOf(30) != 1 {
		t.Errorf("past MaxTracked: pid 20 inspected %d times, 30 %d; want once each, at the exec", p.triesOf(20), p.triesOf(30))
	}
}

// TestEventsPassOverflowOnAndCloseTheSource: lost events are said (the
// receiver scans), and Close closes the source.
func TestEventsPassOverflowOnAndCloseTheSource(t *testing.T) {
	s := NewScanner(procresource.NewReader(t.TempDir(), 0), newProcesses(nil).inspect)
	feed := procdiscoverytest.NewFeed()
	e := NewEvents(s, feed, Policy[int]{MaxTracked: 10})
	feed.Send(true)
	select {
	case <-e.Ready():
		if a := e.Take(); !a.Overflow {
			t.Errorf("took %+v, want Overflow", a)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("an overflow was not handed over")
	}
	e.Close()
	if !feed.Closed() {
		t.Error("Close left the source open")
	}
}
