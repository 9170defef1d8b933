package runtimecorrelationprocessor // import "github.com/otelcol-ai/otelcol-ai/processor/runtimecorrelationprocessor"

import (
	"cmp"
	"context"
	"math"
	"slices"
	"strings"
	"sync"
	"unsafe"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/metric"

	"github.com/otelcol-ai/otelcol-ai/internal/window"
	"github.com/otelcol-ai/otelcol-ai/pkg/timeline"
	"github.com/otelcol-ai/otelcol-ai/processor/runtimecorrelationprocessor/internal/metadata"
	"github.com/otelcol-ai/otelcol-ai/processor/runtimecorrelationprocessor/internal/recent"
	"github.com/otelcol-ai/otelcol-ai/processor/runtimecorrelationprocessor/internal/windowindex"
)

// The timeline page's view of the correlator (pkg/timeline): the windows
// come from the index, copied under its read lock; the rest (spans, thread
// names, VM operations and GC names, GPU memory, process names) the index
// does not keep, so it is recorded beside it, always: one opens the page
// after something happened.

// timelineState is what the correlator records for the timeline page.
type timelineState struct {
	mu         sync.Mutex
	maxDetails int
	maxLabels  int
	labels     map[scopeKey]timeline.Lane
	threads    map[threadKey]string
	details    map[detailKey]windowDetail
	spans      *recent.Ring[tlSpan]
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

// tlSpan is what the page shows of a span, kept compact until a snapshot
// asks for it: ids as bytes, the overlap totals of the kinds that
// overlapped it, its inference.* attributes if it had any.
type tlSpan struct {
	scope      scopeKey
	start, end int64
	traceID    pcommon.TraceID
	spanID     pcommon.SpanID
	name       string
	overlap    []kindTotal
	scores     []spanScore
}

// kindTotal is the windows of one kind that overlapped a span.
type kindTotal struct {
	kind  uint8
	count uint32
	dur   int64
}

// spanScore is one inference.* attribute of a span: a float64, an int64
// or a clipped string.
type spanScore struct {
	key   string
	value any
}

// Costs the ring is charged, in bytes: the span's fixed part and its ring
// slot, each overlap total, each score beside its key and value.
const (
	tlSpanCost    = int64(unsafe.Sizeof(tlSpan{})) + 8
	kindTotalCost = int64(unsafe.Sizeof(kindTotal{}))
	spanScoreCost = int64(unsafe.Sizeof(spanScore{})) + 16
)

// cost is what s holds: its fixed part, its name, its scope's names
// (shared with other spans of its batch, charged to each: an upper bound),
// its overlap totals and scores.
func (s *tlSpan) cost() int64 {
	c := tlSpanCost + int64(len(s.name)+len(s.scope.host)+len(s.scope.pod)) + int64(len(s.overlap))*kindTotalCost
	for _, sc := range s.scores {
		c += spanScoreCost + int64(len(sc.key))
		if v, ok := sc.value.(string); ok {
			c += int64(len(v))
		}
	}
	return c
}

// page is what the snapshot sends of s: its ids in hex and its totals by
// kind name. Lane, Start and Dur are left to the caller.
func (s *tlSpan) page() timeline.Span {
	v := timeline.Span{TraceID: s.traceID.String(), SpanID: s.spanID.String(), Name: s.name}
	if len(s.overlap) > 0 {
		v.Overlap = make(map[string]timeline.OverlapTotal, len(s.overlap))
		for _, o := range s.overlap {
			v.Overlap[string(kinds[o.kind])] = timeline.OverlapTotal{Duration: o.dur, Count: int64(o.count)}
		}
	}
	if len(s.scores) > 0 {
		v.Scores = make(map[string]any, len(s.scores))
		for _, sc := range s.scores {
			v.Scores[sc.key] = sc.value
		}
	}
	return v
}

// tlPoint is one reading at t (Unix ns) drawn on its process's lane: a
// GPU's memory (timeline.GPUPoint) or a JVM account (timeline.AccountPoint,
// whose name is one of the timeline package's constants: nothing to charge
// for).
type tlPoint[P any] struct {
	scope scopeKey
	t     int64
	p     P
}

type (
	tlGPU     = tlPoint[timeline.GPUPoint]
	tlAccount = tlPoint[timeline.AccountPoint]
)

// onLanes returns the points of the scopes laneFor places, with their lane
// and time relative to base set by at.
func onLanes[P any](points []tlPoint[P], laneFor func(scopeKey) (int, bool), base int64, at func(p *P, lane int, t int64)) []P {
	var out []P
	for _, pt := range points {
		id, ok := laneFor(pt.scope)
		if !ok {
			continue
		}
		p := pt.p
		at(&p, id, pt.t-base)
		out = append(out, p)
	}
	return out
}

func newTimelineState(cfg *Config) *timelineState {
	return &timelineState{
		maxDetails: cfg.Windows.MaxWindows,
		maxLabels:  cfg.Identity.MaxProcesses,
		labels:     map[scopeKey]timeline.Lane{},
		threads:    map[threadKey]string{},
		details:    map[detailKey]windowDetail{},
		spans:      recent.New[tlSpan](cfg.Timeline.MaxSpans, cfg.Timeline.MaxBytes),
	}
}

// observe reports the recent spans' count and bytes through tel.
func (t *timelineState) observe(tel *metadata.TelemetryBuilder) error {
	held := func() (spans, bytes int64) {
		t.mu.Lock()
		defer t.mu.Unlock()
		return int64(t.spans.Len()), t.spans.Bytes()
	}
	if err := tel.RegisterProcessorRuntimecorrelationTimelineSpansCallback(func(_ context.Context, o metric.Int64Observer) error {
		n, _ := held()
		o.Observe(n)
		return nil
	}); err != nil {
		return err
	}
	return tel.RegisterProcessorRuntimecorrelationTimelineSpanBytesCallback(func(_ context.Context, o metric.Int64Observer) error {
		_, b := held()
		o.Observe(b)
		return nil
	})
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
	for i := range spans {
		t.spans.Add(spans[i], spans[i].cost())
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

// recordSpan copies what the page shows of a span: its ids and name, the
// totals of the windows that overlapped it (as putTotals wrote them) and
// its inference.* attributes.
func recordSpan(key scopeKey, span ptrace.Span, start, end int64, totals overlapTotals) tlSpan {
	s := tlSpan{scope: key, start: start, end: end, traceID: span.TraceID(), spanID: span.SpanID(), name: timeline.Clip(span.Name())}
	if totals.seen > 0 {
		s.overlap = make([]kindTotal, 0, totals.seen)
		for k := range kinds {
			if totals.count[k] > 0 {
				s.overlap = append(s.overlap, kindTotal{kind: uint8(k), count: uint32(totals.count[k]), dur: totals.dur[k]})
			}
		}
	}
	for k, v := range span.Attributes().All() {
		if !strings.HasPrefix(k, timeline.ScorePrefix) || len(k) > timeline.MaxText || len(s.scores) >= timeline.MaxScores {
			continue
		}
		var val any
		switch v.Type() {
		case pcommon.ValueTypeDouble:
			f := v.Double()
			if math.IsNaN(f) || math.IsInf(f, 0) {
				continue
			}
			val = f
		case pcommon.ValueTypeInt:
			val = v.Int()
		default:
			val = timeline.Clip(v.AsString())
		}
		s.scores = append(s.scores, spanScore{key: k, value: val})
	}
	return s
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
				Node: k.node, PID: k.pid, VPID: int64(r.id.VPID), ContainerID: r.id.ContainerID, PodUID: r.id.PodUID,
			}})
		}
	}
	return out
}

// Snapshot copies the windows of the query's range from the index under
// its read lock, then the recorded spans, names and GPU memory under the
// timeline's own lock, and builds the page's snapshot from the copies with
// no lock held.
func (c *correlator) Snapshot(q timeline.Query) (*timeline.Snapshot, error) {
	now := c.now().UnixNano()
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
		t.spans.All(func(s *tlSpan) bool {
			if s.end > from && s.start < to {
				spans = append(spans, *s)
			}
			return true
		})
	}
	t.mu.Unlock()

	gpu, accts := c.storePoints(q, from, to)
	return c.buildSnapshot(q, from, to, scopes, labels, threads, details, spans, gpu, accts), nil
}

// scopeCopy is one scope's windows in range, copied out of the index.
type scopeCopy struct {
	laneScope
	entries []windowindex.Entry
}

// buildSnapshot turns the copies into the page's snapshot: one lane per
// scope with anything in range, times relative to a base at from.
func (c *correlator) buildSnapshot(q timeline.Query, from, to int64, scopes []scopeCopy, labels map[scopeKey]timeline.Lane,
	threads map[threadKey]string, details map[detailKey]windowDetail, spans []tlSpan, gpu []tlGPU, accts []tlAccount) *timeline.Snapshot {
	s := &timeline.Snapshot{Lanes: []timeline.Lane{}, Windows: []timeline.Window{}, Spans: []timeline.Span{}, GPU: []timeline.GPUPoint{},
		Accounts:  []timeline.AccountPoint{},
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
		v := sp.page()
		v.Lane, v.Start, v.Dur = id, sp.start-s.Base, sp.end-sp.start
		s.Spans = append(s.Spans, v)
	}
	s.GPU = append(s.GPU, onLanes(gpu, laneFor, s.Base, func(p *timeline.GPUPoint, lane int, t int64) { p.Lane, p.T = lane, t })...)
	s.Accounts = append(s.Accounts, onLanes(accts, laneFor, s.Base, func(p *timeline.AccountPoint, lane int, t int64) { p.Lane, p.T = lane, t })...)
	s.Summarize(q.MaxWindows, q.Buckets)
	s.Source = c.name
	return s
}
