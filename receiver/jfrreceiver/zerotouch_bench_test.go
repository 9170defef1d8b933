package jfrreceiver

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/otelcol-ai/otelcol-ai/pkg/jfr/jfrtest"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/attach"
)

// gcBenchResult is what bench/jfr-attach/GCBench.java prints.
type gcBenchResult struct {
	opsPerSecond  float64
	pauses        int
	pauseMillis   int
	pausePerSecMs float64
}

// runGCBench runs GCBench on JDK 17 once: warm-up, then (withRecording)
// the receiver with attach on starts its recording in it, then the
// measured part. The receiver keeps reading the JVM while it is measured
// and stops its recording after.
func runGCBench(b *testing.B, jdk jfrtest.JDK, src string, warm, measure time.Duration, withRecording bool) gcBenchResult {
	b.Helper()
	cmd := exec.Command(jdk.Java(), "-Xmx256m", "-Xmn32m", "-XX:+UseG1GC", src,
		strconv.FormatInt(warm.Milliseconds(), 10), strconv.FormatInt(measure.Milliseconds(), 10))
	cmd.Dir = b.TempDir()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}()
	lines := bufio.NewScanner(stdout)
	pid := cmd.Process.Pid

	var stop func()
	if withRecording {
		attachOnly = func(p int) bool { return p == pid }
		defer func() { attachOnly = nil }()
		cfg := createDefaultConfig().(*Config)
		cfg.Repositories.Attach.Enabled = true
		cfg.Repositories.Attach.KubernetesAuth = kubernetesAuthNone
		cfg.Repositories.DiscoveryInterval = 200 * time.Millisecond
		r := startObserved(b, cfg)
		stop = func() { _ = r.stop() }
		for deadline := time.Now().Add(warm + 60*time.Second); ; time.Sleep(50 * time.Millisecond) {
			if state, reason := statusOf(r.observed, pid); state == string(attach.StateRecordingOurs) {
				break
			} else if time.Now().After(deadline) {
				b.Fatalf("no recording started: %s (%s)", state, reason)
			}
		}
	}
	if !lines.Scan() || lines.Text() != "warm" {
		b.Fatalf("GCBench: %q before warm-up ended", lines.Text())
	}
	if _, err := io.WriteString(stdin, "go\n"); err != nil {
		b.Fatal(err)
	}
	if !lines.Scan() {
		b.Fatal("GCBench printed no result")
	}
	var res gcBenchResult
	if _, err := fmt.Sscanf(lines.Text(), "ops_per_s=%g gc_count=%d gc_ms=%d", &res.opsPerSecond, &res.pauses, &res.pauseMillis); err != nil {
		b.Fatalf("GCBench result %q: %v", lines.Text(), err)
	}
	res.pausePerSecMs = float64(res.pauseMillis) / measure.Seconds()
	if stop != nil {
		stop()
		stop = nil
	}
	return res
}

// BenchmarkZeroTouchOverhead measures what the zero-touch recording costs
// a GC-heavy JVM (bench/jfr-attach/GCBench.java, JDK 17, G1): rounds of one
// run without and one with the recording the receiver starts (order
// alternating), each measured for JFR_ATTACH_BENCH_SECONDS (default 10)
// after a 6 s warm-up. Reported: the median over rounds of with/without
// for throughput (allocation operations per second; 1 = no cost) and GC
// pause time per second. The make bench step runs it once (-benchtime 1x).
func BenchmarkZeroTouchOverhead(b *testing.B) {
	jdk := jfrtest.Find(b, 17)
	_, file, _, _ := runtime.Caller(0)
	src := filepath.Join(filepath.Dir(file), "..", "..", "bench", "jfr-attach", "GCBench.java")
	measure := 10 * time.Second
	if s, err := strconv.Atoi(os.Getenv("JFR_ATTACH_BENCH_SECONDS")); err == nil && s > 0 {
		measure = time.Duration(s) * time.Second
	}
	const rounds = 3
	for range b.N {
		var throughput, pauseTime []float64
		var lines []string
		for round := range rounds {
			var without, with gcBenchResult
			if round%2 == 0 {
				without = runGCBench(b, jdk, src, 6*time.Second, measure, false)
				with = runGCBench(b, jdk, src, 6*time.Second, measure, true)
			} else {
				with = runGCBench(b, jdk, src, 6*time.Second, measure, true)
				without = runGCBench(b, jdk, src, 6*time.Second, measure, false)
			}
			throughput = append(throughput, with.opsPerSecond/without.opsPerSecond)
			pauseTime = append(pauseTime, with.pausePerSecMs/max(without.pausePerSecMs, 1e-9))
			lines = append(lines, fmt.Sprintf("round %d: without %.0f ops/s, %d pauses, %.1f ms/s paused; with %.0f ops/s, %d pauses, %.1f ms/s paused",
				round+1, without.opsPerSecond, without.pauses, without.pausePerSecMs, with.opsPerSecond, with.pauses, with.pausePerSecMs))
		}
		slices.Sort(throughput)
		slices.Sort(pauseTime)
		fmt.Printf("zero-touch JFR recording, GC-heavy JDK 17 G1 JVM, %s measured per run:\n  %s\n  throughput with/without: median %.3f (rounds %.3f)\n  GC pause time with/without: median %.3f (rounds %.3f)\n",
			measure, strings.Join(lines, "\n  "), throughput[rounds/2], throughput, pauseTime[rounds/2], pauseTime)
		b.ReportMetric(throughput[rounds/2], "throughput_ratio")
		b.ReportMetric(pauseTime[rounds/2], "pause_time_ratio")
	}
}
