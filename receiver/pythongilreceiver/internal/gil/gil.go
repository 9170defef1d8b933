// Package gil measures CPython's GIL from outside the process: uprobes on the
// interpreter's GIL and GC functions (gil.bpf.c) report, per thread, when it
// ran without the GIL, how long it waited to take it back, how long it held
// it and when the cyclic GC ran.
//
// A Probe is one loaded copy of the BPF objects. Attach adds one ELF file
// (libpython3.X.so or a static python executable); its uprobes fire in
// every process that maps the file. Windows at least Options.MinDuration
// long come one by one from ReadEvent; shorter ones are summed in the kernel
// and read with Aggregates. Times are CLOCK_MONOTONIC ns.
package gil // import "github.com/otelcol-ai/otelcol-ai/receiver/pythongilreceiver/internal/gil"

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Symbols probed, by name in the ELF symbol tables.
const (
	SymSaveThread     = "PyEval_SaveThread"
	SymRestoreThread  = "PyEval_RestoreThread"
	SymAcquireThread  = "PyEval_AcquireThread"
	SymReleaseThread  = "PyEval_ReleaseThread"
	SymGILStateEnsure = "PyGILState_Ensure"
	SymTakeGIL        = "take_gil"
	SymDropGIL        = "drop_gil"
	SymGCCollectMain  = "gc_collect_main"
	// SymGCCollectLegacy is gc_collect_main's name up to 3.9 (static
	// `collect`, generation in the second argument as well).
	SymGCCollectLegacy = "collect"
)

var probedSymbols = []string{SymSaveThread, SymRestoreThread, SymAcquireThread, SymReleaseThread,
	SymGILStateEnsure, SymTakeGIL, SymDropGIL, SymGCCollectMain, SymGCCollectLegacy}

// Options configure a Probe when it is loaded.
type Options struct {
	// MinDuration: windows shorter than this are counted and summed in the
	// kernel instead of being sent one by one.
	MinDuration time.Duration
	// FilterPIDs restricts probing to the pids given to Select; without it
	// every process mapping an attached file is probed.
	FilterPIDs bool
	// SwitchProbes attaches take_gil/drop_gil where the symbol table has
	// them or decoding finds them (static.go): true waits, forced switches
	// and held time.
	SwitchProbes bool
	// GC attaches gc_collect_main (or collect) where the symbol table has
	// it, else the gc__start/gc__done USDT probes where the file has them,
	// else gc_collect_main where decoding finds it, for GC pauses.
	GC bool
	// Futex takes waits from the futex syscalls of threads blocked on the
	// GIL (tracepoints syscalls:sys_enter_futex/sys_exit_futex, attached
	// from Load to Close) instead of take_gil/drop_gil or
	// PyEval_RestoreThread's return: a release cycle that does not block
	// costs two uprobe hits (PyEval_SaveThread, PyEval_RestoreThread),
	// forced switches are seen where the dropping thread blocks, held time
	// is derived from the windows around it, and while duty cycling
	// detaches the uprobes every wait that blocks is still timed. It
	// overrides SwitchProbes.
	Futex bool
	// Bare replaces every program, entry and return, with one that only
	// counts hits: the baseline of the overhead benchmark.
	Bare bool
	// Points, when set, limits the probe points to these symbols (of
	// those the other options select): the benchmark's floor is a
	// count-only probe on PyEval_SaveThread alone.
	Points []string
}

// Kind is what a window or aggregate measures.
type Kind uint8

// Kinds, numbered as in gil.bpf.c.
const (
	KindReleased Kind = 0 // thread ran without the GIL
	KindWait     Kind = 1 // thread waited for the GIL
	KindGC       Kind = 2 // cyclic GC ran
	KindHeld     Kind = 3 // thread held the GIL (aggregate only, needs take/drop)
	KindSwitch   Kind = 4 // forced drops by the switch interval (count only)
)

// Cause says why a thread waited.
type Cause uint8

// Causes, numbered as in gil.bpf.c.
const (
	CauseUnknown Cause = 0
	CauseRestore Cause = 1 // returning from native code (PyEval_RestoreThread/AcquireThread)
	CauseEnsure  Cause = 2 // entering from outside (PyGILState_Ensure)
	CauseSwitch  Cause = 3 // forced off by the switch interval
)

// Event is one window from the ring buffer.
type Event struct {
	Kind  Kind
	Cause Cause
	PID   uint32
	TID   uint32
	// Start is CLOCK_MONOTONIC ns.
	Start    int64
	Duration time.Duration
	// Generation is the GC generation for KindGC.
	Generation uint8
	// Continues marks a KindWait that goes on from the end of the same
	// thread's previous wait: that one was sent at a wake-up that found
	// the GIL free, and another thread took it first. Start is then that
	// wait's end; the two are one wait.
	Continues bool
}

// AggregateKey names one in-kernel aggregate.
type AggregateKey struct {
	PID  uint32
	TID  uint32
	Kind Kind
	// Generation is the GC generation of KindGC's short pauses (0-2), or
	// NoGeneration; it is 0 for the other kinds.
	Generation int
}

// NoGeneration is the Generation of short GC pauses whose generation is
// out of CPython's three.
const NoGeneration = -1

// Aggregate is a count and total duration of windows shorter than the
// minimum (or lost to a full ring buffer), or of held time.
type Aggregate struct {
	Count uint64
	Sum   time.Duration
}

// Counters are kernel-side counters, cumulative since Load.
type Counters struct {
	// RingBufferFull counts windows summed instead of sent because the
	// ring buffer was full.
	RingBufferFull uint64
	// AggregateMapFull counts probe hits of threads left untracked because
	// the thread map (which holds the aggregates) was full.
	AggregateMapFull uint64
	// Stale counts windows discarded because they began before the probes
	// were last attached (duty cycling).
	Stale uint64
	// Hits counts probe hits, the basis of the overhead estimate.
	Hits uint64
}

// ErrUnavailable is wrapped by errors that mean eBPF uprobes cannot be used
// here at all: no privileges, no kernel support.
var ErrUnavailable = errors.New("eBPF uprobes unavailable: needs root or CAP_BPF, CAP_PERFMON and CAP_SYS_RESOURCE on a kernel with uprobe and ring buffer support (5.8+); in Kubernetes run the collector with hostPID: true and securityContext.capabilities.add [BPF, PERFMON, SYS_RESOURCE, SYS_PTRACE] or privileged: true")

// ErrNoSymbols is returned when a file has none of the GIL functions.
var ErrNoSymbols = errors.New("no CPython GIL symbols")

// ErrClosed is returned by a closed Probe.
var ErrClosed = errors.New("gil: probe closed")

// UnavailableError says which step the kernel refused. It matches
// ErrUnavailable with errors.Is.
type UnavailableError struct {
	Op  string
	Err error
}

func (e *UnavailableError) Error() string {
	return fmt.Sprintf("gil: %s: %v (%v)", e.Op, e.Err, ErrUnavailable)
}

// Unwrap returns both the cause and ErrUnavailable.
func (e *UnavailableError) Unwrap() []error { return []error{e.Err, ErrUnavailable} }

// Symbols maps the probed functions an ELF file defines to their file
// offsets, where their uprobes go.
type Symbols map[string]uint64

// Has reports whether the file defines name.
func (s Symbols) Has(name string) bool { return s[name] != 0 }

// HasGIL reports whether the exported GIL functions are there.
func (s Symbols) HasGIL() bool { return s.Has(SymSaveThread) && s.Has(SymRestoreThread) }

// GC returns the GC function to probe, "" when there is none.
func (s Symbols) GC() string {
	switch {
	case s.Has(SymGCCollectMain):
		return SymGCCollectMain
	case s.Has(SymGCCollectLegacy):
		return SymGCCollectLegacy
	}
	return ""
}

// Switch reports whether take_gil and drop_gil can both be probed.
func (s Symbols) Switch() bool { return s.Has(SymTakeGIL) && s.Has(SymDropGIL) }

// Join adds next to prev when next continues prev (Event.Continues: the
// same thread's wait, starting where prev ends) and reports whether it
// did.
func Join(prev *Event, next Event) bool {
	if !next.Continues || prev.Kind != KindWait || next.Kind != KindWait || prev.PID != next.PID || prev.TID != next.TID ||
		prev.Start+int64(prev.Duration) != next.Start {
		return false
	}
	prev.Duration += next.Duration
	return true
}

// WritableRange returns, from a process's /proc/<pid>/maps, the address
// range of the writable mappings of the file dev:inode (the interpreter's
// .data) and of the anonymous mapping right after them (its .bss): where
// the main interpreter's GIL lies. ok is false when the file has no
// writable mapping.
func WritableRange(maps []byte, dev string, inode uint64) (lo, hi uint64, ok bool) {
	after := false
	for line := range strings.SplitSeq(string(maps), "\n") {
		// address perms offset dev inode [path]
		f := strings.Fields(line)
		if len(f) < 5 {
			after = false
			continue
		}
		start, end, found := strings.Cut(f[0], "-")
		s, err1 := strconv.ParseUint(start, 16, 64)
		e, err2 := strconv.ParseUint(end, 16, 64)
		if !found || err1 != nil || err2 != nil || e <= s {
			after = false
			continue
		}
		writable := len(f[1]) > 1 && f[1][1] == 'w'
		switch {
		case f[3] == dev && f[4] == strconv.FormatUint(inode, 10) && writable:
			if !ok || s < lo {
				lo = s
			}
			hi, ok, after = max(hi, e), true, true
		case after && f[4] == "0" && len(f) == 5 && writable && s == hi:
			hi, after = e, false
		default:
			after = false
		}
	}
	return lo, hi, ok
}
