package pythongilreceiver

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/otelcol-ai/otelcol-ai/receiver/pythongilreceiver/internal/gil"
)

// probes loads the full BPF programs with opts, attaches them to the
// workload's libpython and drains the ring buffer until the returned func
// closes it all.
func probes(b *testing.B, opts gil.Options, stats *progStats) func(pid int) func() {
	return func(pid int) func() {
		p := loadAttached(b, opts, pid)
		done := make(chan struct{})
		go func() {
			defer close(done)
			for {
				if _, err := p.ReadEvent(); errors.Is(err, gil.ErrClosed) {
					return
				}
			}
		}()
		return func() {
			if stats != nil {
				entry, ret, err := p.ProgramStats()
				if err != nil {
					b.Error(err)
				}
				stats.entry, stats.ret = entry, ret
			}
			_ = p.Close()
			<-done
		}
	}
}

// progStats are the kernel's run counts and times of the BPF programs.
type progStats struct{ entry, ret gil.ProgramStats }

func (s progStats) String() string {
	per := func(p gil.ProgramStats) float64 {
		if p.Runs == 0 {
			return 0
		}
		return float64(p.RunTime) / float64(p.Runs)
	}
	return fmt.Sprintf("entry program %d runs x %.0f ns, return program %d runs x %.0f ns", s.entry.Runs, per(s.entry), s.ret.Runs, per(s.ret))
}

// BenchmarkReleaseCycle measures what one GIL release cycle (a hashlib
// call on 4 KB: release, run without the GIL, take it back) costs under
// each probe set, as the extra CPU time of the hashing thread over an
// unprobed run of the same workload in the same benchmark run. The floor
// is measured first: a count-only uprobe on PyEval_SaveThread alone, one
// hit per cycle, is what any uprobe costs on this machine.
//
//	go test -run '^$' -bench ReleaseCycle -benchtime 1x ./receiver/pythongilreceiver/
func BenchmarkReleaseCycle(b *testing.B) {
	if p, err := gil.Load(gil.Options{}); errors.Is(err, gil.ErrUnavailable) {
		b.Skipf("eBPF unavailable: %v", err)
	} else if err == nil {
		_ = p.Close()
	}
	const n = 200_000
	// The receiver's default min_duration: shorter windows are summed in
	// the kernel, not sent.
	const minDur = 100 * time.Microsecond
	lib := newPrivateLib(b)
	// The kernel times every program run: what the BPF code itself costs,
	// apart from the trap.
	if st, err := gil.EnableProgramStats(); err != nil {
		b.Logf("no BPF program statistics: %v", err)
	} else {
		defer st.Close()
	}
	for b.Loop() {
		none := churn(b, lib, 0, n, nil)
		perCycle := func(r churnResult) float64 { return (r.Busy - none.Busy) / n * 1e9 }
		floor := perCycle(churn(b, lib, 0, n, bareProbes(b, gil.Options{Points: []string{gil.SymSaveThread}})))
		b.Logf("%d releases unprobed: %.3fs CPU; uprobe floor (one count-only hit per cycle): %.0f ns", n, none.Busy, floor)
		b.ReportMetric(floor, "floor-ns/hit")
		for _, m := range []struct {
			name, metric string
			opts         gil.Options
		}{
			{"uprobe: SaveThread, RestoreThread (+return)", "uprobe", gil.Options{MinDuration: minDur}},
			{"uprobe with take_gil/drop_gil", "uprobe-switch", gil.Options{MinDuration: minDur, SwitchProbes: true}},
			{"futex: SaveThread, RestoreThread, futex tracepoints", "futex", gil.Options{MinDuration: minDur, Futex: true}},
		} {
			bare := churn(b, lib, 0, n, bareProbes(b, m.opts))
			var st progStats
			full := churn(b, lib, 0, n, probes(b, m.opts, &st))
			b.Logf("  %-52s bare %5.0f ns/cycle (%.1f floors), probed %5.0f ns/cycle, probed/unprobed %.2fx",
				m.name, perCycle(bare), perCycle(bare)/floor, perCycle(full), full.Busy/none.Busy)
			b.Logf("    %s (last run)", st)
			b.ReportMetric(perCycle(full), m.metric+"-ns/cycle")
			b.ReportMetric(full.Busy/none.Busy, m.metric+"-x")
		}
	}
}
