// Package jvmevent is what the jfr receiver's sources tell the receiver: per
// JVM, the pause windows they found and the measurements behind the
// receiver's metrics. Sources (a live JFR repository, a folder of finished
// recordings, an -Xlog file) implement Source; the receiver turns Batches
// into log records (windows) and metrics.
package jvmevent // import "github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/jvmevent"

import (
	"context"
	"time"

	"github.com/otelcol-ai/otelcol-ai/internal/window"
)

// Window attributes the jfr receiver adds to the window model's (package
// window); every source uses these names.
const (
	// AttrGCPhase is the GC pause phase as the JVM names it ("Pause Young
	// (Normal) (G1 Evacuation Pause)", "Pause Mark Start", "GC Pause", …).
	AttrGCPhase = "jvm.gc.phase"
	// AttrSafepointEndSource names the JFR event that gave a safepoint
	// window its end: "jdk.SafepointEnd", "jdk.ExecuteVMOperation" or
	// "jdk.SafepointBegin".
	AttrSafepointEndSource = "jvm.safepoint.end_source"
	// AttrWindowSource is "xlog" on windows read from unified logging, so
	// that a reader can tell them from JFR's.
	AttrWindowSource = "jvm.window.source"
	// AttrGCJFRName is the collector as JFR names it ("G1New", "ZGC
	// Major", …) on jvm.gc.pause windows read from JFR; their jvm.gc.name
	// is the GarbageCollectorMXBean's, as on jvm.gc.duration.
	AttrGCJFRName = "jvm.gc.jfr.name"
)

// JVM identifies the process a batch is about.
type JVM struct {
	// PID is the process id in the collector's pid namespace (0 when not
	// known, e.g. a recording file from elsewhere).
	PID int
	// StartTicks is the process start time from /proc (0 when not known);
	// with PID it tells a JVM from a later one that reused its pid.
	StartTicks uint64
	// Source names where the data came from (a repository folder, a file).
	Source string
}

// GC is one garbage collection (JFR jdk.GarbageCollection or an -Xlog:gc
// pause line).
type GC struct {
	// End is when the collection ended, Unix epoch ns.
	End int64
	// Duration is the collection's length.
	Duration time.Duration
	// Name is the collector as the JVM's GarbageCollectorMXBean names it
	// ("G1 Young Generation", "ZGC Major Pauses", …: the semantic
	// conventions' and the Java agent's jvm.gc.name).
	Name string
	// Action is the MXBean's GC action ("end of minor GC", "end of GC
	// cycle", "Init Mark", …).
	Action string
	// Cause is why it ran ("G1 Evacuation Pause", "System.gc()", …).
	Cause string
}

// UnrecordedGCs counts collections that ran before the first one a source
// read (before the recording started, or in chunks it did not read): the
// JVM numbers its collections from 0, so the first collection's id says
// how many came before. Which collector ran them and how long they took is
// not known; they count under Name and Action (the young collector's
// bean), without durations.
type UnrecordedGCs struct {
	Name, Action string
	Count        int64
}

// Safepoint is one stop-the-world safepoint.
type Safepoint struct {
	// End is when the safepoint ended, Unix epoch ns.
	End int64
	// Duration is the whole stop, from the start of synchronization to
	// the end.
	Duration time.Duration
	// TimeToSafepoint is how long reaching the safepoint took (negative
	// when not known).
	TimeToSafepoint time.Duration
	// Operation is the VM operation that needed it ("" when not known).
	Operation string
}

// Memory types, the values of jvm.memory.type.
const (
	MemoryHeap    = "heap"
	MemoryNonHeap = "non_heap"
)

// Memory is a sample of one memory area. Negative fields are not known.
type Memory struct {
	// Time is when it was sampled, Unix epoch ns.
	Time int64
	// Type is MemoryHeap or MemoryNonHeap.
	Type string
	// Pool names the area ("" for the whole heap).
	Pool string
	// Used, Committed, Limit are bytes.
	Used, Committed, Limit int64
	// UsedAfterGC is Used sampled just after a collection (else -1).
	UsedAfterGC int64
}

// Buffers is a sample of a buffer pool (direct buffers).
type Buffers struct {
	// Time is when it was sampled, Unix epoch ns.
	Time int64
	// Pool is the buffer pool ("direct").
	Pool string
	// Count is the number of buffers.
	Count int64
	// Used is the memory the buffers use, Capacity their total capacity,
	// in bytes.
	Used, Capacity int64
}

// NativeMemory is one Native Memory Tracking category sample.
type NativeMemory struct {
	// Time is when it was sampled, Unix epoch ns.
	Time int64
	// Category is the NMT category ("Java Heap", "Class", "Thread", …;
	// "Total" for the sum).
	Category string
	// Reserved and Committed are bytes.
	Reserved, Committed int64
}

// Threads is a sample of the JVM's live platform threads
// (jdk.JavaThreadStatistics).
type Threads struct {
	// Time is when it was sampled, Unix epoch ns.
	Time int64
	// Active counts every live thread, Daemon the daemon threads among them.
	Active, Daemon int64
}

// Classes is a sample of class loading (jdk.ClassLoadingStatistics).
type Classes struct {
	// Time is when it was sampled, Unix epoch ns.
	Time int64
	// Loaded and Unloaded count classes since the JVM started.
	Loaded, Unloaded int64
}

// CPU is a sample of the JVM's processor use. Negative fields are not known.
type CPU struct {
	// Time is when it was sampled, Unix epoch ns.
	Time int64
	// Utilization is the JVM's recent CPU use, user and system, as a
	// fraction of all the processors it may use (jdk.CPULoad).
	Utilization float64
	// Count is the processors available to the JVM
	// (jdk.ContainerConfiguration's effectiveCpuCount, else
	// jdk.CPUInformation's hwThreads).
	Count int64
}

// Batch is what a source learned about one JVM in one poll.
type Batch struct {
	JVM JVM
	// RuntimeVersion is the JVM's version when the source knows it.
	RuntimeVersion string
	Windows        []window.Window
	GCs            []GC
	UnrecordedGCs  []UnrecordedGCs
	Safepoints     []Safepoint
	Memory         []Memory
	Buffers        []Buffers
	NativeMemory   []NativeMemory
	Threads        []Threads
	Classes        []Classes
	CPU            []CPU
	// Added says the batch comes from a log output the receiver added to
	// the JVM at run time (its safepoint log), not from the JVM's own
	// configuration.
	Added bool
	// Ended says the JVM is gone (or its recording over) and everything it
	// left has been delivered: the receiver forgets it after this batch.
	Ended bool
}

// Empty reports whether the batch carries nothing.
func (b *Batch) Empty() bool {
	return len(b.Windows) == 0 && len(b.GCs) == 0 && len(b.UnrecordedGCs) == 0 && len(b.Safepoints) == 0 &&
		len(b.Memory) == 0 && len(b.Buffers) == 0 && len(b.NativeMemory) == 0 &&
		len(b.Threads) == 0 && len(b.Classes) == 0 && len(b.CPU) == 0
}

// Source is one kind of input the receiver reads. The receiver calls Poll
// from one goroutine, every poll interval; Poll hands what it found to emit,
// one Batch per JVM, and returns new problems (errors.Join of several) that
// the receiver reports; a source reports a lasting problem once, not every
// poll, and keeps going (one bad file does not stop the others).
// Close releases everything the source holds; Poll is not called after it.
type Source interface {
	Poll(ctx context.Context, emit func(Batch)) error
	Close() error
}
