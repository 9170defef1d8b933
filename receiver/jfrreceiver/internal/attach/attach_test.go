package attach

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/otelcol-ai/otelcol-ai/pkg/jfr/jfrtest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	jfrtest.Cleanup()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			os.Stderr.WriteString(err.Error() + "\n")
			code = 1
		}
	}
	os.Exit(code)
}

// TestStartAndStopRecording attaches to a real JVM that records nothing,
// starts a recording with JFR.start (its disk repository appears where
// the receiver's discovery looks), then stops it; a command the JVM
// rejects is ErrRefused.
func TestStartAndStopRecording(t *testing.T) {
	j := jfrtest.Find(t, 17)
	src, _, err := jfrtest.Workload()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(j.Java(), "-Xmx64m", src, "20000")
	cmd.Dir = t.TempDir()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Kill()
		cmd.Wait()
	}()
	pid := cmd.Process.Pid
	target := Target{ProcRoot: "/proc", PID: pid, Timeout: 30 * time.Second}

	// SIGQUIT before the JVM installs its handlers would kill it; Ready
	// says when it has (its perf-data file exists).
	deadline := time.Now().Add(30 * time.Second)
	for !target.Ready() {
		if time.Now().After(deadline) {
			t.Fatalf("JVM not ready\n%s", out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}

	// The attach listener answers before the JVM has registered the JFR
	// commands; until then they are unknown: NotYet.
	var got string
	for {
		got, err = target.Jcmd("JFR.start name=otelcol-ai-test settings=profile")
		if !NotYet(err) || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("JFR.start: %v\n%s", err, out.String())
	}
	if !strings.Contains(got, "Started recording") {
		t.Fatalf("JFR.start said %q", got)
	}
	repos, _ := filepath.Glob(filepath.Join("/proc", strconv.Itoa(pid), "root", "tmp", "*_"+strconv.Itoa(pid)))
	if len(repos) == 0 {
		t.Error("no disk repository after JFR.start")
	}
	if got, err := target.Jcmd("JFR.check"); err != nil || !strings.Contains(got, "otelcol-ai-test") {
		t.Errorf("JFR.check: %q, %v", got, err)
	}
	if _, err := target.Jcmd("JFR.stop name=otelcol-ai-test"); err != nil {
		t.Fatalf("JFR.stop: %v", err)
	}
	if _, err := target.Jcmd("No.such.command"); !errors.Is(err, ErrRefused) {
		t.Errorf("unknown command: %v, want ErrRefused", err)
	}
}

// TestNotAJVM: a process that is not a JVM never opens the socket; the
// error says so within the timeout.
func TestNotAJVM(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	cmd.Dir = t.TempDir()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Kill()
		cmd.Wait()
	}()
	_, err := Target{ProcRoot: "/proc", PID: cmd.Process.Pid, Timeout: time.Second}.Jcmd("JFR.check")
	if err == nil || !strings.Contains(err.Error(), "no attach socket") {
		t.Fatalf("attach to sleep: %v", err)
	}
	if left, _ := filepath.Glob(filepath.Join(cmd.Dir, ".attach_pid*")); len(left) != 0 {
		t.Errorf("trigger file left behind: %v", left)
	}
}
