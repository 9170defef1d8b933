package runtimestate

import (
	"math"
	"testing"
	"time"
)

func TestStoreBoundsAndRetention(t *testing.T) {
	s := New(Config{Retention: time.Minute, MaxProcesses: 2, MaxReadings: 3})
	t0 := time.Unix(1000, 0)
	s.now = func() time.Time { return t0.Add(90 * time.Second) }
	a, b, c := Process{1, 10}, Process{2, 20}, Process{1, 11}
	for i := range 5 {
		s.Record(a, "heap", t0.Add(time.Duration(i)*20*time.Second), int64(i))
	}
	s.Record(a, "heap", t0, 99) // older than the last: ignored
	got := s.Accounts(a, time.Time{})["heap"]
	if len(got) != 3 || got[0].Value != 2 || got[2].Value != 4 {
		t.Fatalf("readings %v, want the newest 3 (2, 3, 4)", got)
	}
	if from := s.Accounts(a, t0.Add(60*time.Second))["heap"]; len(from) != 2 || from[0].Value != 3 {
		t.Errorf("readings from 60 s: %v", from)
	}
	s.Record(b, "heap", t0.Add(80*time.Second), 1)
	s.Record(c, "heap", t0.Add(80*time.Second), 1) // a third process: the bound
	if n, dropped := s.Len(); n != 2 || dropped != 1 {
		t.Errorf("%d processes, %d dropped; want 2 and 1", n, dropped)
	}
	if len(s.Accounts(c, time.Time{})) != 0 {
		t.Error("the process past the bound was recorded (a reused pid's start time names another process)")
	}
	// Retention: at 130 s, readings before 70 s go.
	s.now = func() time.Time { return t0.Add(130 * time.Second) }
	s.Sweep()
	if got := s.Accounts(a, time.Time{})["heap"]; len(got) != 1 || got[0].At != t0.Add(80*time.Second) {
		t.Errorf("after the sweep: %v", got)
	}
	s.Assess(a, "heap", true)
	s.Assess(Process{9, 9}, "heap", true) // no readings: not kept
	if v := s.Verdicts(a); !v["heap"] || len(s.Verdicts(Process{9, 9})) != 0 {
		t.Errorf("verdicts %v", v)
	}
	s.Forget(a)
	if len(s.Verdicts(a)) != 0 {
		t.Error("verdicts kept after Forget")
	}
	s.Reset()
	if n, _ := s.Len(); n != 0 {
		t.Errorf("%d processes after Reset", n)
	}
}

func TestCorrelate(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	var gpu []Reading
	for i := range 20 {
		gpu = append(gpu, Reading{at(2 * i), int64(1<<30 + i*(8<<20))}) // +4 MiB/s
	}
	var refs, flat, sawtooth, late []Reading
	for i := range 40 {
		refs = append(refs, Reading{at(i), int64(1000 + 50*i)})
		flat = append(flat, Reading{at(i), 5000})
		sawtooth = append(sawtooth, Reading{at(i), int64(1000 + 100*(i%5))})
	}
	for i := 30; i < 40; i++ {
		late = append(late, Reading{at(i), int64(i)})
	}
	joins := Correlate(gpu, map[string][]Reading{"jni_global_refs": refs, "heap": flat, "direct_buffers": sawtooth, "metaspace": late})
	byName := map[string]Join{}
	for _, j := range joins {
		byName[j.Account] = j
	}
	if j := byName["jni_global_refs"]; j.Correlation < 0.99 || math.Abs(j.Growth-50) > 1e-9 || j.Pairs != 20 {
		t.Errorf("growing account: %+v", j)
	}
	if j := byName["heap"]; !math.IsNaN(j.Correlation) || j.Growth != 0 {
		t.Errorf("flat account: %+v (a flat side has no correlation)", j)
	}
	if j := byName["direct_buffers"]; math.Abs(j.Correlation) > 0.5 {
		t.Errorf("sawtooth account: %+v", j)
	}
	if j := byName["metaspace"]; j.Pairs != 5 || math.IsNaN(j.Correlation) {
		t.Errorf("account read from 30 s on: %+v (paired from its first reading on)", j)
	}
	if len(joins) != 4 || joins[0].Account != "direct_buffers" {
		t.Errorf("joins not one per account in name order: %+v", joins)
	}
}

// TestGPUReadingsApartFromAccounts: GPU memory is kept per process and
// device beside the accounts, never among them (the nvml join correlates
// every account with the GPU memory), bounded, swept and forgotten alike,
// and Processes lists a process with either.
func TestGPUReadingsApartFromAccounts(t *testing.T) {
	s := New(Config{Retention: time.Minute, MaxProcesses: 2, MaxReadings: 3})
	t0 := time.Unix(1000, 0)
	s.now = func() time.Time { return t0.Add(30 * time.Second) }
	jvm, other, third := Process{1, 10}, Process{2, 20}, Process{3, 30}
	s.Record(jvm, "heap", t0, 1)
	for i := range 4 {
		s.RecordGPU(jvm, "GPU-a", t0.Add(time.Duration(i)*time.Second), int64(i)<<20)
	}
	s.RecordGPU(other, "GPU-b", t0, 5<<20)
	s.RecordGPU(third, "GPU-b", t0, 5<<20) // a third process: the bound
	if got := s.GPU(jvm, time.Time{})["GPU-a"]; len(got) != 3 || got[0].Value != 1<<20 {
		t.Errorf("GPU readings %v, want the newest 3", got)
	}
	if accts := s.Accounts(jvm, time.Time{}); len(accts) != 1 || accts["GPU-a"] != nil {
		t.Errorf("accounts %v: GPU memory among them", accts)
	}
	if got := s.GPU(third, time.Time{}); len(got) != 0 {
		t.Errorf("the process past the bound was recorded: %v", got)
	}
	procs := s.Processes()
	if len(procs) != 2 {
		t.Errorf("processes %v, want the JVM and the other", procs)
	}
	s.Forget(other)
	if len(s.GPU(other, time.Time{})) != 0 {
		t.Error("a forgotten process's GPU readings stayed")
	}
	s.now = func() time.Time { return t0.Add(10 * time.Minute) }
	s.Sweep()
	if len(s.Processes()) != 0 {
		t.Errorf("after the retention: %v", s.Processes())
	}
}
