package jvmaccounts

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/otelcol-ai/otelcol-ai/pkg/jfr/jfrtest"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/attach"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/leaktest"
)

// threadDumpSafepoint matches the -Xlog:safepoint lines of the three
// safepoints a Thread.print takes (JDK 17: print the threads, print the
// JNI references, find deadlocks) and takes their totals.
var threadDumpSafepoint = regexp.MustCompile(`Safepoint "(?:PrintThreads|PrintJNI|FindDeadlocks)".* Total: (\d+) ns`)

// BenchmarkJNIRead measures what reading the JNI reference count costs a
// JDK 17 JVM of 200 idle threads (and the JVM's own, about 220 in all):
// per read, the time the attach exchange takes (ns/op), the time the JVM
// spends stopped at the thread dump's three safepoints (safepoint-ns/read,
// from the JVM's -Xlog:safepoint) and the dump's size (bytes/read).
//
//	go test -run '^$' -bench JNIRead -benchtime 50x ./receiver/jfrreceiver/internal/jvmaccounts/
func BenchmarkJNIRead(b *testing.B) {
	jdk := jfrtest.Find(b, 17)
	prog := leaktest.Build(b, jdk)
	log := filepath.Join(b.TempDir(), "safepoint.log")
	j := leaktest.Start(b, jdk.Java(), prog, leaktest.Threads, 0, 0, 0,
		[]string{"-Xmx64m", "-Xlog:safepoint=info:file=" + log}, "200")
	target := attach.Target{ProcRoot: "/proc", PID: j.PID, Timeout: 10 * time.Second}
	// Warm up: the JVM's start, its attach listener, the 200 threads.
	deadline := time.Now().Add(60 * time.Second)
	for {
		st, err := ReadStatus("/proc", j.PID)
		if err == nil && st.Threads >= 200 && j.Leaked().Lines > 0 {
			if _, err := target.Jcmd("Thread.print"); err == nil {
				break
			}
		}
		if time.Now().After(deadline) {
			b.Fatalf("the JVM did not come up with 200 threads: %s", j.Output())
		}
		time.Sleep(100 * time.Millisecond)
	}
	before := safepointTotals(b, log)
	b.ResetTimer()
	var size int
	for b.Loop() {
		out, err := target.Jcmd("Thread.print")
		if err != nil {
			b.Fatal(err)
		}
		if _, err := ParseJNIRefs(out); err != nil {
			b.Fatal(err)
		}
		size = len(out)
	}
	b.StopTimer()
	// The log is written as the safepoints end; give the last a moment.
	time.Sleep(200 * time.Millisecond)
	after := safepointTotals(b, log)
	n := len(after) - len(before)
	if n < 3*b.N {
		b.Fatalf("%d thread dump safepoints logged for %d reads, want 3 a read", n, b.N)
	}
	var total int64
	for _, ns := range after[len(before):] {
		total += ns
	}
	b.ReportMetric(float64(total)/float64(b.N), "safepoint-ns/read")
	b.ReportMetric(float64(size), "bytes/read")
}

// safepointTotals returns the total of every thread dump safepoint logged.
func safepointTotals(b *testing.B, log string) []int64 {
	b.Helper()
	data, err := os.ReadFile(log)
	if err != nil {
		b.Fatal(err)
	}
	var out []int64
	for _, m := range threadDumpSafepoint.FindAllSubmatch(data, -1) {
		ns, err := strconv.ParseInt(string(m[1]), 10, 64)
		if err != nil {
			b.Fatal(err)
		}
		out = append(out, ns)
	}
	return out
}

// BenchmarkHeapResident measures what reading the resident part of a
// JVM's heap costs the collector, per collection: /proc/<pid>/smaps of a
// JDK 17 JVM of 200 idle threads (about 220 in all), read and summed over
// the heap's range (ns/op), and its size (bytes/read).
//
//	go test -run '^$' -bench HeapResident -benchtime 200x ./receiver/jfrreceiver/internal/jvmaccounts/
func BenchmarkHeapResident(b *testing.B) {
	jdk := jfrtest.Find(b, 17)
	prog := leaktest.Build(b, jdk)
	j := leaktest.Start(b, jdk.Java(), prog, leaktest.Threads, 0, 0, 0, []string{"-Xmx256m"}, "200")
	target := attach.Target{ProcRoot: "/proc", PID: j.PID, Timeout: 10 * time.Second}
	var place HeapPlace
	deadline := time.Now().Add(60 * time.Second)
	for {
		st, err := ReadStatus("/proc", j.PID)
		if err == nil && st.Threads >= 200 && j.Leaked().Lines > 0 {
			out, err := target.Jcmd("GC.heap_info")
			if err == nil {
				if place, err = ParseHeapInfo(out); err != nil {
					b.Fatal(err)
				}
				break
			}
		}
		if time.Now().After(deadline) {
			b.Fatalf("the JVM did not come up with 200 threads: %s", j.Output())
		}
		time.Sleep(100 * time.Millisecond)
	}
	smaps, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(j.PID), "smaps"))
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		if _, err := HeapResident("/proc", j.PID, place); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(smaps)), "bytes/read")
}
