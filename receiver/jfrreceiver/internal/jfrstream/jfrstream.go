// Package jfrstream turns the events of one JVM's recording, segment by
// segment as pkg/jfr delivers them, into pause windows and measurements
// (jvmevent.Batch). It reads only the event types and fields it needs, with
// a jfr.Selection, and joins what HotSpot writes as separate events:
//
//   - a jvm.gc.pause window is one jdk.GCPhasePause, named after the
//     collection (jdk.GarbageCollection with the same gcId: collector and
//     cause), which HotSpot writes when the collection ends;
//   - a jvm.safepoint window runs from jdk.SafepointBegin's start to
//     jdk.SafepointEnd's end (joined on safepointId). SafepointEnd is off in
//     the JDK's default settings; then the window ends where the safepoint's
//     VM operation (jdk.ExecuteVMOperation) ended, or, failing that, where
//     SafepointBegin ended. The attribute AttrSafepointEndSource says which.
//
// Collections are measured under the names the JVM's GarbageCollectorMXBeans
// give them (CollectorOf: the semantic conventions' and the Java agent's
// jvm.gc.name and jvm.gc.action), and a pause window's jvm.gc.name is the
// bean its pause counts under. It also reads the samples behind the
// thread, class and CPU metrics (jdk.JavaThreadStatistics,
// jdk.ClassLoadingStatistics, jdk.CPULoad, jdk.CPUInformation,
// jdk.ContainerConfiguration).
//
// Events of one collection or safepoint may arrive in different segments, so
// a window whose partner has not arrived waits for one more Flush; Flush with
// final set (the recording ended) lets everything out.
package jfrstream // import "github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/jfrstream"

import (
	"math"
	"strings"
	"time"

	"github.com/otelcol-ai/otelcol-ai/internal/window"
	"github.com/otelcol-ai/otelcol-ai/pkg/jfr"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/jvmevent"
)

// Window attributes this package sets besides the window model's.
const (
	AttrGCPhase            = jvmevent.AttrGCPhase
	AttrSafepointEndSource = jvmevent.AttrSafepointEndSource
)

// GC actions, the values of jvm.gc.action, as the GarbageCollectorMXBeans
// give them.
const (
	ActionMinor           = "end of minor GC"
	ActionMajor           = "end of major GC"
	ActionCycle           = "end of GC cycle"
	ActionPause           = "end of GC pause"
	ActionConcurrentPause = "end of concurrent GC pause"
)

// Collector says how the JVM's management interface reports what JFR
// records for one collector: the GarbageCollectorMXBean names and actions
// that the OpenTelemetry Java agent and the semantic conventions give as
// jvm.gc.name and jvm.gc.action. Each collection JFR records
// (jdk.GarbageCollection) counts once under Name, unless Name is empty;
// collectors with a bean of their own for pauses also count each pause
// (jdk.GCPhasePause) of the collection under Pauses.
type Collector struct {
	Name, Action string
	Pauses       string
	// PauseAction is the pauses' action; empty takes it from the pause's
	// name (Shenandoah's: "Pause Init Mark (unload classes)" is "Init Mark").
	PauseAction string
}

// collectors maps JFR's collector names (jdk.GarbageCollection's name) to
// the MXBeans of HotSpot 17-25, as the Java agent 2.22.0 reports them on
// each collector (checked by running it: see README.md).
var collectors = map[string]Collector{
	"G1New":  {Name: "G1 Young Generation", Action: ActionMinor},
	"G1Full": {Name: "G1 Old Generation", Action: ActionMajor},
	// A concurrent cycle: its Remark and Cleanup pauses are what the
	// "G1 Concurrent GC" bean (JDK 20+) counts; the cycle itself is not a
	// collection any bean counts.
	"G1Old":            {Pauses: "G1 Concurrent GC", PauseAction: ActionConcurrentPause},
	"ParallelScavenge": {Name: "PS Scavenge", Action: ActionMinor},
	"ParallelOld":      {Name: "PS MarkSweep", Action: ActionMajor},
	"DefNew":           {Name: "Copy", Action: ActionMinor},
	"SerialOld":        {Name: "MarkSweepCompact", Action: ActionMajor},
	"Z":                {Name: "ZGC Cycles", Action: ActionCycle, Pauses: "ZGC Pauses", PauseAction: ActionPause},
	"ZGC Minor":        {Name: "ZGC Minor Cycles", Action: ActionCycle, Pauses: "ZGC Minor Pauses", PauseAction: ActionPause},
	"ZGC Major":        {Name: "ZGC Major Cycles", Action: ActionCycle, Pauses: "ZGC Major Pauses", PauseAction: ActionPause},
	"Shenandoah":       {Name: "Shenandoah Cycles", Action: ActionCycle, Pauses: "Shenandoah Pauses"},
}

// CollectorOf returns how the collector JFR calls jfrName is reported. A
// name it does not know is kept, its action guessed from the name.
func CollectorOf(jfrName string) Collector {
	if c, ok := collectors[jfrName]; ok {
		return c
	}
	action := ActionMajor
	if strings.Contains(jfrName, "Young") || strings.Contains(jfrName, "Minor") || jfrName == "ParNew" {
		action = ActionMinor
	}
	return Collector{Name: jfrName, Action: action}
}

// pauseGC is the measurement a pause window of c counts as, under c's
// pause bean, with its collection's cause.
func (c Collector) pauseGC(w window.Window, cause string) jvmevent.GC {
	phase, _ := w.Attributes[AttrGCPhase].(string)
	return jvmevent.GC{End: w.Start + int64(w.Duration), Duration: w.Duration, Name: c.Pauses, Action: c.pauseAction(phase), Cause: cause}
}

// pauseAction is the action a pause named phase ("Pause Init Mark (unload
// classes)") counts under.
func (c Collector) pauseAction(phase string) string {
	if c.PauseAction != "" {
		return c.PauseAction
	}
	a := strings.TrimPrefix(phase, "Pause ")
	if i := strings.Index(a, " ("); i > 0 {
		a = a[:i]
	}
	return a
}

// Selected event types; the order of Add calls gives the indexes.
const (
	evGC = iota
	evPhasePause
	evSafepointBegin
	evSafepointEnd
	evVMOperation
	evHeapSummary
	evMetaspace
	evHeapUsage
	evDirectBuffers
	evNMT
	evNMTTotal
	evJVMInfo
	evThreads
	evClasses
	evCPULoad
	evCPUInfo
	evContainer
	evG1Heap
	evPSHeap
	evGCConfig
	evCodeCache
)

func newSelection() *jfr.Selection {
	s := jfr.NewSelection()
	s.Add("jdk.GarbageCollection", "startTime", "duration", "gcId", "name", "cause")
	s.Add("jdk.GCPhasePause", "startTime", "duration", "gcId", "name", "eventThread.javaThreadId", "eventThread.osName")
	s.Add("jdk.SafepointBegin", "startTime", "duration", "safepointId")
	s.Add("jdk.SafepointEnd", "startTime", "duration", "safepointId")
	s.Add("jdk.ExecuteVMOperation", "startTime", "duration", "operation", "safepoint", "safepointId")
	s.Add("jdk.GCHeapSummary", "startTime", "when", "heapUsed", "heapSpace.committedSize", "heapSpace.reservedSize", "gcId")
	s.Add("jdk.MetaspaceSummary", "startTime", "when",
		"metaspace.used", "metaspace.committed", "classSpace.used", "classSpace.committed", "classSpace.reserved")
	s.Add("jdk.GCHeapMemoryUsage", "startTime", "used", "committed", "max")
	s.Add("jdk.DirectBufferStatistics", "startTime", "count", "memoryUsed", "totalCapacity")
	s.Add("jdk.NativeMemoryUsage", "startTime", "type", "reserved", "committed")
	s.Add("jdk.NativeMemoryUsageTotal", "startTime", "reserved", "committed")
	s.Add("jdk.JVMInformation", "jvmVersion", "pid")
	s.Add("jdk.JavaThreadStatistics", "startTime", "activeCount", "daemonCount")
	s.Add("jdk.ClassLoadingStatistics", "startTime", "loadedClassCount", "unloadedClassCount")
	s.Add("jdk.CPULoad", "startTime", "jvmUser", "jvmSystem")
	s.Add("jdk.CPUInformation", "startTime", "hwThreads")
	s.Add("jdk.ContainerConfiguration", "startTime", "effectiveCpuCount")
	// oldGenUsedSize is JDK 21+; on 17 the old generation is the heap's
	// use (jdk.GCHeapSummary of the same gcId and when) less eden and
	// survivors.
	s.Add("jdk.G1HeapSummary", "startTime", "when", "gcId", "edenUsedSize", "edenTotalSize", "survivorUsedSize", "oldGenUsedSize", "numberOfRegions")
	s.Add("jdk.PSHeapSummary", "startTime", "when", "gcId",
		"edenSpace.used", "edenSpace.size", "fromSpace.used", "fromSpace.size",
		"oldObjectSpace.used", "oldObjectSpace.size", "oldSpace.reservedSize")
	s.Add("jdk.GCConfiguration", "startTime", "youngCollector", "oldCollector")
	s.Add("jdk.CodeCacheStatistics", "startTime", "codeBlobType", "startAddress", "reservedTopAddress", "unallocatedCapacity")
	return s
}

// selection is read-only once built and shared by every Stream.
var selection = newSelection()

// Bounds on what a stream holds between flushes: a JVM that writes
// thousands of pauses per second must not grow the receiver without limit.
const (
	maxPending = 4096 // windows waiting for their partner
	maxGCNames = 256  // recent collections remembered for naming pauses
)

type gcInfo struct {
	name, cause string
	collector   Collector
}

type pendingPause struct {
	w    window.Window
	gcID int64
	age  int
}

type safepoint struct {
	id                   int64
	beginStart, beginEnd int64 // 0 = no SafepointBegin
	opEnd                int64 // 0 = no VM operation seen
	op                   string
	end                  int64 // 0 = no SafepointEnd
	age                  int
}

// Stream holds the join state of one recording. It is not safe for
// concurrent use.
type Stream struct {
	gcs     map[int64]gcInfo
	gcOrder []int64
	pauses  []pendingPause
	sps     map[int64]*safepoint
	version string
	pid     int64
	dropped int
	// cpus is the container's effective CPU count once seen: it wins over
	// the host's hardware threads.
	cpus int64
	// pools says how the heap splits into the MXBeans' memory pools
	// (heapPools*), from jdk.GCConfiguration or the first per-collector
	// heap summary.
	pools heapPools
	// heap is the latest jdk.GCHeapSummary, for G1's old generation on
	// JDK 17.
	heap heapSummary
	// readFrom is the start of the first chunk read (Unix epoch ns; 0
	// before): collections that began earlier were not recorded whole.
	readFrom int64
	// firstGCID is the lowest gcId of the collections that began at or
	// after readFrom in the first segment that had any (-1 before): every
	// collection with a lower id was counted as unrecorded then.
	firstGCID int64
	// flushed says the JVM flushed (a segment with records was read) since
	// the last aging: windows age by the JVM's flushes, not the reader's
	// polls, so a short poll_interval does not cut their wait.
	flushed bool
	// late holds, by gcId, the pause windows let out unnamed (at most
	// maxPending in all, lateN), until their collection arrives: HotSpot
	// writes a collection's pauses, then the collection, and a flush may
	// fall between them.
	late  map[int64][]window.Window
	lateN int
}

// heapPools says which memory pools the heap is reported as.
type heapPools int

const (
	poolsUnknown heapPools = iota // the heap as a whole, no pool name
	poolsG1                       // jdk.G1HeapSummary: G1 Eden Space, G1 Survivor Space, G1 Old Gen
	poolsPS                       // jdk.PSHeapSummary: PS Eden Space, PS Survivor Space, PS Old Gen
	poolsZHeap                    // non-generational ZGC: one pool, ZHeap, the whole heap
)

// Memory pool names, as the JVM's MemoryPoolMXBeans (and the Java agent's
// jvm.memory.pool.name) give them.
const (
	PoolG1Eden            = "G1 Eden Space"
	PoolG1Survivor        = "G1 Survivor Space"
	PoolG1Old             = "G1 Old Gen"
	PoolPSEden            = "PS Eden Space"
	PoolPSSurvivor        = "PS Survivor Space"
	PoolPSOld             = "PS Old Gen"
	PoolZHeap             = "ZHeap"
	PoolMetaspace         = "Metaspace"
	PoolCompressedClasses = "Compressed Class Space"
)

// PoolDirect is the direct buffers' pool (jvm.buffer.pool.name), the one
// buffer pool JFR reports.
const PoolDirect = "direct"

// poolsOf tells the heap's pools from jdk.GCConfiguration's collectors
// (non-generational ZGC has no young one: "N/A" and "Z").
func poolsOf(young, old string) heapPools {
	switch {
	case young == "G1New":
		return poolsG1
	case young == "ParallelScavenge":
		return poolsPS
	case old == "Z":
		return poolsZHeap
	}
	return poolsUnknown
}

type heapSummary struct {
	gcID                      int64
	when                      string
	used, committed, reserved int64
}

// New returns an empty stream.
func New() *Stream {
	return &Stream{gcs: map[int64]gcInfo{}, sps: map[int64]*safepoint{}, late: map[int64][]window.Window{}, firstGCID: -1}
}

// RuntimeVersion returns the JVM version the recording names (from
// jdk.JVMInformation), "" until seen.
func (s *Stream) RuntimeVersion() string { return s.version }

// PID returns the recording JVM's pid in its own pid namespace (from
// jdk.JVMInformation), 0 until seen.
func (s *Stream) PID() int64 { return s.pid }

// Dropped returns how many windows were dropped because too many waited
// for their partner events.
func (s *Stream) Dropped() int { return s.dropped }

// Segment reads the selected events of one segment into b. Measurements
// and complete windows go to b at once; windows that wait for a partner
// stay until a later Segment or Flush. Events before a decoding error are
// kept; the error is returned.
func (s *Stream) Segment(seg jfr.Segment, b *jvmevent.Batch) error {
	if !seg.Empty() {
		s.flushed = true
	}
	return s.scan(seg.Scan(selection), seg.Chunk, b)
}

// Chunk reads every selected event of a complete chunk into b (as Segment).
func (s *Stream) Chunk(c *jfr.Chunk, b *jvmevent.Batch) error {
	s.flushed = true
	return s.scan(c.Scan(selection), c, b)
}

func (s *Stream) scan(sc *jfr.Scanner, c *jfr.Chunk, b *jvmevent.Batch) error {
	if s.readFrom == 0 {
		s.readFrom = c.Clock().StartNanos
	}
	firstSegment := s.firstGCID < 0
	lowest, lowestName := int64(-1), ""
	for sc.Next() {
		r := sc.Record()
		start, _ := r.Nanos(0)
		switch r.Selected {
		case evGC:
			dur, _ := r.Nanos(1)
			id, name := r.Int(2), r.Str(3)
			if s.collection(id, start, dur, name, r.Str(4), b) && firstSegment && (lowest < 0 || id < lowest) {
				lowest, lowestName = id, name
			}
		case evPhasePause:
			dur, _ := r.Nanos(1)
			id := r.Int(2)
			w := window.Window{
				Kind: window.KindJVMGCPause, Start: start, Duration: time.Duration(max(dur, 0)),
				ThreadID: r.Int(4), ThreadName: r.Str(5),
				Attributes: map[string]any{window.AttrJVMGCID: id, AttrGCPhase: r.Str(3)},
			}
			if len(s.pauses) >= maxPending {
				s.dropped++
				continue
			}
			s.pauses = append(s.pauses, pendingPause{w: w, gcID: id})
		case evSafepointBegin:
			dur, _ := r.Nanos(1)
			if sp := s.safepoint(r.Int(2)); sp != nil {
				sp.beginStart, sp.beginEnd = start, start+max(dur, 0)
			}
		case evSafepointEnd:
			dur, _ := r.Nanos(1)
			if sp := s.safepoint(r.Int(2)); sp != nil {
				sp.end = start + max(dur, 0)
			}
		case evVMOperation:
			if !r.Bool(3) {
				continue
			}
			dur, _ := r.Nanos(1)
			if sp := s.safepoint(r.Int(4)); sp != nil {
				sp.opEnd, sp.op = start+max(dur, 0), r.Str(2)
			}
		case evHeapSummary:
			s.heap = heapSummary{gcID: r.Int(5), when: r.Str(1), used: r.Int(2), committed: r.Int(3), reserved: r.Int(4)}
			s.wholeHeap(b, jvmevent.Memory{Time: start, Type: jvmevent.MemoryHeap, Used: r.Int(2), Committed: r.Int(3), Limit: r.Int(4), UsedAfterGC: -1}, r.Str(1) == "After GC")
		case evG1Heap:
			s.pools = poolsG1
			s.g1Pools(r, start, b)
		case evPSHeap:
			s.pools = poolsPS
			s.psPools(r, start, b)
		case evGCConfig:
			if p := poolsOf(r.Str(1), r.Str(2)); p != poolsUnknown || s.pools == poolsUnknown {
				s.pools = p
			}
		case evMetaspace:
			after := r.Str(1) == "After GC"
			meta := jvmevent.Memory{Time: start, Type: jvmevent.MemoryNonHeap, Pool: PoolMetaspace, Used: r.Int(2), Committed: r.Int(3), Limit: -1, UsedAfterGC: -1}
			class := jvmevent.Memory{Time: start, Type: jvmevent.MemoryNonHeap, Pool: PoolCompressedClasses, Used: r.Int(4), Committed: r.Int(5), Limit: r.Int(6), UsedAfterGC: -1}
			if after {
				meta.UsedAfterGC, class.UsedAfterGC = meta.Used, class.Used
			}
			b.Memory = append(b.Memory, meta)
			if r.Has(4) && class.Committed > 0 {
				b.Memory = append(b.Memory, class)
			}
		case evHeapUsage:
			s.wholeHeap(b, jvmevent.Memory{Time: start, Type: jvmevent.MemoryHeap, Used: r.Int(1), Committed: r.Int(2), Limit: r.Int(3), UsedAfterGC: -1}, false)
		case evDirectBuffers:
			b.Buffers = append(b.Buffers, jvmevent.Buffers{Time: start, Pool: PoolDirect, Count: r.Int(1), Used: r.Int(2), Capacity: r.Int(3)})
		case evNMT:
			b.NativeMemory = append(b.NativeMemory, jvmevent.NativeMemory{Time: start, Category: r.Str(1), Reserved: r.Int(2), Committed: r.Int(3)})
		case evNMTTotal:
			b.NativeMemory = append(b.NativeMemory, jvmevent.NativeMemory{Time: start, Category: "Total", Reserved: r.Int(1), Committed: r.Int(2)})
		case evJVMInfo:
			if v := ParseVersion(r.Str(0)); v != "" {
				s.version = v
			}
			s.pid = r.Int(1)
		case evThreads:
			b.Threads = append(b.Threads, jvmevent.Threads{Time: start, Active: r.Int(1), Daemon: r.Int(2)})
		case evClasses:
			b.Classes = append(b.Classes, jvmevent.Classes{Time: start, Loaded: r.Int(1), Unloaded: r.Int(2)})
		case evCPULoad:
			b.CPU = append(b.CPU, jvmevent.CPU{Time: start, Utilization: r.Float(1) + r.Float(2), Count: -1})
		case evCPUInfo:
			if s.cpus == 0 {
				b.CPU = append(b.CPU, jvmevent.CPU{Time: start, Utilization: -1, Count: r.Int(1)})
			}
		case evContainer:
			if n := r.Int(1); n > 0 {
				s.cpus = n
				b.CPU = append(b.CPU, jvmevent.CPU{Time: start, Utilization: -1, Count: n})
			}
		case evCodeCache:
			b.Memory = append(b.Memory, codeHeap(r, start))
		}
	}
	if lowest >= 0 {
		s.firstGCID = lowest
		if c := CollectorOf(unrecordedCollector(lowestName)); lowest > 0 && c.Name != "" {
			b.UnrecordedGCs = append(b.UnrecordedGCs, jvmevent.UnrecordedGCs{Name: c.Name, Action: c.Action, Count: lowest})
		}
	}
	s.release(b, false)
	return sc.Err()
}

// collection reads one jdk.GarbageCollection (gcId id, began at start,
// lasted dur ns): it names the collection's pauses, counts it into b unless
// it began before what is read or was counted as unrecorded already, and
// counts its pauses let out before it arrived. It returns whether the
// collection began in what is read.
func (s *Stream) collection(id, start, dur int64, name, cause string, b *jvmevent.Batch) bool {
	c := CollectorOf(name)
	s.rememberGC(id, gcInfo{name: name, cause: cause, collector: c})
	if late, ok := s.late[id]; ok {
		delete(s.late, id)
		s.lateN -= len(late)
		if c.Pauses != "" {
			for _, w := range late {
				b.GCs = append(b.GCs, c.pauseGC(w, cause))
			}
		}
	}
	if start < s.readFrom {
		// Began before what is read (a concurrent cycle running when the
		// recording started): its id is below the first collection's, so
		// it counts among those before.
		return false
	}
	if s.firstGCID >= 0 && id < s.firstGCID {
		return true // counted as unrecorded already
	}
	if c.Name != "" {
		b.GCs = append(b.GCs, jvmevent.GC{End: start + dur, Duration: time.Duration(dur), Name: c.Name, Action: c.Action, Cause: cause})
	}
	return true
}

// unrecordedCollector names the collector of jfrName's family that
// collections before the recording count under: JFR cannot say which ran
// then. Generational collectors' young one, which makes most collections
// of a running JVM; generational ZGC's major one, which makes its first
// collections (the "Warmup" ones at 10%, 20% and 30% of the heap).
func unrecordedCollector(jfrName string) string {
	switch jfrName {
	case "G1Old", "G1Full":
		return "G1New"
	case "ParallelOld":
		return "ParallelScavenge"
	case "SerialOld":
		return "DefNew"
	case "ZGC Minor":
		return "ZGC Major"
	}
	return jfrName
}

// codeHeap reports one code heap (jdk.CodeCacheStatistics) as the
// MemoryPoolMXBean of the same name ("CodeHeap 'non-nmethods'", …): its
// limit is the heap's reserved range, its use the reserved range less
// what is not allocated. JFR records no committed size.
func codeHeap(r *jfr.Record, start int64) jvmevent.Memory {
	reserved := r.Int(3) - r.Int(2)
	used := reserved - r.Int(4)
	if reserved < 0 || used < 0 {
		reserved, used = -1, -1
	}
	return jvmevent.Memory{Time: start, Type: jvmevent.MemoryNonHeap, Pool: r.Str(1), Used: used, Committed: -1, Limit: reserved, UsedAfterGC: -1}
}

// wholeHeap reports a sample of the whole heap: as the ZHeap pool on
// non-generational ZGC, not at all where the heap is reported by pools
// (G1, Parallel: their own summaries), else without a pool name (Serial,
// Shenandoah, generational ZGC: JFR does not split their heaps).
func (s *Stream) wholeHeap(b *jvmevent.Batch, m jvmevent.Memory, afterGC bool) {
	switch s.pools {
	case poolsG1, poolsPS:
		return
	case poolsZHeap:
		m.Pool = PoolZHeap
	}
	if afterGC {
		m.UsedAfterGC = m.Used
	}
	b.Memory = append(b.Memory, m)
}

// g1Pools reports G1's three pools from a jdk.G1HeapSummary. Committed
// sizes follow G1's MemoryPoolMXBeans: survivors take whole regions, eden
// what the young generation's target leaves them, the old generation the
// rest of the committed heap.
func (s *Stream) g1Pools(r *jfr.Record, start int64, b *jvmevent.Batch) {
	when, gcID := r.Str(1), r.Int(2)
	eden, edenTotal, surv := r.Int(3), r.Int(4), r.Int(5)
	after := when == "After GC"
	pool := func(name string, used, committed, limit int64) {
		m := jvmevent.Memory{Time: start, Type: jvmevent.MemoryHeap, Pool: name, Used: used, Committed: committed, Limit: limit, UsedAfterGC: -1}
		if after {
			m.UsedAfterGC = used
		}
		b.Memory = append(b.Memory, m)
	}
	heap := s.heap
	matched := heap.gcID == gcID && heap.when == when
	survCommitted, edenCommitted := int64(-1), int64(-1)
	if regions := r.Int(7); matched && regions > 0 && heap.committed > 0 {
		region := heap.committed / regions
		survCommitted = (surv + region - 1) / region * region
		edenCommitted = max(edenTotal+surv-survCommitted, 0)
	}
	pool(PoolG1Eden, eden, edenCommitted, -1)
	pool(PoolG1Survivor, surv, survCommitted, -1)
	old := int64(-1)
	switch {
	case r.Has(6):
		old = r.Int(6)
	case matched:
		old = max(heap.used-eden-surv, 0)
	}
	if old < 0 {
		return
	}
	oldCommitted, limit := int64(-1), int64(-1)
	if matched {
		limit = heap.reserved
		if survCommitted >= 0 {
			oldCommitted = max(heap.committed-edenCommitted-survCommitted, 0)
		}
	}
	pool(PoolG1Old, old, oldCommitted, limit)
}

// psPools reports the Parallel collector's three pools from a
// jdk.PSHeapSummary, as its MemoryPoolMXBeans do: the spaces' use and
// capacity, the survivor pool being the from-space.
func (s *Stream) psPools(r *jfr.Record, start int64, b *jvmevent.Batch) {
	after := r.Str(1) == "After GC"
	pool := func(name string, used, committed, limit int64) {
		m := jvmevent.Memory{Time: start, Type: jvmevent.MemoryHeap, Pool: name, Used: used, Committed: committed, Limit: limit, UsedAfterGC: -1}
		if after {
			m.UsedAfterGC = used
		}
		b.Memory = append(b.Memory, m)
	}
	pool(PoolPSEden, r.Int(3), r.Int(4), -1)
	pool(PoolPSSurvivor, r.Int(5), r.Int(6), -1)
	pool(PoolPSOld, r.Int(7), r.Int(8), r.Int(9))
}

// ParseVersion takes the runtime version out of jdk.JVMInformation's
// jvmVersion ("OpenJDK 64-Bit Server VM (17.0.15+6-Debian-1deb12u1) for
// linux-amd64 JRE (17.0.15+6-Debian-1deb12u1), built on …"): the JRE's.
func ParseVersion(jvmVersion string) string {
	_, rest, ok := strings.Cut(jvmVersion, "JRE (")
	if !ok {
		_, rest, ok = strings.Cut(jvmVersion, "(")
	}
	if !ok {
		return ""
	}
	v, _, ok := strings.Cut(rest, ")")
	if !ok {
		return ""
	}
	return v
}

func (s *Stream) rememberGC(id int64, g gcInfo) {
	if _, ok := s.gcs[id]; !ok {
		s.gcOrder = append(s.gcOrder, id)
		if len(s.gcOrder) > maxGCNames {
			delete(s.gcs, s.gcOrder[0])
			s.gcOrder = s.gcOrder[1:]
		}
	}
	s.gcs[id] = g
}

func (s *Stream) safepoint(id int64) *safepoint {
	sp := s.sps[id]
	if sp == nil {
		if len(s.sps) >= maxPending {
			s.dropped++
			return nil
		}
		sp = &safepoint{id: id}
		s.sps[id] = sp
	}
	return sp
}

// OldestPending returns the earliest start (Unix ns) of the windows held
// back for an event still to come (a pause's collection, a safepoint's
// end); false when none is held. Such a window's events may lie in an
// earlier chunk than the one read now: the chunk a reader would have to
// read again to build it.
func (s *Stream) OldestPending() (int64, bool) {
	oldest, ok := int64(0), false
	note := func(start int64) {
		if start != 0 && (!ok || start < oldest) {
			oldest, ok = start, true
		}
	}
	for _, p := range s.pauses {
		note(p.w.Start)
	}
	for _, sp := range s.sps {
		note(sp.beginStart) // one without a begin is never a window
	}
	return oldest, ok
}

// Flush lets out windows that waited through one earlier flush (or all of
// them when final: the recording ended) and ages the rest.
func (s *Stream) Flush(b *jvmevent.Batch, final bool) {
	s.release(b, true)
	if final {
		s.releaseAll(b)
	}
}

// release moves complete windows to b. With aging set, it also lets out
// windows that have waited through one JVM flush after their own (the
// first aging after a flush marks them, the next lets them out), and ages
// the others; aging without a flush since the last changes nothing.
func (s *Stream) release(b *jvmevent.Batch, aging bool) {
	aging = aging && s.flushed
	if aging {
		s.flushed = false
	}
	kept := s.pauses[:0]
	for _, p := range s.pauses {
		g, named := s.gcs[p.gcID]
		if !named && (!aging || p.age < 1) {
			if aging {
				p.age++
			}
			kept = append(kept, p)
			continue
		}
		if named {
			s.namePause(&p, g, b)
		} else {
			s.awaitCollection(p)
		}
		b.Windows = append(b.Windows, p.w)
	}
	clear(s.pauses[len(kept):])
	s.pauses = kept

	for id, sp := range s.sps {
		complete := sp.beginStart != 0 && sp.end != 0
		if !complete && (!aging || sp.age < 1) {
			if aging {
				sp.age++
			}
			continue
		}
		delete(s.sps, id)
		s.emitSafepoint(sp, b)
	}
}

// awaitCollection keeps a pause let out unnamed until its collection
// arrives, to count it then. Past maxPending such pauses, those of the
// oldest collection still awaited are given up: its collection would
// count without them.
func (s *Stream) awaitCollection(p pendingPause) {
	for s.lateN >= maxPending {
		oldest := int64(math.MaxInt64)
		for id := range s.late {
			oldest = min(oldest, id)
		}
		s.lateN -= len(s.late[oldest])
		delete(s.late, oldest)
	}
	s.late[p.gcID] = append(s.late[p.gcID], p.w)
	s.lateN++
}

// namePause names a pause window after its collection: jvm.gc.name is the
// MXBean the pause counts under (the collector's pause bean, else the
// collection's), jvm.gc.jfr.name JFR's name. A collector with a pause bean
// counts the pause as a collection of its own.
func (s *Stream) namePause(p *pendingPause, g gcInfo, b *jvmevent.Batch) {
	c := g.collector
	name := c.Name
	if c.Pauses != "" {
		name = c.Pauses
		b.GCs = append(b.GCs, c.pauseGC(p.w, g.cause))
	}
	p.w.Attributes[window.AttrJVMGCName] = name
	p.w.Attributes[jvmevent.AttrGCJFRName] = g.name
	if g.cause != "" {
		p.w.Attributes[window.AttrJVMGCCause] = g.cause
	}
}

func (s *Stream) releaseAll(b *jvmevent.Batch) {
	for _, p := range s.pauses {
		b.Windows = append(b.Windows, p.w)
	}
	s.pauses = s.pauses[:0]
	for id, sp := range s.sps {
		delete(s.sps, id)
		s.emitSafepoint(sp, b)
	}
}

// emitSafepoint writes the window and measurement of a safepoint whose
// SafepointBegin is known; others (a SafepointEnd or VM operation whose
// begin fell under the recording's threshold) have no known start and are
// dropped.
func (s *Stream) emitSafepoint(sp *safepoint, b *jvmevent.Batch) {
	if sp.beginStart == 0 {
		return
	}
	end, source := sp.beginEnd, "jdk.SafepointBegin"
	switch {
	case sp.end != 0:
		end, source = sp.end, "jdk.SafepointEnd"
	case sp.opEnd != 0:
		end, source = max(sp.opEnd, sp.beginEnd), "jdk.ExecuteVMOperation"
	}
	dur := time.Duration(max(end-sp.beginStart, 0))
	attrs := map[string]any{window.AttrJVMSafepointID: sp.id, AttrSafepointEndSource: source}
	if sp.op != "" {
		attrs[window.AttrJVMVMOperation] = sp.op
	}
	b.Windows = append(b.Windows, window.Window{Kind: window.KindJVMSafepoint, Start: sp.beginStart, Duration: dur, Attributes: attrs})
	b.Safepoints = append(b.Safepoints, jvmevent.Safepoint{
		End: end, Duration: dur, TimeToSafepoint: time.Duration(sp.beginEnd - sp.beginStart), Operation: sp.op,
	})
}
