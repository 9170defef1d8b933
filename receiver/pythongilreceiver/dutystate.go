package pythongilreceiver

import (
	"time"

	"github.com/otelcol-ai/otelcol-ai/internal/attention"
	"github.com/otelcol-ai/otelcol-ai/receiver/pythongilreceiver/internal/gil"
)

// dutyLibraries are the probed libraries with their live processes, each
// attended when one of them is in reg.
func (st *runState) dutyLibraries(reg *attention.Registry, now time.Time) []dutyLibrary {
	out := make([]dutyLibrary, 0, len(st.libraries))
	for _, l := range st.libraries {
		dl := dutyLibrary{lib: l.lib, pids: make([]uint32, 0, len(l.pids))}
		for pid := range l.pids {
			p, ok := st.processes[pid]
			if !ok || p.exited {
				continue
			}
			dl.pids = append(dl.pids, pid)
			id := p.res.Identity()
			id.PID = int(pid) // also where the process could not be inspected
			dl.attended = dl.attended || reg.Attended(attention.ProcessOf(id), now)
		}
		out = append(out, dl)
	}
	return out
}

// setSampling gives every probed process its library's ratio.
func (st *runState) setSampling(d *dutyCycle) {
	for _, l := range st.libraries {
		r := d.ratioOf(l.lib)
		for pid := range l.pids {
			if p, ok := st.processes[pid]; ok {
				p.sampling, p.lib = r, l.lib
			}
		}
	}
}

// attendedProcesses counts the live processes of the files d's plan
// favours.
func (st *runState) attendedProcesses(d *dutyCycle) int64 {
	var n int64
	for _, l := range st.libraries {
		if !d.plan.attended[l.lib] {
			continue
		}
		for pid := range l.pids {
			if p, ok := st.processes[pid]; ok && !p.exited {
				n++
			}
		}
	}
	return n
}

// samplingOf is the share of p's sampled windows the probes keep.
func (st *runState) samplingOf(p *process) float64 {
	if p.sampling > 0 {
		return p.sampling
	}
	return st.sampling
}

// samplingAt is the share of p's sampled windows the probes keep for an
// event that ended at end (CLOCK_MONOTONIC ns): its duty-cycle phase's
// (phaseLog), or the process's ratio of the moment where no phase is
// known.
func (st *runState) samplingAt(p *process, end int64) float64 {
	if st.phases != nil && p.lib != nil {
		if r, ok := st.phases.weight(p.lib, time.Duration(end)); ok {
			return r
		}
	}
	return st.samplingOf(p)
}

// withoutFutex is opts with waits from the uprobes.
func withoutFutex(opts gil.Options) gil.Options {
	opts.Futex = false
	return opts
}

// keptRatio is the share of kind's windows and short-window totals that
// reach the receiver while the duty cycle attaches the uprobes for
// sampling of the time. With wait_source futex the tracepoints stay
// attached: every wait that blocked, and every forced switch seen, is
// kept (1), however long the uprobes were detached; the rest is sampled.
func keptRatio(cfg *Config, kind gil.Kind, sampling float64) float64 {
	if cfg.WaitSource == waitSourceFutex && (kind == gil.KindWait || kind == gil.KindSwitch) {
		return 1
	}
	return sampling
}
