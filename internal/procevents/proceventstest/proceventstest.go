// Package proceventstest makes process storms for benchmarks: a child
// process (the test binary itself, re-executed) that starts /bin/true at a
// steady rate for a while, so that the benchmarking process's own CPU time
// (rusage, children excluded) is what it spent watching the storm.
package proceventstest // import "github.com/otelcol-ai/otelcol-ai/internal/procevents/proceventstest"

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// stormEnv carries "rate,duration" to the re-executed test binary.
const stormEnv = "OTELCOL_AI_PROCEVENTS_STORM"

// RunIfStorm turns the test binary into the storm when it was re-executed
// as one: call it first in TestMain. It does not return then.
func RunIfStorm() {
	spec, ok := os.LookupEnv(stormEnv)
	if !ok {
		return
	}
	rate, d, err := parseSpec(spec)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	fmt.Println(storm(rate, d))
	os.Exit(0)
}

func parseSpec(spec string) (int, time.Duration, error) {
	r, ds, ok := strings.Cut(spec, ",")
	rate, err := strconv.Atoi(r)
	if !ok || err != nil || rate <= 0 {
		return 0, 0, fmt.Errorf("proceventstest: bad %s %q", stormEnv, spec)
	}
	d, err := time.ParseDuration(ds)
	if err != nil {
		return 0, 0, fmt.Errorf("proceventstest: bad %s %q: %w", stormEnv, spec, err)
	}
	return rate, d, nil
}

// storm starts /bin/true rate times a second for d and returns how many
// ran.
func storm(rate int, d time.Duration) int {
	tick := time.NewTicker(time.Second / time.Duration(rate))
	defer tick.Stop()
	end := time.Now().Add(d)
	var (
		wg sync.WaitGroup
		mu sync.Mutex
		n  int
	)
	for time.Now().Before(end) {
		<-tick.C
		wg.Add(1)
		go func() {
			defer wg.Done()
			if exec.Command("/bin/true").Run() == nil {
				mu.Lock()
				n++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return n
}

// Result is what one storm cost.
type Result struct {
	// Processes is how many /bin/true ran.
	Processes int
	// Wall is how long the storm lasted.
	Wall time.Duration
	// CPU is this process's CPU time (user and system) during the storm.
	CPU time.Duration
	// StormCPU is the CPU time of the storm itself (the spawner and every
	// process it started): the reference CPU is compared to.
	StormCPU time.Duration
}

// Storm runs a storm of rate processes a second for d in a child process
// and measures this process's CPU time meanwhile.
func Storm(tb testing.TB, rate int, d time.Duration) Result {
	tb.Helper()
	exe, err := os.Executable()
	if err != nil {
		tb.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), stormEnv+"="+strconv.Itoa(rate)+","+d.String())
	before := SelfCPU()
	start := time.Now()
	out, err := cmd.Output()
	wall := time.Since(start)
	cpu := SelfCPU() - before
	if err != nil {
		tb.Fatalf("storm: %v", err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		tb.Fatalf("storm said %q", out)
	}
	var storm time.Duration
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		// The spawner's own rusage counts its waited-for children too.
		storm = tv(ru.Utime) + tv(ru.Stime)
	}
	return Result{Processes: n, Wall: wall, CPU: cpu, StormCPU: storm}
}

// SelfCPU returns this process's CPU time so far, children excluded.
func SelfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return tv(ru.Utime) + tv(ru.Stime)
}

func tv(t syscall.Timeval) time.Duration {
	return time.Duration(t.Sec)*time.Second + time.Duration(t.Usec)*time.Microsecond
}

// Report puts r on b as per-second metrics.
func (r Result) Report(b *testing.B) {
	s := r.Wall.Seconds()
	b.ReportMetric(float64(r.Processes)/s, "procs/s")
	b.ReportMetric(r.CPU.Seconds()/s*100, "%cpu")
	b.ReportMetric(float64(r.CPU.Microseconds())/float64(max(r.Processes, 1)), "cpu-µs/proc")
	if r.StormCPU > 0 {
		b.ReportMetric(r.CPU.Seconds()/r.StormCPU.Seconds(), "x-storm-cpu")
	}
}
