package procresource

import (
	"errors"
	"os"
	"os/exec"
	"testing"
	"time"
)

// A child that has exited and is not yet reaped keeps its stat, start time
// included: Liveness says it has exited, StartTicks alone cannot.
func TestLivenessOfAZombie(t *testing.T) {
	cmd := exec.Command("sleep", "0.2")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	r := NewReader("/proc", 0)
	start, exited, err := r.Liveness(pid)
	if err != nil || exited {
		t.Fatalf("Liveness of a running child: start %d, exited %v, err %v", start, exited, err)
	}
	want, err := r.StartTicks(pid)
	if err != nil || want != start {
		t.Fatalf("StartTicks %d (%v), Liveness start %d", want, err, start)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		s, exited, err := r.Liveness(pid)
		if err != nil {
			t.Fatalf("Liveness of the unreaped child: %v", err)
		}
		if s != start {
			t.Fatalf("start changed: %d, was %d", s, start)
		}
		if exited {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the child never showed as exited")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if st, err := r.StartTicks(pid); err != nil || st != start {
		t.Errorf("StartTicks of the zombie: %d, %v (it keeps its entry until reaped)", st, err)
	}
	_ = cmd.Wait()
	if _, _, err := r.Liveness(pid); !errors.Is(err, ErrNoProcess) {
		t.Errorf("Liveness after the reap: got %v, want ErrNoProcess", err)
	}
}

// BenchmarkLiveness is the cost of the liveness check every cache hit and
// every receiver's Alive makes: one read of /proc/<pid>/stat.
func BenchmarkLiveness(b *testing.B) {
	r := NewReader(DefaultProcRoot, 0)
	pid := os.Getpid()
	b.ReportAllocs()
	for b.Loop() {
		if _, exited, err := r.Liveness(pid); err != nil || exited {
			b.Fatal(err)
		}
	}
}
