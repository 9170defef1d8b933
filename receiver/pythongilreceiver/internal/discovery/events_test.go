package discovery

import (
	"os"
	"slices"
	"testing"
	"time"

	"go.uber.org/goleak"
	"go.uber.org/zap"

	"github.com/otelcol-ai/otelcol-ai/internal/procdiscovery/procdiscoverytest"
	"github.com/otelcol-ai/otelcol-ai/internal/procevents"
	"github.com/otelcol-ai/otelcol-ai/internal/procevents/proceventstest"
	"github.com/otelcol-ai/otelcol-ai/internal/procresource"
)

func TestMain(m *testing.M) {
	proceventstest.RunIfStorm()
	goleak.VerifyTestMain(m)
}

// TestEventsFindAtExecAndReportEveryExit: an interpreter is found at its
// exec (its exit comes in the same batch: a short-lived one is still
// probed), a process that is not one is left to the scans, and every
// exit is reported, the receiver's own or not.
func TestEventsFindAtExecAndReportEveryExit(t *testing.T) {
	fp := newFakeProc(t)
	fp.add(100, "/usr/local/bin/python3.11", "python3.11\x00app.py\x00", sharedPython)
	fp.add(400, "/usr/bin/bash", "bash\x00", plainC)
	feed := procdiscoverytest.NewFeed()
	e := newEvents(NewScanner(procresource.NewReader(fp.root, 0), Filter{}), feed)
	defer e.Close()
	feed.Send(false, procevents.Event{Kind: procevents.Exec, PID: 100}, procevents.Event{Kind: procevents.Exec, PID: 400},
		procevents.Event{Kind: procevents.Exit, PID: 100}, procevents.Event{Kind: procevents.Exit, PID: 999})
	var got Arrivals
	for deadline := time.After(10 * time.Second); len(got.Exited) < 2; {
		select {
		case <-e.Ready():
			a := e.Take()
			got.Interpreters = append(got.Interpreters, a.Interpreters...)
			got.Exited = append(got.Exited, a.Exited...)
		case <-deadline:
			t.Fatalf("after 10 s: %+v", got)
		}
	}
	if len(got.Interpreters) != 1 || got.Interpreters[0].Resource.PID != 100 || got.Interpreters[0].Version != "3.11" {
		t.Errorf("found %+v, want pid 100's CPython 3.11", got.Interpreters)
	}
	if !slices.Equal(got.Exited, []int{100, 999}) {
		t.Errorf("exited %v, want [100 999]", got.Exited)
	}
}

// BenchmarkEventsExecStorm is the CPU discovery costs the collector under
// a storm of 200 short-lived processes a second for 10 s: the process
// events and every exec inspected, with its retries, against the storm's
// own CPU (x-storm-cpu). It runs once, whatever b.N.
func BenchmarkEventsExecStorm(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("process events need root")
	}
	e := NewEvents(NewScanner(procresource.NewReader("/proc", 0), Filter{}), zap.NewNop())
	defer e.Close()
	procdiscoverytest.Storm(b, e.Mechanism(), e.Ready(), func() int { return len(e.Take().Exited) })
}
