// Package fsdeadline runs work on a tenant's filesystem (a listing, a
// stat, an open, a read) in a goroutine of its own, so that a call that
// hangs — a stalled NFS or FUSE mount in the tenant's container — holds
// only that work: the caller waits for it until a deadline and goes on
// with the other tenants; the work's result is taken whenever it comes.
//
// A call cannot be cancelled (a process blocked in the kernel does not
// return for a signal), so a caller that gives up on one, at shutdown,
// Abandons it with what to do with its result: whatever the work opened is
// then closed by its own goroutine once it returns, and nothing is left
// behind, goroutine or descriptor.
package fsdeadline // import "github.com/otelcol-ai/otelcol-ai/internal/fsdeadline"

import (
	"context"
	"sync"
	"time"
)

// Timeout is how long a caller waits for a tenant's filesystem work
// before going on without it: far beyond what a local disk takes, short
// enough that the other tenants' data is late by one poll at most.
const Timeout = 2 * time.Second

// Call is one piece of work started by Start. Wait and Abandon are for one
// goroutine, the one that started it.
type Call[T any] struct {
	done chan T // buffered: the work never blocks on handing its result

	mu      sync.Mutex
	release func(T) // set by Abandon before the work returns
	taken   bool    // the result was received (by Wait or Abandon)
}

// Start runs work in a new goroutine.
func Start[T any](work func() T) *Call[T] {
	c := &Call[T]{done: make(chan T, 1)}
	go func() {
		r := work()
		c.mu.Lock()
		release := c.release
		if release == nil {
			c.done <- r
		}
		c.mu.Unlock()
		if release != nil {
			release(r)
		}
	}()
	return c
}

// Wait returns the work's result when it has returned or returns before
// ctx ends (a context with the caller's deadline, shared by the calls it
// waits for); false when it has not. A result is returned once.
func (c *Call[T]) Wait(ctx context.Context) (T, bool) {
	var zero T
	if c.taken {
		return zero, false
	}
	select {
	case r := <-c.done:
		c.taken = true
		return r, true
	default:
	}
	select {
	case r := <-c.done:
		c.taken = true
		return r, true
	case <-ctx.Done():
		return zero, false
	}
}

// Done reports whether the work has returned, without taking its result.
func (c *Call[T]) Done() bool { return len(c.done) > 0 }

// Abandon gives the call up: release runs with its result once the work
// returns, in the work's goroutine, or at once, here, if it has returned
// already. Wait returns nothing afterwards.
func (c *Call[T]) Abandon(release func(T)) {
	c.mu.Lock()
	if c.taken {
		c.mu.Unlock()
		return
	}
	c.taken = true
	select {
	case r := <-c.done:
		c.mu.Unlock()
		release(r)
		return
	default:
	}
	c.release = release
	c.mu.Unlock()
}
