package runtimecorrelationprocessor // import "github.com/otelcol-ai/otelcol-ai/processor/runtimecorrelationprocessor"

import (
	"container/heap"
	"context"
	"encoding/binary"
	"hash/fnv"
	"sync"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor/processorhelper"
	"go.uber.org/zap"

	"github.com/otelcol-ai/otelcol-ai/internal/sharedcomponent"
	"github.com/otelcol-ai/otelcol-ai/internal/window"
	"github.com/otelcol-ai/otelcol-ai/processor/runtimecorrelationprocessor/internal/metadata"
	"github.com/otelcol-ai/otelcol-ai/processor/runtimecorrelationprocessor/internal/windowindex"
)

// Span attribute names, per window kind: the summed intersection with the
// span in ns, and the number of windows.
var (
	spanDurationAttr [numKinds]string
	spanCountAttr    [numKinds]string
)

func init() {
	for i, k := range kinds {
		spanDurationAttr[i] = "runtime.overlap." + string(k) + ".duration"
		spanCountAttr[i] = "runtime.overlap." + string(k) + ".count"
	}
}

// tracesProcessor annotates spans with the windows that overlapped them.
// With a delay, each batch is held until its spans' windows had time to
// arrive: until the latest span end plus the delay, but never more than
// the delay after the batch arrived.
type tracesProcessor struct {
	ref        *sharedcomponent.Ref[*correlator]
	c          *correlator
	next       consumer.Traces
	logger     *zap.Logger
	delay      time.Duration
	maxWaiting int

	mu      sync.Mutex
	queue   dueHeap
	waiting int
	seq     uint64
	closed  bool

	wake         chan struct{}
	loop         loop
	shutdownOnce sync.Once
}

// endOfTime is after every due time.
var endOfTime = time.Unix(1<<40, 0)

// waitingBatch is a batch of spans held until due.
type waitingBatch struct {
	td ptrace.Traces
	// ids are the identities of td's resources, resolved on arrival while
	// the receiver's context still says which connection they came over.
	ids   []spanIdentity
	due   time.Time
	spans int
	seq   uint64
}

func newTracesProcessor(ref *sharedcomponent.Ref[*correlator], next consumer.Traces) *tracesProcessor {
	c := ref.Value()
	return &tracesProcessor{
		ref:        ref,
		c:          c,
		next:       next,
		logger:     c.logger,
		delay:      c.cfg.Spans.Delay,
		maxWaiting: c.cfg.Spans.MaxWaiting,
		wake:       make(chan struct{}, 1),
	}
}

func (p *tracesProcessor) processTraces(ctx context.Context, td ptrace.Traces) (ptrace.Traces, error) {
	ids := p.resolve(ctx, td)
	if p.delay == 0 {
		p.annotate(ctx, td, ids, false)
		return td, nil
	}
	now := p.c.now()
	held := ptrace.NewTraces()
	td.ResourceSpans().MoveAndAppendTo(held.ResourceSpans())
	b := &waitingBatch{td: held, ids: ids, due: p.dueTime(held, now), spans: held.SpanCount()}

	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		p.annotate(ctx, held, ids, false)
		return held, nil
	}
	p.seq++
	b.seq = p.seq
	heap.Push(&p.queue, b)
	p.waiting += b.spans
	var early []*waitingBatch
	earlySpans := 0
	for p.waiting > p.maxWaiting && len(p.queue) > 0 {
		e := heap.Pop(&p.queue).(*waitingBatch)
		p.waiting -= e.spans
		earlySpans += e.spans
		early = append(early, e)
	}
	p.mu.Unlock()

	p.c.tel.ProcessorRuntimecorrelationSpansWaiting.Add(ctx, int64(b.spans-earlySpans))
	select {
	case p.wake <- struct{}{}:
	default:
	}
	if earlySpans > 0 {
		p.c.tel.ProcessorRuntimecorrelationSpansReleasedEarly.Add(ctx, int64(earlySpans))
	}
	for _, e := range early {
		p.forward(e)
	}
	return td, processorhelper.ErrSkipProcessingData
}

// resolve finds the identity of each of td's resources while the
// receiver's context still names their connection.
func (p *tracesProcessor) resolve(ctx context.Context, td ptrace.Traces) []spanIdentity {
	rss := td.ResourceSpans()
	ids := make([]spanIdentity, rss.Len())
	for i := 0; i < rss.Len(); i++ {
		ids[i] = p.c.ids.resolve(ctx, rss.At(i).Resource())
		p.c.markSpans(ids[i])
	}
	return ids
}

// settle records on each resource how its identity was found, and marks
// and counts the spans of those that could not be matched: left
// unannotated, never taken for spans that nothing overlapped. A resource
// that waited and could not be matched on arrival is tried once more by its
// own attributes: the windows that name its process may have come since.
func (p *tracesProcessor) settle(ctx context.Context, td ptrace.Traces, ids []spanIdentity, waited bool) {
	rss := td.ResourceSpans()
	var unmatched map[string]int64
	for i := 0; i < min(rss.Len(), len(ids)); i++ {
		rs := rss.At(i)
		if waited && ids[i].unmatched != "" && ids[i].unmatched != unmatchedMismatch {
			if again := p.c.ids.retry(ids[i], rs.Resource()); again.unmatched == "" {
				ids[i] = again
			}
		}
		id := ids[i]
		if id.unmatched == "" {
			rs.Resource().Attributes().PutStr(attrIdentity, id.how)
			continue
		}
		if n := markUnmatched(rs, id.unmatched); n > 0 {
			if unmatched == nil {
				unmatched = map[string]int64{}
			}
			unmatched[id.unmatched] += n
		}
	}
	for reason, n := range unmatched {
		p.c.tel.ProcessorRuntimecorrelationSpansUnmatched.Add(ctx, n, reasonOpt(reason))
	}
}

// markUnmatched sets runtime.overlap.unmatched on every span of rs and
// returns how many there are.
func markUnmatched(rs ptrace.ResourceSpans, reason string) int64 {
	var n int64
	sss := rs.ScopeSpans()
	for j := 0; j < sss.Len(); j++ {
		spans := sss.At(j).Spans()
		for k := 0; k < spans.Len(); k++ {
			spans.At(k).Attributes().PutStr(attrUnmatched, reason)
		}
		n += int64(spans.Len())
	}
	return n
}

// dueTime is when a batch arriving at now may leave: the latest span end
// plus the delay, kept within [now, now+delay].
func (p *tracesProcessor) dueTime(td ptrace.Traces, now time.Time) time.Time {
	nowNs := now.UnixNano()
	latest := nowNs
	limit := nowNs + int64(p.delay)
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		sss := rss.At(i).ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			spans := sss.At(j).Spans()
			for k := 0; k < spans.Len(); k++ {
				latest = max(latest, min(int64(spans.At(k).EndTimestamp())+int64(p.delay), limit))
			}
		}
	}
	return now.Add(time.Duration(latest - nowNs))
}

func (p *tracesProcessor) start(_ context.Context, host component.Host) error {
	if err := p.ref.Value().bind(host); err != nil {
		return err
	}
	if p.delay > 0 {
		p.loop.start(p.run)
	}
	return nil
}

// run releases batches as they fall due, until stop.
func (p *tracesProcessor) run(stop <-chan struct{}) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		p.releaseDue(p.c.now())
		wait := time.Hour
		p.mu.Lock()
		if len(p.queue) > 0 {
			wait = max(p.queue[0].due.Sub(p.c.now()), 0)
		}
		p.mu.Unlock()
		timer.Reset(wait)
		select {
		case <-stop:
			return
		case <-p.wake:
		case <-timer.C:
		}
	}
}

// releaseDue forwards, in due order, every batch due at or before now.
func (p *tracesProcessor) releaseDue(now time.Time) int {
	var due []*waitingBatch
	p.mu.Lock()
	for len(p.queue) > 0 && !p.queue[0].due.After(now) {
		b := heap.Pop(&p.queue).(*waitingBatch)
		p.waiting -= b.spans
		due = append(due, b)
	}
	p.mu.Unlock()
	for _, b := range due {
		p.c.tel.ProcessorRuntimecorrelationSpansWaiting.Add(context.Background(), -int64(b.spans))
		p.forward(b)
	}
	return len(due)
}

// forward annotates a held batch and sends it on. The caller's context is
// long gone by now, so a fresh one carries it.
func (p *tracesProcessor) forward(b *waitingBatch) {
	ctx := context.Background()
	p.annotate(ctx, b.td, b.ids, true)
	if err := p.next.ConsumeTraces(ctx, b.td); err != nil {
		p.logger.Warn("runtimecorrelation: forwarding spans that waited for windows failed",
			zap.Int("spans", b.spans), zap.Error(err))
	}
}

// shutdown stops the timer and forwards every batch still waiting, so that
// no span is lost.
func (p *tracesProcessor) shutdown(context.Context) error {
	p.shutdownOnce.Do(func() {
		p.mu.Lock()
		p.closed = true
		p.mu.Unlock()
		p.loop.end()
		p.releaseDue(endOfTime)
		p.ref.Release()
	})
	return nil
}

// annotate writes onto each span of a matched resource the windows of its
// scope that overlap it, and remembers the spans' time ranges as released.
// ids are td's resources' identities, in order; waited says the batch
// waited for windows since they were resolved.
func (p *tracesProcessor) annotate(ctx context.Context, td ptrace.Traces, ids []spanIdentity, waited bool) {
	p.settle(ctx, td, ids, waited)
	c := p.c
	cfg := c.cfg.Spans
	futureLimit := c.now().UnixNano() + int64(c.cfg.Windows.MaxClockSkew)
	var (
		released  []pending
		matches   []windowindex.Entry
		annotated int64
		recorded  []tlSpan
	)
	rss := td.ResourceSpans()
	for i := 0; i < min(rss.Len(), len(ids)); i++ {
		if ids[i].unmatched == "" {
			c.timeline.noteResource(ids[i].scope, rss.At(i).Resource())
		}
	}
	c.mu.RLock()
	for i := 0; i < min(rss.Len(), len(ids)); i++ {
		rs := rss.At(i)
		if ids[i].unmatched != "" {
			continue
		}
		key := ids[i].scope
		sss := rs.ScopeSpans()
		var children ptrace.SpanSlice
		hasChildren := false
		n := sss.Len()
		for j := 0; j < n; j++ {
			spans := sss.At(j).Spans()
			for k := 0; k < spans.Len(); k++ {
				span := spans.At(k)
				start, end := int64(span.StartTimestamp()), int64(span.EndTimestamp())
				if end <= start {
					continue
				}
				if end <= futureLimit {
					released = append(released, pending{scope: key, src: -1, entry: windowindex.Entry{Start: start, End: end}})
				}
				matches = c.windows.AppendOverlapping(matches[:0], key, start, end)
				totals := totalsOf(matches, start, end)
				recorded = append(recorded, recordSpan(key, span, start, end, totals))
				if len(matches) == 0 {
					continue
				}
				annotated++
				putTotals(span, totals)
				placements := matches[:min(len(matches), cfg.MaxPlacements)]
				if cfg.Events {
					putEvents(span, placements, start, end)
				}
				if cfg.ChildSpans {
					if !hasChildren {
						ss := sss.AppendEmpty()
						ss.Scope().SetName(metadata.ScopeName)
						children, hasChildren = ss.Spans(), true
						// AppendEmpty may have moved the slice's backing array.
						spans = sss.At(j).Spans()
						span = spans.At(k)
					}
					putChildren(children, span, placements, start, end)
				}
			}
		}
	}
	c.mu.RUnlock()
	c.recordReleased(released)
	if len(recorded) > 0 {
		c.timeline.addSpans(recorded)
	}
	if annotated > 0 {
		c.tel.ProcessorRuntimecorrelationSpansAnnotated.Add(ctx, annotated)
	}
}

// overlapTotals are the windows that overlapped a span, per kind: the sum
// of their intersections with it (ns) and their number; seen is the number
// of kinds with any.
type overlapTotals struct {
	dur, count [numKinds]int64
	seen       int
}

// totalsOf sums matches, the windows that overlap [start, end), per kind.
func totalsOf(matches []windowindex.Entry, start, end int64) overlapTotals {
	var t overlapTotals
	for _, m := range matches {
		if t.count[m.Kind] == 0 {
			t.seen++
		}
		t.dur[m.Kind] += min(m.End, end) - max(m.Start, start)
		t.count[m.Kind]++
	}
	return t
}

// putTotals writes runtime.overlap.<kind>.duration and .count per kind.
func putTotals(span ptrace.Span, totals overlapTotals) {
	attrs := span.Attributes()
	attrs.EnsureCapacity(attrs.Len() + 2*totals.seen) // one allocation, not one per growth
	for k := range kinds {
		if totals.count[k] > 0 {
			attrs.PutInt(spanDurationAttr[k], totals.dur[k])
			attrs.PutInt(spanCountAttr[k], totals.count[k])
		}
	}
}

// putPlacementAttrs describes one window placed in a span: its whole
// duration, the part inside the span, its thread and process.
func putPlacementAttrs(attrs pcommon.Map, m windowindex.Entry, start, end int64) {
	attrs.PutInt(window.AttrDuration, m.Duration())
	attrs.PutInt(attrOverlapDuration, min(m.End, end)-max(m.Start, start))
	if m.ThreadID != 0 {
		attrs.PutInt(window.AttrThreadID, m.ThreadID)
	}
	if m.PID != 0 {
		attrs.PutInt(window.ResourcePID, m.PID)
	}
}

// putEvents adds one event per window, named for its kind, at the moment
// the window began within the span.
func putEvents(span ptrace.Span, matches []windowindex.Entry, start, end int64) {
	events := span.Events()
	for _, m := range matches {
		ev := events.AppendEmpty()
		ev.SetName(string(kinds[m.Kind]))
		ev.SetTimestamp(pcommon.Timestamp(max(m.Start, start)))
		putPlacementAttrs(ev.Attributes(), m, start, end)
	}
}

// putChildren adds one child span per window, covering the part of the
// window inside the parent, with an id derived from the parent and the
// window so that a retried batch yields the same ids.
func putChildren(dst ptrace.SpanSlice, parent ptrace.Span, matches []windowindex.Entry, start, end int64) {
	for _, m := range matches {
		child := dst.AppendEmpty()
		child.SetTraceID(parent.TraceID())
		child.SetParentSpanID(parent.SpanID())
		child.SetSpanID(childSpanID(parent.SpanID(), m))
		child.SetName(string(kinds[m.Kind]))
		child.SetKind(ptrace.SpanKindInternal)
		child.SetStartTimestamp(pcommon.Timestamp(max(m.Start, start)))
		child.SetEndTimestamp(pcommon.Timestamp(min(m.End, end)))
		putPlacementAttrs(child.Attributes(), m, start, end)
	}
}

func childSpanID(parent pcommon.SpanID, m windowindex.Entry) pcommon.SpanID {
	h := fnv.New64a()
	var buf [8 + 4*8 + 1]byte
	copy(buf[:8], parent[:])
	binary.LittleEndian.PutUint64(buf[8:], uint64(m.Start))
	binary.LittleEndian.PutUint64(buf[16:], uint64(m.End))
	binary.LittleEndian.PutUint64(buf[24:], uint64(m.ThreadID))
	binary.LittleEndian.PutUint64(buf[32:], uint64(m.PID))
	buf[40] = m.Kind
	_, _ = h.Write(buf[:])
	sum := h.Sum64()
	if sum == 0 { // the all-zero id is invalid
		sum = 1
	}
	var id pcommon.SpanID
	binary.BigEndian.PutUint64(id[:], sum)
	return id
}

// dueHeap orders waiting batches by due time, then arrival.
type dueHeap []*waitingBatch

func (h dueHeap) Len() int { return len(h) }
func (h dueHeap) Less(i, j int) bool {
	if h[i].due.Equal(h[j].due) {
		return h[i].seq < h[j].seq
	}
	return h[i].due.Before(h[j].due)
}
func (h dueHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *dueHeap) Push(v any)   { *h = append(*h, v.(*waitingBatch)) }
func (h *dueHeap) Pop() any {
	old := *h
	b := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return b
}
