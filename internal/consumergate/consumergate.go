// Package consumergate guards the next consumer of a receiver that one
// component ID shares between several pipelines (logs and metrics).
//
// The collector shuts a pipeline's exporters down as soon as that pipeline's
// own receiver face has stopped, possibly before the shared receiver's other
// faces stop. A background loop that keeps sending into the first pipeline
// then reaches a stopped exporter. A Gate closes with its face: Close waits
// for the sends in flight and refuses later ones, so nothing reaches a
// pipeline after its receiver's Shutdown has returned.
package consumergate // import "github.com/otelcol-ai/otelcol-ai/internal/consumergate"

import "sync"

// Gate holds one pipeline's next consumer while that pipeline runs. The
// zero Gate is closed.
type Gate[T any] struct {
	mu   sync.RWMutex
	next T
	open bool
}

// Open lets sends through to next.
func (g *Gate[T]) Open(next T) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.next, g.open = next, true
}

// Close waits for the sends in flight to return, then refuses new ones.
func (g *Gate[T]) Close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	var zero T
	g.next, g.open = zero, false
}

// IsOpen reports whether sends go through.
func (g *Gate[T]) IsOpen() bool {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return g.open
}

// Send calls send with the next consumer while the gate is open, and
// reports whether it did. Close waits for send to return.
func (g *Gate[T]) Send(send func(next T)) bool {
	g.mu.RLock()
	defer g.mu.RUnlock()
	if !g.open {
		return false
	}
	send(g.next)
	return true
}
