package runtimestateextension // import "github.com/otelcol-ai/otelcol-ai/extension/runtimestateextension"

import (
	"context"
	"sync"
	"time"

	"go.opentelemetry.io/collector/component"

	"github.com/otelcol-ai/otelcol-ai/internal/runtimestate"
)

// runtimeState owns a store from Start to Shutdown: a collector restarted
// in-process gets a new, empty one.
type runtimeState struct {
	cfg   runtimestate.Config
	mu    sync.Mutex
	store *runtimestate.Store
	stop  chan struct{}
	done  chan struct{}
}

var _ runtimestate.Holder = (*runtimeState)(nil)

// sweepEvery is how often readings past the retention are dropped.
const sweepEvery = time.Minute

func (e *runtimeState) Start(context.Context, component.Host) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.store = runtimestate.New(e.cfg)
	e.stop, e.done = make(chan struct{}), make(chan struct{})
	go func(s *runtimestate.Store, stop, done chan struct{}) {
		defer close(done)
		t := time.NewTicker(sweepEvery)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				s.Sweep()
			}
		}
	}(e.store, e.stop, e.done)
	return nil
}

func (e *runtimeState) Shutdown(context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.stop == nil {
		return nil
	}
	close(e.stop)
	<-e.done
	e.stop = nil
	e.store.Reset()
	return nil
}

// RuntimeState returns the store; nil before Start.
func (e *runtimeState) RuntimeState() *runtimestate.Store {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.store
}
