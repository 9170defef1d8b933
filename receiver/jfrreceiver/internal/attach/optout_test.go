package attach

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/otelcol-ai/otelcol-ai/internal/procresource"
)

func TestPropertyValue(t *testing.T) {
	for _, tc := range []struct {
		args  []string
		value string
		found bool
	}{
		{[]string{"-Xmx64m", "-Dotelcol.ai.jfr.attach=false", "Main"}, "false", true},
		{[]string{"-Dotelcol.ai.jfr.attach=false", "-Dotelcol.ai.jfr.attach=true", "Main"}, "true", true},
		{[]string{"-Dotelcol.ai.jfr.attach", "Main"}, "", true},
		// The program's own arguments are not the JVM's.
		{[]string{"-Xmx64m", "Main", "-Dotelcol.ai.jfr.attach=false"}, "", false},
		{[]string{"-jar", "app.jar", "-Dotelcol.ai.jfr.attach=false"}, "", false},
		{[]string{"-cp", "-Dotelcol.ai.jfr.attach=x", "-Dotelcol.ai.jfr.attach=off", "Main"}, "off", true},
		{[]string{"-Dotelcol.ai.jfr.attachment=false", "Main"}, "", false},
		{nil, "", false},
	} {
		v, ok := PropertyValue(tc.args, OptOutProperty)
		if v != tc.value || ok != tc.found {
			t.Errorf("%q: %q, %v; want %q, %v", tc.args, v, ok, tc.value, tc.found)
		}
	}
}

// TestProcessOptOut reads the switches from real processes' environments
// (the command line's -D is read from real JVMs in the receiver's
// TestZeroTouch).
func TestProcessOptOut(t *testing.T) {
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		env  []string
		want string
	}{
		{"environment", []string{"30"}, []string{"OTELCOL_AI_JFR_ATTACH=FALSE"}, "environment OTELCOL_AI_JFR_ATTACH=FALSE"},
		{"tool options", []string{"30"}, []string{"JAVA_TOOL_OPTIONS=-Xmx1g -Dotelcol.ai.jfr.attach=no"}, "system property -Dotelcol.ai.jfr.attach=no"},
		{"tool options on", []string{"30"}, []string{"JAVA_TOOL_OPTIONS=-Dotelcol.ai.jfr.attach=false", "JDK_JAVA_OPTIONS=-Dotelcol.ai.jfr.attach=true"}, ""},
		{"on", []string{"30"}, []string{"OTELCOL_AI_JFR_ATTACH=true"}, ""},
		{"nothing", []string{"30"}, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(sleep, tc.args...)
			cmd.Env = append(os.Environ(), tc.env...)
			if err := cmd.Start(); err != nil {
				t.Skipf("%s %s: %v", sleep, strings.Join(tc.args, " "), err)
			}
			defer func() {
				_ = cmd.Process.Kill()
				_ = cmd.Wait()
			}()
			// Until the child has exec'd, its environment is the test's.
			execd := []byte(sleep + "\x00" + strings.Join(tc.args, "\x00"))
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
				if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", cmd.Process.Pid)); err == nil && bytes.HasPrefix(b, execd) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("pid %d did not exec %s", cmd.Process.Pid, sleep)
				}
			}
			if got := ProcessOptOut(procresource.NewReader("/proc", 0), cmd.Process.Pid); got != tc.want {
				t.Errorf("opt-out %q, want %q", got, tc.want)
			}
		})
	}
}

func TestRunningRecording(t *testing.T) {
	for _, tc := range []struct {
		out     string
		name    string
		running bool
	}{
		{"No available recordings.\n\nUse jcmd 1 JFR.start to start a recording.\n", "", false},
		{"Recording 1: name=1 maxsize=250.0MB (running)\n", "1", true},
		{"Recording 1: name=app (stopped)\nRecording 2: name=otelcol-ai maxage=10m maxsize=64.0MB (running)\n", RecordingName, true},
		{"Recording 1: name=app (running)\nRecording 2: name=otelcol-ai maxage=10m (running)\n", RecordingName, true},
		{"Recording 1: name=app (stopped)\n", "", false},
		{"Recording 3: (running)", "", true},
	} {
		name, running := runningRecording(tc.out)
		if name != tc.name || running != tc.running {
			t.Errorf("%q: %q, %v; want %q, %v", tc.out, name, running, tc.name, tc.running)
		}
	}
}

// FuzzRunningRecording: JFR.check's answer comes from the JVM's socket;
// whatever it holds, reading it neither panics nor names a recording that
// is not in it.
func FuzzRunningRecording(f *testing.F) {
	f.Add("Recording 1: name=1 maxsize=250.0MB (running)\n")
	f.Add("No available recordings.\n")
	f.Add("Recording 2: name=otelcol-ai\x00 (running)")
	f.Fuzz(func(t *testing.T, out string) {
		name, running := runningRecording(out)
		if !running && name != "" {
			t.Fatalf("name %q without a running recording", name)
		}
		if name != "" && !strings.Contains(out, "name="+name) {
			t.Fatalf("name %q not in %q", name, out)
		}
	})
}
