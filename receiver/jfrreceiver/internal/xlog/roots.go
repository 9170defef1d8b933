package xlog

import (
	"sync/atomic"

	"github.com/otelcol-ai/otelcol-ai/internal/procroot"
)

// rootKey names a root: a discovered JVM's (pid and start time), or the
// host's (the zero key) for the patterns' files.
type rootKey struct {
	pid   int
	start uint64
}

// heldRoot is a root shared by the tails of its files and the scans
// running in it, closed when the last of them lets it go. holds is atomic:
// a read or scan abandoned at Close lets go from its own goroutine.
type heldRoot struct {
	*procroot.Root
	key   rootKey
	holds atomic.Int32
}

// release lets the root go, closing it with the last hold.
func (r *heldRoot) release() {
	if r.holds.Add(-1) == 0 {
		r.Close()
	}
}

// releaseIfHeld releases r unless it is nil.
func (r *heldRoot) releaseIfHeld() {
	if r != nil {
		r.release()
	}
}

// hold returns the root of key held once more, or nil when none is open.
func (s *Source) hold(key rootKey) *heldRoot {
	r := s.roots[key]
	if r != nil {
		r.holds.Add(1)
	}
	return r
}

// adopt makes root, opened by a scan, the root of key, held once; a root
// opened meanwhile for key is kept instead.
func (s *Source) adopt(key rootKey, root *procroot.Root) *heldRoot {
	if r := s.hold(key); r != nil {
		root.Close()
		return r
	}
	r := &heldRoot{Root: root, key: key}
	r.holds.Store(1)
	s.roots[key] = r
	return r
}

func (s *Source) release(r *heldRoot) {
	if r.holds.Add(-1) == 0 {
		r.Close()
		if s.roots[r.key] == r {
			delete(s.roots, r.key)
		}
	}
}

// hostRoot opens the collector's own root, where the patterns (paths the
// operator gave) resolve as usual, symlinks included, but magic links do
// not and only regular files are read.
func hostRoot() (*procroot.Root, error) { return procroot.OpenDir("/") }
