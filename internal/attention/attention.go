// Package attention records which local processes and pods recently had
// what the collector's users look at: request spans and JVM pauses. The
// runtimecorrelation processor marks them as it matches spans and indexes
// pauses; the pythongil receiver reads the marks to spend its uprobe budget
// on the interpreters whose windows can overlap them. They meet in the
// Registry of the runtimestate extension both name (runtime_state;
// internal/runtimestate), which lives from its Start to its Shutdown. A nil
// Registry takes no marks and attends to nothing.
package attention

import (
	"sync"
	"time"

	"github.com/otelcol-ai/otelcol-ai/internal/procresource"
)

// DefaultTTL is how long a mark lasts: a service that handles a request or
// pauses at least once a minute keeps its attention.
const DefaultTTL = time.Minute

// DefaultMax bounds the processes and the pods a registry of the
// runtimestate extension holds (each): far more than a node runs.
const DefaultMax = 4096

// Process is a local process as the node sees it: the part of its
// identity that marks are kept by (ProcessOf).
type Process struct {
	// PID is the process id in the node's pid namespace.
	PID int
	// StartTicks tells a process from a later one under the same pid; 0
	// when unknown (then the pid alone matches).
	StartTicks uint64
	// PodUID is the process's Kubernetes pod, "" when none or unknown.
	PodUID string
}

// ProcessOf is the process procresource identifies as id.
func ProcessOf(id procresource.Identity) Process {
	return Process{PID: id.PID, StartTicks: id.StartTicks, PodUID: id.PodUID}
}

// Registry holds marks, each with when it was last made; a mark older than
// the TTL no longer counts and is swept. It is bounded: once full, a new
// key is refused (counted) until a sweep frees room, so a flood of distinct
// keys costs neither memory nor more than one sweep per quarter TTL. Safe
// for concurrent use; marking an existing key does not allocate.
type Registry struct {
	ttl time.Duration
	max int

	mu    sync.Mutex
	procs map[int]processMark
	pods  map[string]int64
	// sweptAt is when the last sweep ran (Unix ns).
	sweptAt int64
	refused uint64
}

// processMark is one process's last mark.
type processMark struct {
	startTicks uint64
	at         int64
}

// New returns an empty registry holding at most max processes and max
// pods, whose marks last ttl.
func New(max int, ttl time.Duration) *Registry {
	return &Registry{ttl: ttl, max: max, procs: map[int]processMark{}, pods: map[string]int64{}}
}

// MarkProcess records that the process pid (startTicks, 0 when unknown)
// had a span or a pause at now. A mark with other start ticks than the
// recorded ones is a new process under a reused pid and replaces it.
func (r *Registry) MarkProcess(pid int, startTicks uint64, now time.Time) {
	if r == nil || pid <= 0 {
		return
	}
	at := now.UnixNano()
	r.mu.Lock()
	defer r.mu.Unlock()
	m, ok := r.procs[pid]
	if !ok && !r.room(len(r.procs), at) {
		return
	}
	switch {
	case !ok:
	case startTicks == 0:
		startTicks, at = m.startTicks, max(m.at, at)
	case m.startTicks == 0 || m.startTicks == startTicks:
		at = max(m.at, at)
	}
	r.procs[pid] = processMark{startTicks: startTicks, at: at}
}

// MarkPod records that a process of the pod uid had a span or a pause at
// now.
func (r *Registry) MarkPod(uid string, now time.Time) {
	if r == nil || uid == "" {
		return
	}
	at := now.UnixNano()
	r.mu.Lock()
	defer r.mu.Unlock()
	prev, ok := r.pods[uid]
	if !ok && !r.room(len(r.pods), at) {
		return
	}
	r.pods[uid] = max(prev, at)
}

// room reports whether a map holding n keys may take a new one at at,
// sweeping expired marks first when it is full; r.mu is held.
func (r *Registry) room(n int, at int64) bool {
	if n < r.max {
		return true
	}
	if at-r.sweptAt >= int64(r.ttl/4) {
		r.sweep(at)
	}
	if len(r.procs) < r.max && len(r.pods) < r.max {
		return true
	}
	r.refused++
	return false
}

// sweep forgets the marks that expired by at; r.mu is held.
func (r *Registry) sweep(at int64) {
	r.sweptAt = at
	limit := at - int64(r.ttl)
	for pid, m := range r.procs {
		if m.at < limit {
			delete(r.procs, pid)
		}
	}
	for uid, t := range r.pods {
		if t < limit {
			delete(r.pods, uid)
		}
	}
}

// Attended reports whether p, or its pod, was marked within the TTL
// before now. A process mark with start ticks other than p's (both known)
// was another process's.
func (r *Registry) Attended(p Process, now time.Time) bool {
	if r == nil {
		return false
	}
	limit := now.UnixNano() - int64(r.ttl)
	r.mu.Lock()
	defer r.mu.Unlock()
	if m, ok := r.procs[p.PID]; ok && m.at >= limit &&
		(m.startTicks == 0 || p.StartTicks == 0 || m.startTicks == p.StartTicks) {
		return true
	}
	if p.PodUID == "" {
		return false
	}
	t, ok := r.pods[p.PodUID]
	return ok && t >= limit
}

// Stats is what a registry holds and refused.
type Stats struct {
	Processes, Pods int
	// Refused counts new keys not recorded because the registry was full.
	Refused uint64
}

// Stats returns the registry's counts (expired marks not swept yet
// included).
func (r *Registry) Stats() Stats {
	r.mu.Lock()
	defer r.mu.Unlock()
	return Stats{Processes: len(r.procs), Pods: len(r.pods), Refused: r.refused}
}
