// Package recoverable reports a component's recoverable failures to the
// collector's status and, at its first success after them, that it is well
// again: the onnxinference extension's failed model loads, the inference
// processor's items that went unjudged.
package recoverable // import "github.com/otelcol-ai/otelcol-ai/internal/recoverable"

import (
	"sync"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componentstatus"
)

// Status is one component's. The zero Status reports nothing until Attach.
// It is safe for concurrent use.
type Status struct {
	mu       sync.Mutex
	host     component.Host
	degraded bool
}

// Attach sets the host the status is reported to (nil: nowhere), at start
// and at shutdown.
func (s *Status) Attach(host component.Host) {
	s.mu.Lock()
	s.host = host
	s.mu.Unlock()
}

// Failed reports err as a recoverable error.
func (s *Status) Failed(err error) {
	s.mu.Lock()
	host := s.host
	s.degraded = true
	s.mu.Unlock()
	if host != nil {
		componentstatus.ReportStatus(host, componentstatus.NewRecoverableErrorEvent(err))
	}
}

// Succeeded reports StatusOK when something failed since the last success.
func (s *Status) Succeeded() {
	s.mu.Lock()
	host, was := s.host, s.degraded
	s.degraded = false
	s.mu.Unlock()
	if was && host != nil {
		componentstatus.ReportStatus(host, componentstatus.NewEvent(componentstatus.StatusOK))
	}
}
