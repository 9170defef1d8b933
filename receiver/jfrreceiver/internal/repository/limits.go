package repository

import (
	"errors"
	"fmt"
	"sync/atomic"
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
	// repositories past MaxMemory.
	RefusedOverBudget = "over_budget"
	// RefusedTooMany: a folder lists more than maxListed entries, or a JVM
	// has more than maxRepositoriesPerJVM repository folders; the rest are
	// not looked at.
	RefusedTooMany = "too_many"
	// RefusedPanic: decoding a repository's chunk panicked; the repository
	// is not read again until its JVM restarts (a new folder).
	RefusedPanic = "panic"
	// RefusedStalled: a poll of the repository did not return within
	// pollTimeout (a read hanging on its filesystem); it is skipped, the
	// others are read, until the read returns. Counted once per stall.
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
// the repositories' memory past MaxMemory.
var errOverBudget = errors.New("repositories' memory budget exhausted")

// budget is the chunk memory shared by every follower of a Source: the sum
// of their LiveChunks' Held. Followers are polled on one goroutine; held is
// atomic so that HeldBytes may be read from any.
type budget struct {
	max  int64 // 0: unbounded
	held atomic.Int64
}

// reserve takes grow bytes from the budget, or refuses them.
func (b *budget) reserve(grow int64) error {
	for {
		cur := b.held.Load()
		if b.max > 0 && cur+grow > b.max {
			return fmt.Errorf("%w: chunks hold %d bytes, %d more would pass repositories::max_memory_mib (%d bytes)", errOverBudget, cur, grow, b.max)
		}
		if b.held.CompareAndSwap(cur, cur+grow) {
			return nil
		}
	}
}

// release gives back n bytes reserved before.
func (b *budget) release(n int64) { b.held.Add(-n) }
