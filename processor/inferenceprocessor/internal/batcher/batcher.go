// Package batcher groups rows of features into model runs of a bounded size.
//
// A call with at least MaxSize rows, or any call when MaxWait is zero, runs
// at once in the caller's goroutine, split into runs of at most MaxSize rows.
// Otherwise calls are coalesced: the first one waits up to MaxWait for rows
// from concurrent calls until MaxSize rows are gathered, then one run serves
// them all and each caller gets the part of the result that is its own.
package batcher // import "github.com/otelcol-ai/otelcol-ai/processor/inferenceprocessor/internal/batcher"

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/otelcol-ai/otelcol-ai/pkg/modelrunner"
)

// RunFunc runs the model on n rows of width columns, row-major.
type RunFunc func(ctx context.Context, rows []float32, n int) (modelrunner.Result, error)

// Segment is the result of one run and where a caller's rows sit in it:
// rows [Offset, Offset+Rows) of the run are rows [First, First+Rows) of the
// caller's call.
type Segment struct {
	Result modelrunner.Result
	// RunRows is the number of rows in the run.
	RunRows int
	Offset  int
	First   int
	Rows    int
	Err     error
}

// ErrStopped is returned for calls made after Stop.
var ErrStopped = errors.New("batcher stopped")

// Batcher groups rows into runs.
type Batcher struct {
	run     RunFunc
	width   int
	maxSize int
	maxWait time.Duration

	mu       sync.Mutex
	stopped  bool
	requests chan *request
	done     chan struct{}
}

type request struct {
	rows  []float32
	n     int
	reply chan []Segment
}

// New returns a Batcher. Call Stop when done with it.
func New(run RunFunc, width, maxSize int, maxWait time.Duration) *Batcher {
	b := &Batcher{run: run, width: width, maxSize: maxSize, maxWait: maxWait}
	if maxWait > 0 {
		b.requests = make(chan *request)
		b.done = make(chan struct{})
		go b.coalesce()
	}
	return b
}

// Do runs the model on n rows and returns the segments covering them, in
// order. A failed run yields a segment with Err set for its rows.
func (b *Batcher) Do(ctx context.Context, rows []float32, n int) []Segment {
	if n == 0 {
		return nil
	}
	if b.maxWait <= 0 || n >= b.maxSize {
		return b.direct(ctx, rows, n)
	}
	req := &request{rows: rows, n: n, reply: make(chan []Segment, 1)}
	b.mu.Lock()
	if b.stopped {
		b.mu.Unlock()
		return []Segment{{First: 0, Rows: n, Err: ErrStopped}}
	}
	// Sent under the lock so that Stop cannot close the loop in between;
	// the loop never blocks on anything but a run.
	b.requests <- req
	b.mu.Unlock()
	return <-req.reply
}

func (b *Batcher) direct(ctx context.Context, rows []float32, n int) []Segment {
	segments := make([]Segment, 0, (n+b.maxSize-1)/b.maxSize)
	for first := 0; first < n; first += b.maxSize {
		k := min(b.maxSize, n-first)
		res, err := b.run(ctx, rows[first*b.width:(first+k)*b.width], k)
		segments = append(segments, Segment{Result: res, RunRows: k, First: first, Rows: k, Err: err})
	}
	return segments
}

// Stop runs what is pending and ends coalescing. Calls after Stop fail with
// ErrStopped. Stop is safe to call twice.
func (b *Batcher) Stop() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.stopped {
		return
	}
	b.stopped = true
	if b.requests != nil {
		close(b.requests)
		<-b.done
	}
}

func (b *Batcher) coalesce() {
	defer close(b.done)
	var pending []*request
	rows := 0
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	flush := func() {
		if len(pending) > 0 {
			b.flush(pending, rows)
		}
		pending, rows = pending[:0], 0
		timer.Stop()
	}
	for {
		select {
		case req, ok := <-b.requests:
			if !ok {
				flush()
				return
			}
			if rows+req.n > b.maxSize {
				flush()
			}
			if len(pending) == 0 {
				timer.Reset(b.maxWait)
			}
			pending = append(pending, req)
			rows += req.n
			if rows >= b.maxSize {
				flush()
			}
		case <-timer.C:
			flush()
		}
	}
}

func (b *Batcher) flush(pending []*request, n int) {
	var rows []float32
	if len(pending) == 1 {
		rows = pending[0].rows[:n*b.width]
	} else {
		rows = make([]float32, 0, n*b.width)
		for _, r := range pending {
			rows = append(rows, r.rows[:r.n*b.width]...)
		}
	}
	// The run outlives any one caller's context: it serves them all.
	res, err := b.run(context.Background(), rows, n)
	offset := 0
	for _, r := range pending {
		r.reply <- []Segment{{Result: res, RunRows: n, Offset: offset, First: 0, Rows: r.n, Err: err}}
		offset += r.n
	}
}
