package runtimecorrelationprocessor

import (
	"testing"
	"time"
)

// TestStuckLookupCostsOneWait: batches of a peer whose lookup does not
// end wait for it once in all, not once each.
func TestStuckLookupCostsOneWait(t *testing.T) {
	q := newLookupQueue()
	release := make(chan struct{})
	defer func() { close(release); q.close() }()
	if !q.submit("peer", func() { <-release }) {
		t.Fatal("submit refused")
	}
	if q.wait("peer", 10*time.Millisecond) {
		t.Fatal("a stuck lookup reported done")
	}
	q.mu.Lock()
	until := q.pending["peer"].until
	q.mu.Unlock()
	for range 10 {
		if q.wait("peer", time.Hour) {
			t.Fatal("a stuck lookup reported done")
		}
	}
	q.mu.Lock()
	again := q.pending["peer"].until
	q.mu.Unlock()
	if !again.Equal(until) {
		t.Errorf("later waits moved the deadline from %v to %v: each batch would wait anew", until, again)
	}
	if !q.wait("other", time.Hour) {
		t.Error("a key with no lookup is not done")
	}
}

// TestLookupRunsOncePerKey: a key queued or running is not queued again.
func TestLookupRunsOncePerKey(t *testing.T) {
	q := newLookupQueue()
	defer q.close()
	release := make(chan struct{})
	runs := 0
	for range 5 {
		if !q.submit("peer", func() { runs++; <-release }) {
			t.Fatal("submit refused")
		}
	}
	close(release)
	if !q.wait("peer", time.Minute) {
		t.Fatal("the lookup did not end")
	}
	if runs != 1 {
		t.Errorf("runs: got %d, want 1", runs)
	}
}
