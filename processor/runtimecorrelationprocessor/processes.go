package runtimecorrelationprocessor // import "github.com/otelcol-ai/otelcol-ai/processor/runtimecorrelationprocessor"

import (
	"time"

	"github.com/otelcol-ai/otelcol-ai/internal/procresource"
)

// processTable finds the node's live processes, each as procresource
// reads its identity: *procresource.Index (tests use a fake). A process's
// StartTicks is 0 when unknown.
type processTable interface {
	// ByHostPID returns the process with this pid in the node's pid
	// namespace.
	ByHostPID(pid int) (procresource.Identity, bool)
	// ByContainer returns the process of the container that sees itself
	// as vpid; a pod's sandbox id names its pod's process when only one
	// of the pod's processes is vpid.
	ByContainer(containerID string, vpid int) (procresource.Identity, bool)
	// ByPod returns every process of the pod that sees itself as vpid.
	ByPod(podUID string, vpid int) []procresource.Identity
	// SeenAs reports whether some process in a pid namespace other than
	// the node's sees itself as vpid (a container's process, which a
	// hostNetwork pod's SDK reports with the node's hostname).
	SeenAs(vpid int) bool
}

// minRescan bounds the process table's scans of the proc root on misses.
const minRescan = time.Second

// newProcessTable returns the process table of the proc root procRoot.
func newProcessTable(procRoot string) *procresource.Index {
	return procresource.NewIndex(procresource.NewReader(procRoot, 0), minRescan)
}

// nodePID is a process as its windows name it: the node and the host pid.
type nodePID struct {
	node string
	pid  int64
}

// namePID is a pid within a container or a pod.
type namePID struct {
	name string
	pid  int64
}

// procRecord is what the windows said about one (node, host pid).
type procRecord struct {
	// gen is the incarnation of the pid whose windows are indexed now: it
	// changes when the pid turns out to be reused (new start ticks, or a
	// new container, pod or vpid), so the windows of a dead process are
	// never matched to its successor's spans.
	gen uint32
	// id is the process as its windows' resources said (its StartTicks
	// from the process table at ingest, 0 unknown; VPID 0 unknown).
	id        procresource.Identity
	lastStart int64 // newest window start: the record expires with it
}

// goneGen names an incarnation that holds no windows: a span of an older
// process than the one whose windows are indexed under its pid.
const goneGen = ^uint32(0)

// processes is what the correlator learned about processes from window
// resources, so that a span naming a process by its container, pod or
// in-namespace pid finds the host pid its windows are indexed under, also
// after the process exited or on a node whose /proc is not this one. It
// is bounded (max records) and records expire with their last window.
// The correlator's mutex guards it.
type processes struct {
	max         int
	byHost      map[nodePID]*procRecord
	byContainer map[namePID]nodePID
	byPod       map[namePID][]nodePID
	// byVPID holds, per node and vpid, the processes in another pid
	// namespace that see themselves as vpid (vpid != pid).
	byVPID map[nodePID][]nodePID
	// nodes counts records per node name: span host.name values that name
	// a node whose windows are indexed.
	nodes map[string]int
	// sweptAt is the horizon of the last sweep.
	sweptAt int64
	// refused counts windows' processes not learned because max was
	// reached.
	refused uint64
}

func newProcesses(max int) *processes {
	return &processes{
		max:         max,
		byHost:      map[nodePID]*procRecord{},
		byContainer: map[namePID]nodePID{},
		byPod:       map[namePID][]nodePID{},
		byVPID:      map[nodePID][]nodePID{},
		nodes:       map[string]int{},
	}
}

// learn records that a window of p, on node, started at start, and
// returns the incarnation its windows are indexed under. horizon is the
// window index's retention horizon: records older than it are swept.
func (ps *processes) learn(node string, p procresource.Identity, start, horizon int64) uint32 {
	k := nodePID{node, int64(p.PID)}
	r, ok := ps.byHost[k]
	if !ok {
		if len(ps.byHost) >= ps.max {
			ps.sweep(horizon)
		}
		if len(ps.byHost) >= ps.max {
			ps.refused++
			return 0
		}
		r = &procRecord{id: p}
		ps.byHost[k] = r
		ps.nodes[node]++
		ps.link(k, r)
	} else if r.reused(p) {
		ps.unlink(k, r)
		r.gen++
		if r.gen == goneGen {
			r.gen = 0
		}
		r.id = p
		ps.link(k, r)
	} else if r.id.StartTicks == 0 && p.StartTicks != 0 {
		r.id.StartTicks = p.StartTicks
	}
	r.lastStart = max(r.lastStart, start)
	return r.gen
}

// reused reports whether p, seen now with the record's pid, is another
// process than the one recorded: different start ticks, or (when ticks are
// unknown) a different container, pod or vpid.
func (r *procRecord) reused(p procresource.Identity) bool {
	if r.id.StartTicks != 0 && p.StartTicks != 0 {
		return r.id.StartTicks != p.StartTicks
	}
	return p.ContainerID != r.id.ContainerID || p.PodUID != r.id.PodUID || (p.VPID != 0 && r.id.VPID != 0 && p.VPID != r.id.VPID)
}

func (ps *processes) link(k nodePID, r *procRecord) {
	vpid := int64(r.id.VPID)
	if vpid == 0 {
		return
	}
	if r.id.ContainerID != "" {
		ps.byContainer[namePID{r.id.ContainerID, vpid}] = k
	}
	if r.id.PodUID != "" {
		pk := namePID{r.id.PodUID, vpid}
		ps.byPod[pk] = append(ps.byPod[pk], k)
	}
	if vpid != k.pid {
		vk := nodePID{k.node, vpid}
		ps.byVPID[vk] = append(ps.byVPID[vk], k)
	}
}

func (ps *processes) unlink(k nodePID, r *procRecord) {
	vpid := int64(r.id.VPID)
	if vpid == 0 {
		return
	}
	if r.id.ContainerID != "" {
		ck := namePID{r.id.ContainerID, vpid}
		if ps.byContainer[ck] == k {
			delete(ps.byContainer, ck)
		}
	}
	if r.id.PodUID != "" {
		pk := namePID{r.id.PodUID, vpid}
		if rest := without(ps.byPod[pk], k); len(rest) > 0 {
			ps.byPod[pk] = rest
		} else {
			delete(ps.byPod, pk)
		}
	}
	if vpid != k.pid {
		vk := nodePID{k.node, vpid}
		if rest := without(ps.byVPID[vk], k); len(rest) > 0 {
			ps.byVPID[vk] = rest
		} else {
			delete(ps.byVPID, vk)
		}
	}
}

func without(s []nodePID, k nodePID) []nodePID {
	out := s[:0]
	for _, v := range s {
		if v != k {
			out = append(out, v)
		}
	}
	return out
}

// sweep forgets the processes whose newest window started before horizon:
// their windows have left the index.
func (ps *processes) sweep(horizon int64) {
	ps.sweptAt = horizon
	for k, r := range ps.byHost {
		if r.lastStart < horizon {
			ps.unlink(k, r)
			delete(ps.byHost, k)
			if ps.nodes[k.node]--; ps.nodes[k.node] <= 0 {
				delete(ps.nodes, k.node)
			}
		}
	}
}

// maybeSweep sweeps when the horizon moved by more than a quarter of the
// retention since the last sweep, so that expiry costs O(1) amortized per
// window.
func (ps *processes) maybeSweep(horizon, retention int64) {
	if horizon-ps.sweptAt > retention/4 {
		ps.sweep(horizon)
	}
}

// genFor returns the incarnation under which the windows of p on node are
// indexed: the recorded one when p is the recorded process (or cannot be
// told from it), the next one when p is younger (its windows, when they
// come, start a new incarnation), goneGen when p is older (its windows are
// gone).
func (ps *processes) genFor(node string, p procresource.Identity) uint32 {
	r, ok := ps.byHost[nodePID{node, int64(p.PID)}]
	if !ok {
		return 0
	}
	if r.id.StartTicks == 0 || p.StartTicks == 0 || r.id.StartTicks == p.StartTicks {
		return r.gen
	}
	if p.StartTicks > r.id.StartTicks {
		if next := r.gen + 1; next != goneGen {
			return next
		}
		return 0
	}
	return goneGen
}
