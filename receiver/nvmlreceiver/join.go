package nvmlreceiver

import (
	"math"
	"time"

	"github.com/otelcol-ai/otelcol-ai/internal/runtimestate"
	"github.com/otelcol-ai/otelcol-ai/receiver/nvmlreceiver/internal/metadata"
)

// jvmJoin sets a process's JVM memory accounts, as the jfr receiver shares
// them through the runtimestate extension (leak_detection::runtime_state),
// against its GPU memory on a device over the leak window: the accounts
// that grew with it (correlated at least join_min_correlation, and
// suspected of leaking by the jfr receiver's own detection), each
// assessed account's correlation, and how the leak joins them
// (metadata.yaml's gpu.memory.leak.jvm_join). The process is named by pid
// and start time, as the jfr receiver names its JVMs, so a pid reused by
// another process joins nothing.
func (r *nvmlReceiver) jvmJoin(pid uint32, key leakKey) (metadata.AttributeJvmJoin, []any, map[string]any) {
	st := &r.scr
	none := func() (metadata.AttributeJvmJoin, []any, map[string]any) {
		return metadata.AttributeJvmJoinNoAccounts, []any{}, map[string]any{}
	}
	if st.runtime == nil || st.procs == nil || st.leaks == nil {
		return none()
	}
	proc, err := st.procs.Get(int(pid))
	if err != nil {
		return none()
	}
	var gpu []runtimestate.Reading
	st.leaks.Readings(key, func(at time.Time, v int64) { gpu = append(gpu, runtimestate.Reading{At: at, Value: v}) })
	if len(gpu) == 0 {
		return none()
	}
	p := runtimestate.ProcessOf(proc.Identity())
	accounts, verdicts := st.runtime.Accounts(p, gpu[0].At), st.runtime.Verdicts(p)
	growing, correlations, assessed := []any{}, map[string]any{}, false
	for _, j := range runtimestate.Correlate(gpu, accounts) {
		suspected, judged := verdicts[j.Account]
		if j.Pairs < runtimestate.MinPairs || !judged {
			continue // too few readings, or not assessed by the jfr receiver yet
		}
		assessed = true
		if math.IsNaN(j.Correlation) {
			continue
		}
		correlations[j.Account] = math.Round(j.Correlation*1000) / 1000
		// Growing is the jfr receiver's own leak verdict on the account,
		// by its thresholds: a JVM's allocator drifting up a few MiB while
		// it warms up correlates with a ramp, and is not a leak.
		if j.Correlation >= r.cfg.LeakDetection.JoinMinCorrelation && j.Growth > 0 && suspected {
			growing = append(growing, j.Account)
		}
	}
	switch {
	case len(growing) > 0:
		return metadata.AttributeJvmJoinJoined, growing, correlations
	case assessed:
		return metadata.AttributeJvmJoinNone, growing, correlations
	}
	return none()
}

// shareGPUMemory records a process's memory on one GPU in the runtimestate
// extension (leak_detection::runtime_state), where the timeline draws it on
// the process's lane. The process is named by pid and start time, so only
// where NVML's pids are this proc root's (procPIDsMatchNVML).
func (r *nvmlReceiver) shareGPUMemory(pid uint32, device string, at time.Time, bytes int64) {
	st := &r.scr
	if st.runtime == nil || st.procs == nil {
		return
	}
	proc, err := st.procs.Get(int(pid))
	if err != nil {
		return
	}
	st.runtime.RecordGPU(runtimestate.ProcessOf(proc.Identity()), device, at, bytes)
}
