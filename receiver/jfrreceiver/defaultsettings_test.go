package jfrreceiver

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/otelcol-ai/otelcol-ai/internal/window"
	"github.com/otelcol-ai/otelcol-ai/pkg/jfr/jfrtest"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/jfroracletest"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/jvmevent"
)

// threadDumpWorkload waits for a line on stdin, then asks for a thread
// dump (one ThreadDump safepoint, well under 10 ms) every 20 ms for the
// given milliseconds, prints "done <dumps>" and exits.
const threadDumpWorkload = `
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;

public class ThreadDumps {
    public static void main(String[] args) throws Exception {
        new BufferedReader(new InputStreamReader(System.in)).readLine();
        ThreadMXBean threads = ManagementFactory.getThreadMXBean();
        long end = System.nanoTime() + Long.parseLong(args[0]) * 1_000_000L;
        long dumps = 0;
        while (System.nanoTime() < end) {
            threads.dumpAllThreads(false, false);
            dumps++;
            Thread.sleep(20);
        }
        System.out.println("done " + dumps);
    }
}
`

// TestDefaultSettingsSafepointsFromRuntimeLog checks what README.md says
// of a JVM recording with JFR's default settings (plain
// -XX:StartFlightRecording): its recording holds no safepoint under 10 ms,
// and a unified-logging output added at run time (jcmd VM.log) gives every
// safepoint to the receiver (xlog::include, prefer_jfr off) while the
// recording the JVM dumps stays as the default settings make it.
func TestDefaultSettingsSafepointsFromRuntimeLog(t *testing.T) {
	j := jfrtest.Find(t, 17)
	dir := t.TempDir()
	src := filepath.Join(dir, "ThreadDumps.java")
	if err := os.WriteFile(src, []byte(threadDumpWorkload), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(filepath.Join(filepath.Dir(j.Java()), "javac"), "-d", dir, src).CombinedOutput(); err != nil {
		t.Fatalf("javac: %v\n%s", err, out)
	}
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
	cmd := exec.Command(j.Java(), "-Xlog:disable", "-XX:FlightRecorderOptions:repository="+dir,
		"-XX:StartFlightRecording:filename="+dump, "-cp", dir, "ThreadDumps", "3000")
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
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		_, _ = io.Copy(io.Discard, stdout)
		close(lines)
	}()

	// The JVM takes jcmd once its attach listener runs: retried until
	// then (each try waits for the JVM's answer).
	jcmd := filepath.Join(filepath.Dir(j.Java()), "jcmd")
	var out []byte
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
		for _, ld := range logs.AllLogs() {
			for i := range ld.ResourceLogs().Len() {
				rl := ld.ResourceLogs().At(i)
				if pidOf(rl.Resource()) != int64(cmd.Process.Pid) {
					continue
				}
				recs := rl.ScopeLogs().At(0).LogRecords()
				for k := range recs.Len() {
					w, err := window.Decode(recs.At(k))
					if err != nil {
						t.Fatal(err)
					}
					if w.Kind == window.KindJVMSafepoint && w.Attributes[jvmevent.AttrWindowSource] == "xlog" &&
						w.Attributes[window.AttrJVMVMOperation] == "ThreadDump" {
						n++
						if w.Duration < 10*time.Millisecond {
							short++
						}
					}
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
