package runtimecorrelationprocessor

import (
	"cmp"
	"slices"
	"time"

	"github.com/otelcol-ai/otelcol-ai/internal/runtimestate"
	"github.com/otelcol-ai/otelcol-ai/pkg/timeline"
)

// The timeline's GPU memory and JVM accounts come from the runtimestate
// extension that runtime_state names: the nvml receiver shares each
// process's GPU memory there and the jfr receiver each JVM's accounts,
// both by pid and start time; the node's own receivers only, so no
// workload's claim reaches the page.

// maxSeriesPoints bounds the points one series (a process's device or
// account) gives a snapshot: beyond it, every k-th reading, which keeps
// the line's shape. maxStorePoints bounds them all.
const (
	maxSeriesPoints = 500
	maxStorePoints  = 50_000
)

// drawnAccounts are the accounts the page draws (the heap has its own
// panels).
var drawnAccounts = map[string]bool{
	timeline.AccountNativeUnaccounted: true,
	timeline.AccountJNIGlobalRefs:     true,
	timeline.AccountDirectBuffers:     true,
	timeline.AccountMetaspace:         true,
}

// storePoints returns the readings in [from, to] (Unix ns) of the kinds q
// asks for, each on its process's scope.
func (c *correlator) storePoints(q timeline.Query, from, to int64) ([]tlGPU, []tlAccount) {
	store := c.store.Load()
	wantGPU, wantAccounts := q.WantsKind(timeline.KindGPU), q.WantsKind(timeline.KindAccounts)
	if store == nil || !(wantGPU || wantAccounts) {
		return nil, nil
	}
	var gpu []tlGPU
	var accts []tlAccount
	since := time.Unix(0, from)
	total := 0
	for _, p := range store.Processes() {
		key, ok := c.scopeOfProcess(p)
		if !ok {
			continue
		}
		if wantGPU {
			for device, rs := range store.GPU(p, since) {
				device = timeline.Clip(device)
				total += eachInRange(rs, to, maxStorePoints-total, func(t, v int64) {
					gpu = append(gpu, tlGPU{scope: key, t: t, p: timeline.GPUPoint{Device: device, Bytes: v}})
				})
			}
		}
		if wantAccounts {
			for account, rs := range store.Accounts(p, since) {
				if !drawnAccounts[account] {
					continue
				}
				total += eachInRange(rs, to, maxStorePoints-total, func(t, v int64) {
					accts = append(accts, tlAccount{scope: key, t: t, p: timeline.AccountPoint{Account: account, Value: v}})
				})
			}
		}
	}
	// Map order is random: the page gets them by time.
	slices.SortStableFunc(gpu, func(a, b tlGPU) int { return cmp.Or(cmp.Compare(a.t, b.t), cmp.Compare(a.p.Device, b.p.Device)) })
	slices.SortStableFunc(accts, func(a, b tlAccount) int { return cmp.Or(cmp.Compare(a.t, b.t), cmp.Compare(a.p.Account, b.p.Account)) })
	return gpu, accts
}

// eachInRange calls f with the readings of rs (from the query's start on)
// up to to, at most maxSeriesPoints of them and at most room, thinned
// evenly when there are more; it returns how many.
func eachInRange(rs []runtimestate.Reading, to int64, room int, f func(t, v int64)) int {
	n := 0
	for n < len(rs) && rs[n].At.UnixNano() <= to {
		n++
	}
	keep := min(n, maxSeriesPoints, max(room, 0))
	if keep == 0 {
		return 0
	}
	for i := range keep {
		// Evenly spread, the newest always in.
		r := rs[(n-1)-(keep-1-i)*(n-1)/max(keep-1, 1)]
		f(r.At.UnixNano(), r.Value)
	}
	return keep
}

// scopeOfProcess is the scope of a process the runtimestate extension
// names: its pid on this node (process scope), or the pod the node's
// process table says it is in, when the pid still names the process of
// that start time (pod scope).
func (c *correlator) scopeOfProcess(p runtimestate.Process) (scopeKey, bool) {
	s := source{node: c.node.HostName, hasPID: p.PID > 0}
	s.proc.PID, s.proc.StartTicks = p.PID, p.StartTicks
	if c.ids.table != nil {
		if id, ok := c.ids.table.ByHostPID(p.PID); ok && (p.StartTicks == 0 || id.StartTicks == p.StartTicks) {
			s.proc = id
		}
	}
	key, ok := c.scopeOf(s)
	return noGen(key), ok
}
