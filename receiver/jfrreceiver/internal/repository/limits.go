package repository

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Reasons a chunk file or a repository is refused, as counted by
// Config.Refused. A repository folder is written by the JVM's container,
// which may be hostile: what is not a chunk a JVM would write is not read.
const (
	// RefusedNotRegular: a file named like a chunk is a FIFO, a device, a
	// socket or a directory (opening a FIFO would block the source).
	RefusedNotRegular = "not_regular"
	// RefusedOutsideRoot: a file named like a chunk is a symlink that does
	// not resolve inside the JVM's root (its container), or through a
	// magic link.
	RefusedOutsideRoot = "outside_root"
	// RefusedOpenFailed: a chunk file could not be opened for another
	// reason (permissions, I/O).
	RefusedOpenFailed = "open_failed"
	// RefusedTooLarge: a chunk's header claims more than MaxChunkSize, or
	// its metadata more than package jfr allows.
	RefusedTooLarge = "too_large"
	// RefusedOverBudget: holding a chunk would take the bytes held by all
	// repositories past MaxMemory, or the bytes held for its JVM past that
	// JVM's share of it (jvmShare).
	RefusedOverBudget = "over_budget"
	// RefusedTooMany: a folder lists more than maxListed entries, or a JVM
	// has more than maxRepositoriesPerJVM repository folders; the rest are
	// not looked at.
	RefusedTooMany = "too_many"
	// RefusedPanic: decoding a repository's chunk panicked; the repository
	// is not read again until its JVM restarts (a new folder).
	RefusedPanic = "panic"
	// RefusedStalled: a poll of the repository, or the look for a JVM's
	// repository folders in its root, did not return within pollTimeout,
	// or an attach exchange within its timeout and a grace (a call hanging
	// on the JVM's filesystem); that repository or JVM is skipped, the
	// others are read, until the call returns. Counted once per stall.
	RefusedStalled = "stalled"
)

// Bounds on what a folder's contents make the source look at.
const (
	// maxListed bounds the entries read from one repository folder per
	// listing (a JVM keeps a few dozen chunk files).
	maxListed = 4096
	// maxRepositoriesPerJVM bounds the repository folders followed for one
	// discovered JVM (normally one; the newest names are kept).
	maxRepositoriesPerJVM = 4
	// maxRefusedNames bounds the file names remembered per repository as
	// refused, so each is counted once; past it, refused files are opened
	// and refused again at each listing (cheap: opens never block).
	maxRefusedNames = 1024
)

// errOverBudget is what the shared budget answers when a chunk would take
// the repositories' memory past MaxMemory, or its JVM's past its share.
var errOverBudget = errors.New("repositories' memory budget exhausted")

// shareDivisor: one JVM may hold at most MaxMemory/shareDivisor of chunk
// memory (never less than MaxChunkSize, so that any JVM can hold one chunk
// of the largest size allowed). A JVM reads one chunk at a time per
// repository, about 12 MB with HotSpot's default rotation; a quarter of
// the default budget (64 MiB) is five of those. Without a share, one JVM
// with maxRepositoriesPerJVM repositories of unfinished chunks claiming
// MaxChunkSize each takes the whole default budget (4 × 64 MiB), and every
// other JVM's chunks are refused; with it, at least three quarters stay
// for the others.
const shareDivisor = 4

// jvmShare returns the chunk memory one JVM may hold under a budget of
// maxMemory bytes (0: unbounded) with chunks of at most maxChunk bytes.
func jvmShare(maxMemory, maxChunk int64) int64 {
	if maxMemory <= 0 {
		return 0
	}
	return min(max(maxMemory/shareDivisor, maxChunk), maxMemory)
}

// tenant is whom held chunk memory is counted against: a discovered JVM
// (pid and start time, whatever its repositories), or a pattern's folder
// (dir), which names no process.
type tenant struct {
	pid   int
	start uint64
	dir   string
}

// budget is the chunk memory shared by every follower of a Source: the sum
// of their LiveChunks' Held, and the part of it each tenant holds. Followers
// reserve from their poll goroutines, which run at once; held is atomic so
// that HeldBytes may be read without the lock.
type budget struct {
	max   int64 // 0: unbounded
	share int64 // most one tenant may hold; 0: unbounded
	held  atomic.Int64

	mu    sync.Mutex
	byJVM map[tenant]int64
}

// reserve takes grow bytes from the budget for t, or refuses them.
func (b *budget) reserve(t tenant, grow int64) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	mine, all := b.byJVM[t], b.held.Load()
	if b.share > 0 && mine+grow > b.share {
		return fmt.Errorf("%w: this JVM's chunks hold %d bytes, %d more would pass its share (%d bytes: a quarter of repositories::max_memory_mib, at least repositories::max_chunk_size_mib)", errOverBudget, mine, grow, b.share)
	}
	if b.max > 0 && all+grow > b.max {
		return fmt.Errorf("%w: chunks hold %d bytes, %d more would pass repositories::max_memory_mib (%d bytes)", errOverBudget, all, grow, b.max)
	}
	if b.byJVM == nil {
		b.byJVM = map[tenant]int64{}
	}
	b.byJVM[t] = mine + grow
	b.held.Add(grow)
	return nil
}

// release gives back n bytes t reserved before.
func (b *budget) release(t tenant, n int64) {
	if n == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if left := b.byJVM[t] - n; left > 0 {
		b.byJVM[t] = left
	} else {
		delete(b.byJVM, t)
	}
	b.held.Add(-n)
}

// heldBy returns the bytes t holds.
func (b *budget) heldBy(t tenant) int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.byJVM[t]
}

// isolated is one call on a tenant's files running in a goroutine of its
// own, so that a hang there (a stalled FUSE or NFS mount in the tenant's
// container) holds only that tenant: its caller waits for it until a
// deadline shared by every tenant, then leaves it to return on its own.
type isolated[T any] struct {
	done    chan T
	stalled bool // await has reported the stall

	mu        sync.Mutex
	abandoned bool
	discard   func(T) // releases a result nobody will take; may be nil
}

// isolate runs call in a goroutine of its own; discard, when set, releases
// its result if the call is abandoned.
func isolate[T any](call func() T, discard func(T)) *isolated[T] {
	c := &isolated[T]{done: make(chan T, 1), discard: discard}
	go func() {
		res := call()
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.abandoned {
			if c.discard != nil {
				c.discard(res)
			}
			return
		}
		c.done <- res
	}()
	return c
}

// await returns the call's result once it has returned, waiting for it
// until deadline fires (not at all once expired says it has fired, or once
// the call was reported stalled: it would hold every later caller). ok is
// false while the call runs; first is true the one time await gives up on
// a call (report the stall then). fired says whether the deadline has
// fired.
func (c *isolated[T]) await(deadline <-chan time.Time, expired bool) (res T, ok, first, fired bool) {
	if !expired && !c.stalled {
		select {
		case res = <-c.done:
			return res, true, false, false
		case <-deadline:
			expired = true
		}
	}
	select {
	case res = <-c.done:
		return res, true, false, expired
	default:
	}
	if c.stalled {
		return res, false, false, expired
	}
	c.stalled = true
	return res, false, true, expired
}

// abandon gives up on the call: its result, now or when it returns, goes
// to discard.
func (c *isolated[T]) abandon() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.abandoned = true
	select {
	case res := <-c.done:
		if c.discard != nil {
			c.discard(res)
		}
	default:
	}
}
