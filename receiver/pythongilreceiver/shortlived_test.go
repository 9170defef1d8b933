package pythongilreceiver

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.uber.org/zap"

	"github.com/otelcol-ai/otelcol-ai/internal/procevents"
	"github.com/otelcol-ai/otelcol-ai/internal/window"
	"github.com/otelcol-ai/otelcol-ai/receiver/pythongilreceiver/internal/gil"
	"github.com/otelcol-ai/otelcol-ai/receiver/pythongilreceiver/internal/workloadtest"
)

// shortPython lives 300 ms: two threads sleep 5 ms at a time (each sleep
// a GIL release window) while the main thread waits for them.
const shortPython = `
import sys, threading, time
end = time.monotonic() + 0.3
def sleeper():
    while time.monotonic() < end:
        time.sleep(0.005)
ts = [threading.Thread(target=sleeper) for _ in range(2)]
for t in ts: t.start()
for t in ts: t.join()
`

// needEBPF skips where neither the GIL probes nor process events can be
// had; CI runs as root with eBPF, so it fails there.
func needEBPF(t *testing.T) {
	t.Helper()
	p, err := gil.Load(gil.Options{})
	if err == nil {
		if err := p.Close(); err != nil {
			t.Fatalf("p.Close: %v", err)
		}
		s := procevents.Subscribe(zap.NewNop())
		defer s.Close()
		if s.Mechanism() != procevents.MechanismNone {
			return
		}
		err = errors.New("no process events")
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("eBPF unavailable in CI: %v", err)
	}
	t.Skipf("eBPF unavailable: %v", err)
}

// TestShortLivedPythonIsProbedAtItsExec: a CPython that lives 300 ms,
// started while the receiver runs with a discovery interval of an hour, is
// probed at its exec (the process events), so its GIL release windows
// arrive: about one per 5 ms sleep of each thread, all inside its life.
func TestShortLivedPythonIsProbedAtItsExec(t *testing.T) {
	needEBPF(t)
	python := workloadtest.Python(t)
	marker := "short-lived-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	cfg := fastConfig()
	cfg.DiscoveryInterval = time.Hour
	cfg.Include.CommandLines = []string{marker}
	h := startReceiver(t, cfg, componenttest.NewNopHost())
	waitFor(t, "probes loaded", func() bool {
		h.core.stateMu.Lock()
		defer h.core.stateMu.Unlock()
		return h.core.state != nil
	})
	// Process events are subscribed to before the state is published.
	// The pyenv shim or python itself runs long after the scan at start:
	// only the events can find the interpreter in time.

	// The marker leads: a resource's command line is capped.
	cmd := exec.Command(python, "-c", "# "+marker+shortPython)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	started := time.Now()
	if err := cmd.Run(); err != nil {
		t.Fatalf("%v: %v", out.String(), err)
	}
	ended := time.Now()
	pid := cmd.Process.Pid

	var got []received
	defer func() {
		if t.Failed() {
			h.core.stateMu.Lock()
			st, ok := h.core.state.statuses.Get(pid)
			t.Logf("status of pid %d: %+v (known %v); %d libraries", pid, st, ok, len(h.core.state.libraries))
			h.core.stateMu.Unlock()
		}
	}()
	waitFor(t, "windows of pid "+strconv.Itoa(pid), func() bool {
		got = h.windows(pid)
		return len(got) >= 20
	})
	first := got[0].w.Start
	for _, r := range got {
		first = min(first, r.w.Start)
		slack := h.slack()
		if r.w.Start < started.UnixNano()-slack {
			t.Errorf("window before the process started: got %v, want >= %v", r.w.Start, started.UnixNano()-slack)
		}
		if got := r.w.End(); got > ended.UnixNano()+slack {
			t.Errorf("window after the process ended: got %v, want <= %v", got, ended.UnixNano()+slack)
		}
	}
	released := 0
	for _, r := range got {
		if r.w.Kind == window.KindPythonGILReleased && r.w.Duration >= 4*time.Millisecond {
			released++
		}
	}
	// 2 threads x 300 ms / 5 ms is some 120 sleeps; the first ones may
	// come before the probes are attached.
	if released < 40 {
		t.Errorf("sleep-long GIL release windows: got %v, want >= %v", released, 40)
	}
	toFirst := time.Duration(first - started.UnixNano())
	t.Logf("CPython lived %v; %d windows (%d sleeps released); first window %v after its start",
		ended.Sub(started).Round(time.Millisecond), len(got), released, toFirst.Round(time.Microsecond))
}
