package jfrreceiver

import (
	"sync"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componentstatus"
)

// statusHost records the errors components report through status.
type statusHost struct {
	component.Host
	mu    sync.Mutex
	errs  []error
	fatal int // fatal error events
}

// Report implements componentstatus.Reporter.
func (h *statusHost) Report(e *componentstatus.Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if e.Err() != nil {
		h.errs = append(h.errs, e.Err())
	}
	if e.Status() == componentstatus.StatusFatalError {
		h.fatal++
	}
}

func (h *statusHost) fatals() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.fatal
}

func (h *statusHost) errors() []error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]error(nil), h.errs...)
}
