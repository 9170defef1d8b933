package procresource

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultMinRescan is the shortest time between two scans of the proc root
// when NewIndex is given none: a flood of lookups for identities no local
// process has costs one scan a second, not one each.
const DefaultMinRescan = time.Second

// Index answers which local process an identity seen from inside a container
// names; safe for concurrent use.
//
// It holds one entry per live process of the proc root (pid, start ticks,
// NSpid, cgroup), built by scanning every /proc/<pid>. A lookup that misses
// scans again, at most once per minRescan; a scan drops processes that have
// exited and replaces an entry whose pid has new start ticks (pid reuse). An
// entry not confirmed for minRescan has its start ticks read again when it
// is found, so a process that reused an old pid never answers with the old
// process's identity.
//
// Kubernetes pods have a sandbox ("pause") container, whose only process
// runs the pause binary (comm "pause") and is pid 1 of its own pid
// namespace. An SDK inside an app container may report the sandbox's
// container id (see ByContainer); the sandbox's process itself is never an
// answer of ByContainer or ByPod, since it sends no telemetry.
type Index struct {
	reader    *Reader
	minRescan time.Duration
	now       func() time.Time // replaced by tests
	epoch     time.Time

	state atomic.Pointer[indexState]
	// lastScan is when the last scan started, in ns since epoch, plus one
	// (0: never).
	lastScan atomic.Int64
	scanMu   sync.Mutex // one scan at a time

	scans, throttled, reused, exited, unreadable atomic.Uint64
}

// indexEntry is one tracked process. Only checked and dead change after a
// scan made it; the state maps that hold it never change.
type indexEntry struct {
	id    Identity
	pause bool
	// checked is when the process's start ticks were last confirmed, in
	// ns since the index's epoch.
	checked atomic.Int64
	// dead: the pid exited or now names another process.
	dead atomic.Bool
}

// indexState is what one scan found. It is replaced whole, never changed.
type indexState struct {
	byPID       map[int]*indexEntry
	byContainer map[containerKey]*indexEntry // nil: several processes
	// byPod holds every process of a pod but its sandbox's.
	byPod map[podKey][]*indexEntry
	// sandboxPod maps a sandbox container's id to its pod's UID.
	sandboxPod map[string]string
	// byVPID holds the processes in pid namespaces of their own (VPID !=
	// PID) by the pid they see themselves as, sandboxes left out.
	byVPID map[int][]*indexEntry
}

type containerKey struct {
	id   string
	vpid int
}

type podKey struct {
	uid  string
	vpid int
}

func newIndexState(n int) *indexState {
	return &indexState{
		byPID:       make(map[int]*indexEntry, n),
		byContainer: make(map[containerKey]*indexEntry, n),
		byPod:       map[podKey][]*indexEntry{},
		sandboxPod:  map[string]string{},
		byVPID:      map[int][]*indexEntry{},
	}
}

// NewIndex returns an index of the processes under r's proc root that scans
// again on a miss at most once per minRescan (<= 0: DefaultMinRescan). The
// first lookup makes the first scan.
func NewIndex(r *Reader, minRescan time.Duration) *Index {
	if minRescan <= 0 {
		minRescan = DefaultMinRescan
	}
	x := &Index{reader: r, minRescan: minRescan, now: time.Now}
	x.epoch = x.now()
	x.state.Store(newIndexState(0))
	return x
}

// ByHostPID returns the identity of the process whose pid in the proc root
// is pid.
func (x *Index) ByHostPID(pid int) (Identity, bool) {
	return x.find(func(st *indexState) (Identity, bool) {
		if e := st.byPID[pid]; e != nil && x.live(e) {
			return e.id, true
		}
		return Identity{}, false
	})
}

// ByContainer returns the process of container containerID that sees itself
// as vpid. When containerID is a pod's sandbox — what SDK container
// detectors often report under cgroup v2 — it answers through the pod: the
// one process of the pod, outside the sandbox, that sees itself as vpid;
// not found when there are several (two app containers each with a pid 1).
// An app container's id is never answered with another container's process:
// a vpid that container lacks has exited or is a wrong claim.
func (x *Index) ByContainer(containerID string, vpid int) (Identity, bool) {
	if containerID == "" || vpid <= 0 {
		return Identity{}, false
	}
	return x.find(func(st *indexState) (Identity, bool) {
		if uid, ok := st.sandboxPod[containerID]; ok {
			return x.unique(st.byPod[podKey{uid, vpid}])
		}
		if e := st.byContainer[containerKey{containerID, vpid}]; e != nil && x.live(e) {
			return e.id, true
		}
		return Identity{}, false
	})
}

// ByPod returns every process of the pod that sees itself as vpid, outside
// the sandbox: one for a pod whose containers share a pid namespace or have
// one container, several when its containers each have their own pid 1.
// Which one a caller means is for the caller to decide.
func (x *Index) ByPod(podUID string, vpid int) []Identity {
	if podUID == "" || vpid <= 0 {
		return nil
	}
	var out []Identity
	x.find(func(st *indexState) (Identity, bool) {
		out = out[:0]
		for _, e := range st.byPod[podKey{podUID, vpid}] {
			if x.live(e) {
				out = append(out, e.id)
			}
		}
		return Identity{}, len(out) > 0
	})
	return out
}

// SeenAs reports whether a live process in a pid namespace of its own
// (a container's) sees itself as vpid: then a span that claims vpid with
// the node's hostname (a hostNetwork pod's SDK reports the node's
// hostname) may be that process rather than the host process with that
// pid. Sandboxes are left out. A process started since the last scan is
// found after a rescan, at most once per minRescan.
func (x *Index) SeenAs(vpid int) bool {
	if vpid <= 0 {
		return false
	}
	_, ok := x.find(func(st *indexState) (Identity, bool) {
		for _, e := range st.byVPID[vpid] {
			if x.live(e) {
				return e.id, true
			}
		}
		return Identity{}, false
	})
	return ok
}

// unique returns the one live entry of es.
func (x *Index) unique(es []*indexEntry) (Identity, bool) {
	var found *indexEntry
	for _, e := range es {
		if !x.live(e) {
			continue
		}
		if found != nil {
			return Identity{}, false
		}
		found = e
	}
	if found == nil {
		return Identity{}, false
	}
	return found.id, true
}

// find tries a lookup on the current state and, when it misses and a scan is
// due, once more after scanning.
func (x *Index) find(try func(*indexState) (Identity, bool)) (Identity, bool) {
	if id, ok := try(x.state.Load()); ok {
		return id, true
	}
	if !x.rescan() {
		return Identity{}, false
	}
	return try(x.state.Load())
}

// live reports whether e's process still runs, reading its start ticks
// again when they were last confirmed more than minRescan ago.
func (x *Index) live(e *indexEntry) bool {
	if e.dead.Load() {
		return false
	}
	now := x.clock()
	if now-e.checked.Load() < int64(x.minRescan) {
		return true
	}
	start, err := x.reader.StartTicks(e.id.PID)
	switch {
	case err == nil && start == e.id.StartTicks:
		e.checked.Store(now)
		return true
	case err == nil:
		if !e.dead.Swap(true) {
			x.reused.Add(1)
		}
	case errors.Is(err, ErrNoProcess):
		if !e.dead.Swap(true) {
			x.exited.Add(1)
		}
	default:
		// Unreadable for another reason: not confirmed, not answered.
		return false
	}
	return false
}

func (x *Index) clock() int64 { return int64(x.now().Sub(x.epoch)) }

// rescan scans the proc root unless the last scan was less than minRescan
// ago. It reports whether the state may have changed since the caller
// looked: it scanned, or another caller scanned meanwhile.
func (x *Index) rescan() bool {
	seen := x.lastScan.Load()
	if seen != 0 && x.clock()-(seen-1) < int64(x.minRescan) {
		x.throttled.Add(1)
		return false
	}
	x.scanMu.Lock()
	defer x.scanMu.Unlock()
	if x.lastScan.Load() != seen {
		return true
	}
	now := x.clock()
	x.lastScan.Store(now + 1)
	st, err := x.scan(x.state.Load(), now)
	if err != nil {
		// The proc root itself cannot be listed: keep what is known.
		return false
	}
	x.state.Store(st)
	return true
}

// scan reads every process of the proc root. Entries of prev whose process
// is unchanged are kept, so are their strings and their confirmation time.
func (x *Index) scan(prev *indexState, now int64) (*indexState, error) {
	x.scans.Add(1)
	root, err := os.Open(x.reader.root)
	if err != nil {
		return nil, fmt.Errorf("procresource: index: %w", err)
	}
	defer root.Close()
	names, err := root.Readdirnames(-1)
	if err != nil {
		return nil, fmt.Errorf("procresource: index: list %s: %w", x.reader.root, err)
	}
	rootfd := int(root.Fd())

	st := newIndexState(len(prev.byPID))
	intern := map[string]string{}
	s := newScratch()
	for _, name := range names {
		pid64, ok := parseDecimal([]byte(name))
		if !ok || pid64 == 0 || pid64 > 1<<31-1 {
			continue
		}
		pid := int(pid64)
		old := prev.byPID[pid]
		var known *Identity
		if old != nil {
			known = &old.id
		}
		p, err := x.reader.readProcess(rootfd, name, pid, &s, known)
		if err != nil {
			// Exited between the listing and the read, or its stat is
			// unusable: not tracked.
			if !errors.Is(err, ErrNoProcess) {
				x.unreadable.Add(1)
			}
			continue
		}
		if p.statusErr != nil || p.cgroupErr != nil {
			x.unreadable.Add(1)
		}
		var e *indexEntry
		if old != nil && !old.dead.Load() && old.id == p.id && old.pause == p.pause {
			e = old
			internString(intern, e.id.ContainerID)
			internString(intern, e.id.PodUID)
		} else {
			if old != nil && !old.dead.Load() && old.id.StartTicks != p.id.StartTicks {
				x.reused.Add(1)
			}
			p.id.ContainerID = internString(intern, p.id.ContainerID)
			p.id.PodUID = internString(intern, p.id.PodUID)
			e = &indexEntry{id: p.id, pause: p.pause}
		}
		e.checked.Store(now)
		st.byPID[pid] = e
	}
	for pid, old := range prev.byPID {
		if _, ok := st.byPID[pid]; !ok && !old.dead.Load() {
			x.exited.Add(1)
		}
	}
	st.index()
	return st, nil
}

// index fills the lookup maps from byPID.
func (st *indexState) index() {
	for _, e := range st.byPID {
		if e.pause && e.id.ContainerID != "" && e.id.PodUID != "" {
			st.sandboxPod[e.id.ContainerID] = e.id.PodUID
		}
	}
	for _, e := range st.byPID {
		id := e.id
		if id.VPID > 0 && id.VPID != id.PID && !e.pause {
			st.byVPID[id.VPID] = append(st.byVPID[id.VPID], e)
		}
		if id.VPID <= 0 || id.ContainerID == "" && id.PodUID == "" {
			continue
		}
		if id.ContainerID != "" {
			k := containerKey{id.ContainerID, id.VPID}
			if _, dup := st.byContainer[k]; dup {
				st.byContainer[k] = nil // two processes claim it: answer neither
			} else {
				st.byContainer[k] = e
			}
		}
		if _, sandbox := st.sandboxPod[id.ContainerID]; id.PodUID != "" && !sandbox {
			k := podKey{id.PodUID, id.VPID}
			st.byPod[k] = append(st.byPod[k], e)
		}
	}
}

// internString returns one copy of each distinct string, so that the
// processes of one container share its id.
func internString(m map[string]string, s string) string {
	if s == "" {
		return ""
	}
	if v, ok := m[s]; ok {
		return v
	}
	m[s] = s
	return s
}

// IndexStats counts what an Index did.
type IndexStats struct {
	// Scans is the number of scans of the proc root.
	Scans uint64
	// Throttled is the number of misses that did not scan, the last scan
	// being less than minRescan old.
	Throttled uint64
	// Reused is the number of entries dropped because their pid had new
	// start ticks: another process took it.
	Reused uint64
	// Exited is the number of entries dropped because their process exited.
	Exited uint64
	// Unreadable is the number of process reads at scans whose status or
	// cgroup could not be read or parsed, leaving VPID or the container
	// unknown, or whose stat could not (the process is then not tracked).
	Unreadable uint64
	// Tracked is the number of processes the index holds now.
	Tracked int
}

// Stats returns the index's counts.
func (x *Index) Stats() IndexStats {
	return IndexStats{
		Scans:      x.scans.Load(),
		Throttled:  x.throttled.Load(),
		Reused:     x.reused.Load(),
		Exited:     x.exited.Load(),
		Unreadable: x.unreadable.Load(),
		Tracked:    len(x.state.Load().byPID),
	}
}
