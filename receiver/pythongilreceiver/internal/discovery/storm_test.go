package discovery

import (
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"
	"go.uber.org/zap"

	"github.com/otelcol-ai/otelcol-ai/internal/procevents"
	"github.com/otelcol-ai/otelcol-ai/internal/procevents/proceventstest"
	"github.com/otelcol-ai/otelcol-ai/internal/procresource"
)

func TestMain(m *testing.M) {
	proceventstest.RunIfStorm()
	goleak.VerifyTestMain(m)
}

// BenchmarkEventsExecStorm is the CPU discovery costs the collector under
// a storm of 200 short-lived processes a second for 10 s: the process
// events and every exec inspected, with its retries, against the storm's
// own CPU (x-storm-cpu). It runs once, whatever b.N.
func BenchmarkEventsExecStorm(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("process events need root")
	}
	s := NewScanner(procresource.NewReader("/proc", 0), Filter{})
	e := NewEvents(s, zap.NewNop())
	defer e.Close()
	if e.Mechanism() == procevents.MechanismNone {
		b.Skip("no process events here")
	}
	// The receiver's side: take what arrives.
	stop := make(chan struct{})
	taken := make(chan int)
	go func() {
		n := 0
		for {
			select {
			case <-stop:
				taken <- n
				return
			case <-e.Ready():
				n += len(e.Take().Exited)
			}
		}
	}()
	b.ResetTimer()
	r := proceventstest.Storm(b, 200, 10*time.Second)
	b.StopTimer()
	close(stop)
	exits := <-taken
	r.Report(b)
	b.Logf("%d processes in %v (%s); discovery CPU %v, the storm's own %v; %d exits seen",
		r.Processes, r.Wall.Round(time.Millisecond), e.Mechanism(), r.CPU, r.StormCPU, exits)
}
