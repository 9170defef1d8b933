package runtimecorrelationprocessor

import "sync"

// loop is a processor's background goroutine (the metrics' ticker, the
// held spans' timer): started once at the first start, stopped at
// shutdown, never started again after it.
type loop struct {
	mu      sync.Mutex
	stop    chan struct{}
	done    chan struct{}
	stopped bool
}

// start runs run in a goroutine, unless it runs already or end was
// called; run returns when stop is closed.
func (l *loop) start(run func(stop <-chan struct{})) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stopped || l.done != nil {
		return
	}
	l.stop, l.done = make(chan struct{}), make(chan struct{})
	go func(stop <-chan struct{}, done chan struct{}) {
		defer close(done)
		run(stop)
	}(l.stop, l.done)
}

// end stops the goroutine and waits for it to return; it reports whether
// the goroutine ran (false at a second call).
func (l *loop) end() bool {
	l.mu.Lock()
	stopped, done := l.stopped, l.done
	l.stopped = true
	l.mu.Unlock()
	if stopped || done == nil {
		return false
	}
	close(l.stop)
	<-done
	return true
}
