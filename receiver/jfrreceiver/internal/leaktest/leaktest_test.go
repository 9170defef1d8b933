package leaktest

import (
	"testing"
	"time"

	"github.com/otelcol-ai/otelcol-ai/pkg/jfr/jfrtest"
)

// TestWorkloadLeaksAtItsRate: the native workload reports the leak it was
// asked for, 100 KiB and 20 references a tick, ten ticks a second.
func TestWorkloadLeaksAtItsRate(t *testing.T) {
	jdk := jfrtest.Find(t, 17)
	p := Build(t, jdk)
	j := Start(t, jdk.Java(), p, Native, 100<<10, 20, 0, []string{"-Xmx64m"})
	deadline := time.Now().Add(30 * time.Second)
	for j.Leaked().Lines < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("no report after 30 s:\n%s", j.Output())
		}
		time.Sleep(100 * time.Millisecond)
	}
	l := j.Leaked()
	ticks := l.Refs / 20
	if l.NativeBytes != ticks*100<<10 || l.DirectBytes != 0 || ticks < 20 {
		t.Errorf("leaked %+v: want %d ticks of 100 KiB and 20 references, at least 20", l, ticks)
	}
}
