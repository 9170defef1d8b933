package repository

import (
	"bytes"
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/otelcol-ai/otelcol-ai/internal/window"
	"github.com/otelcol-ai/otelcol-ai/pkg/jfr/jfrtest"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/attach"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/discovery"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/jvmevent"
)

// TestStartsRecordingWhereNoneRuns: a real JDK 17 JVM started without JFR
// gets a recording with the project's settings through the attach
// protocol; its GC pauses and safepoints then arrive like any other JVM's,
// and closing the source stops the recording it started.
func TestStartsRecordingWhereNoneRuns(t *testing.T) {
	j := jfrtest.Find(t, 17)
	src, _, err := jfrtest.Workload()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(j.Java(), "-Xmx64m", src, "15000")
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

	s := New(Config{Discover: true, ProcRoot: "/proc", DiscoveryInterval: 100 * time.Millisecond,
		Attach: AttachConfig{Enabled: true, Timeout: 10 * time.Second}})
	s.starter.only = func(j discovery.JVM) bool { return j.PID == pid }
	closed := false
	defer func() {
		if !closed {
			s.Close()
		}
	}()
	kinds := map[window.Kind]int{}
	deadline := time.Now().Add(60 * time.Second)
	for kinds[window.KindJVMGCPause] == 0 || kinds[window.KindJVMSafepoint] == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("windows %v after a minute\n%s", kinds, out.String())
		}
		if err := s.Poll(context.Background(), func(b jvmevent.Batch) {
			if b.JVM.PID != pid {
				return
			}
			for _, w := range b.Windows {
				kinds[w.Kind]++
				if w.Kind == window.KindJVMSafepoint && w.Attributes["jvm.safepoint.end_source"] != "jdk.SafepointEnd" {
					t.Errorf("the project's settings record SafepointEnd; window %+v", w)
				}
			}
		}); err != nil {
			t.Logf("poll: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	s.Close()
	closed = true
	check, err := attach.Target{ProcRoot: "/proc", PID: pid, Timeout: 10 * time.Second}.Jcmd("JFR.check")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(check, RecordingName) {
		t.Errorf("the recording the source started still runs after Close:\n%s", check)
	}
}
