package jfrreceiver

import (
	"bufio"
	"cmp"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/receiver/receivertest"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/otelcol-ai/otelcol-ai/internal/e2etest"
	"github.com/otelcol-ai/otelcol-ai/internal/window"
	"github.com/otelcol-ai/otelcol-ai/pkg/jfr/jfrtest"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/attach"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/jfroracletest"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/jvmevent"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/metadata"
)

// threadDumpWorkload waits for a line on stdin, then asks for a thread
// dump (one ThreadDump safepoint, well under 10 ms) every 20 ms for the
// given milliseconds, prints "done <dumps>", and exits at the next line or
// the end of stdin. With a second argument it first fills that many MiB of
// the heap with small live objects, and collects it whole (System.gc(),
// a stop well over 10 ms) once the dumps are done; with a third ("spin"), a
// thread spins in counted loops meanwhile (run with
// -XX:-UseCountedLoopSafepoints, reaching each safepoint waits for a loop
// to end: JFR's default settings then record safepoints too).
const threadDumpWorkload = `
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;

public class ThreadDumps {
    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        java.util.ArrayList<int[]> live = new java.util.ArrayList<>();
        if (args.length > 1) {
            for (long b = 0; b < Long.parseLong(args[1]) << 20; b += 32) {
                live.add(new int[2]);
            }
        }
        in.readLine();
        if (args.length > 2) {
            Thread spinner = new Thread(() -> {
                long sum = 0;
                while (true) {
                    sum += spin(20_000_000);
                    if (sum == 42) System.out.println(sum);
                }
            });
            spinner.setDaemon(true);
            spinner.start();
        }
        ThreadMXBean threads = ManagementFactory.getThreadMXBean();
        long end = System.nanoTime() + Long.parseLong(args[0]) * 1_000_000L;
        long dumps = 0;
        while (System.nanoTime() < end) {
            threads.dumpAllThreads(false, false);
            dumps++;
            Thread.sleep(20);
        }
        if (args.length > 1) {
            System.gc();
        }
        System.out.println("done " + dumps + " " + live.size());
        in.readLine();
    }

    static long spin(int n) {
        long s = 0;
        for (int i = 0; i < n; i++) {
            s += i ^ (s >>> 3);
        }
        return s;
    }
}
`

// threadDumps is a running threadDumpWorkload: its stdin, and its output
// line by line (stderr with stdout).
type threadDumps struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string
}

// startThreadDumps compiles threadDumpWorkload into dir and starts it with
// j, the JVM options opts and the workload's args; it is killed when the
// test ends.
func startThreadDumps(t *testing.T, j jfrtest.JDK, dir string, opts []string, args ...string) *threadDumps {
	t.Helper()
	src := filepath.Join(dir, "ThreadDumps.java")
	if err := os.WriteFile(src, []byte(threadDumpWorkload), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(filepath.Join(filepath.Dir(j.Java()), "javac"), "-d", dir, src).CombinedOutput(); err != nil {
		t.Fatalf("javac: %v\n%s", err, out)
	}
	cmd := exec.Command(j.Java(), append(append(opts, "-cp", dir, "ThreadDumps"), args...)...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		_, _ = io.Copy(io.Discard, stdout)
		close(lines)
	}()
	return &threadDumps{cmd: cmd, stdin: stdin, lines: lines}
}

// TestDefaultSettingsSafepointsFromRuntimeLog checks what README.md says
// of a JVM recording with JFR's default settings (plain
// -XX:StartFlightRecording): its recording holds no safepoint under 10 ms,
// and a unified-logging output added at run time (jcmd VM.log) gives every
// safepoint to the receiver (xlog::include, prefer_jfr off) while the
// recording the JVM dumps stays as the default settings make it.
func TestDefaultSettingsSafepointsFromRuntimeLog(t *testing.T) {
	j := jfrtest.Find(t, 17)
	dir := t.TempDir()
	safepointLog := filepath.Join(dir, "safepoint.log")

	cfg := NewFactory().CreateDefaultConfig().(*Config)
	cfg.PollInterval = 200 * time.Millisecond
	cfg.Repositories.DiscoveryInterval = 200 * time.Millisecond
	cfg.XLog.Include = []string{safepointLog}
	cfg.XLog.StartAt = "beginning"
	cfg.XLog.DiscoveryInterval = 200 * time.Millisecond
	cfg.XLog.PreferJFR = false
	rcv, logs := startLogs(t, cfg)
	defer func() {
		if err := rcv.Shutdown(t.Context()); err != nil {
			t.Error(err)
		}
	}()

	dump := filepath.Join(dir, "dump.jfr")
	w := startThreadDumps(t, j, dir, []string{"-Xlog:disable", "-XX:FlightRecorderOptions:repository=" + dir,
		"-XX:StartFlightRecording:filename=" + dump}, "3000")
	cmd, stdin, lines := w.cmd, w.stdin, w.lines

	// The JVM takes jcmd once its attach listener runs: retried until
	// then (each try waits for the JVM's answer).
	jcmd := filepath.Join(filepath.Dir(j.Java()), "jcmd")
	var (
		out []byte
		err error
	)
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		out, err = exec.Command(jcmd, fmt.Sprint(cmd.Process.Pid), "VM.log", "output=file="+safepointLog,
			"what=safepoint=info", "decorators=time,uptimenanos,timenanos,pid,level,tags").CombinedOutput()
		if err == nil && strings.Contains(string(out), "Command executed successfully") || time.Now().After(deadline) {
			break
		}
	}
	if err != nil || !strings.Contains(string(out), "Command executed successfully") {
		t.Fatalf("jcmd VM.log: %v\n%s", err, out)
	}
	if _, err := io.WriteString(stdin, "go\n"); err != nil {
		t.Fatal(err)
	}
	_ = stdin.Close()
	var dumps int
	for line := range lines {
		if _, err := fmt.Sscanf(line, "done %d", &dumps); err == nil {
			break
		}
	}
	if dumps == 0 {
		t.Fatal("the workload made no thread dumps")
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("JVM: %v", err)
	}

	// Every thread dump's safepoint comes from the log, with its VM
	// operation and the JVM's pid.
	fromLog := func() (n, short int) {
		for _, w := range windowsOf(t, logs.AllLogs(), int64(cmd.Process.Pid)) {
			if w.Kind == window.KindJVMSafepoint && w.Attributes[jvmevent.AttrWindowSource] == "xlog" &&
				w.Attributes[window.AttrJVMVMOperation] == "ThreadDump" {
				n++
				if w.Duration < 10*time.Millisecond {
					short++
				}
			}
		}
		return n, short
	}
	got, short := fromLog()
	for deadline := time.Now().Add(30 * time.Second); got < dumps && time.Now().Before(deadline); got, short = fromLog() {
		time.Sleep(200 * time.Millisecond)
	}
	// Each thread dump is one safepoint, well under 10 ms on an idle
	// machine; on a loaded one some take longer (and JFR records those).
	if got < dumps || short == 0 {
		t.Errorf("%d ThreadDump safepoints from the log (%d under 10 ms), the workload made %d", got, short, dumps)
	}

	// The recording the JVM dumped is the default settings': no
	// SafepointEnd, no safepoint or VM operation under 10 ms.
	events := jfroracletest.Events(t, j, dump, "jdk.SafepointBegin", "jdk.SafepointEnd", "jdk.ExecuteVMOperation")
	for _, e := range events {
		d, err := e.Duration("duration")
		if err != nil {
			t.Fatal(err)
		}
		if e.Type == "jdk.SafepointEnd" || d < 10*time.Millisecond {
			t.Errorf("the user's recording holds %s of %v: the log changed what it records", e.Type, d)
		}
	}
	t.Logf("%d thread dumps, %d safepoint windows from the log (%d under 10 ms); the user's recording: %d safepoint events, all over 10 ms", dumps, got, short, len(events))
}

// TestSafepointLogAddedToDefaultSettingsJVM: with attach on, as the
// embedded default config has it, a JVM recording with JFR's default
// settings gets a safepoint log added at run time
// (repositories::attach::safepoint_log, on by default): every thread dump's
// safepoint arrives exactly once as a window (from the log; the recording's
// copies of those over 10 ms are dropped) and once in jvm.safepoint.duration,
// in the one series of the JVM's resource; the recording the JVM dumps
// holds what the default settings make it hold; the output is gone from the
// JVM once the receiver shuts down.
func TestSafepointLogAddedToDefaultSettingsJVM(t *testing.T) {
	j := jfrtest.Find(t, 17)
	dir := t.TempDir()
	dump := filepath.Join(dir, "dump.jfr")
	w := startThreadDumps(t, j, dir, []string{"-Xlog:disable", "-XX:-UseCountedLoopSafepoints", "-XX:StartFlightRecording:filename=" + dump},
		"3000", "256", "spin")
	cmd, stdin, lines := w.cmd, w.stdin, w.lines
	pid := cmd.Process.Pid
	attachOnly = func(p int) bool { return p == pid }
	defer func() { attachOnly = nil }()
	// What the user's recording records (every event type's settings),
	// before the receiver looks at the JVM (its answer names events
	// "Exception", which the jcmd helper takes for a failure).
	recordingSettings := func() string {
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
			out, err := exec.Command(filepath.Join(j.Home, "bin", "jcmd"), fmt.Sprint(pid), "JFR.check", "verbose=true").CombinedOutput()
			if err == nil && strings.Contains(string(out), "(running)") {
				return string(out)
			}
			if time.Now().After(deadline) {
				t.Fatalf("jcmd JFR.check verbose=true: %v\n%s", err, out)
			}
		}
	}
	settingsBefore := recordingSettings()

	f := NewFactory()
	cfg := f.CreateDefaultConfig().(*Config)
	cfg.Repositories.Attach.Enabled = true // as distribution/config.yaml
	cfg.PollInterval = 200 * time.Millisecond
	cfg.CollectionInterval = 300 * time.Millisecond
	cfg.Repositories.DiscoveryInterval = 200 * time.Millisecond
	cfg.XLog.DiscoveryInterval = 200 * time.Millisecond
	cfg.Accounts.JNIReferences.Enabled = false // no Thread.print of ours in the JVM's safepoints
	set := receivertest.NewNopSettings(metadata.Type)
	core, observed := observer.New(zap.InfoLevel)
	set.Logger = zap.New(core)
	logs, metrics, shutdown := startBoth(t, cfg, set, componenttest.NewNopHost())

	// The workload starts once the log runs: every dump is then after it.
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		state, reason := statusOf(observed, pid)
		if state == string(attach.StateRecordingTheirs) && strings.Contains(reason, "safepoints from a log added at run time") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no safepoint log after a minute: status %q (%q)", state, reason)
		}
	}
	if list := jcmd(t, j, pid, "VM.log", "list"); !strings.Contains(list, attach.SafepointLogPath(pid)+" all=off,safepoint=info") {
		t.Fatalf("the JVM has no safepoint output of the receiver's:\n%s", list)
	}
	if after := recordingSettings(); after != settingsBefore {
		t.Errorf("the JVM's recordings changed once the log was added:\nbefore\n%s\nafter\n%s", settingsBefore, after)
	}
	if _, err := io.WriteString(stdin, "go\n"); err != nil {
		t.Fatal(err)
	}
	var dumps int
	for line := range lines {
		if _, err := fmt.Sscanf(line, "done %d", &dumps); err == nil {
			break
		}
	}
	if dumps == 0 {
		t.Fatal("the workload made no thread dumps")
	}

	// Safepoints are one at a time: windows of the JVM that overlap are one
	// safepoint reported twice.
	overlaps := func() (n int, stops []window.Window) {
		for _, w := range e2etest.WindowsOf(logs.AllLogs(), int64(pid)) {
			if w.Kind == window.KindJVMSafepoint {
				stops = append(stops, w)
			}
		}
		slices.SortFunc(stops, func(a, b window.Window) int { return cmp.Compare(a.Start, b.Start) })
		for i := 1; i < len(stops); i++ {
			if stops[i].Start < stops[i-1].End() {
				n++
			}
		}
		return n, stops
	}
	windows := func() (fromLog, fromJFR, short, full, fullPauses int) {
		for _, w := range windowsOf(t, logs.AllLogs(), int64(pid)) {
			if w.Kind == window.KindJVMSafepoint && w.Attributes[window.AttrJVMVMOperation] == "G1CollectFull" {
				full++
			}
			if w.Kind == window.KindJVMGCPause && w.Attributes[window.AttrJVMGCCause] == "System.gc()" {
				fullPauses++
			}
			if w.Kind != window.KindJVMSafepoint || w.Attributes[window.AttrJVMVMOperation] != "ThreadDump" {
				continue
			}
			if w.Attributes[jvmevent.AttrWindowSource] == "xlog" {
				fromLog++
			} else {
				fromJFR++
			}
			if w.Duration < 10*time.Millisecond {
				short++
			}
		}
		return
	}
	// The series: the last collection's ResourceMetrics of the JVM (one)
	// and its ThreadDump safepoints.
	series := func() (resources int, counted uint64) {
		all := metrics.AllMetrics()
		for i := len(all) - 1; i >= 0 && resources == 0; i-- {
			rms := all[i].ResourceMetrics()
			for k := range rms.Len() {
				if pidOf(rms.At(k).Resource()) != int64(pid) {
					continue
				}
				resources++
				if m, ok := metric(rms.At(k), "jvm.safepoint.duration"); ok {
					dps := m.Histogram().DataPoints()
					for d := range dps.Len() {
						if op, _ := dps.At(d).Attributes().Get(window.AttrJVMVMOperation); op.Str() == "ThreadDump" {
							counted += dps.At(d).Count()
						}
					}
				}
			}
		}
		return
	}
	// Until the log's windows are in and JFR has been read past the full
	// collection (its pauses come from JFR only, the same chunk as its
	// safepoint), then a collection more.
	fromLog, fromJFR, short, full, fullPauses := windows()
	resources, counted := series()
	for deadline := time.Now().Add(30 * time.Second); (fromLog < dumps || counted < uint64(dumps) || full == 0 || fullPauses == 0) && time.Now().Before(deadline); {
		time.Sleep(200 * time.Millisecond)
		fromLog, fromJFR, short, full, fullPauses = windows()
		resources, counted = series()
	}
	time.Sleep(2 * cfg.CollectionInterval)
	fromLog, fromJFR, short, full, _ = windows()
	resources, counted = series()
	twice, stops := overlaps()
	if twice > 0 {
		t.Errorf("%d of %d safepoint windows overlap the one before: reported twice", twice, len(stops))
	}
	// The full collection's stop is over 10 ms: the JVM's recording has
	// it too (checked below), and it is reported once.
	if full != 1 {
		t.Errorf("%d G1CollectFull safepoint windows, want 1", full)
	}
	if fromLog != dumps || fromJFR != 0 || short == 0 {
		t.Errorf("ThreadDump safepoint windows: %d from the log, %d from JFR (%d under 10 ms); the workload made %d", fromLog, fromJFR, short, dumps)
	}
	if resources != 1 || counted != uint64(dumps) {
		t.Errorf("jvm.safepoint.duration: %d resources of the JVM, ThreadDump count %d; want 1 and %d", resources, counted, dumps)
	}

	shutdown()
	if msgs := observed.FilterMessage("removed the safepoint log the receiver added").Len(); msgs != 1 {
		t.Errorf("%d safepoint logs removed at shutdown, want 1", msgs)
	}
	if list := jcmd(t, j, pid, "VM.log", "list"); strings.Contains(list, "otelcol-ai") {
		t.Errorf("the receiver's output is still configured after shutdown:\n%s", list)
	}
	_ = stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("JVM: %v", err)
	}
	// The recording the JVM dumped is the default settings': no
	// SafepointEnd, no safepoint or VM operation under 10 ms; the full
	// collection's is there.
	events := jfroracletest.Events(t, j, dump, "jdk.SafepointBegin", "jdk.SafepointEnd", "jdk.ExecuteVMOperation")
	fullInJFR, slowBegins := 0, 0
	for _, e := range events {
		if e.Type == "jdk.SafepointBegin" {
			slowBegins++
		}
		d, err := e.Duration("duration")
		if err != nil {
			t.Fatal(err)
		}
		if e.Type == "jdk.SafepointEnd" || d < 10*time.Millisecond {
			t.Errorf("the user's recording holds %s of %v: the log changed what it records", e.Type, d)
		}
		if e.Type == "jdk.ExecuteVMOperation" && strings.Contains(fmt.Sprint(e.Values["operation"]), "G1CollectFull") {
			fullInJFR++
		}
	}
	if slowBegins == 0 {
		t.Errorf("the user's recording holds no jdk.SafepointBegin: the spinning thread did not delay a safepoint past 10 ms, and nothing was there to be reported twice")
	}
	if fullInJFR != 1 {
		t.Errorf("the user's recording holds %d G1CollectFull operations, want 1 (the stop both sources see)", fullInJFR)
	}
	t.Logf("%d thread dumps: %d windows from the log (%d under 10 ms), counted %d in one series, %d safepoint windows in all; the user's recording: %d safepoint events (%d SafepointBegin), all over 10 ms",
		dumps, fromLog, short, counted, len(stops), len(events), slowBegins)
}
