package procresource

import (
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"
)

func TestStatFieldsExited(t *testing.T) {
	tests := []struct {
		name string
		line string
		want bool
	}{
		{"running", "12 (java) S 1 12 12 0 -1 4194560 1 0 0 0 5 3 0 0 20 0 31 0 777 1 1", false},
		{"zombie", "12 (java) Z 1 12 12 0 -1 4194560 1 0 0 0 5 3 0 0 20 0 1 0 777 0 0", true},
		{"dead", "12 (java) X 1 12 12 0 -1 4194560 1 0 0 0 5 3 0 0 20 0 0 0 777 0 0", true},
		// The leader called pthread_exit: a zombie leader whose process runs.
		{"zombie leader, threads left", "12 (java) Z 1 12 12 0 -1 4194560 1 0 0 0 5 3 0 0 20 0 4 0 777 0 0", false},
		{"parentheses in comm", "12 (a) Z (b) S 1 12 12 0 -1 4194560 1 0 0 0 5 3 0 0 20 0 2 0 777 1 1", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := parseStatFields([]byte(tt.line))
			if err != nil {
				t.Fatalf("parseStatFields(%q): %v", tt.line, err)
			}
			if f.start != 777 {
				t.Errorf("start: got %d, want 777", f.start)
			}
			if got := f.exited(); got != tt.want {
				t.Errorf("exited() of %q: got %v, want %v", tt.line, got, tt.want)
			}
		})
	}
	for _, bad := range []string{"12 (x) SS 1", "12 (x) S 1 1 1 0 -1 4 1 0 0 0 5 3 0 0 20 0 many 0 777"} {
		if _, err := parseStatFields([]byte(bad)); err == nil {
			t.Errorf("parseStatFields(%q): no error", bad)
		}
	}
}

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

func FuzzParseStatFields(f *testing.F) {
	f.Add([]byte("1 (init) S 0 1 1 0 -1 4194560 1 0 0 0 7 3 0 0 20 0 1 0 5 1 1 1\n"))
	f.Add([]byte("2 (a) Z) c) Z 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20"))
	f.Add([]byte(")"))
	f.Fuzz(func(t *testing.T, stat []byte) {
		fields, err := parseStatFields(stat)
		if err != nil {
			return
		}
		start, err := parseStartTicks(stat)
		if err != nil || start != fields.start {
			t.Errorf("parseStartTicks(%q) = %d, %v; parseStatFields start %d", stat, start, err, fields.start)
		}
		if !strings.Contains(string(stat), string(fields.comm)) {
			t.Errorf("comm %q not in %q", fields.comm, stat)
		}
	})
}
