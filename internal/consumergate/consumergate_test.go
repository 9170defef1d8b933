package consumergate

import (
	"sync/atomic"
	"testing"
	"time"
)

func TestGateSendsOnlyWhileOpen(t *testing.T) {
	var g Gate[*int]
	got := 0
	if g.Send(func(*int) { got++ }) {
		t.Fatal("the zero gate let a send through")
	}
	v := 7
	g.Open(&v)
	if !g.Send(func(p *int) { got += *p }) || got != 7 {
		t.Fatalf("open gate: sent %d, want 7", got)
	}
	g.Close()
	if g.Send(func(*int) { got++ }) || got != 7 {
		t.Fatal("closed gate let a send through")
	}
	g.Open(&v)
	if !g.Send(func(p *int) { got += *p }) || got != 14 {
		t.Fatal("reopened gate refused a send")
	}
}

// TestCloseWaitsForSendsInFlight: once Close returns, no send is running and
// none starts.
func TestCloseWaitsForSendsInFlight(t *testing.T) {
	var g Gate[int]
	g.Open(1)
	var running, after atomic.Int32
	entered := make(chan struct{})
	release := make(chan struct{})
	go g.Send(func(int) {
		running.Add(1)
		close(entered)
		<-release
		running.Add(-1)
	})
	<-entered
	closed := make(chan struct{})
	go func() {
		g.Close()
		after.Store(running.Load())
		close(closed)
	}()
	select {
	case <-closed:
		t.Fatal("Close returned while a send was in flight")
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	<-closed
	if after.Load() != 0 {
		t.Fatalf("%d sends running after Close returned", after.Load())
	}
	if g.Send(func(int) { t.Error("send after Close") }) {
		t.Fatal("closed gate let a send through")
	}
}
