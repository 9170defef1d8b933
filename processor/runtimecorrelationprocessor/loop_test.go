package runtimecorrelationprocessor

import (
	"sync/atomic"
	"testing"
)

// TestLoopRunsOnceUntilEnd: a second start does not start another
// goroutine; end stops the one running and waits for it, and says it ran
// once; a start after end starts nothing.
func TestLoopRunsOnceUntilEnd(t *testing.T) {
	var running, runs atomic.Int32
	run := func(stop <-chan struct{}) {
		runs.Add(1)
		running.Add(1)
		<-stop
		running.Add(-1)
	}
	var never loop
	if never.end() {
		t.Fatal("end before any start: got true, want false")
	}
	var l loop
	l.start(run)
	l.start(run)
	if !l.end() {
		t.Fatal("end after start: got false, want true")
	}
	if n := running.Load(); n != 0 {
		t.Errorf("goroutines running after end: %d, want 0", n)
	}
	if n := runs.Load(); n != 1 {
		t.Errorf("runs: %d, want 1", n)
	}
	l.start(run)
	if ended := l.end(); ended || runs.Load() != 1 {
		t.Errorf("start after end: end %v, runs %d; want false, 1", ended, runs.Load())
	}
}
