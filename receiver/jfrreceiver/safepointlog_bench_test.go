package jfrreceiver

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/otelcol-ai/otelcol-ai/pkg/jfr/jfrtest"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/attach"
)

// safepointPhases makes thread dumps (one ThreadDump safepoint each) as
// fast as it can for each "run <ms>" line on stdin, and answers
// "<dumps> <ns>" for each: the JVM's own measure of how many safepoints
// it gets through.
const safepointPhases = `
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;

public class SafepointPhases {
    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        ThreadMXBean threads = ManagementFactory.getThreadMXBean();
        System.out.println("ready");
        for (String line; (line = in.readLine()) != null; ) {
            long ms = Long.parseLong(line.substring(4));
            long start = System.nanoTime(), end = start + ms * 1_000_000L, dumps = 0;
            while (System.nanoTime() < end) {
                threads.dumpAllThreads(false, false);
                dumps++;
            }
            System.out.println(dumps + " " + (System.nanoTime() - start));
        }
    }
}
`

// BenchmarkSafepointLogCost measures what the safepoint log
// (repositories::attach::safepoint_log) costs a JVM on JFR's default
// settings: a JDK 17 JVM makes thread dumps flat out (each a safepoint,
// each one log line once the output is added), in 2 s phases alternating
// without and with the output (added and removed with the same jcmd
// VM.log commands the receiver sends), and the benchmark reports the
// safepoints a second of each and the time each logged safepoint adds.
// A flat-out stream of safepoints is the worst case: a service makes a
// few to a few hundred a second.
func BenchmarkSafepointLogCost(b *testing.B) {
	j := jfrtest.Find(b, 17)
	dir := b.TempDir()
	src := filepath.Join(dir, "SafepointPhases.java")
	if err := os.WriteFile(src, []byte(safepointPhases), 0o644); err != nil {
		b.Fatal(err)
	}
	if out, err := exec.Command(filepath.Join(filepath.Dir(j.Java()), "javac"), "-d", dir, src).CombinedOutput(); err != nil {
		b.Fatalf("javac: %v\n%s", err, out)
	}
	cmd := exec.Command(j.Java(), "-XX:StartFlightRecording", "-cp", dir, "SafepointPhases")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = stdin.Close(); _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	lines := bufio.NewScanner(stdout)
	for lines.Text() != "ready" { // after JFR's startup lines
		if !lines.Scan() {
			b.Fatal("workload ended before it was ready")
		}
	}
	pid := cmd.Process.Pid
	log := attach.SafepointLogPath(pid)
	jcmdLine := func(args ...string) {
		out, err := exec.Command(filepath.Join(filepath.Dir(j.Java()), "jcmd"), append([]string{fmt.Sprint(pid)}, args...)...).CombinedOutput()
		if err != nil || strings.Contains(string(out), "rror") {
			b.Fatalf("jcmd %v: %v\n%s", args, err, out)
		}
	}
	defer os.Remove(log)
	phase := func() (rate float64) {
		if _, err := fmt.Fprintln(stdin, "run 2000"); err != nil {
			b.Fatal(err)
		}
		if !lines.Scan() {
			b.Fatal("workload ended")
		}
		var dumps, ns float64
		if _, err := fmt.Sscanf(lines.Text(), "%g %g", &dumps, &ns); err != nil {
			b.Fatalf("workload: %q", lines.Text())
		}
		return dumps / ns * 1e9
	}
	phase() // warm-up: JIT, the attach listener
	var without, with float64
	const rounds = 3
	for range rounds {
		without += phase() / rounds
		jcmdLine("VM.log", "output=file="+log, "output_options=filecount=2,filesize=1m", "what=safepoint=info", "decorators=time,uptimenanos,timenanos,pid,level,tags")
		with += phase() / rounds
		jcmdLine("VM.log", "output=file="+log, "what=all=off")
	}
	b.ReportMetric(without, "safepoints/s-without")
	b.ReportMetric(with, "safepoints/s-with-log")
	b.ReportMetric((1/with-1/without)*1e9, "ns-added/safepoint")
	b.ReportMetric(with/without, "ratio")
}
