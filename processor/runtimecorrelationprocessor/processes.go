package runtimecorrelationprocessor // import "github.com/otelcol-ai/otelcol-ai/processor/runtimecorrelationprocessor"

// process is one local process as the node sees it (pid, start ticks) and
// as it sees itself (vpid), with its container and pod.
type process struct {
	pid, vpid   int64
	startTicks  uint64 // 0 when unknown
	containerID string
	podUID      string
}

// processTable finds the node's live processes (procresource.Index; tests
// use a fake).
type processTable interface {
	// byHostPID returns the process with this pid in the node's pid
	// namespace.
	byHostPID(pid int64) (process, bool)
	// byContainer returns the process of the container that sees itself
	// as vpid; a pod's sandbox id names its pod's process when only one
	// of the pod's processes is vpid.
	byContainer(containerID string, vpid int64) (process, bool)
	// byPod returns every process of the pod that sees itself as vpid.
	byPod(podUID string, vpid int64) []process
	// seenAs reports whether some process in a pid namespace other than
	// the node's sees itself as vpid (a container's process, which a
	// hostNetwork pod's SDK reports with the node's hostname).
	seenAs(vpid int64) bool
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
	gen         uint32
	startTicks  uint64 // from the process table at ingest; 0 unknown
	vpid        int64  // 0 unknown
	containerID string
	podUID      string
	lastStart   int64 // newest window start: the record expires with it
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
func (ps *processes) learn(node string, p process, start, horizon int64) uint32 {
	k := nodePID{node, p.pid}
	r, ok := ps.byHost[k]
	if !ok {
		if len(ps.byHost) >= ps.max {
			ps.sweep(horizon)
		}
		if len(ps.byHost) >= ps.max {
			ps.refused++
			return 0
		}
		r = &procRecord{}
		ps.byHost[k] = r
		ps.nodes[node]++
		r.set(p)
		ps.link(k, r)
	} else if r.reused(p) {
		ps.unlink(k, r)
		r.gen++
		if r.gen == goneGen {
			r.gen = 0
		}
		r.set(p)
		ps.link(k, r)
	} else if r.startTicks == 0 && p.startTicks != 0 {
		r.startTicks = p.startTicks
	}
	r.lastStart = max(r.lastStart, start)
	return r.gen
}

func (r *procRecord) set(p process) {
	r.startTicks, r.vpid, r.containerID, r.podUID = p.startTicks, p.vpid, p.containerID, p.podUID
}

// reused reports whether p, seen now with the record's pid, is another
// process than the one recorded: different start ticks, or (when ticks are
// unknown) a different container, pod or vpid.
func (r *procRecord) reused(p process) bool {
	if r.startTicks != 0 && p.startTicks != 0 {
		return r.startTicks != p.startTicks
	}
	return p.containerID != r.containerID || p.podUID != r.podUID || (p.vpid != 0 && r.vpid != 0 && p.vpid != r.vpid)
}

func (ps *processes) link(k nodePID, r *procRecord) {
	if r.vpid == 0 {
		return
	}
	if r.containerID != "" {
		ps.byContainer[namePID{r.containerID, r.vpid}] = k
	}
	if r.podUID != "" {
		pk := namePID{r.podUID, r.vpid}
		ps.byPod[pk] = append(ps.byPod[pk], k)
	}
	if r.vpid != k.pid {
		vk := nodePID{k.node, r.vpid}
		ps.byVPID[vk] = append(ps.byVPID[vk], k)
	}
}

func (ps *processes) unlink(k nodePID, r *procRecord) {
	if r.vpid == 0 {
		return
	}
	if r.containerID != "" {
		ck := namePID{r.containerID, r.vpid}
		if ps.byContainer[ck] == k {
			delete(ps.byContainer, ck)
		}
	}
	if r.podUID != "" {
		pk := namePID{r.podUID, r.vpid}
		if rest := without(ps.byPod[pk], k); len(rest) > 0 {
			ps.byPod[pk] = rest
		} else {
			delete(ps.byPod, pk)
		}
	}
	if r.vpid != k.pid {
		vk := nodePID{k.node, r.vpid}
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
func (ps *processes) genFor(node string, p process) uint32 {
	r, ok := ps.byHost[nodePID{node, p.pid}]
	if !ok {
		return 0
	}
	if r.startTicks == 0 || p.startTicks == 0 || r.startTicks == p.startTicks {
		return r.gen
	}
	if p.startTicks > r.startTicks {
		if next := r.gen + 1; next != goneGen {
			return next
		}
		return 0
	}
	return goneGen
}
