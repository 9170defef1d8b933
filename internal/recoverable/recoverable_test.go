package recoverable

import (
	"errors"
	"slices"
	"testing"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componentstatus"
	"go.opentelemetry.io/collector/component/componenttest"
)

// reportingHost records the statuses reported to it.
type reportingHost struct {
	component.Host
	got []componentstatus.Status
}

func (h *reportingHost) Report(e *componentstatus.Event) { h.got = append(h.got, e.Status()) }

// TestStatus: every failure is reported; StatusOK once, at the first
// success after failures; nothing without a host, and a failure without a
// host is still recovered from once one is attached.
func TestStatus(t *testing.T) {
	host := &reportingHost{Host: componenttest.NewNopHost()}
	var s Status
	s.Failed(errors.New("before start"))
	s.Attach(host)
	s.Succeeded()
	s.Succeeded()
	s.Failed(errors.New("one"))
	s.Failed(errors.New("two"))
	s.Succeeded()
	s.Succeeded()
	s.Attach(nil)
	s.Failed(errors.New("after shutdown"))
	want := []componentstatus.Status{componentstatus.StatusOK,
		componentstatus.StatusRecoverableError, componentstatus.StatusRecoverableError, componentstatus.StatusOK}
	if !slices.Equal(host.got, want) {
		t.Errorf("reported %v, want %v", host.got, want)
	}
}
