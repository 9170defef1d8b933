package runtimecorrelationprocessor // import "github.com/otelcol-ai/otelcol-ai/processor/runtimecorrelationprocessor"

import (
	"sync"
	"time"
)

// Bounds on the lookups of connections' owners done off the OTLP
// receiver's call: a scan of /proc costs milliseconds (more on a node with
// many processes, or while another tenant's scans hold the resolver), and
// the receiver's handler should not wait for it when its spans wait for
// windows anyway.
const (
	// maxQueuedLookups is the most distinct peers waiting to be looked
	// up; beyond it a lookup runs in the caller's call, as without a
	// queue.
	maxQueuedLookups = 1024
	// lookupWait bounds how long a batch released after its delay waits
	// for its peer's lookup, still running, before it is left unmatched
	// (unknown_process).
	lookupWait = time.Second
)

// lookupQueue runs lookups of connections' owners on one goroutine of its
// own, each distinct key once at a time, and lets a caller wait for one.
type lookupQueue struct {
	mu      sync.Mutex
	pending map[any]chan struct{}
	work    chan queuedLookup
	stop    chan struct{}
	done    chan struct{}
	started bool
	closed  bool
}

type queuedLookup struct {
	key  any
	run  func()
	done chan struct{}
}

func newLookupQueue() *lookupQueue {
	return &lookupQueue{
		pending: map[any]chan struct{}{},
		work:    make(chan queuedLookup, maxQueuedLookups),
		stop:    make(chan struct{}),
		done:    make(chan struct{}),
	}
}

// submit queues run under key unless a lookup of key is queued or running
// already; false when the queue is full or closed (the caller looks up
// itself).
func (q *lookupQueue) submit(key any, run func()) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return false
	}
	if _, ok := q.pending[key]; ok {
		return true
	}
	l := queuedLookup{key: key, run: run, done: make(chan struct{})}
	select {
	case q.work <- l:
	default:
		return false
	}
	q.pending[key] = l.done
	if !q.started {
		q.started = true
		go q.loop()
	}
	return true
}

// wait waits up to d for the lookup of key, when one is queued or running,
// and reports whether none is left running.
func (q *lookupQueue) wait(key any, d time.Duration) bool {
	q.mu.Lock()
	done, ok := q.pending[key]
	q.mu.Unlock()
	if !ok {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
		return false
	}
}

func (q *lookupQueue) loop() {
	defer close(q.done)
	for {
		select {
		case <-q.stop:
			return
		case l := <-q.work:
			l.run()
			q.mu.Lock()
			delete(q.pending, l.key)
			q.mu.Unlock()
			close(l.done)
		}
	}
}

// close stops the goroutine after the lookup it runs, if any; queued ones
// are dropped (their spans are released unmatched, or looked up by their
// own release).
func (q *lookupQueue) close() {
	q.mu.Lock()
	q.closed = true
	started := q.started
	q.mu.Unlock()
	if started {
		close(q.stop)
		<-q.done
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	for k, done := range q.pending {
		close(done)
		delete(q.pending, k)
	}
}
