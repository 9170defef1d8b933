package runtimecorrelationprocessor // import "github.com/otelcol-ai/otelcol-ai/processor/runtimecorrelationprocessor"

import (
	"go.opentelemetry.io/collector/component"

	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/otelcol-ai/otelcol-ai/internal/attention"
	"github.com/otelcol-ai/otelcol-ai/internal/procresource"
	"github.com/otelcol-ai/otelcol-ai/internal/procsocket"
	"github.com/otelcol-ai/otelcol-ai/internal/runtimestate"
	"github.com/otelcol-ai/otelcol-ai/internal/window"
	"github.com/otelcol-ai/otelcol-ai/processor/runtimecorrelationprocessor/internal/metadata"
	"github.com/otelcol-ai/otelcol-ai/processor/runtimecorrelationprocessor/internal/windowindex"
)

// Why a window was not indexed (the reason attribute of
// processor_runtimecorrelation_windows_dropped).
const (
	reasonDuplicate = "duplicate"
	reasonTooOld    = "too_old"
	reasonFuture    = "future"
	reasonMalformed = "malformed"
	reasonUnscoped  = "unscoped"
	// reasonUntrusted: a record shaped like a window from a sender that
	// is not trusted (a workload over OTLP).
	reasonUntrusted = "untrusted"
	// Why a window was evicted (processor_runtimecorrelation_windows_evicted).
	reasonRetention = "retention"
	reasonCap       = "cap"
	reasonScopeCap  = "scope_cap"
	reasonLongCap   = "long_cap"
)

func reasonOpt(r string) metric.AddOption {
	return metric.WithAttributeSet(attribute.NewSet(attribute.String("reason", r)))
}

// scopeKey identifies a match scope: the fields the scope does not use are
// zero. A process is its node, its host pid and the pid's incarnation.
type scopeKey struct {
	host string
	pod  string
	pid  int64
	gen  uint32
}

// correlator is the state one component ID shares among its pipelines: the
// window index, what the windows said about their processes, the time
// covered by spans already forwarded (to count windows that come too late
// for them) and the overlap totals for metrics.
type correlator struct {
	cfg    *Config
	logger *zap.Logger
	tel    *metadata.TelemetryBuilder
	pairs  [numKinds][numKinds]bool
	// overlapKinds marks the kinds that appear in some pair: only their
	// windows need an overlap query on arrival.
	overlapKinds [numKinds]bool
	// now is the collector's clock; tests replace it.
	now func() time.Time
	// node is the node the collector runs on: the host.name its receivers
	// give windows, and the node of processes found in its /proc.
	node procresource.Node
	ids  *identities
	// attention is where matched spans' and JVM pauses' processes are
	// marked for the pythongil receiver (attention.go): the runtimestate
	// extension's, set by bind; nil (no marks) without runtime_state.
	attention atomic.Pointer[attention.Registry]
	// store is the runtimestate extension's, the timeline's GPU memory
	// and JVM accounts (snapshot_store.go); nil before bind.
	store atomic.Pointer[runtimestate.Store]
	// name is the component ID the timeline page finds this state by;
	// timeline is what it records for the page (snapshot.go).
	name     string
	timeline *timelineState
	// names are the scopes' pod, container and workload names, for the
	// records and metrics this processor makes (names.go).
	names *scopeNames
	// bindMu guards bound and unregister: the first pipeline to start
	// registers the state in the runtimestate extension (bind).
	bindMu     sync.Mutex
	bound      bool
	unregister func()

	// untrustedOnce logs the first untrusted window batch.
	untrustedOnce sync.Once

	mu       sync.RWMutex
	windows  *windowindex.Index[scopeKey]
	released *windowindex.Coverage[scopeKey]
	procs    *processes
	totals   map[pairKey]*pairTotal
	// settings build the overlap metrics (metadata.NewMetricsBuilder).
	settings processor.Settings
}

// pairKey names one overlap metric series.
type pairKey struct {
	scope         scopeKey
	first, second uint8
}

// pairTotal is one series' cumulative figures.
type pairTotal struct {
	start    time.Time
	proc     procresource.Identity
	count    int64
	duration int64
}

func newCorrelator(set processor.Settings, cfg *Config) (*correlator, error) {
	tel, err := metadata.NewTelemetryBuilder(set.TelemetrySettings)
	if err != nil {
		return nil, fmt.Errorf("runtimecorrelation: telemetry: %w", err)
	}
	bounds := windowindex.Config{Retention: int64(cfg.Windows.Retention), MaxEntries: cfg.Windows.MaxWindows}
	windowBounds := bounds
	windowBounds.MaxPerScope = cfg.Windows.MaxPerScope
	c := &correlator{
		cfg:      cfg,
		logger:   set.Logger,
		tel:      tel,
		pairs:    cfg.pairTable(),
		now:      time.Now,
		node:     procresource.LocalNode(),
		windows:  windowindex.New[scopeKey](windowBounds),
		released: windowindex.NewCoverage[scopeKey](bounds),
		procs:    newProcesses(cfg.Identity.MaxProcesses),
		totals:   map[pairKey]*pairTotal{},
		name:     set.ID.String(),
		settings: set,
		timeline: newTimelineState(cfg),
		names:    newScopeNames(),
	}
	var sockets socketOwners
	if cfg.Identity.Connection {
		sockets = procsocket.NewResolver(cfg.Identity.ProcRoot)
	}
	trusted, err := cfg.Identity.trustedPrefixes()
	if err != nil {
		return nil, fmt.Errorf("runtimecorrelation: %w", err)
	}
	c.ids = newIdentities(c, newProcessTable(cfg.Identity.ProcRoot), sockets, cfg.Identity.CacheTTL, trusted)
	if err := c.timeline.observe(tel); err != nil {
		return nil, fmt.Errorf("runtimecorrelation: telemetry: %w", err)
	}
	c.unregister = func() {}
	for a := range numKinds {
		for b := range numKinds {
			if c.pairs[a][b] {
				c.overlapKinds[a], c.overlapKinds[b] = true, true
			}
		}
	}
	return c, nil
}

// bind registers the correlator's state in the runtimestate extension that
// runtime_state names, for the timeline extension, and marks attention in
// its registry from then on, once: each of its
// pipelines' processors calls it at Start (extensions start first).
func (c *correlator) bind(host component.Host) error {
	c.bindMu.Lock()
	defer c.bindMu.Unlock()
	if c.bound || c.cfg.RuntimeState == nil {
		return nil
	}
	store, err := runtimestate.Lookup(host, *c.cfg.RuntimeState)
	if err != nil {
		return fmt.Errorf("runtimecorrelation: runtime_state: %w", err)
	}
	c.unregister = store.Timelines().Register(c.name, c)
	c.attention.Store(store.Attention())
	c.store.Store(store)
	c.bound = true
	return nil
}

func (c *correlator) close() {
	c.bindMu.Lock()
	c.unregister()
	c.bindMu.Unlock()
	c.tel.Shutdown()
}

// isNode reports whether a span's host.name names a node: this one, or
// one whose windows are indexed.
func (c *correlator) isNode(host string) bool {
	if host == "" {
		return false
	}
	if host == c.node.HostName || host == c.node.K8sNodeName {
		return true
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.procs.nodes[host] > 0
}

// source is the process of a batch of windows, from their resource.
type source struct {
	node   string
	proc   procresource.Identity
	hasPID bool
	// maxStart is the latest start among the source's windows.
	maxStart int64
}

// sourceOf reads the identity of a window resource. On this node the
// process table adds the start ticks, when it still holds the process the
// resource describes.
func (c *correlator) sourceOf(res pcommon.Resource) source {
	attrs := res.Attributes()
	pid, hasPID := window.IntAttr(attrs, window.ResourcePID)
	vpid, _ := window.IntAttr(attrs, window.ResourceVPID)
	s := source{
		node:   window.StrAttr(attrs, window.ResourceHostName),
		hasPID: hasPID && pid > 0,
		proc: procresource.Identity{PID: int(pid), VPID: int(vpid),
			ContainerID: window.StrAttr(attrs, window.ResourceContainerID), PodUID: window.StrAttr(attrs, window.ResourceK8sPodUID)},
	}
	if s.hasPID && s.node == c.node.HostName && c.ids.table != nil {
		if p, ok := c.ids.table.ByHostPID(int(pid)); ok && sameAs(p, s.proc) {
			s.proc.StartTicks = p.StartTicks
		}
	}
	return s
}

// sameAs reports whether p may be the process a resource describes as q:
// what q says about it agrees.
func sameAs(p, q procresource.Identity) bool {
	return (q.VPID == 0 || p.VPID == q.VPID) && (q.ContainerID == "" || p.ContainerID == q.ContainerID) &&
		(q.PodUID == "" || p.PodUID == q.PodUID)
}

// scopeOf returns the match scope of a window source, false when it lacks
// the attribute the scope needs (process.pid for process, k8s.pod.uid for
// pod; host needs nothing). A process's incarnation is set at indexing.
func (c *correlator) scopeOf(s source) (scopeKey, bool) {
	switch c.cfg.MatchScope {
	case ScopePod:
		if s.proc.PodUID == "" {
			return scopeKey{}, false
		}
		return scopeKey{pod: s.proc.PodUID}, true
	case ScopeHost:
		return scopeKey{host: s.node}, true
	default:
		if !s.hasPID {
			return scopeKey{}, false
		}
		return scopeKey{host: s.node, pid: int64(s.proc.PID)}, true
	}
}

// putScope writes the scope's identifying attributes onto a resource: for
// a process its node, both pids, container and pod.
func (c *correlator) putScope(attrs pcommon.Map, k scopeKey, p procresource.Identity) {
	if k.host != "" {
		attrs.PutStr(window.ResourceHostName, k.host)
	}
	switch c.cfg.MatchScope {
	case ScopeProcess:
		attrs.PutInt(window.ResourcePID, k.pid)
		if p.VPID != 0 {
			attrs.PutInt(window.ResourceVPID, int64(p.VPID))
		}
		if p.ContainerID != "" {
			attrs.PutStr(window.ResourceContainerID, p.ContainerID)
		}
		if p.PodUID != "" {
			attrs.PutStr(window.ResourceK8sPodUID, p.PodUID)
		}
	case ScopePod:
		attrs.PutStr(window.ResourceK8sPodUID, k.pod)
	}
	c.names.put(k, attrs)
}

// overlap is one pair of windows that overlapped.
type overlap struct {
	scope         scopeKey
	proc          procresource.Identity
	first, second windowindex.Entry
	start, end    int64
}

// pending is a decoded window waiting to be indexed.
type pending struct {
	scope scopeKey
	entry windowindex.Entry
	// src indexes the batch's sources; -1 for a span.
	src int
}

// ingestLogs indexes the windows among ld's records and returns the
// overlaps they complete. Records that are not windows are ignored;
// windows that cannot be indexed are counted, and all pass on unchanged.
func (c *correlator) ingestLogs(ctx context.Context, ld plog.Logs) []overlap {
	if !c.windowsTrusted(ctx) {
		c.dropUntrusted(ctx, ld)
		return nil
	}
	now := c.now().UnixNano()
	futureLimit := now + int64(c.cfg.Windows.MaxClockSkew)
	var (
		batch                       []pending
		sources                     []source
		malformed, unscoped, future int64
		notes                       []timelineNote
	)
	rls := ld.ResourceLogs()
	for i := 0; i < rls.Len(); i++ {
		rl := rls.At(i)
		src := c.sourceOf(rl.Resource())
		key, scoped := c.scopeOf(src)
		src.maxStart = math.MinInt64
		srcIndex := len(sources)
		paused := false
		if scoped {
			c.timeline.noteResource(key, rl.Resource())
			c.names.note(key, rl.Resource().Attributes())
		}
		sls := rl.ScopeLogs()
		for j := 0; j < sls.Len(); j++ {
			lrs := sls.At(j).LogRecords()
			for k := 0; k < lrs.Len(); k++ {
				w, err := window.Decode(lrs.At(k))
				if err != nil {
					if errors.Is(err, window.ErrMalformed) {
						malformed++
						c.logger.Debug("runtimecorrelation: window not indexed", zap.Error(err))
					}
					continue
				}
				kind, known := kindIndex(w.Kind)
				end := w.End()
				switch {
				case !known:
					continue
				case end < w.Start: // a duration that overflows the clock
					malformed++
					continue
				case !scoped:
					unscoped++
					continue
				case end > futureLimit:
					future++
					continue
				}
				src.maxStart = max(src.maxStart, w.Start)
				paused = paused || isPause(w.Kind)
				notes = append(notes, noteWindow(key, int64(src.proc.PID), kind, w))
				batch = append(batch, pending{scope: key, src: srcIndex, entry: windowindex.Entry{
					Start: w.Start, End: end, ThreadID: w.ThreadID, PID: int64(src.proc.PID), Kind: kind,
				}})
			}
		}
		if paused {
			c.markPaused(src)
		}
		sources = append(sources, src)
	}
	for r, n := range map[string]int64{reasonMalformed: malformed, reasonUnscoped: unscoped, reasonFuture: future} {
		if n > 0 {
			c.tel.ProcessorRuntimecorrelationWindowsDropped.Add(ctx, n, reasonOpt(r))
		}
	}
	if len(notes) > 0 {
		c.mu.RLock()
		horizon := c.windows.Horizon()
		c.mu.RUnlock()
		c.timeline.noteWindows(notes, horizon)
	}
	if len(batch) == 0 {
		return nil
	}
	return c.index(ctx, batch, sources)
}

// windowsTrusted reports whether the windows in ctx's batch are this
// collector's own measurements (a receiver marked them window.Measured)
// or come from a sender in identity::trusted_peers.
func (c *correlator) windowsTrusted(ctx context.Context) bool {
	_, measured := window.MeasuredBy(ctx)
	return measured || c.ids.fromTrustedPeer(ctx)
}

// dropUntrusted counts the records of ld shaped like windows, which a
// sender that is not trusted sent: passed on as logs, never indexed.
func (c *correlator) dropUntrusted(ctx context.Context, ld plog.Logs) {
	var n int64
	rls := ld.ResourceLogs()
	for i := 0; i < rls.Len(); i++ {
		sls := rls.At(i).ScopeLogs()
		for j := 0; j < sls.Len(); j++ {
			lrs := sls.At(j).LogRecords()
			for k := 0; k < lrs.Len(); k++ {
				if lrs.At(k).EventName() == "" {
					continue
				}
				if w, err := window.Decode(lrs.At(k)); err == nil && w.Kind.Known() {
					n++
				}
			}
		}
	}
	if n == 0 {
		return
	}
	c.tel.ProcessorRuntimecorrelationWindowsDropped.Add(ctx, n, reasonOpt(reasonUntrusted))
	peer, _ := peerOf(ctx)
	c.untrustedOnce.Do(func() {
		c.logger.Info("runtimecorrelation: windows sent by a workload are not indexed (only this collector's receivers measure windows); a collector that forwards for others goes in identity::trusted_peers",
			zap.String("peer", peer.String()), zap.Int64("windows", n))
	})
}

// learn records what each source said about its process and returns the
// incarnation each source's windows are indexed under; c.mu is held.
func (c *correlator) learn(sources []source) []uint32 {
	gens := make([]uint32, len(sources))
	horizon := c.windows.Horizon()
	c.procs.maybeSweep(horizon, int64(c.cfg.Windows.Retention))
	for i, s := range sources {
		if s.hasPID && s.maxStart != math.MinInt64 {
			gens[i] = c.procs.learn(s.node, s.proc, s.maxStart, horizon)
		}
	}
	return gens
}

// index adds decoded windows to the index under one lock.
func (c *correlator) index(ctx context.Context, batch []pending, sources []source) []overlap {
	var (
		overlaps                []overlap
		scratch                 []windowindex.Entry
		indexed, dup, old, late int64
	)
	wallNow := c.now()
	c.mu.Lock()
	refusedBefore := c.procs.refused
	gens := c.learn(sources)
	lenBefore, statsBefore := c.windows.Len(), c.windows.Stats()
	for _, p := range batch {
		e := p.entry
		src := sources[p.src]
		if c.cfg.MatchScope == ScopeProcess {
			p.scope.gen = gens[p.src]
		}
		res, err := c.windows.Insert(p.scope, e)
		if err != nil { // ruled out by ingestLogs; counted should it happen
			c.tel.ProcessorRuntimecorrelationWindowsDropped.Add(ctx, 1, reasonOpt(reasonMalformed))
			continue
		}
		switch res {
		case windowindex.Duplicate:
			dup++
			continue
		case windowindex.TooOld:
			old++
		case windowindex.Inserted:
			indexed++
		}
		if c.released.Overlaps(p.scope, e.Start, e.End) {
			late++
		}
		if res != windowindex.Inserted || !c.overlapKinds[e.Kind] {
			continue
		}
		scratch = c.windows.AppendOverlapping(scratch[:0], p.scope, e.Start, e.End)
		for _, o := range scratch {
			if o == e {
				continue
			}
			first, second := e, o
			switch {
			case c.pairs[e.Kind][o.Kind]:
			case c.pairs[o.Kind][e.Kind]:
				first, second = o, e
			default:
				continue
			}
			ov := overlap{scope: p.scope, proc: src.proc, first: first, second: second, start: max(e.Start, o.Start), end: min(e.End, o.End)}
			overlaps = append(overlaps, ov)
			c.addTotal(ov, wallNow)
		}
	}
	lenAfter, statsAfter := c.windows.Len(), c.windows.Stats()
	refused := c.procs.refused - refusedBefore
	c.mu.Unlock()
	c.countIndexStats(ctx, statsBefore, statsAfter)
	if refused > 0 {
		c.logger.Debug("runtimecorrelation: processes not learned, identity::max_processes reached",
			zap.Uint64("sources", refused), zap.Int("max_processes", c.cfg.Identity.MaxProcesses))
	}

	c.tel.ProcessorRuntimecorrelationWindowsIndexed.Add(ctx, indexed)
	if dup > 0 {
		c.tel.ProcessorRuntimecorrelationWindowsDropped.Add(ctx, dup, reasonOpt(reasonDuplicate))
	}
	if old > 0 {
		c.tel.ProcessorRuntimecorrelationWindowsDropped.Add(ctx, old, reasonOpt(reasonTooOld))
	}
	if late > 0 {
		c.tel.ProcessorRuntimecorrelationWindowsLate.Add(ctx, late)
	}
	c.tel.ProcessorRuntimecorrelationWindows.Add(ctx, int64(lenAfter-lenBefore))
	if len(overlaps) > 0 {
		c.tel.ProcessorRuntimecorrelationOverlaps.Add(ctx, int64(len(overlaps)))
	}
	return overlaps
}

// countIndexStats reports what the index counted between two readings of
// its stats: evictions by reason and clipped windows.
func (c *correlator) countIndexStats(ctx context.Context, before, after windowindex.Stats) {
	for _, ev := range []struct {
		reason        string
		before, after uint64
	}{
		{reasonRetention, before.EvictedRetention, after.EvictedRetention},
		{reasonCap, before.EvictedCap, after.EvictedCap},
		{reasonScopeCap, before.EvictedScopeCap, after.EvictedScopeCap},
		{reasonLongCap, before.EvictedLongCap, after.EvictedLongCap},
	} {
		if n := ev.after - ev.before; n > 0 {
			c.tel.ProcessorRuntimecorrelationWindowsEvicted.Add(ctx, int64(n), reasonOpt(ev.reason))
		}
	}
	if n := after.Clipped - before.Clipped; n > 0 {
		c.tel.ProcessorRuntimecorrelationWindowsClipped.Add(ctx, int64(n))
	}
}

// addTotal counts an overlap in its metric series; c.mu is held.
func (c *correlator) addTotal(ov overlap, now time.Time) {
	k := pairKey{scope: ov.scope, first: ov.first.Kind, second: ov.second.Kind}
	t, ok := c.totals[k]
	if !ok {
		t = &pairTotal{start: now, proc: ov.proc}
		c.totals[k] = t
	}
	t.count++
	t.duration += ov.end - ov.start
}

// recordReleased records the time ranges of spans that left the processor, so
// that windows overlapping them later are counted as late.
func (c *correlator) recordReleased(spans []pending) {
	if len(spans) == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range spans {
		c.released.Add(s.scope, s.entry.Start, s.entry.End)
	}
}

// Names of the runtime.overlap record and its attributes.
const (
	overlapEventName      = "runtime.overlap"
	attrOverlapDuration   = "runtime.overlap.duration"
	attrOverlapScope      = "runtime.overlap.scope"
	attrOverlapFirstKind  = "runtime.overlap.first.kind"
	attrOverlapSecondKind = "runtime.overlap.second.kind"
)

// appendOverlaps adds one runtime.overlap record per overlap to ld, in one
// resource per scope, each naming both windows: kind, start, duration,
// thread and process.
func (c *correlator) appendOverlaps(ld plog.Logs, overlaps []overlap) {
	if len(overlaps) == 0 {
		return
	}
	observed := pcommon.NewTimestampFromTime(c.now())
	byScope := map[scopeKey]plog.LogRecordSlice{}
	for _, ov := range overlaps {
		lrs, ok := byScope[ov.scope]
		if !ok {
			rl := ld.ResourceLogs().AppendEmpty()
			c.putScope(rl.Resource().Attributes(), ov.scope, ov.proc)
			sl := rl.ScopeLogs().AppendEmpty()
			sl.Scope().SetName(metadata.ScopeName)
			lrs = sl.LogRecords()
			byScope[ov.scope] = lrs
		}
		lr := lrs.AppendEmpty()
		lr.SetEventName(overlapEventName)
		lr.SetTimestamp(pcommon.Timestamp(ov.start))
		lr.SetObservedTimestamp(observed)
		first, second := kinds[ov.first.Kind], kinds[ov.second.Kind]
		lr.Body().SetStr(fmt.Sprintf("%s overlapped %s for %s", first, second, time.Duration(ov.end-ov.start)))
		attrs := lr.Attributes()
		attrs.PutInt(attrOverlapDuration, ov.end-ov.start)
		attrs.PutStr(attrOverlapScope, string(c.cfg.MatchScope))
		putWindow(attrs, "runtime.overlap.first.", ov.first)
		putWindow(attrs, "runtime.overlap.second.", ov.second)
	}
}

// putWindow writes one window of an overlap under prefix: kind, start (ns),
// duration (ns), thread.id and process.pid where known.
func putWindow(attrs pcommon.Map, prefix string, e windowindex.Entry) {
	attrs.PutStr(prefix+"kind", string(kinds[e.Kind]))
	attrs.PutInt(prefix+"start", e.Start)
	attrs.PutInt(prefix+"duration", e.Duration())
	if e.ThreadID != 0 {
		attrs.PutInt(prefix+window.AttrThreadID, e.ThreadID)
	}
	if e.PID != 0 {
		attrs.PutInt(prefix+window.ResourcePID, e.PID)
	}
}
