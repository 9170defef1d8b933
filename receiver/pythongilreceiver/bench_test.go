package pythongilreceiver

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component/componenttest"

	"github.com/otelcol-ai/otelcol-ai/receiver/pythongilreceiver/internal/gil"
	"github.com/otelcol-ai/otelcol-ai/receiver/pythongilreceiver/internal/workloadtest"
)

// churnResult is what gilwork.py churn reports.
type churnResult struct {
	Calls    int     `json:"calls"`
	Elapsed  float64 `json:"elapsed_s"`
	Busy     float64 `json:"busy_s"`
	Sys      float64 `json:"sys_s"`
	Sampling float64 `json:"-"`
}

// churn runs a hashlib churn workload at rate (0: flat out) for n calls,
// with whatever probing setup attaches it to the process, three times, and
// keeps the fastest run: the machine is shared, and noise only slows.
func churn(b *testing.B, lib privateLib, rate, n int, setup func(pid int) func()) churnResult {
	b.Helper()
	best := churnOnce(b, lib, rate, n, setup)
	for range 2 {
		if r := churnOnce(b, lib, rate, n, setup); r.Busy < best.Busy {
			best = r
		}
	}
	return best
}

func churnOnce(b *testing.B, lib privateLib, rate, n int, setup func(pid int) func()) churnResult {
	b.Helper()
	w := lib.churn(b, rate, n)
	done := func() {}
	if setup != nil {
		done = setup(w.PID)
	}
	var res churnResult
	w.Run(&res)
	done()
	w.Wait()
	return res
}

// loadAttached loads the BPF programs with opts and attaches them to the
// libpython that pid maps.
func loadAttached(b *testing.B, opts gil.Options, pid int) *gil.Probe {
	b.Helper()
	p, err := gil.Load(opts)
	if err != nil {
		b.Fatal(err)
	}
	path, err := workloadtest.LibPython(pid)
	if err != nil {
		b.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if _, err := p.Attach(f); err != nil {
		b.Fatal(err)
	}
	return p
}

// bareProbes attaches count-only programs at the points opts selects.
func bareProbes(b *testing.B, opts gil.Options) func(pid int) func() {
	return func(pid int) func() {
		opts.Bare = true
		p := loadAttached(b, opts, pid)
		return func() { _ = p.Close() }
	}
}

// probeReport is what the receiver's probes said when a run ended.
type probeReport struct {
	sampling float64
	counters gil.Counters
}

// withReceiver runs the receiver, selecting the workload's pid. A nil
// mutate keeps every default but the pid selection.
func withReceiver(b *testing.B, mutate func(*Config), report *probeReport) func(pid int) func() {
	return func(pid int) func() {
		cfg := createDefaultConfig().(*Config)
		cfg.Include.PIDs = []int{pid}
		if mutate != nil {
			// Discovery reads every process's maps: often enough to
			// attach quickly, not so often that it competes with the
			// workload.
			cfg.DiscoveryInterval = 500 * time.Millisecond
			mutate(cfg)
		}
		h := startReceiver(b, cfg, componenttest.NewNopHost())
		h.waitAttached(pid)
		return func() {
			h.core.stateMu.Lock()
			if h.core.state != nil && report != nil {
				report.sampling = h.core.state.sampling
				c, err := h.core.state.probe.Counters()
				if err != nil {
					b.Error(err)
				}
				report.counters = c
			}
			h.core.stateMu.Unlock()
			h.stop()
		}
	}
}

// BenchmarkOverhead times one GIL-churning workload (hashlib on 4 KB
// buffers, one GIL release per call) flat out (about 400k releases a second
// here) and paced at 20k releases a second: unprobed, under count-only
// probes, under the receiver without a budget, and under the receiver at
// its default settings (budget 2%, period 10s; defaultBudgetRuns). It
// reports the cost per release cycle, the slowdowns and the kernel-side
// drop counters.
//
//	go test -run '^$' -bench Overhead -benchtime 1x ./receiver/pythongilreceiver/
func BenchmarkOverhead(b *testing.B) {
	if p, err := gil.Load(gil.Options{}); errors.Is(err, gil.ErrUnavailable) {
		b.Skipf("eBPF unavailable: %v", err)
	} else if err == nil {
		_ = p.Close()
	}
	const flatN, pacedN, pacedRate = 200_000, 40_000, 20_000
	lib, twinLib := newPrivateLib(b), newPrivateLib(b)
	noBudget := func(c *Config) { c.Overhead.Budget = 0 }
	for b.Loop() {
		none := churn(b, lib, 0, flatN, nil)
		bare2 := churn(b, lib, 0, flatN, bareProbes(b, gil.Options{}))
		bareAll := churn(b, lib, 0, flatN, bareProbes(b, gil.Options{SwitchProbes: true, GC: true}))
		var recvRep probeReport
		recv := churn(b, lib, 0, flatN, withReceiver(b, noBudget, &recvRep))
		// Hits per release cycle under the receiver (churn keeps the
		// report of its last run).
		recvHitsPerCycle := float64(recvRep.counters.Hits) / float64(flatN)

		// CPU time of the hashing thread: uprobe traps are system time in
		// the probed thread, and CPU time does not grow with other load.
		perCycle := func(r churnResult) float64 { return (r.Busy - none.Busy) / float64(flatN) * 1e9 }
		b.Logf("flat out, %d releases: unprobed %.3fs CPU (%.0f releases per CPU second)", flatN, none.Busy, float64(flatN)/none.Busy)
		b.Logf("  system time unprobed %.3fs, receiver without budget %.3fs", none.Sys, recv.Sys)
		for _, row := range []struct {
			name string
			r    churnResult
		}{
			{"bare probes, SaveThread+RestoreThread (+return)", bare2},
			{"bare probes, the receiver's points and returns", bareAll},
			{"receiver, no budget", recv},
		} {
			b.Logf("  %-48s %.3fs  slowdown %5.1f%%  cost/cycle %6.0f ns", row.name, row.r.Busy, (row.r.Busy/none.Busy-1)*100, perCycle(row.r))
		}
		b.Logf("  receiver cost per cycle / same-points bare = %.2f; %.2f hits per cycle", perCycle(recv)/perCycle(bareAll), recvHitsPerCycle)

		pacedNone := churn(b, lib, pacedRate, pacedN, nil)
		pacedRecv := churn(b, lib, pacedRate, pacedN, withReceiver(b, noBudget, nil))
		// Slowdown at a paced rate: the extra CPU per second of running.
		b.Logf("paced at %d releases/s for %.1fs: receiver without budget costs %.1f%% of a CPU",
			pacedRate, pacedNone.Elapsed, (pacedRecv.Busy-pacedNone.Busy)/pacedRecv.Elapsed*100)

		// The receiver at its default settings.
		costPerHit := perCycle(recv) / recvHitsPerCycle
		flatSlow, pacedSlow, flatKernel, flatAA := defaultBudgetRuns(b, lib, twinLib, costPerHit)

		b.ReportMetric(perCycle(bareAll), "bare-ns/cycle")
		b.ReportMetric(perCycle(recv), "receiver-ns/cycle")
		b.ReportMetric(flatSlow, "default-flat-slowdown-%")
		b.ReportMetric(pacedSlow, "default-20k/s-slowdown-%")
		b.ReportMetric(flatKernel, "default-flat-kernel-%cpu")
		b.ReportMetric(flatAA, "default-flat-unprobed-pair-%")
	}
}

// BenchmarkDefaultBudget is the default-budget half of BenchmarkOverhead
// alone: the slowdown of the hashing workload under the receiver at its
// default settings, flat out (about 400k releases a second here) and paced
// at 20k releases a second, each beside an unprobed twin running at the
// same time. The probes' cost is also given as hits times the configured
// cost_per_hit.
//
//	go test -run '^$' -bench DefaultBudget -benchtime 1x ./receiver/pythongilreceiver/
func BenchmarkDefaultBudget(b *testing.B) {
	if p, err := gil.Load(gil.Options{}); errors.Is(err, gil.ErrUnavailable) {
		b.Skipf("eBPF unavailable: %v", err)
	} else if err == nil {
		_ = p.Close()
	}
	lib, twinLib := newPrivateLib(b), newPrivateLib(b)
	costPerHit := float64(createDefaultConfig().(*Config).Overhead.CostPerHit.Nanoseconds())
	for b.Loop() {
		flatSlow, pacedSlow, flatKernel, flatAA := defaultBudgetRuns(b, lib, twinLib, costPerHit)
		b.ReportMetric(flatSlow, "default-flat-slowdown-%")
		b.ReportMetric(pacedSlow, "default-20k/s-slowdown-%")
		b.ReportMetric(flatKernel, "default-flat-kernel-%cpu")
		b.ReportMetric(flatAA, "default-flat-unprobed-pair-%")
	}
}

// defaultBudgetRuns runs the workload under the receiver at its default
// settings beside an unprobed twin, flat out and paced at 20k releases a
// second, and returns the slowdowns (flat: extra CPU time over the twin's,
// in %; paced: extra CPU time per wall second, in % of a CPU) and, flat
// out, the probes' kernel time in % of a CPU, and how far two unprobed
// twins run at once differ (aa, in %: the noise the flat slowdown lies
// in; -4.7% to +3.8% in three pairs on a 2-vCPU VM, where the flat
// slowdown read -10.3% to +11.6% in five runs). Each run is 3M releases flat out
// (about 7.5 s of CPU unprobed, longer on a shared host: a wall-clock
// period of 10 s or more) and 15 s paced, so that both end well inside
// the workload's 2-minute limit on a loaded host; the duty cycle makes its
// first estimate after 50 ms and is in its steady state from the first
// detached phase on.
func defaultBudgetRuns(b *testing.B, lib, twinLib privateLib, costPerHit float64) (flatSlow, pacedSlow, flatKernel, aa float64) {
	b.Helper()
	const longFlatN, longPacedN, pacedRate = 3_000_000, 300_000, 20_000
	var flatRep, pacedRep probeReport
	aa = unprobedPair(b, lib, twinLib, longFlatN)
	b.Logf("two unprobed twins at once, flat out, %d releases each: the first's CPU time in the calls %+.2f%% over the other's (the noise of the slowdown below)", longFlatN, aa)
	longNone, longBudget := pair(b, lib, twinLib, 0, longFlatN, &flatRep)
	flatSlow = (longBudget.Busy/longNone.Busy - 1) * 100
	b.Logf("defaults (budget 2%%, period 10s, cost_per_hit 1us), flat out, %d releases (%.0f/s unprobed, %.1fs): slowdown %.2f%% (sampling ratio %.3f)",
		longFlatN, float64(longFlatN)/longNone.Elapsed, longNone.Elapsed, flatSlow, flatRep.sampling)
	// The same from the probes' side: hits times the cost per hit (hits
	// of every process mapping the file).
	b.Logf("  kernel counters: %s; hits x %.0f ns = %.2f%% of the run", countersLine(flatRep.counters), costPerHit,
		float64(flatRep.counters.Hits)*costPerHit/1e9/longBudget.Elapsed*100)
	// Uprobe traps are system time in the probed thread, and hashing
	// makes no system calls: the extra system time is what the probes
	// cost in the kernel, under the host's load at the time. The budget
	// is a share of one CPU (per wall second); the slowdown is relative
	// to what CPU the workload got, which on a loaded host is less than
	// one.
	flatKernel = (longBudget.Sys - longNone.Sys) / longBudget.Elapsed * 100
	b.Logf("  system time: probed %.3fs, twin %.3fs: the probes' kernel time is %.2f%% of a CPU (the budget's measure), %.2f%% of the workload's own CPU time (%.2f CPUs)",
		longBudget.Sys, longNone.Sys, flatKernel, (longBudget.Sys-longNone.Sys)/longBudget.Busy*100, longBudget.Busy/longBudget.Elapsed)

	longPacedNone, longPacedBudget := pair(b, lib, twinLib, pacedRate, longPacedN, &pacedRep)
	pacedSlow = (longPacedBudget.Busy - longPacedNone.Busy) / longPacedBudget.Elapsed * 100
	b.Logf("defaults, paced at %d releases/s for %.1fs: the receiver costs %.2f%% of a CPU (sampling ratio %.3f)",
		pacedRate, longPacedNone.Elapsed, pacedSlow, pacedRep.sampling)
	b.Logf("  kernel counters: %s; hits x %.0f ns = %.2f%% of the run", countersLine(pacedRep.counters), costPerHit,
		float64(pacedRep.counters.Hits)*costPerHit/1e9/longPacedBudget.Elapsed*100)
	// No system-time figure here: a paced workload sleeps between calls,
	// and how much of that is system time differs between the two runs
	// (a quiet host saw 0.08 s probed, 10.3 s twin), so the difference
	// is not the probes' kernel time; the CPU-time figure above is.
	return flatSlow, pacedSlow, flatKernel, aa
}

// unprobedPair runs the workload flat out on both copies at once, neither
// probed, and returns how far the first copy's CPU time in the calls is
// over the second's, in %: pair's measure with nothing to measure.
func unprobedPair(b *testing.B, lib, twinLib privateLib, n int) float64 {
	b.Helper()
	x, y := twinLib.churn(b, 0, n), lib.churn(b, 0, n)
	rx, ry := together(x, y)
	x.Wait()
	y.Wait()
	return (ry.Busy/rx.Busy - 1) * 100
}

// together runs two started workloads at once and returns their results.
func together(x, y *workloadtest.Process) (rx, ry churnResult) {
	var wg sync.WaitGroup
	wg.Go(func() { x.Run(&rx) })
	y.Run(&ry)
	wg.Wait()
	return rx, ry
}

// privateLib is the environment of workloads that load a copy of the
// interpreter's libpython in a directory of its own
// (workloadtest.PrivateLibPython): they run the same code from a file that
// only this benchmark's probes attach to: the host is shared, and another
// receiver's uprobes on the interpreter's own libpython fire in every
// process that maps it.
type privateLib []string

func newPrivateLib(b *testing.B) privateLib { return workloadtest.PrivateLibPython(b) }

// churn starts gilwork.py churn on the copy.
func (pl privateLib) churn(b *testing.B, rate, n int) *workloadtest.Process {
	b.Helper()
	return workloadtest.Churn(b, pl, rate, n)
}

// pair runs the workload twice at once, on two private copies: one under
// the receiver at its default settings, one unprobed, so that both see the
// same load from the rest of the host; report gets the receiver's report.
func pair(b *testing.B, probedLib, twinLib privateLib, rate, n int, report *probeReport) (none, probed churnResult) {
	b.Helper()
	unprobed := twinLib.churn(b, rate, n)
	w := probedLib.churn(b, rate, n)
	done := withReceiver(b, nil, report)(w.PID)
	none, probed = together(unprobed, w)
	done()
	unprobed.Wait()
	w.Wait()
	return none, probed
}

func countersLine(c gil.Counters) string {
	return fmt.Sprintf("hits %d, dropped: ring_buffer_full %d, aggregate_map_full %d, stale %d", c.Hits, c.RingBufferFull, c.AggregateMapFull, c.Stale)
}
