package runtimecorrelationprocessor // import "github.com/otelcol-ai/otelcol-ai/processor/runtimecorrelationprocessor"

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

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
// zero.
type scopeKey struct {
	host string
	pod  string
	pid  int64
}

// correlator is the state one component ID shares among its pipelines: the
// window index, the time covered by spans already forwarded (to count
// windows that come too late for them) and the overlap totals for metrics.
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

	mu       sync.RWMutex
	windows  *windowindex.Index[scopeKey]
	released *windowindex.Coverage[scopeKey]
	totals   map[pairKey]*pairTotal
}

// pairKey names one overlap metric series.
type pairKey struct {
	scope         scopeKey
	first, second uint8
}

// pairTotal is one series' cumulative figures.
type pairTotal struct {
	start    time.Time
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
		windows:  windowindex.New[scopeKey](windowBounds),
		released: windowindex.NewCoverage[scopeKey](bounds),
		totals:   map[pairKey]*pairTotal{},
	}
	for a := range numKinds {
		for b := range numKinds {
			if c.pairs[a][b] {
				c.overlapKinds[a], c.overlapKinds[b] = true, true
			}
		}
	}
	return c, nil
}

func (c *correlator) close() { c.tel.Shutdown() }

// scopeOf returns the match scope of a resource, false when the resource
// lacks the attribute the scope needs (process.pid for process, k8s.pod.uid
// for pod; host needs nothing).
func (c *correlator) scopeOf(res pcommon.Resource) (scopeKey, bool) {
	attrs := res.Attributes()
	switch c.cfg.MatchScope {
	case ScopePod:
		uid, ok := attrs.Get(window.ResourceK8sPodUID)
		if !ok || uid.Str() == "" {
			return scopeKey{}, false
		}
		return scopeKey{pod: uid.Str()}, true
	case ScopeHost:
		return scopeKey{host: hostOf(attrs)}, true
	default:
		pid, ok := pidOf(attrs)
		if !ok {
			return scopeKey{}, false
		}
		return scopeKey{host: hostOf(attrs), pid: pid}, true
	}
}

func hostOf(attrs pcommon.Map) string {
	if v, ok := attrs.Get(window.ResourceHostName); ok {
		return v.Str()
	}
	return ""
}

// pidOf reads process.pid, an int by the semantic conventions; a decimal
// string is accepted too.
func pidOf(attrs pcommon.Map) (int64, bool) {
	v, ok := attrs.Get(window.ResourcePID)
	if !ok {
		return 0, false
	}
	switch v.Type() {
	case pcommon.ValueTypeInt:
		return v.Int(), true
	case pcommon.ValueTypeStr:
		pid, err := strconv.ParseInt(v.Str(), 10, 64)
		return pid, err == nil
	}
	return 0, false
}

// putScope writes the scope's identifying attributes onto a resource.
func (c *correlator) putScope(attrs pcommon.Map, k scopeKey) {
	if k.host != "" {
		attrs.PutStr(window.ResourceHostName, k.host)
	}
	switch c.cfg.MatchScope {
	case ScopeProcess:
		attrs.PutInt(window.ResourcePID, k.pid)
	case ScopePod:
		attrs.PutStr(window.ResourceK8sPodUID, k.pod)
	}
}

// overlap is one pair of windows that overlapped.
type overlap struct {
	scope         scopeKey
	first, second windowindex.Entry
	start, end    int64
}

// pending is a decoded window waiting to be indexed.
type pending struct {
	scope scopeKey
	entry windowindex.Entry
}

// ingestLogs indexes the windows among ld's records and returns the
// overlaps they complete. Records that are not windows are ignored;
// windows that cannot be indexed are counted, and all pass on unchanged.
func (c *correlator) ingestLogs(ctx context.Context, ld plog.Logs) []overlap {
	now := c.now().UnixNano()
	futureLimit := now + int64(c.cfg.Windows.MaxClockSkew)
	var batch []pending
	var malformed, unscoped, future int64
	rls := ld.ResourceLogs()
	for i := 0; i < rls.Len(); i++ {
		rl := rls.At(i)
		key, scoped := c.scopeOf(rl.Resource())
		pid, _ := pidOf(rl.Resource().Attributes())
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
				batch = append(batch, pending{scope: key, entry: windowindex.Entry{
					Start: w.Start, End: end, ThreadID: w.ThreadID, PID: pid, Kind: kind,
				}})
			}
		}
	}
	for r, n := range map[string]int64{reasonMalformed: malformed, reasonUnscoped: unscoped, reasonFuture: future} {
		if n > 0 {
			c.tel.ProcessorRuntimecorrelationWindowsDropped.Add(ctx, n, reasonOpt(r))
		}
	}
	if len(batch) == 0 {
		return nil
	}
	return c.index(ctx, batch)
}

// index adds decoded windows to the index under one lock.
func (c *correlator) index(ctx context.Context, batch []pending) []overlap {
	var (
		overlaps                []overlap
		scratch                 []windowindex.Entry
		indexed, dup, old, late int64
	)
	wallNow := c.now()
	c.mu.Lock()
	lenBefore, statsBefore := c.windows.Len(), c.windows.Stats()
	for _, p := range batch {
		e := p.entry
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
			ov := overlap{scope: p.scope, first: first, second: second, start: max(e.Start, o.Start), end: min(e.End, o.End)}
			overlaps = append(overlaps, ov)
			c.addTotal(ov, wallNow)
		}
	}
	lenAfter, statsAfter := c.windows.Len(), c.windows.Stats()
	c.mu.Unlock()
	c.countIndexStats(ctx, statsBefore, statsAfter)

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
		t = &pairTotal{start: now}
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
			c.putScope(rl.Resource().Attributes(), ov.scope)
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
