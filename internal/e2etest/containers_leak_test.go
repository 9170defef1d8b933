package e2etest

import (
	"path/filepath"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/otelcol-ai/otelcol-ai/internal/e2etest/containertest"
)

// TestContainerLeakRecordNamesThePod: a JVM in a pod (its own pid, mount
// and network namespaces, cgroups named as kubelet and containerd name
// them), recording JFR on its default settings, leaks direct buffers; the
// built collector on its embedded default configuration, with a 40 s leak
// window, sends a jvm.memory.leak_suspected record for it whose resource
// is the pod's process: host pid, the pid it sees, its container id and pod
// UID. (The harness turns attach off, so that the collector leaves other
// tests' JVMs alone: the JVM records itself, as a service started with
// plain -XX:StartFlightRecording does.)
func TestContainerLeakRecordNamesThePod(t *testing.T) {
	RequireComponents(t, "jfr")
	if why := containertest.Supported(); why != "" {
		t.Skip(why)
	}
	deps := prepareContainerDeps(t)
	root, err := ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	classes := compileJava(t, filepath.Join(root, "internal", "e2etest", "testdata", "containers", "DirectLeak.java"), nil)
	c := Start(t, Options{Configs: []string{"embedded:default",
		"yaml:receivers::jfr::collection_interval: 2s",
		"yaml:receivers::jfr::accounts::leak_detection::window: 40s",
		"yaml:receivers::jfr::accounts::leak_detection::min_samples: 4",
	}})
	if err := c.WaitHealthy(60 * time.Second); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { keepOutput(t, c.OutputDir) })
	pod := containertest.StartPod(t, containertest.PodSpec{QoS: containertest.Burstable, Hostname: "inference-leak-2b9d"})
	w := startContainerWorkload(t, pod, "e2e-direct-leak", []string{deps.java, "-Xmx64m", "-XX:MaxDirectMemorySize=1g", "-XX:StartFlightRecording", "-cp", classes, "DirectLeak"}, nil)
	w.readyPID(t, 60*time.Second)
	begin := time.Now()
	t.Logf("%s: host pid %d, pid %d inside (%s)", w.name, w.hostPID, w.vpid, w.where())

	var record plog.ResourceLogs
	found := false
	if err := c.Eventually(150*time.Second, func() bool {
		logs, err := c.Logs("logs.jsonl")
		if err != nil {
			t.Fatal(err)
		}
		for _, ld := range logs {
			for _, rl := range ld.ResourceLogs().All() {
				if pid, ok := rl.Resource().Attributes().Get("process.pid"); !ok || pid.Int() != int64(w.hostPID) {
					continue
				}
				for _, sl := range rl.ScopeLogs().All() {
					for _, lr := range sl.LogRecords().All() {
						src, _ := lr.Attributes().Get("jvm.memory.leak.source")
						if lr.EventName() == "jvm.memory.leak_suspected" && src.Str() == "direct_buffers" {
							record, found = rl, true
							return true
						}
					}
				}
			}
		}
		return false
	}); err != nil || !found {
		t.Fatalf("no jvm.memory.leak_suspected record for the pod's direct buffers: %v", err)
	}
	t.Logf("direct_buffers named %s after the JVM started", time.Since(begin).Round(time.Second))
	checkIdentity(t, w, record.Resource().Attributes(), "leak record")
	for k, want := range map[string]string{"process.runtime.name": "java"} {
		if v, _ := record.Resource().Attributes().Get(k); v.Str() != want {
			t.Errorf("leak record resource %s = %q, want %q", k, v.Str(), want)
		}
	}
}
