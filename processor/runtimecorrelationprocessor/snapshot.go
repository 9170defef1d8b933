package runtimecorrelationprocessor // import "github.com/otelcol-ai/otelcol-ai/processor/runtimecorrelationprocessor"

import (
	"cmp"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otelcol-ai/otelcol-ai/internal/window"
	"github.com/otelcol-ai/otelcol-ai/pkg/timeline"
	"github.com/otelcol-ai/otelcol-ai/processor/runtimecorrelationprocessor/internal/windowindex"
)

// The timeline page's view of the correlator (pkg/timeline): the windows
// come from the index, copied under its read lock; the rest (spans, thread
// names, VM operations and GC names, GPU memory, process names) the index
// does not keep, so it is recorded beside it, only while someone looks.
const (
	// timelineWatchTTL is how long recording goes on after the last
	// snapshot: a closed page stops costing anything within it.
	timelineWatchTTL = time.Minute
	// timelineMaxSpans and timelineMaxGPUPoints bound the recorded spans
	// and GPU memory points (rings: the oldest go first).
	timelineMaxSpans     = 10_000
	timelineMaxGPUPoints = 10_000
)

// timelineState is what the correlator records for the timeline page.
type timelineState struct {
	// watchedUntil is when recording stops (Unix ns) unless another
	// snapshot is taken.
	watchedUntil atomic.Int64

	mu         sync.Mutex
	maxDetails int
	maxLabels  int
	labels     map[scopeKey]timeline.Lane
	threads    map[threadKey]string
	details    map[detailKey]windowDetail
	spans      ring[tlSpan]
	gpu        ring[tlGPU]
}

// threadKey is one thread of a scope (without the pid's incarnation).
type threadKey struct {
	scope scopeKey
	pid   int64
	tid   int64
}

// detailKey is one window, as its start, kind and thread name it.
type detailKey struct {
	scope scopeKey
	start int64
	tid   int64
	kind  uint8
}

type windowDetail struct{ detail, cause string }

type tlSpan struct {
	scope      scopeKey
	start, end int64
	span       timeline.Span
}

type tlGPU struct {
	scope scopeKey
	t     int64
	p     timeline.GPUPoint
}

// ring keeps the newest max values.
type ring[T any] struct {
	max  int
	buf  []T
	next int
}

func (r *ring[T]) add(v T) {
	if len(r.buf) < r.max {
		r.buf = append(r.buf, v)
		return
	}
	r.buf[r.next] = v
	r.next = (r.next + 1) % r.max
}

func newTimelineState(cfg *Config) *timelineState {
	return &timelineState{
		maxDetails: cfg.Windows.MaxWindows,
		maxLabels:  cfg.Identity.MaxProcesses,
		labels:     map[scopeKey]timeline.Lane{},
		threads:    map[threadKey]string{},
		details:    map[detailKey]windowDetail{},
		spans:      ring[tlSpan]{max: timelineMaxSpans},
		gpu:        ring[tlGPU]{max: timelineMaxGPUPoints},
	}
}

// watched reports whether a snapshot was taken within timelineWatchTTL:
// only then is anything recorded for the page.
func (c *correlator) watched() bool {
	return c.timeline.watchedUntil.Load() > c.now().UnixNano()
}

// noGen is a scope key without the pid's incarnation: what the recorded
// extras are keyed by, since ingest learns the incarnation only later.
func noGen(k scopeKey) scopeKey { k.gen = 0; return k }

// timelineNote is a window's extras, noted while ingesting a batch.
type timelineNote struct {
	key        detailKey
	pid        int64
	threadName string
	detail     windowDetail
}

// noteResource records a resource's names for its scope's lane.
func (t *timelineState) noteResource(key scopeKey, res pcommon.Resource) {
	t.mu.Lock()
	defer t.mu.Unlock()
	key = noGen(key)
	l, ok := t.labels[key]
	if !ok && len(t.labels) >= t.maxLabels {
		return
	}
	timeline.FillLane(&l, res.Attributes())
	t.labels[key] = l
}

// noteWindows records thread names and window details; horizon is the
// index's, below which details are swept when the map is full.
func (t *timelineState) noteWindows(notes []timelineNote, horizon int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, n := range notes {
		if n.threadName != "" && n.key.tid != 0 {
			tk := threadKey{scope: n.key.scope, pid: n.pid, tid: n.key.tid}
			if _, ok := t.threads[tk]; ok || len(t.threads) < t.maxDetails {
				t.threads[tk] = n.threadName
			}
		}
		if n.detail == (windowDetail{}) {
			continue
		}
		if len(t.details) >= t.maxDetails {
			for k := range t.details {
				if k.start < horizon {
					delete(t.details, k)
				}
			}
			if len(t.details) >= t.maxDetails {
				continue
			}
		}
		t.details[n.key] = n.detail
	}
}

func (t *timelineState) addSpans(spans []tlSpan) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, s := range spans {
		t.spans.add(s)
	}
}

// noteWindow returns the extras of a decoded window of scope key.
func noteWindow(key scopeKey, pid int64, kind uint8, w window.Window) timelineNote {
	detail, cause := timeline.WindowDetail(w)
	return timelineNote{
		key:        detailKey{scope: noGen(key), start: w.Start, tid: w.ThreadID, kind: kind},
		pid:        pid,
		threadName: timeline.Clip(w.ThreadName),
		detail:     windowDetail{detail, cause},
	}
}

// recordSpan copies what the page shows of a span whose windows have been
// written onto it (putTotals).
func recordSpan(key scopeKey, span ptrace.Span, start, end int64) tlSpan {
	s := timeline.SpanOf(span)
	return tlSpan{scope: key, start: start, end: end, span: s}
}

// noteMetrics records per-process GPU memory points, when md has any.
func (c *correlator) noteMetrics(md pmetric.Metrics) {
	var pts []tlGPU
	for _, rm := range md.ResourceMetrics().All() {
		for _, sm := range rm.ScopeMetrics().All() {
			for _, m := range sm.Metrics().All() {
				dps, ok := timeline.GPUMemoryPoints(m)
				if !ok {
					continue
				}
				key, scoped := c.scopeOf(c.sourceOf(rm.Resource()))
				if !scoped {
					continue
				}
				for _, dp := range dps.All() {
					device, _ := dp.Attributes().Get("device_id")
					pts = append(pts, tlGPU{scope: noGen(key), t: int64(dp.Timestamp()),
						p: timeline.GPUPoint{Device: device.AsString(), Bytes: dp.IntValue()}})
				}
			}
		}
	}
	if len(pts) == 0 {
		return
	}
	c.timeline.mu.Lock()
	defer c.timeline.mu.Unlock()
	for _, p := range pts {
		c.timeline.gpu.add(p)
	}
}

// laneScope is one scope the snapshot draws and the lane it becomes.
type laneScope struct {
	key  scopeKey
	lane timeline.Lane
}

// scopesLocked lists the scopes that may hold windows, with what the
// correlator learned of their processes; c.mu is held.
func (c *correlator) scopesLocked() []laneScope {
	var out []laneScope
	switch c.cfg.MatchScope {
	case ScopePod:
		seen := map[string]bool{}
		for k := range c.procs.byPod {
			if !seen[k.name] {
				seen[k.name] = true
				out = append(out, laneScope{key: scopeKey{pod: k.name}, lane: timeline.Lane{PodUID: k.name}})
			}
		}
	case ScopeHost:
		for node := range c.procs.nodes {
			out = append(out, laneScope{key: scopeKey{host: node}, lane: timeline.Lane{Node: node}})
		}
	default:
		for k, r := range c.procs.byHost {
			out = append(out, laneScope{key: scopeKey{host: k.node, pid: k.pid, gen: r.gen}, lane: timeline.Lane{
				Node: k.node, PID: k.pid, VPID: r.vpid, ContainerID: r.containerID, PodUID: r.podUID,
			}})
		}
	}
	return out
}

// Snapshot copies the windows of the query's range from the index under
// its read lock, then the recorded spans, names and GPU memory under the
// timeline's own lock, and builds the page's snapshot from the copies with
// no lock held. It starts (or prolongs) recording for timelineWatchTTL.
func (c *correlator) Snapshot(q timeline.Query) (*timeline.Snapshot, error) {
	now := c.now().UnixNano()
	c.timeline.watchedUntil.Store(now + int64(timelineWatchTTL))
	from, to := q.Range(now)
	var scopes []scopeCopy
	c.mu.RLock()
	for _, sc := range c.scopesLocked() {
		cp := scopeCopy{laneScope: sc}
		// The pod filter waits for the lanes' names, below.
		if q.PID == 0 || sc.lane.PID == q.PID {
			cp.entries = c.windows.AppendOverlapping(nil, sc.key, from, to)
		}
		scopes = append(scopes, cp)
	}
	c.mu.RUnlock()

	t := c.timeline
	t.mu.Lock()
	labels := make(map[scopeKey]timeline.Lane, len(scopes))
	for _, s := range scopes {
		if l, ok := t.labels[noGen(s.key)]; ok {
			labels[noGen(s.key)] = l
		}
	}
	threads := map[threadKey]string{}
	details := map[detailKey]windowDetail{}
	for _, s := range scopes {
		for _, e := range s.entries {
			k := detailKey{scope: noGen(s.key), start: e.Start, tid: e.ThreadID, kind: e.Kind}
			if d, ok := t.details[k]; ok {
				details[k] = d
			}
			tk := threadKey{scope: k.scope, pid: e.PID, tid: e.ThreadID}
			if n, ok := t.threads[tk]; ok {
				threads[tk] = n
			}
		}
	}
	var spans []tlSpan
	if q.WantsKind(timeline.KindSpan) {
		for _, s := range t.spans.buf {
			if s.end > from && s.start < to {
				spans = append(spans, s)
			}
		}
	}
	var gpu []tlGPU
	if q.WantsKind(timeline.KindGPU) {
		for _, p := range t.gpu.buf {
			if p.t >= from && p.t <= to {
				gpu = append(gpu, p)
			}
		}
	}
	t.mu.Unlock()

	return c.buildSnapshot(q, from, to, scopes, labels, threads, details, spans, gpu), nil
}

// scopeCopy is one scope's windows in range, copied out of the index.
type scopeCopy struct {
	laneScope
	entries []windowindex.Entry
}

// buildSnapshot turns the copies into the page's snapshot: one lane per
// scope with anything in range, times relative to a base at from.
func (c *correlator) buildSnapshot(q timeline.Query, from, to int64, scopes []scopeCopy, labels map[scopeKey]timeline.Lane,
	threads map[threadKey]string, details map[detailKey]windowDetail, spans []tlSpan, gpu []tlGPU) *timeline.Snapshot {
	s := &timeline.Snapshot{Lanes: []timeline.Lane{}, Windows: []timeline.Window{}, Spans: []timeline.Span{}, GPU: []timeline.GPUPoint{},
		Recording: true}
	s.SetBase(from)
	s.From, s.To = from-s.Base, to-s.Base
	laneOf := map[scopeKey]int{} // by noGen key: spans and GPU points carry no incarnation
	slices.SortFunc(scopes, func(a, b scopeCopy) int {
		return cmp.Or(cmp.Compare(a.key.host, b.key.host), cmp.Compare(a.key.pod, b.key.pod), cmp.Compare(a.key.pid, b.key.pid))
	})
	lane := func(sc laneScope) (int, bool) {
		k := noGen(sc.key)
		if i, ok := laneOf[k]; ok {
			return i, true
		}
		l := sc.lane
		if named, ok := labels[k]; ok {
			l.PodName, l.ContainerName, l.Executable, l.Runtime, l.Service = named.PodName, named.ContainerName, named.Executable, named.Runtime, named.Service
			l.ContainerID, l.PodUID = cmp.Or(l.ContainerID, named.ContainerID), cmp.Or(l.PodUID, named.PodUID)
		}
		if !q.WantsLane(l) {
			return 0, false
		}
		l.Name = timeline.LaneName(l)
		if l.PID == 0 {
			l.Name = cmp.Or(l.PodName, l.PodUID, l.Node, l.Name)
		}
		l.ID = len(s.Lanes)
		s.Lanes = append(s.Lanes, l)
		laneOf[k] = l.ID
		return l.ID, true
	}
	total := 0
	for _, sc := range scopes {
		total += len(sc.entries)
	}
	s.Windows = make([]timeline.Window, 0, total)
	for _, sc := range scopes {
		kept := sc.entries[:0]
		for _, e := range sc.entries {
			if q.WantsKind(string(kinds[e.Kind])) {
				kept = append(kept, e)
			}
		}
		if len(kept) == 0 {
			continue
		}
		id, ok := lane(sc.laneScope)
		if !ok {
			continue
		}
		for _, e := range kept {
			k := detailKey{scope: noGen(sc.key), start: e.Start, tid: e.ThreadID, kind: e.Kind}
			d := details[k]
			s.Windows = append(s.Windows, timeline.Window{Lane: id, Kind: string(kinds[e.Kind]), Start: e.Start - s.Base,
				Dur: e.Duration(), TID: e.ThreadID, Detail: d.detail, Cause: d.cause})
			if n, ok := threads[threadKey{scope: k.scope, pid: e.PID, tid: e.ThreadID}]; ok {
				l := &s.Lanes[id]
				if l.Threads == nil {
					l.Threads = map[int64]string{}
				}
				l.Threads[e.ThreadID] = n
			}
		}
	}
	// Spans and GPU points of scopes with no windows in range still get a
	// lane; their scopes are found by key among those listed.
	byKey := map[scopeKey]laneScope{}
	for _, sc := range scopes {
		byKey[noGen(sc.key)] = sc.laneScope
	}
	laneFor := func(k scopeKey) (int, bool) {
		sc, ok := byKey[k]
		if !ok {
			sc = laneScope{key: k, lane: timeline.Lane{Node: k.host, PID: k.pid, PodUID: k.pod}}
		}
		return lane(sc)
	}
	slices.SortFunc(spans, func(a, b tlSpan) int { return cmp.Compare(b.start, a.start) })
	for _, sp := range spans {
		if q.MaxSpans > 0 && len(s.Spans) >= q.MaxSpans {
			s.SpansDropped++
			continue
		}
		id, ok := laneFor(noGen(sp.scope))
		if !ok {
			continue
		}
		v := sp.span
		v.Lane, v.Start, v.Dur = id, sp.start-s.Base, sp.end-sp.start
		s.Spans = append(s.Spans, v)
	}
	for _, g := range gpu {
		id, ok := laneFor(g.scope)
		if !ok {
			continue
		}
		p := g.p
		p.Lane, p.T = id, g.t-s.Base
		s.GPU = append(s.GPU, p)
	}
	s.Summarize(q.MaxWindows, q.Buckets)
	s.Source = c.name
	return s
}
