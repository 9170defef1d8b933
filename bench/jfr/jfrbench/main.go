// Command jfrbench times pkg/jfr reading every event of a recording, for
// bench/jfr/jfr.sh. It prints one line per pass and a final line
//
//	RESULT mode=<mode> workers=<n> events=<n> first_ms=<ms> best_ms=<ms> first_cpu_ms=<ms> best_cpu_ms=<ms> events_per_s=<n> mb_per_s=<x> peak_heap_mb=<x>
//
// *_ms is wall time, *_cpu_ms the process's CPU time (user + system) during
// the pass, which stays meaningful on a shared machine; best_* is the
// fastest pass by each measure, and events_per_s and mb_per_s are for the
// best wall time.
//
// Modes: generic (Chunk.Events: every field of every event decoded, pool
// references resolved), scan (Chunk.Scan: a receiver-like selection of GC,
// safepoint and VM-operation fields; everything else skipped by size),
// stats (record sizes and types only).
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/otelcol-ai/otelcol-ai/pkg/jfr"
)

func main() {
	file := flag.String("file", "", "recording to read")
	mode := flag.String("mode", "generic", "generic, scan or stats")
	workers := flag.Int("workers", 1, "chunks decoded in parallel")
	passes := flag.Int("passes", 3, "passes; the best is reported")
	flag.Parse()
	if *file == "" {
		fmt.Fprintln(os.Stderr, "jfrbench: -file is required")
		os.Exit(2)
	}
	st, err := os.Stat(*file)
	if err != nil {
		fail(err)
	}
	var first, best, firstCPU, bestCPU time.Duration
	var events int64
	var peak uint64
	for p := 0; p < *passes; p++ {
		runtime.GC()
		cpu0 := cpuTime()
		start := time.Now()
		n, err := pass(*file, *mode, *workers, &peak)
		if err != nil {
			fail(err)
		}
		el := time.Since(start)
		cpu := cpuTime() - cpu0
		fmt.Printf("pass %d: %d events in %v (CPU %v)\n", p+1, n, el.Round(time.Millisecond), cpu.Round(time.Millisecond))
		if p == 0 {
			first, firstCPU, best, bestCPU = el, cpu, el, cpu
		}
		best, bestCPU = min(best, el), min(bestCPU, cpu)
		events = n
	}
	secs := best.Seconds()
	fmt.Printf("RESULT mode=%s workers=%d events=%d first_ms=%d best_ms=%d first_cpu_ms=%d best_cpu_ms=%d events_per_s=%.0f mb_per_s=%.1f peak_heap_mb=%.1f\n",
		*mode, *workers, events, first.Milliseconds(), best.Milliseconds(), firstCPU.Milliseconds(), bestCPU.Milliseconds(),
		float64(events)/secs, float64(st.Size())/1e6/secs, float64(peak)/1e6)
}

// cpuTime returns the CPU time (user + system) the process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "jfrbench:", err)
	os.Exit(1)
}

func pass(path, mode string, workers int, peak *uint64) (int64, error) {
	r, err := jfr.Open(path)
	if err != nil {
		return 0, err
	}
	defer r.Close()
	var total atomic.Int64
	sel := jfr.NewSelection()
	sel.Add("jdk.GarbageCollection", "startTime", "duration", "gcId", "name", "cause")
	sel.Add("jdk.GCPhasePause", "startTime", "duration", "gcId", "name", "eventThread.javaThreadId")
	sel.Add("jdk.SafepointBegin", "startTime", "duration", "safepointId")
	sel.Add("jdk.ExecuteVMOperation", "startTime", "duration", "operation", "safepoint", "safepointId")
	sel.Add("jdk.GCHeapSummary", "startTime", "gcId", "when", "heapUsed")
	err = r.ForEachChunk(workers, func(c *jfr.Chunk) error {
		var n int64
		switch mode {
		case "generic":
			er := c.Events()
			for er.Next() {
				ev := er.Event()
				for i := range ev.Fields {
					_ = ev.Fields[i].Kind() // resolves references
				}
				n++
			}
			if err := er.Err(); err != nil {
				return err
			}
		case "scan":
			// Every record is visited; the selected ones are decoded.
			sc := c.Scan(sel)
			for sc.Next() {
				rec := sc.Record()
				_, _ = rec.Nanos(0)
				_ = rec.Int(2)
			}
			if err := sc.Err(); err != nil {
				return err
			}
			n += int64(sc.Count())
		case "stats":
			st, err := c.Stats()
			if err != nil {
				return err
			}
			for _, s := range st {
				if s.ID > 1 {
					n += s.Count
				}
			}
		default:
			return fmt.Errorf("unknown mode %q", mode)
		}
		total.Add(n)
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		for {
			old := atomic.LoadUint64(peak)
			if ms.HeapInuse <= old || atomic.CompareAndSwapUint64(peak, old, ms.HeapInuse) {
				break
			}
		}
		return nil
	})
	return total.Load(), err
}
