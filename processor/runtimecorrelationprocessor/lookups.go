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
	// lookupWait bounds how long batches released after their delay wait
	// for their peer's lookup, still running, before they are left
	// unmatched (unknown_process): in all, from the first batch that
	// waits, so that many batches of one stuck peer cost one wait.
	lookupWait = time.Second
)

// lookupQueue runs lookups of connections' owners on one goroutine of its
// own, each distinct key once at a time, and lets a caller wait for one.
type lookupQueue struct {
	mu      sync.Mutex
	pending map[any]*pendingLookup
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

// pendingLookup is a lookup queued or running: done closes when it ends;
// until is when waiting for it stops (zero until someone waits).
type pendingLookup struct {
	done  chan struct{}
	until time.Time
}

func newLookupQueue() *lookupQueue {
	return &lookupQueue{
		pending: map[any]*pendingLookup{},
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
	q.pending[key] = &pendingLookup{done: l.done}
	if !q.started {
		q.started = true
		go q.loop()
	}
	return true
}

// wait waits for the lookup of key, when one is queued or running, until
// d after the first wait for it began, and reports whether none is left
// running.
func (q *lookupQueue) wait(key any, d time.Duration) bool {
	q.mu.Lock()
	p, ok := q.pending[key]
	if ok && p.until.IsZero() {
		p.until = time.Now().Add(d)
	}
	q.mu.Unlock()
	if !ok {
		return true
	}
	left := time.Until(p.until)
	if left <= 0 {
		select {
		case <-p.done:
			return true
		default:
			return false
		}
	}
	t := time.NewTimer(left)
	defer t.Stop()
	select {
	case <-p.done:
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
	for k, p := range q.pending {
		close(p.done)
		delete(q.pending, k)
	}
}
