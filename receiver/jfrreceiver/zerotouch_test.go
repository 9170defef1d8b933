package jfrreceiver

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"
	"go.uber.org/zap/zaptest/observer"

	"github.com/otelcol-ai/otelcol-ai/internal/window"
	"github.com/otelcol-ai/otelcol-ai/pkg/jfr/jfrtest"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/attach"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/metadatatest"
)

// zeroTouchJVM starts the GC-heavy test workload with only -Xmx and
// extra: no JFR and no logging flag. It is killed when the test ends.
func zeroTouchJVM(t *testing.T, java string, env []string, extra ...string) (pid int, out *bytes.Buffer) {
	t.Helper()
	src, _, err := jfrtest.Workload()
	if err != nil {
		t.Fatal(err)
	}
	args := append(append([]string{"-Xmx64m"}, extra...), src, "60000")
	cmd := exec.Command(java, args...)
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), env...)
	out = &bytes.Buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	jfrtest.Start(t, cmd)
	return cmd.Process.Pid, out
}

// jcmd runs the JDK's own jcmd against pid, trying again while the JVM is
// too early in its start to answer, and returns its output.
func jcmd(t *testing.T, jdk jfrtest.JDK, pid int, command ...string) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, err := exec.Command(filepath.Join(jdk.Home, "bin", "jcmd"), append([]string{strconv.Itoa(pid)}, command...)...).CombinedOutput()
		if err == nil && !strings.Contains(string(out), "Exception") {
			return string(out)
		}
		if time.Now().After(deadline) {
			t.Fatalf("jcmd %d %s: %v\n%s", pid, strings.Join(command, " "), err, out)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// gcPausesOf counts the jvm.gc.pause windows the sink holds for pid.
func gcPausesOf(sink *consumertest.LogsSink, pid int) int {
	return countKind(sink.AllLogs(), int64(pid), window.KindJVMGCPause)
}

// statusOf returns the last "JVM status" line logged for pid.
func statusOf(logs *observer.ObservedLogs, pid int) (state, reason string) {
	for _, e := range logs.FilterMessage("JVM status").All() {
		m := e.ContextMap()
		if fmt.Sprint(m["pid"]) == strconv.Itoa(pid) {
			state, reason = fmt.Sprint(m["state"]), fmt.Sprint(m["reason"])
		}
	}
	return state, reason
}

// TestZeroTouch: with attach on, as the embedded default config has it,
// JDK 17 and JDK 25 JVMs started without any JFR or logging flag are
// followed (their GC pauses arrive) through a recording the receiver
// starts, bounded in age and size, and stopped when the receiver shuts
// down; a JVM opted out by its system property is left untouched (not even
// its attach listener is started); a JVM that records in memory (no disk
// repository, so only JFR.check shows it) is not given a second recording.
// Each change of a JVM's status is one log line, and the
// otelcol_receiver_jfr_jvms gauge counts them. About 20 s.
func TestZeroTouch(t *testing.T) {
	jdk17, jdk25 := jfrtest.Find(t, 17), jfrtest.Find(t, 25)
	plain17, out17 := zeroTouchJVM(t, jdk17.Java(), nil)
	plain25, out25 := zeroTouchJVM(t, jdk25.Java(), nil)
	optedOut, _ := zeroTouchJVM(t, jdk17.Java(), nil, "-D"+attach.OptOutProperty+"=false")
	inMemory, _ := zeroTouchJVM(t, jdk17.Java(), nil)
	// Someone else's recording, started at run time and kept in memory.
	if out := jcmd(t, jdk17, inMemory, "JFR.start", "name=theirs", "disk=false"); !strings.Contains(out, "Started recording") {
		t.Fatalf("JFR.start: %s", out)
	}
	ours := map[int]bool{plain17: true, plain25: true, optedOut: true, inMemory: true}
	attachOnly = func(pid int) bool { return ours[pid] }
	defer func() { attachOnly = nil }()

	cfg := attachConfig()
	r := startObserved(t, cfg)
	sink, observed := r.sink, r.observed

	// Attach exchanges run beside the poll loop: the JVM recording in
	// memory is decided once its JFR.check has answered.
	settled := func() bool {
		state, _ := statusOf(observed, inMemory)
		return state == string(attach.StateRecordingTheirs)
	}
	deadline := time.Now().Add(60 * time.Second)
	for gcPausesOf(sink, plain17) == 0 || gcPausesOf(sink, plain25) == 0 || !settled() {
		if time.Now().After(deadline) {
			t.Fatalf("GC pauses after a minute: JDK 17 %d, JDK 25 %d\nstatuses %v\nJDK 17 JVM:\n%s\nJDK 25 JVM:\n%s",
				gcPausesOf(sink, plain17), gcPausesOf(sink, plain25), observed.FilterMessage("JVM status").All(), out17, out25)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, pid := range []int{plain17, plain25} {
		jdk := map[int]jfrtest.JDK{plain17: jdk17, plain25: jdk25}[pid]
		check := jcmd(t, jdk, pid, "JFR.check")
		if !strings.Contains(check, "name="+attach.RecordingName+" maxsize=64.0MB maxage=10m (running)") {
			t.Errorf("pid %d: no bounded recording of the receiver's:\n%s", pid, check)
		}
		if state, _ := statusOf(observed, pid); state != string(attach.StateRecordingOurs) {
			t.Errorf("pid %d: status %q, want %s", pid, state, attach.StateRecordingOurs)
		}
	}
	if state, reason := statusOf(observed, optedOut); state != string(attach.StateOptedOut) || reason != "system property -Dotelcol.ai.jfr.attach=false" {
		t.Errorf("opted-out JVM: status %q (%q)", state, reason)
	}
	if state, reason := statusOf(observed, inMemory); state != string(attach.StateRecordingTheirs) || !strings.Contains(reason, "theirs") {
		t.Errorf("JVM recording in memory: status %q (%q)", state, reason)
	}
	if n := gcPausesOf(sink, optedOut); n != 0 {
		t.Errorf("%d GC pauses from the opted-out JVM", n)
	}
	// Untouched: its attach listener never started.
	if _, err := os.Stat(fmt.Sprintf("/tmp/.java_pid%d", optedOut)); !os.IsNotExist(err) {
		t.Errorf("the opted-out JVM's attach socket exists (%v): something attached to it", err)
	}
	// The gauge is recorded after each poll: one more poll after the last
	// status change.
	time.Sleep(3 * cfg.PollInterval)
	point := func(state attach.State, n int64) metricdata.DataPoint[int64] {
		return metricdata.DataPoint[int64]{Value: n, Attributes: attribute.NewSet(attribute.String("state", string(state)))}
	}
	metadatatest.AssertEqualReceiverJfrJvms(t, r.tel, []metricdata.DataPoint[int64]{
		point(attach.StateFound, 0), point(attach.StateRecordingOurs, 2), point(attach.StateRecordingTheirs, 1),
		point(attach.StateOptedOut, 1), point(attach.StateOptOutUnknown, 0), point(attach.StateRefused, 0),
	}, metricdatatest.IgnoreTimestamp())
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}

	// After shutdown: the receiver's recordings are stopped, the other
	// JVMs hold what they held.
	for pid, jdk := range map[int]jfrtest.JDK{plain17: jdk17, plain25: jdk25} {
		if check := jcmd(t, jdk, pid, "JFR.check"); strings.Contains(check, attach.RecordingName) {
			t.Errorf("pid %d: the receiver's recording still runs after shutdown:\n%s", pid, check)
		}
	}
	if check := jcmd(t, jdk17, optedOut, "JFR.check"); !strings.Contains(check, "No available recordings") {
		t.Errorf("the opted-out JVM records:\n%s", check)
	}
	check := jcmd(t, jdk17, inMemory, "JFR.check")
	if n := strings.Count(check, "Recording "); n != 1 || !strings.Contains(check, "name=theirs") {
		t.Errorf("the JVM recording in memory has %d recordings, want its own only:\n%s", n, check)
	}
	if msgs := observed.FilterMessage("stopped the JFR recording the receiver started").Len(); msgs != 2 {
		t.Errorf("%d recordings stopped, want 2", msgs)
	}
}

// TestKubernetesAuthValidated: repositories::attach::kubernetes_auth
// defaults to serviceAccount and takes only the three documented values.
func TestKubernetesAuthValidated(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	if got := cfg.Repositories.Attach.KubernetesAuth; got != kubernetesAuthServiceAccount {
		t.Errorf("default kubernetes_auth %q", got)
	}
	cfg.Repositories.Attach.Enabled = true
	for _, v := range []string{kubernetesAuthServiceAccount, kubernetesAuthKubeConfig, kubernetesAuthNone} {
		cfg.Repositories.Attach.KubernetesAuth = v
		if err := cfg.Validate(); err != nil {
			t.Errorf("%s: %v", v, err)
		}
	}
	cfg.Repositories.Attach.KubernetesAuth = "token"
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), `repositories::attach::kubernetes_auth must be "serviceAccount", "kubeConfig" or "none", got "token"`) {
		t.Errorf("kubernetes_auth token: %v", err)
	}
}
