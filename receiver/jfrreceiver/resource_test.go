package jfrreceiver

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/receiver/receivertest"

	"github.com/otelcol-ai/otelcol-ai/internal/procresource"
	"github.com/otelcol-ai/otelcol-ai/internal/window"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/jvmevent"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/metadata"
)

// TestJVMResourceIdentity: a JVM that is pid 1 of its container carries
// both pids, its container and pod, and the node's name from K8S_NODE_NAME
// rather than the agent pod's hostname.
func TestJVMResourceIdentity(t *testing.T) {
	const (
		containerID = "3f1b2c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f809"
		podUID      = "1a2b3c4d-5e6f-4a1b-8c9d-0e1f2a3b4c5d"
	)
	root := t.TempDir()
	dir := filepath.Join(root, "4242")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatalf("os.MkdirAll: %v", err)
	}
	files := map[string]string{
		"stat":   "4242 (java) S 1 1 1 0 -1 4194304 100 0 0 0 5 3 0 0 20 0 1 0 777 1000000 100 18446744073709551615 0 0 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0\n",
		"status": "Name:\tjava\nPid:\t4242\nNSpid:\t4242\t1\n",
		"cgroup": "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1a2b3c4d_5e6f_4a1b_8c9d_0e1f2a3b4c5d.slice/cri-containerd-" + containerID + ".scope\n",
		"comm":   "java\n",
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatalf("os.WriteFile: %v", err)
		}
	}
	t.Setenv(procresource.EnvNodeName, "gpu-node-3")

	r := newReceiver(receivertest.NewNopSettings(metadata.Type), &Config{ProcRoot: root})
	r.cache = procresource.NewCache(procresource.NewReader(root, 0))
	resource := func(jvm jvmevent.JVM) map[string]any {
		info := &jvmInfo{resource: pcommon.NewResource()}
		r.putResource(info, jvm)
		return info.resource.Attributes().AsRaw()
	}

	if got, want := resource(jvmevent.JVM{PID: 4242, StartTicks: 777}), map[string]any{
		window.ResourceRuntimeName: window.RuntimeJava,
		"process.executable.name":  "java",
		window.ResourcePID:         int64(4242),
		window.ResourceVPID:        int64(1),
		window.ResourceContainerID: containerID,
		window.ResourceK8sPodUID:   podUID,
		window.ResourceHostName:    "gpu-node-3",
		window.ResourceNodeName:    "gpu-node-3",
	}; !reflect.DeepEqual(got, want) {
		t.Errorf("resource(jvmevent.JVM{PID: 4242, StartTicks: 777}): got %v, want %v", got, want)
	}

	if got, want := resource(jvmevent.JVM{PID: 4242, StartTicks: 778}), map[string]any{
		window.ResourceRuntimeName: window.RuntimeJava,
		window.ResourcePID:         int64(4242),
		window.ResourceHostName:    "gpu-node-3",
		window.ResourceNodeName:    "gpu-node-3",
	}; !reflect.DeepEqual(got, want) {
		t.Errorf("a later process with the JVM's pid lends it nothing: got %v, want %v", got, want)
	}

	if got, want := resource(jvmevent.JVM{Source: "recording.jfr"}), map[string]any{
		window.ResourceRuntimeName: window.RuntimeJava,
		window.ResourceHostName:    "gpu-node-3",
		window.ResourceNodeName:    "gpu-node-3",
	}; !reflect.DeepEqual(got, want) {
		t.Errorf("a recording from elsewhere names only the node: got %v, want %v", got, want)
	}
}
