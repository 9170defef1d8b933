package attach

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/otelcol-ai/otelcol-ai/pkg/jfr/jfrtest"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/discovery"
)

// output is a JVM's stdout and stderr, in a file the test reads while
// the JVM writes it.
type output string

func (o output) String() string {
	b, _ := os.ReadFile(string(o))
	return string(b)
}

// startJVM runs the workload JVM (JDK 17) with args before its source file.
func startJVM(t *testing.T, env []string, args ...string) (*exec.Cmd, output) {
	t.Helper()
	j := jfrtest.Find(t, 17)
	src, _, err := jfrtest.Workload()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(j.Java(), append(append([]string{"-Xmx64m"}, args...), src, "30000")...)
	cmd.Dir = t.TempDir()
	cmd.Env = env
	out := output(filepath.Join(t.TempDir(), "out"))
	f, err := os.Create(string(out))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd.Stdout, cmd.Stderr = f, f
	jfrtest.Start(t, cmd)
	return cmd, out
}

// considerUntil runs discoveries of the JVM (as the receiver does, every
// 100 ms here) until its status is settled in a state other than found, or
// 60 s pass.
func considerUntil(t *testing.T, r *Recorder, j discovery.JVM) Status {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		if err := r.Consider(j, false); err != nil {
			t.Logf("consider: %v", err)
		}
		s, _ := r.Status(j.PID, j.StartTicks)
		if s.State != StateFound && s.State != "" {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("pid %d still %q (%q) after 60 s", j.PID, s.State, s.Reason)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func startTicksOf(t *testing.T, pid int) uint64 {
	t.Helper()
	x, err := Target{ProcRoot: "/proc", PID: pid}.open()
	if err != nil {
		t.Fatal(err)
	}
	defer x.close()
	return x.start
}

// TestAttachOffInTheJVM: a JVM run with -XX:+DisableAttachMechanism (on
// its command line, or in JAVA_TOOL_OPTIONS) is refused without a signal:
// SIGQUIT would only make it print a thread dump, once per try. The same
// flag turned back on later in the options is attached to.
func TestAttachOffInTheJVM(t *testing.T) {
	for _, tc := range []struct {
		name     string
		env      []string
		args     []string
		refused  bool
		settings bool
	}{
		{name: "command line", args: []string{"-XX:+DisableAttachMechanism"}, refused: true},
		{name: "tool options", env: []string{"JAVA_TOOL_OPTIONS=-XX:+DisableAttachMechanism"}, refused: true},
		{name: "turned on again", env: []string{"JAVA_TOOL_OPTIONS=-XX:+DisableAttachMechanism"}, args: []string{"-XX:-DisableAttachMechanism"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd, out := startJVM(t, tc.env, tc.args...)
			settingsAsked := false
			r := NewRecorder(RecorderConfig{ProcRoot: "/proc", Enabled: true, Timeout: 10 * time.Second,
				Settings: func(discovery.JVM) (string, func(), error) {
					settingsAsked = true
					return "profile", func() {}, nil
				}})
			j := discovery.JVM{PID: cmd.Process.Pid, NSPID: cmd.Process.Pid, StartTicks: startTicksOf(t, cmd.Process.Pid)}
			// Let the JVM come far enough that a SIGQUIT would be seen.
			for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
				if ok, _ := (Target{ProcRoot: "/proc", PID: j.PID}).Ready(); ok {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("JVM not ready\n%s", out)
				}
			}
			s := considerUntil(t, r, j)
			if tc.refused {
				if s.State != StateRefused || !strings.Contains(s.Reason, "-XX:+DisableAttachMechanism") {
					t.Errorf("status %q (%q), want refused for -XX:+DisableAttachMechanism", s.State, s.Reason)
				}
				if settingsAsked {
					t.Error("a recording was set up for a JVM with attach off")
				}
				time.Sleep(500 * time.Millisecond) // a SIGQUIT's dump would be out by now
				if strings.Contains(out.String(), "Full thread dump") {
					t.Errorf("the JVM was sent SIGQUIT: it printed a thread dump\n%s", out)
				}
				return
			}
			if s.State != StateRecordingOurs {
				t.Errorf("status %q (%q), want %s", s.State, s.Reason, StateRecordingOurs)
			}
		})
	}
}
