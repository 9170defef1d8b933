package discovery

import (
	"errors"
	"os"
	"os/exec"
	"slices"
	"testing"
	"time"

	"go.uber.org/goleak"
	"go.uber.org/zap"

	"github.com/otelcol-ai/otelcol-ai/internal/procdiscovery/procdiscoverytest"
	"github.com/otelcol-ai/otelcol-ai/internal/procevents"
	"github.com/otelcol-ai/otelcol-ai/internal/procevents/proceventstest"
	"github.com/otelcol-ai/otelcol-ai/pkg/jfr/jfrtest"
)

func TestMain(m *testing.M) {
	proceventstest.RunIfStorm()
	goleak.VerifyTestMain(m)
}

// TestEventsWithoutInotify: where no inotify instance can be had (a
// node's fs.inotify.max_user_instances, shared by every container of a
// user, is used up), a JVM found at its exec is announced again every
// 250 ms, so that its repository is found when it makes it, and its exit
// is reported, so that its last chunks are read. A real JVM of 2 s.
func TestEventsWithoutInotify(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("process events need root")
	}
	defer func(f func() (*Watch, error)) { newWatch = f }(newWatch)
	newWatch = func() (*Watch, error) { return nil, errors.New("inotify_init1: too many open files (test)") }
	e := NewEvents("/proc", zap.NewNop(), nil)
	defer e.Close()
	if e.Mechanism() == procevents.MechanismNone {
		if os.Getenv("CI") != "" {
			t.Fatal("no process events in CI")
		}
		t.Skip("no process events here")
	}
	j := jfrtest.Find(t, 17)
	src, _, err := jfrtest.Workload()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(j.Java(), "-Xmx64m", src, "2000")
	cmd.Dir = t.TempDir()
	started := time.Now()
	exited := jfrtest.Start(t, cmd)
	pid := cmd.Process.Pid
	var announced []time.Duration
	gotExit, jvmDone := false, false
	for deadline := time.After(60 * time.Second); !gotExit; {
		select {
		case <-e.Ready():
			a := e.Take()
			for _, jvm := range a.JVMs {
				if jvm.PID == pid {
					announced = append(announced, time.Since(started))
				}
			}
			gotExit = slices.Contains(a.Exited, pid)
		case err := <-exited:
			if err != nil {
				t.Fatalf("the JVM: %v", err)
			}
			jvmDone = true
			exited = nil
		case <-deadline:
			t.Fatalf("no exit reported for pid %d (JVM exited: %v); announced at %v", pid, jvmDone, announced)
		}
	}
	// At its exec, then every 250 ms while it ran (2 s of work and its
	// start): a handful at least.
	if len(announced) < 4 {
		t.Fatalf("pid %d announced %d times (%v), want its exec and a recheck every 250 ms", pid, len(announced), announced)
	}
	t.Logf("pid %d announced %d times, the first %v after its start; exit reported", pid, len(announced), announced[0].Round(time.Millisecond))
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
	procdiscoverytest.Storm(b, e.Mechanism(), e.Ready(), func() int { return len(e.Take().Exited) })
}
