package discovery

import (
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"
	"go.uber.org/zap"

	"github.com/otelcol-ai/otelcol-ai/internal/procevents"
	"github.com/otelcol-ai/otelcol-ai/internal/procevents/proceventstest"
)

func TestMain(m *testing.M) {
	proceventstest.RunIfStorm()
	goleak.VerifyTestMain(m)
}

// BenchmarkEventsExecStorm is the CPU JVM discovery costs the collector
// under a storm of 200 short-lived processes a second for 10 s: the
// process events, each exec's command name checked, against the storm's
// own CPU (x-storm-cpu). It runs once, whatever b.N.
func BenchmarkEventsExecStorm(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("process events need root")
	}
	e := NewEvents("/proc", zap.NewNop(), nil)
	defer e.Close()
	if e.Mechanism() == procevents.MechanismNone {
		b.Skip("no process events here")
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-e.Ready():
				e.Take()
			}
		}
	}()
	b.ResetTimer()
	r := proceventstest.Storm(b, 200, 10*time.Second)
	b.StopTimer()
	close(stop)
	<-done
	r.Report(b)
	b.Logf("%d processes in %v (%s); discovery CPU %v, the storm's own %v",
		r.Processes, r.Wall.Round(time.Millisecond), e.Mechanism(), r.CPU, r.StormCPU)
}
