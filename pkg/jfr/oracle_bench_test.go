package jfr_test

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/otelcol-ai/otelcol-ai/pkg/jfr"
	"github.com/otelcol-ai/otelcol-ai/pkg/jfr/internal/jdktest"
)

// jdkPasses is how many passes the JDK makes over each oracle recording in
// one JVM, each reading it readsPerPass times: the JDK's parser keeps
// getting faster for hundreds of reads of a small file while C2 compiles
// it, and the process CPU time it reports moves in 10 ms steps, so a pass
// must last many of them.
const jdkPasses = 20

// passBytes is about how much a pass reads: readsPerPass copies of a file.
const passBytes = 8 << 20

func readsPerPass(size int64) int { return int(max(1, passBytes/max(size, 1))) }

// BenchmarkOracleVsJDK reads every recording of the JFR oracle set
// (TestJDKOracle's) with the JDK's jdk.jfr.consumer.RecordingFile (of the
// JDK that made it; bench/jfr/ReadAll.java) and with this package, in
// jdkPasses passes of readsPerPass reads, and reports this package's speed as a ratio to the JDK's:
// x-jdk-warm-cpu is the JDK's best pass over the generic reader's best pass
// by CPU time (the JDK's includes its JIT and GC threads), x-jdk-first-cpu
// the same against the JDK's first pass in a fresh JVM, x-jdk-warm-wall by
// wall time, and scan-x-jdk-warm-cpu the selective Scan against the JDK's
// best. CPU time is the process's user + system time during a pass, which
// stays meaningful on a shared machine.
func BenchmarkOracleVsJDK(b *testing.B) {
	readAll, err := filepath.Abs(filepath.Join("..", "..", "bench", "jfr", "ReadAll.java"))
	if err != nil {
		b.Fatal(err)
	}
	for _, oc := range oracleCases {
		b.Run(oc.name, func(b *testing.B) {
			j := jdktest.Find(b, oc.major)
			path := jdktest.Record(b, oc.spec(j))
			st, err := os.Stat(path)
			if err != nil {
				b.Fatal(err)
			}
			reads := readsPerPass(st.Size())
			jdk := jdkReadAll(b, j, readAll, path, reads)
			var generic, scan passTimes
			for b.Loop() {
				generic = timePasses(b, jdkPasses, reads, func() int64 { return readGeneric(b, path) })
				scan = timePasses(b, jdkPasses, reads, func() int64 { return readScan(b, path) })
			}
			if generic.events != jdk.events {
				b.Fatalf("pkg/jfr read %d events, the JDK %d", generic.events, jdk.events)
			}
			b.ReportMetric(jdk.bestCPU.Seconds()/generic.bestCPU.Seconds(), "x-jdk-warm-cpu")
			b.ReportMetric(jdk.firstCPU.Seconds()/generic.bestCPU.Seconds(), "x-jdk-first-cpu")
			b.ReportMetric(jdk.best.Seconds()/generic.best.Seconds(), "x-jdk-warm-wall")
			b.ReportMetric(jdk.bestCPU.Seconds()/scan.bestCPU.Seconds(), "scan-x-jdk-warm-cpu")
			b.ReportMetric(float64(generic.events), "events")
			b.Logf("%s: %d bytes, %d events; CPU ms per read: JDK %.1f first, %.2f best; generic %.2f; scan %.2f",
				oc.name, st.Size(), jdk.events, ms(jdk.firstCPU), ms(jdk.bestCPU), ms(generic.bestCPU), ms(scan.bestCPU))
		})
	}
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }

// passTimes are the first and best of several passes over a recording.
type passTimes struct {
	events                         int64
	first, best, firstCPU, bestCPU time.Duration
}

func (p *passTimes) add(i int, wall, cpu time.Duration) {
	if i == 0 {
		p.first, p.firstCPU, p.best, p.bestCPU = wall, cpu, wall, cpu
	}
	p.best, p.bestCPU = min(p.best, wall), min(p.bestCPU, cpu)
}

// timePasses times n passes of reads reads each; its times are per read.
func timePasses(b *testing.B, n, reads int, read func() int64) passTimes {
	var p passTimes
	for i := 0; i < n; i++ {
		cpu0, start := processCPU(b), time.Now()
		for range reads {
			p.events = read()
		}
		p.add(i, time.Since(start)/time.Duration(reads), (processCPU(b)-cpu0)/time.Duration(reads))
	}
	return p
}

func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// readGeneric decodes every field of every event, resolving references,
// as RecordingFile does.
func readGeneric(b *testing.B, path string) int64 {
	var n int64
	eachChunk(b, path, func(c *jfr.Chunk) {
		er := c.Events()
		for er.Next() {
			ev := er.Event()
			for k := range ev.Fields {
				_ = ev.Fields[k].Kind()
			}
			n++
		}
		if err := er.Err(); err != nil {
			b.Fatal(err)
		}
	})
	return n
}

// readScan visits every record with the selective Scanner, decoding a
// receiver's GC, safepoint and VM-operation fields.
func readScan(b *testing.B, path string) int64 {
	sel := jfr.NewSelection()
	sel.Add("jdk.GarbageCollection", "startTime", "duration", "gcId", "name", "cause")
	sel.Add("jdk.GCPhasePause", "startTime", "duration", "gcId", "name")
	sel.Add("jdk.SafepointBegin", "startTime", "duration", "safepointId")
	sel.Add("jdk.ExecuteVMOperation", "startTime", "duration", "operation", "safepoint")
	var n int64
	eachChunk(b, path, func(c *jfr.Chunk) {
		sc := c.Scan(sel)
		for sc.Next() {
			_, _ = sc.Record().Nanos(0)
			n++
		}
		if err := sc.Err(); err != nil {
			b.Fatal(err)
		}
	})
	return n
}

// eachChunk opens the recording at path and calls f with each of its
// chunks in turn.
func eachChunk(b *testing.B, path string, f func(c *jfr.Chunk)) {
	r, err := jfr.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	for i := range r.Chunks() {
		c, err := r.Chunk(i)
		if err != nil {
			b.Fatal(err)
		}
		f(c)
	}
}

// jdkReadAll runs ReadAll.java in the JDK and parses its RESULT line.
func jdkReadAll(b *testing.B, j jdktest.JDK, source, path string, reads int) passTimes {
	b.Helper()
	out, err := exec.Command(j.Java(), source, path, strconv.Itoa(jdkPasses), strconv.Itoa(reads)).CombinedOutput()
	if err != nil {
		b.Fatalf("%s %s: %v\n%s", j.Java(), source, err, out)
	}
	var p passTimes
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "RESULT ")
		if !ok {
			continue
		}
		for _, kv := range strings.Fields(rest) {
			k, v, _ := strings.Cut(kv, "=")
			n, _ := strconv.ParseInt(v, 10, 64)
			switch k {
			case "events":
				p.events = n
			case "first_us":
				p.first = time.Duration(n) * time.Microsecond
			case "best_us":
				p.best = time.Duration(n) * time.Microsecond
			case "first_cpu_us":
				p.firstCPU = time.Duration(n) * time.Microsecond
			case "best_cpu_us":
				p.bestCPU = time.Duration(n) * time.Microsecond
			}
		}
		return p
	}
	b.Fatalf("no RESULT line from ReadAll:\n%s", out)
	return p
}
