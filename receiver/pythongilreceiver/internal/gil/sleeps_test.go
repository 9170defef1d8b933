//go:build linux && amd64

package gil

import (
	"testing"
	"time"
)

// sleepReleases returns, for each call of the workload (its
// CLOCK_MONOTONIC readings just before and after time.sleep), the released
// windows of thread tid that are that call's sleep: they begin in the call,
// and end in it no earlier than d after its start. They are matched by the
// workload's own clock readings, never by length: CPython 3.11+ sleeps
// until an absolute deadline read before it releases the GIL, so the
// window is shorter than d by whatever delayed the thread between that
// read and PyEval_SaveThread (a preemption, a page fault, a slow uprobe
// trap), while clock_nanosleep never returns before the deadline.
func sleepReleases(events []Event, tid uint32, calls [][2]int64, d time.Duration) [][]Event {
	out := make([][]Event, len(calls))
	for _, e := range events {
		if e.TID != tid || e.Kind != KindReleased {
			continue
		}
		end := e.Start + int64(e.Duration)
		for i, c := range calls {
			if e.Start >= c[0] && end >= c[0]+int64(d) && end <= c[1] {
				out[i] = append(out[i], e)
			}
		}
	}
	return out
}

// oneReleasePerCall asserts that every call of the workload has exactly one
// sleep window (sleepReleases) and returns them, one a call; a call
// without one is the zero Event.
func oneReleasePerCall(t *testing.T, events []Event, tid uint32, calls [][2]int64, d time.Duration) []Event {
	t.Helper()
	one := make([]Event, len(calls))
	for i, ws := range sleepReleases(events, tid, calls, d) {
		if len(ws) != 1 {
			t.Errorf("call %d [%d, %d]: %d released windows of its sleep, want 1: %+v", i, calls[i][0], calls[i][1], len(ws), ws)
			continue
		}
		one[i] = ws[0]
	}
	return one
}

// monotonicSpans are the CLOCK_MONOTONIC halves of the sleep mode's calls
// ([wall before, wall after, monotonic before, monotonic after]).
func monotonicSpans(calls [][4]int64) [][2]int64 {
	out := make([][2]int64, len(calls))
	for i, c := range calls {
		out[i] = [2]int64{c[2], c[3]}
	}
	return out
}
