//go:build linux && amd64

package gil

import (
	"errors"
	"os"
	"testing"
	"time"

	"github.com/otelcol-ai/otelcol-ai/receiver/pythongilreceiver/internal/workload"
)

// load loads a probe or skips the test when eBPF is unavailable here.
func load(t *testing.T, opts Options) *Probe {
	t.Helper()
	p, err := Load(opts)
	if errors.Is(err, ErrUnavailable) {
		t.Skipf("eBPF unavailable: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return p
}

func attach(t *testing.T, p *Probe, pid int) *Library {
	t.Helper()
	path, err := workload.LibPython(pid)
	if err != nil {
		t.Fatal(err)
	}
	l, err := p.Attach(path)
	if errors.Is(err, ErrUnavailable) {
		t.Skipf("uprobes unavailable: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// drain returns the pending events of pid.
func drain(t *testing.T, p *Probe, pid int) []Event {
	t.Helper()
	p.SetDeadline(time.Now())
	defer p.SetDeadline(time.Time{})
	var out []Event
	for {
		e, err := p.ReadEvent()
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		if int(e.PID) == pid {
			out = append(out, e)
		}
	}
}

var defaults = Options{MinDuration: 100 * time.Microsecond, SwitchProbes: true, GC: true}

func TestSleepReleasesGILOncePerCall(t *testing.T) {
	p := load(t, defaults)
	w := workload.Start(t, "sleep", "5", "20")
	attach(t, p, w.PID)
	var res struct {
		TID   uint32     `json:"tid"`
		N     int        `json:"n"`
		DNS   int64      `json:"d_ns"`
		Calls [][4]int64 `json:"calls"`
	}
	w.Run(&res)
	var released []Event
	for _, e := range drain(t, p, w.PID) {
		if e.TID == res.TID && e.Kind == KindReleased && e.Duration >= time.Duration(res.DNS) {
			released = append(released, e)
		}
	}
	if len(released) != res.N {
		t.Fatalf("%d released windows of at least %s on thread %d, want %d: %+v", len(released), time.Duration(res.DNS), res.TID, res.N, released)
	}
	for i, e := range released {
		m0, m1 := res.Calls[i][2], res.Calls[i][3]
		// The window lies inside the workload's own monotonic readings
		// around time.sleep, and is as long as the call, within 1 ms.
		if e.Start < m0 || e.Start+int64(e.Duration) > m1 {
			t.Errorf("window %d [%d, +%s] not inside the call [%d, %d]", i, e.Start, e.Duration, m0, m1)
		}
		if d := time.Duration(m1-m0) - e.Duration; d < 0 || d > time.Millisecond {
			t.Errorf("window %d lasts %s, the call %s", i, e.Duration, time.Duration(m1-m0))
		}
	}
}
