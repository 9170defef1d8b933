package batcher

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/otelcol-ai/otelcol-ai/pkg/modelrunner"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// echo is a model returning each row's first column, and records run sizes.
type echo struct {
	mu   sync.Mutex
	runs []int
	fail bool
}

func (e *echo) run(_ context.Context, rows []float32, n int) (modelrunner.Result, error) {
	e.mu.Lock()
	e.runs = append(e.runs, n)
	e.mu.Unlock()
	if e.fail {
		return modelrunner.Result{}, errors.New("boom")
	}
	out := make([]float32, n)
	for i := range out {
		out[i] = rows[i*2]
	}
	return modelrunner.Result{Version: 1, Outputs: []modelrunner.Tensor{{Name: "y", Shape: []int64{int64(n)}, Data: out}}}, nil
}

func rowsFrom(first, n int) []float32 {
	rows := make([]float32, 2*n)
	for i := 0; i < n; i++ {
		rows[2*i] = float32(first + i)
	}
	return rows
}

// values returns, for each of the caller's rows, what the model said.
func values(t *testing.T, segments []Segment, n int) []float32 {
	t.Helper()
	got := make([]float32, n)
	covered := 0
	for _, s := range segments {
		if s.Err != nil {
			t.Fatal(s.Err)
		}
		out := s.Result.Outputs[0].Data.([]float32)
		if len(out) != s.RunRows {
			t.Fatalf("run of %d rows returned %d", s.RunRows, len(out))
		}
		for r := 0; r < s.Rows; r++ {
			got[s.First+r] = out[s.Offset+r]
		}
		covered += s.Rows
	}
	if covered != n {
		t.Fatalf("segments cover %d rows of %d", covered, n)
	}
	return got
}

func TestDirectSplitsIntoMaxSize(t *testing.T) {
	m := &echo{}
	b := New(m.run, 2, 4, 0)
	defer b.Stop()
	got := values(t, b.Do(context.Background(), rowsFrom(0, 10), 10), 10)
	for i, v := range got {
		if v != float32(i) {
			t.Fatalf("row %d: %v", i, v)
		}
	}
	if !slices.Equal(m.runs, []int{4, 4, 2}) {
		t.Fatalf("runs %v, want [4 4 2]", m.runs)
	}
}

func TestCoalescesConcurrentCalls(t *testing.T) {
	m := &echo{}
	// A long wait: the batch is sent when it fills, not when the timer fires.
	b := New(m.run, 2, 8, time.Minute)
	defer b.Stop()
	var wg sync.WaitGroup
	segments := make([][]Segment, 4)
	for c := 0; c < 4; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			segments[c] = b.Do(context.Background(), rowsFrom(100*c, 2), 2)
		}()
	}
	wg.Wait()
	for c, segs := range segments {
		got := values(t, segs, 2)
		if !slices.Equal(got, []float32{float32(100 * c), float32(100*c + 1)}) {
			t.Fatalf("caller %d got %v", c, got)
		}
	}
	if !slices.Equal(m.runs, []int{8}) {
		t.Fatalf("runs %v, want one run of 8", m.runs)
	}
}

func TestMaxWaitSendsAPartialBatch(t *testing.T) {
	m := &echo{}
	b := New(m.run, 2, 64, time.Millisecond)
	defer b.Stop()
	got := values(t, b.Do(context.Background(), rowsFrom(5, 3), 3), 3)
	if !slices.Equal(got, []float32{5, 6, 7}) || !slices.Equal(m.runs, []int{3}) {
		t.Fatalf("got %v in runs %v", got, m.runs)
	}
}

func TestErrorsReachEveryCaller(t *testing.T) {
	m := &echo{fail: true}
	for _, wait := range []time.Duration{0, time.Millisecond} {
		b := New(m.run, 2, 4, wait)
		segs := b.Do(context.Background(), rowsFrom(0, 6), 6)
		rows := 0
		for _, s := range segs {
			if s.Err == nil {
				t.Fatalf("wait %s: a failed run returned no error", wait)
			}
			rows += s.Rows
		}
		if rows != 6 {
			t.Fatalf("wait %s: error segments cover %d rows", wait, rows)
		}
		b.Stop()
	}
}

func TestStop(t *testing.T) {
	m := &echo{}
	b := New(m.run, 2, 4, time.Minute)
	b.Stop()
	b.Stop()
	segs := b.Do(context.Background(), rowsFrom(0, 1), 1)
	if len(segs) != 1 || !errors.Is(segs[0].Err, ErrStopped) {
		t.Fatalf("Do after Stop: %+v", segs)
	}
	if segs := b.Do(context.Background(), nil, 0); segs != nil {
		t.Fatalf("Do of no rows: %+v", segs)
	}
}
