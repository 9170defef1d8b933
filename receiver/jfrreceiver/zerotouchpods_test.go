package jfrreceiver

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/otelcol-ai/otelcol-ai/internal/e2etest/containertest"
	"github.com/otelcol-ai/otelcol-ai/pkg/jfr/jfrtest"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/attach"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/attach/kubetest"
)

// TestZeroTouchPods: two pods made of real namespaces and kubelet-style
// cgroups (containertest), each running a flag-less JDK 17 JVM as pid 1 of
// its own PID and mount namespaces; the Kubernetes API (kubetest, reached
// through a kubeconfig) annotates one pod otelcol-ai.io/jfr-attach:
// "false". The receiver finds that pod from the JVM's cgroup (k8s.pod.uid)
// and leaves its JVM untouched (no attach socket in its /tmp); the other
// JVM gets the receiver's recording inside its own root, its GC pauses
// arrive with its host pid, and the recording is stopped at shutdown
// (jcmd JFR.check). About 20 s.
func TestZeroTouchPods(t *testing.T) {
	jdk := jfrtest.Find(t, 17)
	src, _, err := jfrtest.Workload()
	if err != nil {
		t.Fatal(err)
	}
	parent := "/otelcol-ai-zerotouch-" + containertest.NewID()[:8]
	jvm := containertest.Spec{Args: []string{jdk.Java(), "-Xmx64m", src, "60000"}, Volumes: []string{filepath.Dir(src)}}
	optedOutPod := containertest.StartPod(t, containertest.PodSpec{HostNetwork: true, CgroupParent: parent})
	plainPod := containertest.StartPod(t, containertest.PodSpec{HostNetwork: true, CgroupParent: parent})
	optedOut, plain := optedOutPod.Start(t, jvm), plainPod.Start(t, jvm)

	const node = "zerotouch-node"
	api := kubetest.Start(t, []corev1.Pod{
		kubetest.Pod("inference", "opted-out", optedOutPod.UID, node, map[string]string{attach.OptOutKey: "false"}, nil),
		kubetest.Pod("inference", "plain", plainPod.UID, node, nil, nil),
	}, kubetest.Namespace("inference", nil, nil))
	t.Setenv("KUBECONFIG", api.Kubeconfig(t))
	t.Setenv("K8S_NODE_NAME", node)
	attachOnly = func(pid int) bool { return pid == optedOut.PID || pid == plain.PID }
	defer func() { attachOnly = nil }()

	cfg := attachConfig()
	cfg.Repositories.Attach.KubernetesAuth = kubernetesAuthKubeConfig
	r := startObserved(t, cfg)
	sink, observed := r.sink, r.observed

	deadline := time.Now().Add(60 * time.Second)
	for gcPausesOf(sink, plain.PID) == 0 {
		if time.Now().After(deadline) {
			out, _ := os.ReadFile(plain.Stdout)
			t.Fatalf("no GC pause from the pod's JVM after a minute; statuses %v\n%s", observed.FilterMessage("JVM status").All(), out)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if state, reason := statusOf(observed, plain.PID); state != string(attach.StateRecordingOurs) {
		t.Errorf("the plain pod's JVM: %q (%q), want %s", state, reason, attach.StateRecordingOurs)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		state, reason := statusOf(observed, optedOut.PID)
		if state == string(attach.StateOptedOut) {
			if want := "pod inference/opted-out annotation otelcol-ai.io/jfr-attach=false"; reason != want {
				t.Errorf("opted out by %q, want %q", reason, want)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the annotated pod's JVM: %q (%q), want %s", state, reason, attach.StateOptedOut)
		}
	}
	sock := fmt.Sprintf("/proc/%d/root/tmp/.java_pid1", optedOut.PID)
	if _, err := os.Stat(sock); !os.IsNotExist(err) {
		t.Errorf("the opted-out JVM's attach socket exists (%v): something attached to it", err)
	}
	if n := gcPausesOf(sink, optedOut.PID); n != 0 {
		t.Errorf("%d GC pauses from the opted-out pod's JVM", n)
	}
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	if check := jcmd(t, jdk, plain.PID, "JFR.check"); strings.Contains(check, attach.RecordingName) || !strings.Contains(check, "No available recordings") {
		t.Errorf("the pod's JVM still records after shutdown:\n%s", check)
	}
}
