package jvmaccounts

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/otelcol-ai/otelcol-ai/internal/procroot"
)

// HeapPlace says where a JVM's Java heap lies in its memory, as the JVM's
// GC.heap_info tells it. The heap is committed in large parts that are
// touched (made resident) only as the collector first allocates in them:
// a heap committed at start (-Xms, G1's initial heap) is mostly not
// resident for tens of seconds, and its committed size set against the
// resident memory would make the unaccounted native memory climb as the
// heap is touched. The resident part of the heap's addresses is what
// RssAnon holds of it.
type HeapPlace struct {
	// Lo and Hi bound the heap's reserved addresses, [Lo, Hi): the
	// collectors whose heap is one reservation of private anonymous
	// memory (G1, Parallel, Serial, Shenandoah).
	Lo, Hi uint64
	// Shared is true for a heap in shared memory (ZGC maps it from a
	// memfd, counted in RssShmem): none of it is in RssAnon.
	Shared bool
}

// ErrNoHeapPlace: GC.heap_info's answer names no heap addresses and no
// collector known to keep its heap out of RssAnon.
var ErrNoHeapPlace = errors.New("GC.heap_info names no heap address range")

// maxHeapSpan bounds a heap's reserved range (128 TiB, the x86-64 user
// address space).
const maxHeapSpan = 1 << 47

// ParseHeapInfo reads where the heap lies from GC.heap_info's answer: the
// address ranges its lines give ("[0x…, 0x…)", "[0x…, 0x…, 0x…)": the
// heap's, or each generation's, low and high bounds), from the lowest low
// to the highest high; a ZHeap is Shared. The answer is the JVM's and
// checked: a range must be ordered and within the address space.
func ParseHeapInfo(out string) (HeapPlace, error) {
	var p HeapPlace
	found := false
	for line := range strings.SplitSeq(out, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "ZHeap ") {
			return HeapPlace{Shared: true}, nil
		}
		// The heap comes first; what follows Metaspace is not it.
		if strings.HasPrefix(strings.TrimSpace(line), "Metaspace ") {
			break
		}
		open := strings.Index(line, "[0x")
		if open < 0 {
			continue
		}
		end := strings.IndexAny(line[open:], ")]")
		if end < 0 {
			return HeapPlace{}, fmt.Errorf("jvmaccounts: GC.heap_info line %q: unclosed range", line)
		}
		var bounds []uint64
		for f := range strings.SplitSeq(line[open+1:open+end], ",") {
			v, err := strconv.ParseUint(strings.TrimPrefix(strings.TrimSpace(f), "0x"), 16, 64)
			if err != nil {
				return HeapPlace{}, fmt.Errorf("jvmaccounts: GC.heap_info line %q: %w", line, err)
			}
			bounds = append(bounds, v)
		}
		if len(bounds) < 2 {
			return HeapPlace{}, fmt.Errorf("jvmaccounts: GC.heap_info line %q: not a range", line)
		}
		lo, hi := bounds[0], bounds[len(bounds)-1]
		if lo >= hi || hi-lo > maxHeapSpan {
			return HeapPlace{}, fmt.Errorf("jvmaccounts: GC.heap_info line %q: not a range", line)
		}
		if !found || lo < p.Lo {
			p.Lo = lo
		}
		if !found || hi > p.Hi {
			p.Hi = hi
		}
		found = true
	}
	if !found {
		return HeapPlace{}, ErrNoHeapPlace
	}
	if p.Hi-p.Lo > maxHeapSpan {
		return HeapPlace{}, fmt.Errorf("jvmaccounts: GC.heap_info: heap [%#x, %#x) larger than the address space", p.Lo, p.Hi)
	}
	return p, nil
}

// maxSmaps caps the read of /proc/<pid>/smaps: about 1.1 KiB a mapping,
// two mappings a thread (its stack and guard page), so about 14 000
// threads.
const maxSmaps = 32 << 20

// ErrSmapsTooLarge: /proc/<pid>/smaps is longer than maxSmaps.
var ErrSmapsTooLarge = errors.New("smaps larger than the read cap")

// HeapResident returns how much of the heap at h is resident: the Rss of
// the process's mappings that lie within [h.Lo, h.Hi), from
// /proc/<pid>/smaps (read under maxSmaps, line by line); 0 for a Shared
// heap, which is not in RssAnon.
func HeapResident(procRoot string, pid int, h HeapPlace) (int64, error) {
	if h.Shared {
		return 0, nil
	}
	path := filepath.Join(procRoot, strconv.Itoa(pid), "smaps")
	f, err := procroot.OpenProcFile(unix.AT_FDCWD, path)
	if err != nil {
		return 0, fmt.Errorf("jvmaccounts: pid %d: %w", pid, err)
	}
	defer f.Close()
	rss, err := heapRSS(io.LimitReader(f, maxSmaps+1), h)
	if err != nil {
		return 0, fmt.Errorf("jvmaccounts: pid %d: %s: %w", pid, path, err)
	}
	return rss, nil
}

// heapRSS sums the Rss lines of the smaps mappings within [h.Lo, h.Hi).
func heapRSS(r io.Reader, h HeapPlace) (int64, error) {
	sc := bufio.NewScanner(r)
	// A mapping's line ends with its path (at most PATH_MAX).
	sc.Buffer(make([]byte, 0, 4096), 8192)
	var rss, read int64
	in := false
	for sc.Scan() {
		line := sc.Bytes()
		if read += int64(len(line)) + 1; read > maxSmaps {
			return 0, ErrSmapsTooLarge
		}
		if lo, hi, ok := mappingRange(line); ok {
			in = lo >= h.Lo && hi <= h.Hi
			continue
		}
		if !in {
			continue
		}
		value, ok := bytes.CutPrefix(line, []byte("Rss:"))
		if !ok {
			continue
		}
		f := bytes.Fields(value)
		if len(f) != 2 || string(f[1]) != "kB" {
			return 0, fmt.Errorf("rss line %q", line)
		}
		kb, err := strconv.ParseInt(string(f[0]), 10, 64)
		if err != nil || kb < 0 || kb > 1<<40 {
			return 0, fmt.Errorf("rss line %q", line)
		}
		rss += kb << 10
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return rss, nil
}

// mappingRange reads the range of an smaps mapping's first line
// ("687400000-69f000000 rw-p 00000000 00:00 0"); the field lines that
// follow it begin with a capitalised name ("Rss:").
func mappingRange(line []byte) (lo, hi uint64, ok bool) {
	r, _, found := bytes.Cut(line, []byte(" "))
	if !found {
		return 0, 0, false
	}
	a, b, found := bytes.Cut(r, []byte("-"))
	if !found {
		return 0, 0, false
	}
	lo, err := strconv.ParseUint(string(a), 16, 64)
	if err != nil {
		return 0, 0, false
	}
	hi, err = strconv.ParseUint(string(b), 16, 64)
	if err != nil || hi < lo {
		return 0, 0, false
	}
	return lo, hi, true
}
