package jvmaccounts

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"
)

func TestParseJNIRefs(t *testing.T) {
	tests := []struct {
		name    string
		dump    string
		want    JNIRefs
		wantErr error // nil: no error; errNumber: any other error
	}{
		{"JDK 17 and 25", "\"main\" #1 prio=5\n\nJNI global refs: 7, weak refs: 2\n\nHeap\n garbage-first heap\n", JNIRefs{Global: 7, Weak: 2}, nil},
		{"JDK 8", "Full thread dump\n\nJNI global references: 1234\n\nHeap\n", JNIRefs{Global: 1234}, nil},
		{"the last line wins over a thread named like it", "\"JNI global refs: 99, weak refs: 99\" #12\n\nJNI global refs: 5, weak refs: 0\n", JNIRefs{Global: 5}, nil},
		{"cut before the line", "\"main\" #1 prio=5\n   java.lang.Thread.State: RUNNABLE\n", JNIRefs{}, ErrNoJNILine},
		{"no weak count", "JNI global refs: 5\n", JNIRefs{}, ErrNoJNILine},
		{"negative", "JNI global refs: -5, weak refs: 0\n", JNIRefs{}, errNumber},
		{"overflow", "JNI global refs: 99999999999999999999, weak refs: 0\n", JNIRefs{}, errNumber},
		{"not a number", "JNI global refs: many, weak refs: 0\n", JNIRefs{}, errNumber},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseJNIRefs(tt.dump)
			switch {
			case tt.wantErr == nil && err != nil:
				t.Fatalf("ParseJNIRefs: %v", err)
			case tt.wantErr == errNumber && err == nil:
				t.Fatalf("ParseJNIRefs: got %+v, want an error", got)
			case tt.wantErr != nil && tt.wantErr != errNumber && !errors.Is(err, tt.wantErr):
				t.Fatalf("ParseJNIRefs: got error %v, want %v", err, tt.wantErr)
			}
			if got != tt.want {
				t.Errorf("ParseJNIRefs: got %+v, want %+v", got, tt.want)
			}
		})
	}
}

// errNumber stands for "an error about the number", which has no sentinel.
var errNumber = errors.New("a number error")

func TestParseStatus(t *testing.T) {
	status := "Name:\tjava\nVmRSS:\t  81232 kB\nRssAnon:\t   61440 kB\nRssFile:\t   19792 kB\nThreads:\t23\n"
	got, err := parseStatus([]byte(status), 1)
	if err != nil {
		t.Fatal(err)
	}
	if want := (Status{RSSAnon: 61440 << 10, Threads: 23}); got != want {
		t.Errorf("parseStatus: got %+v, want %+v", got, want)
	}
	for _, bad := range []string{
		"Name:\tjava\nThreads:\t23\n",                 // no RssAnon (a kernel older than 4.5)
		"RssAnon:\t 12 MB\nThreads:\t1\n",             // another unit
		"RssAnon:\t -12 kB\nThreads:\t1\n",            // negative
		"RssAnon:\t 12 kB\nThreads:\tmany\n",          // not a number
		"RssAnon:\t 99999999999999 kB\nThreads:\t1\n", // beyond any machine
	} {
		if _, err := parseStatus([]byte(bad), 1); err == nil {
			t.Errorf("parseStatus(%q): no error", bad)
		}
	}
}

func TestUnaccounted(t *testing.T) {
	const mib = 1 << 20
	tests := []struct {
		name string
		rss  int64
		a    Accounted
		// heap is the heap's resident part, -1 when its place is not
		// known.
		heap int64
		want int64
		ok   bool
	}{
		{"without NMT: heap, metaspace, code cache, direct buffers", 500 * mib,
			Accounted{HeapCommitted: 256 * mib, Metaspace: 20 * mib, CodeCache: 10 * mib, DirectBuffers: 64 * mib, NMTCommitted: -1}, -1, 150 * mib, true},
		{"with NMT: its total, which covers the direct buffers", 500 * mib,
			Accounted{HeapCommitted: 256 * mib, Metaspace: 20 * mib, CodeCache: 10 * mib, DirectBuffers: 64 * mib, NMTCommitted: 400 * mib}, -1, 100 * mib, true},
		{"an untouched heap makes it negative", 100 * mib,
			Accounted{HeapCommitted: 256 * mib, Metaspace: 20 * mib, CodeCache: -1, DirectBuffers: 0, NMTCommitted: -1}, -1, -176 * mib, true},
		{"direct buffers not known (or stale): a direct leak would read as native", 500 * mib,
			Accounted{HeapCommitted: 256 * mib, Metaspace: 20 * mib, CodeCache: 10 * mib, DirectBuffers: -1, NMTCommitted: -1}, -1, 0, false},
		{"heap not reported yet", 500 * mib, Accounted{HeapCommitted: -1, Metaspace: 20 * mib, NMTCommitted: -1}, -1, 0, false},
		{"metaspace not reported yet", 500 * mib, Accounted{HeapCommitted: 256 * mib, Metaspace: -1, NMTCommitted: -1}, -1, 0, false},
		{"the heap's resident part for its committed size", 300 * mib,
			Accounted{HeapCommitted: 256 * mib, Metaspace: 20 * mib, CodeCache: 10 * mib, DirectBuffers: 64 * mib, NMTCommitted: -1}, 56 * mib, 150 * mib, true},
		{"with NMT, the resident part for the committed heap in its total", 300 * mib,
			Accounted{HeapCommitted: 256 * mib, Metaspace: 20 * mib, CodeCache: 10 * mib, DirectBuffers: 64 * mib, NMTCommitted: 400 * mib}, 56 * mib, 100 * mib, true},
		{"a heap in shared memory (ZGC): none of it in RssAnon", 150 * mib,
			Accounted{HeapCommitted: 256 * mib, Metaspace: 20 * mib, CodeCache: 10 * mib, DirectBuffers: 64 * mib, NMTCommitted: -1}, 0, 56 * mib, true},
		{"with NMT and the heap not reported yet: NMT's total", 500 * mib, Accounted{HeapCommitted: -1, Metaspace: -1, NMTCommitted: 400 * mib}, -1, 100 * mib, true},
		{"with NMT, a resident heap and the committed heap not reported yet", 500 * mib, Accounted{HeapCommitted: -1, NMTCommitted: 400 * mib}, 56 * mib, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := Unaccounted(tt.rss, tt.a, tt.heap)
			if got != tt.want || ok != tt.ok {
				t.Errorf("Unaccounted: got %d %v, want %d %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}

// TestReaderSkipsManyThreads: a JVM with more threads than MaxThreads is
// not attached to, once per interval, and counted as skipped; a closed
// Reader starts nothing.
func TestReaderSkipsManyThreads(t *testing.T) {
	var outcomes []string
	r := NewReader(ReaderConfig{ProcRoot: "/proc", ThreadDumps: true, Interval: time.Minute, MaxThreads: 10, Timeout: time.Second,
		Done: func(_ Target, outcome string, err error, changed bool) {
			outcomes = append(outcomes, fmt.Sprintf("%s %v", outcome, changed))
		}})
	tgt := Target{PID: 1 << 22} // beyond pid_max: nothing to attach to
	now := time.Now()
	for i := range 3 {
		if _, ok := r.Poll(tgt, 11, now.Add(time.Duration(i)*30*time.Second)); ok {
			t.Fatal("a reading without a read")
		}
	}
	if want := []string{"skipped_threads true", "skipped_threads false"}; !slices.Equal(outcomes, want) {
		t.Errorf("outcomes %q, want %q (one per minute; the second the same as the first)", outcomes, want)
	}
	r.Close(context.Background())
	r.Poll(tgt, 1, now.Add(time.Hour))
	r.Sweep()
	r.Sweep()
	if r.Len() != 0 {
		t.Errorf("%d JVMs held after two sweeps without a poll", r.Len())
	}
	if len(outcomes) != 2 {
		t.Errorf("a closed reader read: %q", outcomes)
	}
}
