package attention

import (
	"sync"
	"testing"
	"time"
)

var t0 = time.Unix(1_700_000_000, 0)

func TestAttendedWithinTTL(t *testing.T) {
	r := New(16, time.Minute)
	r.MarkProcess(100, 555, t0)
	r.MarkPod("pod-a", t0)
	for _, tc := range []struct {
		name string
		p    Process
		at   time.Time
		want bool
	}{
		{"marked process", Process{PID: 100, StartTicks: 555}, t0.Add(59 * time.Second), true},
		{"marked process, start unknown", Process{PID: 100}, t0, true},
		{"expired", Process{PID: 100, StartTicks: 555}, t0.Add(61 * time.Second), false},
		{"pid reused by another process", Process{PID: 100, StartTicks: 999}, t0, false},
		{"other process", Process{PID: 101}, t0, false},
		{"other process in a marked pod", Process{PID: 101, PodUID: "pod-a"}, t0.Add(30 * time.Second), true},
		{"pod expired", Process{PID: 101, PodUID: "pod-a"}, t0.Add(2 * time.Minute), false},
		{"other pod", Process{PID: 101, PodUID: "pod-b"}, t0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := r.Attended(tc.p, tc.at); got != tc.want {
				t.Errorf("Attended(%+v) at +%s = %v, want %v", tc.p, tc.at.Sub(t0), got, tc.want)
			}
		})
	}
}

func TestMarkKeepsNewestAndStartTicks(t *testing.T) {
	r := New(16, time.Minute)
	r.MarkProcess(7, 42, t0.Add(50*time.Second))
	// A late mark (an older pause indexed after) does not shorten it.
	r.MarkProcess(7, 42, t0)
	// A mark that does not know the start keeps the recorded one.
	r.MarkProcess(7, 0, t0.Add(10*time.Second))
	if !r.Attended(Process{PID: 7, StartTicks: 42}, t0.Add(100*time.Second)) {
		t.Error("the newest mark (+50 s) should last until +110 s")
	}
	if r.Attended(Process{PID: 7, StartTicks: 43}, t0.Add(60*time.Second)) {
		t.Error("start ticks 42 kept: another process under pid 7 is not attended")
	}
	// The pid reused: the new process's mark replaces the old one.
	r.MarkProcess(7, 43, t0.Add(60*time.Second))
	if r.Attended(Process{PID: 7, StartTicks: 42}, t0.Add(61*time.Second)) || !r.Attended(Process{PID: 7, StartTicks: 43}, t0.Add(61*time.Second)) {
		t.Error("after a mark with new start ticks only the new process is attended")
	}
	r.MarkProcess(0, 0, t0)
	r.MarkProcess(-3, 0, t0)
	r.MarkPod("", t0)
	if s := r.Stats(); s.Processes != 1 || s.Pods != 0 {
		t.Errorf("stats %+v: want only pid 7 (pid <= 0 and an empty pod ignored)", s)
	}
}

func TestCapRefusesUntilSwept(t *testing.T) {
	r := New(4, time.Minute)
	for pid := 1; pid <= 4; pid++ {
		r.MarkProcess(pid, 0, t0)
	}
	r.MarkProcess(5, 0, t0.Add(time.Second))
	if r.Attended(Process{PID: 5}, t0.Add(time.Second)) {
		t.Error("pid 5 recorded in a full registry")
	}
	// Known keys are still refreshed when full.
	r.MarkProcess(2, 0, t0.Add(50*time.Second))
	if s := r.Stats(); s.Processes != 4 || s.Refused != 1 {
		t.Errorf("stats %+v, want 4 processes, 1 refused", s)
	}
	// Once the others expired, a sweep makes room.
	r.MarkProcess(6, 0, t0.Add(70*time.Second))
	if !r.Attended(Process{PID: 6}, t0.Add(70*time.Second)) || !r.Attended(Process{PID: 2}, t0.Add(70*time.Second)) {
		t.Error("after the sweep pid 6 should be recorded and pid 2 kept")
	}
	if s := r.Stats(); s.Processes != 2 {
		t.Errorf("stats %+v, want pids 2 and 6 after the sweep", s)
	}
	for i := range 10 {
		r.MarkPod(string(rune('a'+i)), t0.Add(70*time.Second))
	}
	if s := r.Stats(); s.Pods != 4 || s.Refused != 7 {
		t.Errorf("stats %+v, want 4 pods and 1+6 refused", s)
	}
}

// A flood of distinct keys into a full registry sweeps at most once per
// quarter TTL, not once per key.
func TestFullRegistrySweepsRarely(t *testing.T) {
	r := New(2, time.Minute)
	r.MarkProcess(1, 0, t0)
	r.MarkProcess(2, 0, t0)
	r.MarkProcess(3, 0, t0) // sweeps (nothing expired), refused
	swept := r.sweptAt
	for pid := 4; pid < 1000; pid++ {
		r.MarkProcess(pid, 0, t0.Add(time.Duration(pid)*time.Millisecond))
	}
	if r.sweptAt != swept {
		t.Errorf("swept again within a quarter TTL")
	}
}

func TestConcurrentMarksAndQueries(t *testing.T) {
	r := New(64, time.Minute)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 2000 {
				pid := 1 + (g*2000+i)%100
				r.MarkProcess(pid, uint64(pid), t0.Add(time.Duration(i)*time.Millisecond))
				r.MarkPod("pod", t0)
				r.Attended(Process{PID: pid, StartTicks: uint64(pid)}, t0)
			}
		})
	}
	wg.Wait()
	s := r.Stats()
	if s.Processes != 64 || s.Pods != 1 || s.Refused == 0 {
		t.Errorf("stats %+v: want the cap (64) reached, one pod, the other pids refused", s)
	}
	for pid := 1; pid <= 100; pid++ {
		_, held := r.procs[pid]
		if got := r.Attended(Process{PID: pid, StartTicks: uint64(pid)}, t0.Add(time.Second)); got != held {
			t.Errorf("pid %d: Attended %v, recorded %v", pid, got, held)
		}
	}
}

func TestMarkDoesNotAllocate(t *testing.T) {
	r := New(16, time.Minute)
	r.MarkProcess(9, 1, t0)
	r.MarkPod("pod-a", t0)
	pod := "pod-a"
	n := testing.AllocsPerRun(100, func() {
		r.MarkProcess(9, 1, t0)
		r.MarkPod(pod, t0)
		r.Attended(Process{PID: 9, StartTicks: 1, PodUID: pod}, t0)
	})
	if n != 0 {
		t.Errorf("marking known keys allocates %v times a run", n)
	}
}
