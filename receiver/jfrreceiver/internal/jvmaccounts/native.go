package jvmaccounts

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strconv"

	"github.com/otelcol-ai/otelcol-ai/internal/procresource"
	"github.com/otelcol-ai/otelcol-ai/internal/procroot"
)

// Status is what /proc/<pid>/status says of a process's memory and threads.
type Status struct {
	// RSSAnon is the resident anonymous memory, bytes (RssAnon).
	RSSAnon int64
	// Threads is the number of threads, Java and native (Threads).
	Threads int64
}

// maxStatus caps the read of /proc/<pid>/status (about 1.5 KiB).
const maxStatus = 64 << 10

// ReadStatus reads a process's status from procRoot, capped.
func ReadStatus(procRoot string, pid int) (Status, error) {
	data, err := procroot.ReadProcFile(filepath.Join(procRoot, strconv.Itoa(pid), "status"), maxStatus)
	if err != nil {
		return Status{}, fmt.Errorf("jvmaccounts: pid %d: %w", pid, err)
	}
	return parseStatus(data, pid)
}

func parseStatus(data []byte, pid int) (Status, error) {
	rss, okRSS := procresource.StatusField(data, "RssAnon")
	threads, okThreads := procresource.StatusField(data, "Threads")
	if !okRSS || !okThreads {
		return Status{}, fmt.Errorf("jvmaccounts: pid %d: status has no RssAnon or Threads line", pid)
	}
	// "1234 kB"
	f := bytes.Fields(rss)
	if len(f) != 2 || string(f[1]) != "kB" {
		return Status{}, fmt.Errorf("jvmaccounts: pid %d: RssAnon %q", pid, rss)
	}
	kb, err := strconv.ParseInt(string(f[0]), 10, 64)
	if err != nil || kb < 0 || kb > 1<<42 {
		return Status{}, fmt.Errorf("jvmaccounts: pid %d: RssAnon %q", pid, rss)
	}
	n, err := strconv.ParseInt(string(threads), 10, 64)
	if err != nil || n < 0 {
		return Status{}, fmt.Errorf("jvmaccounts: pid %d: Threads %q", pid, threads)
	}
	return Status{RSSAnon: kb << 10, Threads: n}, nil
}

// Accounted is the memory a JVM accounts for, from its JFR events; -1
// marks a term not known yet.
type Accounted struct {
	// HeapCommitted is the committed Java heap (the sum of its pools).
	HeapCommitted int64
	// Metaspace is metaspace committed, class space included.
	Metaspace int64
	// CodeCache is the code heaps' used memory (JFR gives no committed).
	CodeCache int64
	// DirectBuffers is the memory direct buffers use (-1 also when the
	// newest reading is too old to set against the resident memory now).
	DirectBuffers int64
	// NMTCommitted is Native Memory Tracking's committed total; -1 when
	// NMT is off (or its newest reading is too old).
	NMTCommitted int64
}

// Unaccounted returns the resident anonymous memory that no JVM account
// covers: rssAnon minus NMT's committed total where NMT is on (it counts
// the heap, metaspace, code cache, thread stacks, GC structures and the
// memory behind direct buffers), else minus the heap, metaspace committed,
// code cache used and direct buffers used. The heap's term is
// heapResident, the part of it that is resident (HeapResident), where its
// place is known (heapResident >= 0; in NMT's total it stands for the
// committed heap), else the committed heap: committed memory that was
// never touched is not resident, so the committed heap makes the result
// low until the heap has been touched, even negative, and makes it climb
// as the heap is touched. False when a term it needs is not known: the
// direct buffers' above all, since a direct buffer leak left out would
// read as a native one.
func Unaccounted(rssAnon int64, a Accounted, heapResident int64) (int64, bool) {
	if rssAnon < 0 {
		return 0, false
	}
	if a.NMTCommitted >= 0 && heapResident < 0 {
		return rssAnon - a.NMTCommitted, true
	}
	if a.HeapCommitted < 0 {
		return 0, false
	}
	heap := a.HeapCommitted
	if heapResident >= 0 {
		heap = heapResident
	}
	if a.NMTCommitted >= 0 {
		return rssAnon - (a.NMTCommitted - a.HeapCommitted + heap), true
	}
	if a.Metaspace < 0 || a.DirectBuffers < 0 {
		return 0, false
	}
	u := rssAnon - heap - a.Metaspace - a.DirectBuffers
	if a.CodeCache > 0 {
		u -= a.CodeCache
	}
	return u, true
}
