package fsdeadline

import (
	"context"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestWaitTakesTheResultOnce: a call that returns before the deadline is
// taken, once; Wait after that returns nothing.
func TestWaitTakesTheResultOnce(t *testing.T) {
	c := Start(func() int { return 42 })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if r, ok := c.Wait(ctx); !ok || r != 42 {
		t.Fatalf("Wait = %d, %v; want 42, true", r, ok)
	}
	if r, ok := c.Wait(ctx); ok {
		t.Errorf("a second Wait = %d, true; want nothing", r)
	}
}

// TestHangingCallIsLeftAndReleased: a call that has not returned by the
// deadline leaves Wait empty-handed (the caller goes on); waited for
// again later, its result is there; abandoned, its release runs in its
// goroutine when it returns, and nothing is left running.
func TestHangingCallIsLeftAndReleased(t *testing.T) {
	unblock := make(chan struct{})
	c := Start(func() string { <-unblock; return "opened" })
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, ok := c.Wait(ctx); ok {
		t.Fatal("Wait returned a result of a call still blocked")
	}
	if c.Done() {
		t.Fatal("Done while blocked")
	}
	released := make(chan string, 1)
	c.Abandon(func(r string) { released <- r })
	select {
	case r := <-released:
		t.Fatalf("released (%q) before the call returned", r)
	default:
	}
	close(unblock)
	select {
	case r := <-released:
		if r != "opened" {
			t.Errorf("released %q, want the call's result", r)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("not released 30 s after the call returned")
	}
}

// TestAbandonAfterReturnReleasesAtOnce: a call that has returned but was
// not taken is released by Abandon itself.
func TestAbandonAfterReturnReleasesAtOnce(t *testing.T) {
	c := Start(func() int { return 7 })
	for !c.Done() {
		time.Sleep(time.Millisecond)
	}
	got := 0
	c.Abandon(func(r int) { got = r })
	if got != 7 {
		t.Errorf("released %d, want 7 at once", got)
	}
}
