package jfrreceiver

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"maps"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"go.opentelemetry.io/collector/receiver/receivertest"

	"github.com/otelcol-ai/otelcol-ai/pkg/jfr"
	"github.com/otelcol-ai/otelcol-ai/pkg/jfr/jfrtest"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/metadata"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/repository"
)

// javaAgentVersion is the OpenTelemetry Java agent the parity test runs
// (the Makefile's OTEL_JAVAAGENT_VERSION, fetched by make test-deps).
const javaAgentVersion = "2.22.0"

// parityWorkload allocates for the given milliseconds with a live set that
// survives young collections and a System.gc() every 700 ms (old/full
// collections), collects once more, prints "idle" and then, until killed,
// answers each line on stdin with a "counts" line, so that both sides can
// report their final values while the JVM still runs: the "idle" and
// "counts" lines end with each GarbageCollectorMXBean's collection count
// (";name=count"), read when the line is printed (ZGC goes on collecting
// while the workload is idle). With a second argument, "late", it first waits
// for a line on stdin (the agent counts), allocates until the JVM has made
// three more young collections, prints "warm" and waits for another line
// (the recording runs) before it begins.
const parityWorkload = `
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.lang.management.GarbageCollectorMXBean;
import java.lang.management.ManagementFactory;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;

public class Parity {
    public static void main(String[] args) throws Exception {
        List<byte[]> live = new ArrayList<>();
        Random r = new Random(1);
        long sink = 0;
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        if (args.length > 1 && args[1].equals("late")) {
            in.readLine();
            long before = collections();
            while (collections() < before + 3) {
                byte[] b = new byte[512 + r.nextInt(4096)];
                sink += b.length;
            }
            System.out.println("warm " + collections());
            System.out.flush();
            in.readLine();
        }
        long end = System.nanoTime() + Long.parseLong(args[0]) * 1_000_000L;
        long nextFull = System.nanoTime() + 700_000_000L;
        while (System.nanoTime() < end) {
            byte[] b = new byte[512 + r.nextInt(4096)];
            sink += b.length;
            if (r.nextInt(8) == 0) live.add(b);
            if (live.size() > 6000) live.subList(0, 3000).clear();
            if (System.nanoTime() > nextFull) {
                System.gc();
                nextFull = System.nanoTime() + 700_000_000L;
            }
        }
        // JFR samples metaspace at collections only: one more makes its
        // last sample as recent as the agent's.
        live.clear();
        System.gc();
        System.out.println("idle " + sink + " " + counts());
        System.out.flush();
        while (in.readLine() != null) {
            System.out.println("counts " + counts());
            System.out.flush();
        }
        Thread.sleep(600_000);
    }

    static String counts() {
        StringBuilder counts = new StringBuilder();
        for (GarbageCollectorMXBean gc : ManagementFactory.getGarbageCollectorMXBeans()) {
            counts.append(';').append(gc.getName()).append('=').append(gc.getCollectionCount());
        }
        return counts.toString();
    }

    static long collections() {
        long n = 0;
        for (GarbageCollectorMXBean gc : ManagementFactory.getGarbageCollectorMXBeans()) {
            n += Math.max(gc.getCollectionCount(), 0);
        }
        return n;
    }
}
`

// parityCase is one JVM of the parity test.
type parityCase struct {
	name  string
	major int
	flags []string
	// late starts JFR (jcmd JFR.start) after the workload's first young
	// collections, which the agent counts and the recording has not: the
	// receiver counts them from the first recorded collection's gcId.
	late bool
	// unrecorded is the bean the receiver counts collections before the
	// recording under; beans names the bean of each kind of collection
	// -Xlog:gc logs (the text after "GC(n) "), "" for none (G1's
	// concurrent cycle).
	unrecorded string
	beans      map[string]string
}

var (
	g1Beans       = map[string]string{"Pause Young": "G1 Young Generation", "Pause Full": "G1 Old Generation", "Concurrent Mark Cycle": "", "Concurrent Undo Cycle": ""}
	parallelBeans = map[string]string{"Pause Young": "PS Scavenge", "Pause Full": "PS MarkSweep"}
	zgcBeans      = map[string]string{"Garbage Collection": "ZGC Cycles"}
	genZGCBeans   = map[string]string{"Minor Collection": "ZGC Minor Cycles", "Major Collection": "ZGC Major Cycles"}
)

// TestAgentParity runs, per collector, one JVM with the real OpenTelemetry
// Java agent exporting its runtime metrics over OTLP/HTTP to this test and
// the jfr receiver following the same JVM's JFR repository, and compares
// the final cumulative values: every series the agent sends by the agent's
// own attribute set (the receiver's are not summed: jvm.gc.cause is
// opt-in on both sides), every memory pool the agent reports but those JFR
// does not give (poolNotGiven), collection counts equal to the JVM's own
// GarbageCollectorMXBean counts, collections before the recording
// included (G1 and Parallel start it by jcmd after three young
// collections; -Xlog:gc names those before it, see expectedCounts), the
// agent's at most those (it counts from its listener), sums within 1% (or
// 3 ms per collection) where both count the same collections, other
// values within 1% (metaspace 2%: JFR samples it at collections only; the
// code heaps' use 5%, sampled every 5 s). Heap pools: use after the last
// collection, the limits and committed sizes within 1% (G1's eden and old
// generation as their total, see compareParity); the use of eden and
// ZHeap, into which the agent's exporter allocates after the last
// collection, is printed only. jvm.cpu.time within 5% or 0.25 s (the two
// are read at different moments). The agent's jvm.thread.state (which JFR
// does not give) is summed away; jvm.cpu.recent_utilization samples
// different moments, and jvm.thread.count, where the agent counted one
// daemon and one other thread more than JFR in every run (README.md), are
// printed, not compared. It prints the parity table.
// About 35-45 s per JVM on the loaded 2-core machine.
func TestAgentParity(t *testing.T) {
	agent := javaAgent(t)
	cases := []parityCase{
		// Heaps large enough that the agent's own start-up allocations
		// trigger no collection before its listener counts (see
		// README.md); JFR starts after three young collections of the
		// workload's, which both must count.
		{"G1/JDK17", 17, []string{"-XX:+UseG1GC", "-Xms256m", "-Xmx256m", "-Xmn128m"}, true, "G1 Young Generation", g1Beans},
		{"Parallel/JDK17", 17, []string{"-XX:+UseParallelGC", "-Xms256m", "-Xmx256m", "-Xmn128m"}, true, "PS Scavenge", parallelBeans},
		// ZGC collects at 10%, 20% and 30% of the heap in use however
		// young the JVM ("Warmup"): the agent allocates some 270 MB
		// before JFR starts (traced with -Xlog:gc on a loaded host, where
		// its premain took 32 s: two warm-up collections came before the
		// recording and after the agent began counting), so the heap is
		// large enough that 10% is more than that.
		// Their collections before the recording would count under the
		// cycles bean only (their pauses are not known): no delay.
		{"ZGC/JDK17", 17, []string{"-XX:+UseZGC", "-Xms4g", "-Xmx4g"}, false, "ZGC Cycles", zgcBeans},
		{"generational ZGC/JDK25", 25, []string{"-XX:+UseZGC", "-Xms4g", "-Xmx4g"}, false, "ZGC Major Cycles", genZGCBeans},
	}
	classes := t.TempDir() // Parity.class, compiled once for Java 17
	compiled := false
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			j := jfrtest.Find(t, c.major)
			if !compiled {
				compileParity(t, j, classes)
				compiled = true
			}
			runParity(t, j, agent, classes, c)
		})
	}
}

// compileParity compiles the workload for Java 17 into dir.
func compileParity(t *testing.T, j jfrtest.JDK, dir string) {
	t.Helper()
	src := filepath.Join(dir, "Parity.java")
	if err := os.WriteFile(src, []byte(parityWorkload), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(filepath.Join(filepath.Dir(j.Java()), "javac"), "--release", "17", "-d", dir, src).CombinedOutput(); err != nil {
		t.Fatalf("javac: %v\n%s", err, out)
	}
}

func javaAgent(t *testing.T) string {
	t.Helper()
	home, _ := os.UserHomeDir()
	jar := filepath.Join(home, ".m2", "repository", "io", "opentelemetry", "javaagent", "opentelemetry-javaagent",
		javaAgentVersion, "opentelemetry-javaagent-"+javaAgentVersion+".jar")
	if _, err := os.Stat(jar); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("the OpenTelemetry Java agent %s is missing (make test-deps fetches it): %v", javaAgentVersion, err)
		}
		t.Skipf("the OpenTelemetry Java agent %s is missing (make test-deps fetches it): %v", javaAgentVersion, err)
	}
	return jar
}

func runParity(t *testing.T, j jfrtest.JDK, agent, classes string, c parityCase) {
	dir := t.TempDir()
	jfc := filepath.Join(dir, "otelcol-ai.jfc")
	if err := os.WriteFile(jfc, repository.Settings, 0o644); err != nil {
		t.Fatal(err)
	}
	repo := filepath.Join(dir, "repo")
	if err := os.Mkdir(repo, 0o755); err != nil {
		t.Fatal(err)
	}

	sink := newOTLPSink(t)
	cfg := NewFactory().CreateDefaultConfig().(*Config)
	cfg.PollInterval = 200 * time.Millisecond
	cfg.CollectionInterval = 500 * time.Millisecond
	// Discovered, not matched by a pattern: only a JVM found in the proc
	// root has a process whose CPU time (jvm.cpu.time) can be read. Other
	// JVMs on the machine may be found too: only this one's series count.
	cfg.Repositories.Discover = true
	cfg.Repositories.DiscoveryInterval = 200 * time.Millisecond
	metrics := new(consumertest.MetricsSink)
	rcv, err := NewFactory().CreateMetrics(context.Background(), receivertest.NewNopSettings(metadata.Type), cfg, metrics)
	if err != nil {
		t.Fatal(err)
	}
	if err := rcv.Start(context.Background(), componenttest.NewNopHost()); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := rcv.Shutdown(context.Background()); err != nil {
			t.Error(err)
		}
	}()

	gcLog := filepath.Join(dir, "gc.log")
	args := append([]string{"-javaagent:" + agent, "-Xlog:disable", "-Xlog:gc:file=" + gcLog}, c.flags...)
	args = append(args, "-XX:FlightRecorderOptions:repository="+repo)
	if c.late {
		args = append(args, "-cp", classes, "Parity", "4000", "late")
	} else {
		args = append(args, "-XX:StartFlightRecording:name=parity,settings="+jfc, "-cp", classes, "Parity", "4000")
	}
	cmd := exec.Command(j.Java(), args...)
	cmd.Env = append(os.Environ(),
		"OTEL_SERVICE_NAME=parity", "OTEL_TRACES_EXPORTER=none", "OTEL_LOGS_EXPORTER=none",
		"OTEL_METRICS_EXPORTER=otlp", "OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf",
		"OTEL_EXPORTER_OTLP_METRICS_ENDPOINT="+sink.url, "OTEL_METRIC_EXPORT_INTERVAL=500",
		"OTEL_JAVAAGENT_LOGGING=none")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	idle, warm, gone := make(chan struct{}), make(chan struct{}), make(chan struct{})
	var idleLine string
	countLines := make(chan string, 1)
	var outMu sync.Mutex
	var output []string // the JVM's last lines, for a failure
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			outMu.Lock()
			output = append(output[max(len(output)-20, 0):], sc.Text())
			outMu.Unlock()
			if strings.HasPrefix(sc.Text(), "idle") {
				idleLine = sc.Text()
				close(idle)
			}
			if strings.HasPrefix(sc.Text(), "counts") {
				countLines <- sc.Text()
			}
			if strings.HasPrefix(sc.Text(), "warm") {
				close(warm)
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
		close(gone)
	}()
	failed := func(what string) {
		outMu.Lock()
		defer outMu.Unlock()
		t.Fatalf("%s:\n%s", what, strings.Join(output, "\n"))
	}
	if c.late {
		startLate(t, j, cmd.Process.Pid, jfc, sink, stdin, warm, gone, failed)
	}
	select {
	case <-idle:
	case <-gone:
		failed("the workload exited before going idle")
	case <-time.After(90 * time.Second):
		failed("the workload did not finish in 90 s")
	}

	// Both sides report cumulative values: wait until each side's
	// collection count and the JVM's own have stopped changing for 3 s (the
	// receiver sees a collection a flush and a poll after it), or 30 s, and
	// compare with the JVM's counts as they stand then, not at idle: ZGC
	// collects on while the workload is idle (a clean-clone run on a fresh
	// machine: 29 ZGC cycles at idle, 35 when the receiver and the agent,
	// with 34, had stopped counting). The two
	// counts need not be equal: the agent may miss collections made during
	// its premain (compareParity allows it to count fewer), and a wait for
	// equal counts then never ended early (a clean-clone run, load about
	// 10: the agent's 170 young collections against the JVM's 173 held the
	// wait to its deadline, and the code heaps below were compared as they
	// stood then, 8.4 MB and 12.1 MB). The code heaps' use is sampled (the
	// agent every 500 ms, jdk.CodeCacheStatistics every 5 s) while the JIT
	// may still be compiling after the workload went idle: the wait also
	// lasts until the two samples agree (in passing runs they are 1-2%
	// apart).
	jvmCounts := func() map[string]uint64 {
		if _, err := io.WriteString(stdin, "counts\n"); err != nil {
			t.Fatal(err)
		}
		select {
		case l := <-countLines:
			return beanCounts(l)
		case <-gone:
			failed("the workload exited while idle")
		case <-time.After(10 * time.Second):
			failed("the workload gave no counts in 10 s")
		}
		return nil
	}
	var agentPts, rcvPts map[string]point
	beans := beanCounts(idleLine)
	deadline := time.Now().Add(30 * time.Second)
	stable := 0
	for time.Now().Before(deadline) && stable < 6 {
		time.Sleep(500 * time.Millisecond)
		a, r := finalPoints(sink.batches(), agentDrop, 0), finalPoints(metrics.AllMetrics(), receiverDrop, cmd.Process.Pid)
		b := jvmCounts()
		if gcTotal(a) > 0 && gcTotal(r) >= gcTotal(a) && gcTotal(a) == gcTotal(agentPts) && gcTotal(r) == gcTotal(rcvPts) && maps.Equal(b, beans) && codeHeapsAgree(a, r) {
			stable++
		} else {
			stable = 0
		}
		agentPts, rcvPts, beans = a, r, b
	}
	t.Logf("%s: the JVM's collections at idle %v, at the end %v", c.name, beanCounts(idleLine), beans)
	// What the receiver should count: the JVM's own counts, with the
	// collections before the recording (by -Xlog:gc) under one bean.
	first := firstGCID(t, j, cmd.Process.Pid, dir)
	want := expectedCounts(t, beans, gcLog, first, c)
	compareParity(t, c.name, agentPts, rcvPts, want, first)
	// The workload made three collections or more before a late
	// recording started: its first collection's gcId says how many.
	if c.late && first < 3 {
		t.Errorf("%s: the recording's first collection has gcId %d; the workload made 3 before it started", c.name, first)
	}
	// What only a live JVM gives is declared as emitted (name, unit, type,
	// attributes), as TestEmittedMetricsAreDeclared checks the rest.
	d := readDeclarations(t)
	seen := map[string]bool{}
	for _, md := range metrics.AllMetrics() {
		for i := range md.ResourceMetrics().Len() {
			ms := md.ResourceMetrics().At(i).ScopeMetrics().At(0).Metrics()
			for k := range ms.Len() {
				if m := ms.At(k); liveOnly[m.Name()] && !seen[m.Name()] {
					seen[m.Name()] = true
					checkDeclared(t, d, m)
				}
			}
		}
	}
	for name := range liveOnly {
		if !seen[name] {
			t.Errorf("%s: the receiver emitted no %s", c.name, name)
		}
	}
}

// expectedCounts is what the receiver should count per bean: the JVM's
// own counts (jvm), less the collections before the recording (gcId below
// first), which -Xlog:gc names, and all of those under c.unrecorded.
func expectedCounts(t *testing.T, jvm map[string]uint64, gcLog string, first int64, c parityCase) map[string]uint64 {
	t.Helper()
	data, err := os.ReadFile(gcLog)
	if err != nil {
		t.Fatal(err)
	}
	want := maps.Clone(jvm)
	seen := map[int64]bool{}
	var before []string
	for line := range strings.Lines(string(data)) {
		_, rest, ok := strings.Cut(line, "] GC(")
		if !ok {
			continue
		}
		idText, what, _ := strings.Cut(rest, ") ")
		var id int64
		if _, err := fmt.Sscan(idText, &id); err != nil || id >= first || seen[id] {
			continue
		}
		seen[id] = true
		kind := ""
		for k := range c.beans {
			if strings.HasPrefix(what, k) {
				kind = k
			}
		}
		if kind == "" {
			t.Fatalf("%s: -Xlog:gc line of an unknown kind of collection: %s", c.name, line)
		}
		before = append(before, kind)
		if bean := c.beans[kind]; bean != "" {
			want[bean]--
		}
		want[c.unrecorded]++
	}
	if int64(len(before)) != first {
		t.Fatalf("%s: -Xlog:gc names %d of the %d collections before the recording", c.name, len(before), first)
	}
	t.Logf("%s: %d collections before the recording (%v)", c.name, first, before)
	return want
}

// beanCounts reads the collection counts the workload's idle line ends
// with: GarbageCollectorMXBean name -> collections since the JVM started.
func beanCounts(idle string) map[string]uint64 {
	out := map[string]uint64{}
	for _, kv := range strings.Split(idle, ";")[1:] {
		name, n, _ := strings.Cut(kv, "=")
		var v uint64
		if _, err := fmt.Sscan(n, &v); err == nil {
			out[name] = v
		}
	}
	return out
}

// startLate lets the workload allocate once the agent's runtime metrics
// are exported (its collection listener is in place), starts the
// recording (jcmd JFR.start) once the workload has made its first young
// collections, and lets it go on.
func startLate(t *testing.T, j jfrtest.JDK, pid int, jfc string, sink *otlpSink, stdin io.Writer, warm, gone <-chan struct{}, failed func(string)) {
	t.Helper()
	for deadline := time.Now().Add(90 * time.Second); !agentExports(sink, "jvm.class.loaded"); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			failed("the agent exported no runtime metrics in 90 s")
		}
	}
	if _, err := io.WriteString(stdin, "go\n"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-warm:
	case <-gone:
		failed("the workload exited before its first collections")
	case <-time.After(90 * time.Second):
		failed("the workload made no collections in 90 s")
	}
	if out, err := exec.Command(filepath.Join(filepath.Dir(j.Java()), "jcmd"), fmt.Sprint(pid), "JFR.start", "name=parity", "settings="+jfc).CombinedOutput(); err != nil {
		t.Fatalf("jcmd JFR.start: %v\n%s", err, out)
	}
	if _, err := io.WriteString(stdin, "recording\n"); err != nil {
		t.Fatal(err)
	}
}

// agentExports says whether the agent has exported the metric name.
func agentExports(sink *otlpSink, name string) bool {
	for _, md := range sink.batches() {
		for i := range md.ResourceMetrics().Len() {
			sms := md.ResourceMetrics().At(i).ScopeMetrics()
			for k := range sms.Len() {
				ms := sms.At(k).Metrics()
				for m := range ms.Len() {
					if ms.At(m).Name() == name {
						return true
					}
				}
			}
		}
	}
	return false
}

// firstGCID dumps the JVM's recording (jcmd JFR.dump) and returns the
// lowest gcId of the collections that began once it ran (-1: none); a
// concurrent cycle running when it started has a lower id and counts
// among those before, as the receiver counts it.
func firstGCID(t *testing.T, j jfrtest.JDK, pid int, dir string) int64 {
	t.Helper()
	dump := filepath.Join(dir, "parity.jfr")
	if out, err := exec.Command(filepath.Join(filepath.Dir(j.Java()), "jcmd"), fmt.Sprint(pid), "JFR.dump", "name=parity", "filename="+dump).CombinedOutput(); err != nil {
		t.Fatalf("jcmd JFR.dump: %v\n%s", err, out)
	}
	r, err := jfr.Open(dump)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	sel := jfr.NewSelection()
	sel.Add("jdk.GarbageCollection", "gcId", "startTime")
	lowest := int64(-1)
	for i, info := range r.Chunks() {
		c, err := r.Chunk(i)
		if err != nil {
			t.Fatal(err)
		}
		sc := c.Scan(sel)
		for sc.Next() {
			id := sc.Record().Int(0)
			start, _ := sc.Record().Nanos(1)
			if start >= r.Chunks()[0].Header.StartNanos && (lowest < 0 || id < lowest) {
				lowest = id
			}
		}
		if err := sc.Err(); err != nil {
			t.Fatalf("chunk %d: %v", info.Index, err)
		}
	}
	return lowest
}

// point is a series' final value: a histogram's count and sum, or a
// number.
type point struct {
	metric    string
	histogram bool
	count     uint64
	value     float64
}

// Attributes summed away on each side before comparing: the agent's
// jvm.thread.state (JFR gives thread counts by daemon only). Nothing of
// the receiver's: its series must be the agent's, attribute for attribute
// (jvm.gc.cause is opt-in on both sides).
var (
	receiverDrop = map[string]bool{}
	agentDrop    = map[string]bool{"jvm.thread.state": true}
)

// finalPoints returns the newest point of every series in batches, keyed
// by metric name and attributes (without those in drop, whose series are
// summed), for the runtime metrics only (jvm.*), of the resource whose
// process.pid is pid (any, when 0).
func finalPoints(batches []pmetric.Metrics, drop map[string]bool, pid int) map[string]point {
	type series struct {
		ts  pcommon.Timestamp
		key string
		p   point
	}
	latest := map[string]series{} // by full attributes
	for _, md := range batches {
		for i := range md.ResourceMetrics().Len() {
			if v, ok := md.ResourceMetrics().At(i).Resource().Attributes().Get("process.pid"); pid != 0 && (!ok || v.Int() != int64(pid)) {
				continue
			}
			sms := md.ResourceMetrics().At(i).ScopeMetrics()
			for k := range sms.Len() {
				ms := sms.At(k).Metrics()
				for m := range ms.Len() {
					metric := ms.At(m)
					if !strings.HasPrefix(metric.Name(), "jvm.") {
						continue
					}
					add := func(ts pcommon.Timestamp, attrs pcommon.Map, p point) {
						full := metric.Name() + attrKey(attrs, nil)
						if old, ok := latest[full]; ok && old.ts > ts {
							return
						}
						p.metric = metric.Name()
						latest[full] = series{ts: ts, key: metric.Name() + attrKey(attrs, drop), p: p}
					}
					switch metric.Type() {
					case pmetric.MetricTypeHistogram:
						dps := metric.Histogram().DataPoints()
						for d := range dps.Len() {
							dp := dps.At(d)
							add(dp.Timestamp(), dp.Attributes(), point{histogram: true, count: dp.Count(), value: dp.Sum()})
						}
					case pmetric.MetricTypeSum, pmetric.MetricTypeGauge:
						var dps pmetric.NumberDataPointSlice
						if metric.Type() == pmetric.MetricTypeGauge {
							dps = metric.Gauge().DataPoints()
						} else {
							dps = metric.Sum().DataPoints()
						}
						for d := range dps.Len() {
							dp := dps.At(d)
							v := dp.DoubleValue()
							if dp.ValueType() == pmetric.NumberDataPointValueTypeInt {
								v = float64(dp.IntValue())
							}
							add(dp.Timestamp(), dp.Attributes(), point{value: v})
						}
					}
				}
			}
		}
	}
	out := map[string]point{}
	for _, s := range latest {
		p := out[s.key]
		p.metric, p.histogram = s.p.metric, s.p.histogram
		p.count += s.p.count
		p.value += s.p.value
		out[s.key] = p
	}
	return out
}

func attrKey(attrs pcommon.Map, drop map[string]bool) string {
	var kv []string
	for k, v := range attrs.All() {
		if !drop[k] {
			kv = append(kv, k+"="+v.AsString())
		}
	}
	slices.Sort(kv)
	return "{" + strings.Join(kv, ", ") + "}"
}

// codeHeapsAgree reports whether every code heap's use is within the
// comparison's tolerance (5%) on both sides, as compareParity checks it.
func codeHeapsAgree(a, r map[string]point) bool {
	for k, ap := range a {
		if ap.metric != "jvm.memory.used" || !strings.Contains(k, "CodeHeap") {
			continue
		}
		rp, ok := r[k]
		if !ok || math.Abs(rp.value-ap.value) > 0.05*math.Abs(ap.value) {
			return false
		}
	}
	return true
}

func gcTotal(pts map[string]point) uint64 {
	var n uint64
	for _, p := range pts {
		if p.metric == "jvm.gc.duration" {
			n += p.count
		}
	}
	return n
}

// compareParity checks and prints every series both sides emit; every
// collector series the agent reports must be among them.
// Collection counts: the receiver's must be the JVM's own (beans, the
// GarbageCollectorMXBeans' counts), collections before the recording
// included (pause beans: at most the JVM's, see README.md); the agent
// counts from when its listener was installed, so it may count fewer
// (collections during its premain), never more. Where both count the same
// collections, their sums agree.
// With late, the young collector's first collections came before the
// recording: the receiver counts them without durations, so its sum may
// only be lower than the agent's.
// before is how many collections the JVM made before the recording: the
// receiver counts them without durations and without their pauses, and the
// agent has those that came after its listener was in place (a late
// recording's, or a collection in the JVM's start-up, such as ZGC's first
// cycle).
func compareParity(t *testing.T, name string, agent, rcv map[string]point, beans map[string]uint64, before int64) {
	keys := slices.Sorted(func(yield func(string) bool) {
		for k := range agent {
			if !yield(k) {
				return
			}
		}
	})
	var b strings.Builder
	fmt.Fprintf(&b, "parity %s:\n%-100s %16s %16s %10s\n", name, "metric {attributes}", "agent", "receiver", "difference")
	shared := 0
	var genPauses [2]uint64 // generational ZGC's pauses: agent, receiver
	var heap [2]float64     // the heap pools' committed memory: agent, receiver
	for _, k := range keys {
		a := agent[k]
		r, ok := rcv[k]
		if !ok {
			if a.metric == "jvm.gc.duration" {
				t.Errorf("%s: the agent reports %s (%d collections), the receiver does not", name, k, a.count)
			}
			if a.metric == "jvm.memory.used" && !poolNotGiven(k) {
				t.Errorf("%s: the agent reports the pool %s, the receiver does not", name, k)
			}
			continue
		}
		shared++
		if a.histogram {
			fmt.Fprintf(&b, "%-100s %16s %16s %10s\n", k+" count", fmt.Sprint(a.count), fmt.Sprint(r.count), fmt.Sprint(int64(r.count)-int64(a.count)))
			fmt.Fprintf(&b, "%-100s %16.4f %16.4f %9.2f%%\n", k+" sum (s)", a.value, r.value, pct(r.value, a.value))
			bean := gcName(k)
			mx, known := beans[bean]
			fmt.Fprintf(&b, "%-100s %16s %16s %10s\n", k+" count, the JVM's", "", fmt.Sprint(mx), fmt.Sprint(int64(r.count)-int64(mx)))
			pauses := pauseBean(k)
			switch {
			case !known:
				t.Errorf("%s: the JVM has no collector %q (%v)", name, bean, beans)
			case !pauses && r.count != mx:
				t.Errorf("%s: %s counts %d (receiver), the JVM %d", name, k, r.count, mx)
			case pauses && r.count > mx:
				t.Errorf("%s: %s counts %d (receiver), more than the JVM's %d", name, k, r.count, mx)
			}
			if strings.Contains(k, "ZGC Minor Pauses") || strings.Contains(k, "ZGC Major Pauses") {
				// Generational ZGC: the receiver files a pause under its
				// collection's gcId, the agent under the generation that
				// paused; an open difference (README.md). Their total is
				// compared below.
				genPauses[0] += a.count
				genPauses[1] += r.count
			} else if a.count > r.count && (!pauses || a.count > r.count+maxPausesPerCycle*uint64(before)) {
				// The pauses of collections before the recording are the
				// agent's alone (a clean-clone run: the agent 100 ZGC
				// pauses, the receiver 99, the JVM 102, one cycle before
				// the recording).
				t.Errorf("%s: %s counts %d (agent), more than the receiver's %d", name, k, a.count, r.count)
			}
			if a.count != r.count {
				// Collections before the agent's listener: the sums hold
				// different collections.
				continue
			}
			// The agent's durations are whole milliseconds (GcInfo start and
			// end, so ±1 ms each: pauses shorter than that sum to 0 there),
			// and the MXBean times a full collection inside the span JFR's
			// jdk.GarbageCollection gives it (1-3 ms shorter per G1 full
			// collection on a loaded 2-core machine): a sum may differ by 1%
			// or by 3 ms per collection (a CI run's G1 old generation: 6
			// full collections, 12.3 ms apart, 2.05 ms each).
			tolerance := max(0.01*a.value, 0.003*float64(a.count))
			if strings.Contains(k, "G1 Old Generation") {
				// JFR's span of a G1 full collection holds the MXBean's,
				// and what lies outside it grows with the machine's load
				// (+0.8% idle, +4.0% over 5 collections with the 2 cores
				// busy): never shorter, at most 10% longer.
				if r.value < a.value-0.001*float64(a.count) || r.value > 1.1*a.value+tolerance {
					t.Errorf("%s: %s sums %.4f s (agent) and %.4f s (receiver)", name, k, a.value, r.value)
				}
			} else if before > 0 {
				// Equal counts may hold different collections: the
				// receiver's before the recording have no duration, and
				// the agent may have timed them (a clean-clone run: 34 ZGC
				// cycles each, one of them before the recording, and 0.26 s
				// more in the agent's sum).
				if r.value > a.value+tolerance {
					t.Errorf("%s: %s sums %.4f s (agent) and %.4f s (receiver), which has collections without durations", name, k, a.value, r.value)
				}
			} else if math.Abs(r.value-a.value) > tolerance {
				t.Errorf("%s: %s sums %.4f s (agent) and %.4f s (receiver)", name, k, a.value, r.value)
			}
			continue
		}
		fmt.Fprintf(&b, "%-100s %16.4g %16.4g %9.2f%%\n", k, a.value, r.value, pct(r.value, a.value))
		if a.metric == "jvm.cpu.recent_utilization" || a.metric == "jvm.thread.count" {
			continue
		}
		if a.metric == "jvm.cpu.time" {
			// The agent's is its last export's, the receiver's its last
			// emit's (each every 500 ms), of a JVM that still runs the
			// agent's exporter and JFR: 5%, or 0.25 s of CPU.
			if d := math.Abs(r.value - a.value); d > 0.05*a.value && d > 0.25 {
				t.Errorf("%s: %s is %.3f s (agent) and %.3f s (receiver)", name, k, a.value, r.value)
			}
			continue
		}
		if strings.Contains(k, "jvm.memory.type=heap") {
			heapCommitted(&heap, k, a.value, r.value)
			// JFR samples the heap at collections only: the pools the
			// agent's exporter allocates into after the last one (eden;
			// ZGC's whole heap) are not comparable in use (their use
			// after the last collection is). G1's eden and old
			// generation split what is committed as the MXBeans do but
			// for the young generation's GC-locker expansion (JDK 17: 5%
			// of its target, counted in eden by the MXBean, in the old
			// generation here): their total is compared.
			if a.metric == "jvm.memory.used" && (strings.Contains(k, "Eden") || strings.Contains(k, "ZHeap")) ||
				a.metric == "jvm.memory.committed" && (strings.Contains(k, "G1 Eden") || strings.Contains(k, "G1 Old")) {
				continue
			}
		}
		tolerance := 0.01
		if strings.Contains(k, "CodeHeap") && a.metric == "jvm.memory.used" {
			// jdk.CodeCacheStatistics, every 5 s: code the JIT adds
			// after the last sample (the agent's exporter still runs)
			// is not in it (-1.9% seen).
			tolerance = 0.05
		} else if strings.Contains(k, "jvm.memory.type=non_heap") && a.metric != "jvm.memory.limit" {
			// JFR samples metaspace at collections only (jdk.MetaspaceSummary);
			// what the JIT's method data allocates after the last one is
			// not in it (up to 1.6% measured, with a collection just before
			// the comparison).
			tolerance = 0.02
		}
		if math.Abs(r.value-a.value) > tolerance*math.Abs(a.value) {
			t.Errorf("%s: %s is %v (agent) and %v (receiver)", name, k, a.value, r.value)
		}
	}
	if math.Abs(heap[1]-heap[0]) > 0.01*heap[0] {
		t.Errorf("%s: the heap pools' committed memory totals %v (agent) and %v (receiver)", name, heap[0], heap[1])
	}
	if heap[0] > 0 {
		fmt.Fprintf(&b, "%-100s %16.4g %16.4g %9.2f%%\n", "jvm.memory.committed summed over the heap pools", heap[0], heap[1], pct(heap[1], heap[0]))
	}
	if genPauses[0] != genPauses[1] {
		t.Errorf("%s: generational ZGC pauses %d (agent) and %d (receiver)", name, genPauses[0], genPauses[1])
	}
	var only []string
	for k, r := range rcv {
		if _, ok := agent[k]; !ok {
			only = append(only, k)
			// A collector the agent did not see collect: the JVM's
			// count says whether the receiver's is right.
			if r.metric == "jvm.gc.duration" && !pauseBean(k) && r.count != beans[gcName(k)] {
				t.Errorf("%s: %s counts %d (receiver, not the agent), the JVM %d", name, k, r.count, beans[gcName(k)])
			}
		}
	}
	slices.Sort(only)
	fmt.Fprintf(&b, "receiver only: %s\n", strings.Join(only, "; "))
	var agentOnly []string
	for _, k := range keys {
		if _, ok := rcv[k]; !ok {
			agentOnly = append(agentOnly, k)
		}
	}
	fmt.Fprintf(&b, "agent only: %s\n", strings.Join(agentOnly, "; "))
	t.Log(b.String())
	if shared == 0 || gcTotal(agent) == 0 {
		t.Fatalf("%s: nothing to compare (%d shared series, %d collections from the agent)", name, shared, gcTotal(agent))
	}
}

// maxPausesPerCycle is the most pauses one collection makes: ZGC's
// three, Shenandoah's four.
const maxPausesPerCycle = 4

// pauseBean says whether a series counts pauses (a pause bean: ZGC's and
// Shenandoah's, G1 Concurrent GC, which JDK 17 does not have), which the
// receiver does not count for collections before the recording.
func pauseBean(key string) bool {
	return strings.Contains(key, "Pauses") || strings.Contains(key, "Concurrent GC")
}

// gcName is the jvm.gc.name of a series key.
func gcName(key string) string {
	_, rest, _ := strings.Cut(key, "jvm.gc.name=")
	name, _, _ := strings.Cut(rest, ",")
	return strings.TrimSuffix(name, "}")
}

// poolNotGiven says whether a pool is one JFR gives nothing for
// (README.md, Memory pools): the per-generation pools of Serial,
// Shenandoah and generational ZGC.
func poolNotGiven(key string) bool {
	for _, p := range []string{"ZGC Young Generation", "ZGC Old Generation", "Eden Space", "Survivor Space", "Tenured Gen", "Shenandoah"} {
		if strings.Contains(key, "jvm.memory.pool.name="+p+",") || strings.Contains(key, "jvm.memory.pool.name="+p+"}") {
			return true
		}
	}
	return false
}

// heapCommitted adds a heap pool's committed memory to the totals.
func heapCommitted(total *[2]float64, key string, agent, rcv float64) {
	if strings.HasPrefix(key, "jvm.memory.committed{") {
		total[0] += agent
		total[1] += rcv
	}
}

func pct(got, want float64) float64 {
	if want == 0 {
		if got == 0 {
			return 0
		}
		return math.Inf(1)
	}
	return 100 * (got - want) / want
}

// otlpSink is an OTLP/HTTP metrics endpoint on loopback keeping what the
// agent exports.
type otlpSink struct {
	url string
	mu  sync.Mutex
	got []pmetric.Metrics
}

func newOTLPSink(t *testing.T) *otlpSink {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &otlpSink{url: "http://" + ln.Addr().String() + "/v1/metrics"}
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 64<<20))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		req := pmetricotlp.NewExportRequest()
		if err := req.UnmarshalProto(body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		s.mu.Lock()
		s.got = append(s.got, req.Metrics())
		s.mu.Unlock()
		resp, _ := pmetricotlp.NewExportResponse().MarshalProto()
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(resp)
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return s
}

func (s *otlpSink) batches() []pmetric.Metrics {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.got)
}
