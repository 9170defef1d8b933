package runtimecorrelationprocessor

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"

	"github.com/otelcol-ai/otelcol-ai/internal/procresource"
	"github.com/otelcol-ai/otelcol-ai/processor/runtimecorrelationprocessor/internal/metadatatest"
)

// unifiedCgroup is where this machine mounts the cgroup v2 hierarchy
// (hybrid v1/v2; see CONTAINERS.md); on a pure v2 host it is the root.
func unifiedCgroup(t *testing.T) string {
	for _, dir := range []string{"/sys/fs/cgroup/unified", "/sys/fs/cgroup"} {
		if _, err := os.Stat(filepath.Join(dir, "cgroup.procs")); err == nil {
			if _, err := os.Stat(filepath.Join(dir, "cgroup.controllers")); err == nil || dir == "/sys/fs/cgroup/unified" {
				return dir
			}
		}
	}
	t.Skip("no cgroup v2 hierarchy to build kubepods cgroups in")
	return ""
}

// container is a process that is pid 1 of its own pid, mount and UTS
// namespaces, in a cgroup named as kubelet (systemd driver) and containerd
// name it.
type container struct {
	id, pod string
	hostPID int
	cmd     *exec.Cmd
}

func randomHex(t *testing.T, n int) string {
	b := make([]byte, n)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return hex.EncodeToString(b)
}

func newPodUID(t *testing.T) string {
	h := randomHex(t, 16)
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// startContainer starts `sleep` as pid 1 of new namespaces inside
// kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod<uid>.slice/cri-containerd-<id>.scope.
func startContainer(t *testing.T, root, pod string) container {
	t.Helper()
	id := randomHex(t, 32)
	podSlice := "kubepods-besteffort-pod" + strings.ReplaceAll(pod, "-", "_") + ".slice"
	dir := filepath.Join(root, "kubepods.slice", "kubepods-besteffort.slice", podSlice, "cri-containerd-"+id+".scope")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	// The shell joins the cgroup before exec, so unshare and its child are
	// born in it.
	cmd := exec.Command("sh", "-c", `echo $$ > "$1/cgroup.procs" && exec unshare --pid --fork --mount-proc --uts sleep 300`, "sh", dir)
	require.NoError(t, cmd.Start())
	c := container{id: id, pod: pod, cmd: cmd}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if c.hostPID > 0 {
			_ = exec.Command("kill", "-9", strconv.Itoa(c.hostPID)).Run()
		}
		for d := dir; d != root && strings.HasPrefix(d, root); d = filepath.Dir(d) {
			for range 50 {
				if err := os.Remove(d); err == nil || os.IsNotExist(err) || !strings.Contains(err.Error(), "busy") {
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
		}
	})
	// unshare --fork's child is the container's pid 1.
	children := fmt.Sprintf("/proc/%d/task/%d/children", cmd.Process.Pid, cmd.Process.Pid)
	for range 250 {
		if b, err := os.ReadFile(children); err == nil && len(strings.Fields(string(b))) > 0 {
			c.hostPID, err = strconv.Atoi(strings.Fields(string(b))[0])
			require.NoError(t, err)
			if id, err := procresource.NewReader("/proc", 0).Identity(c.hostPID); err == nil && id.VPID == 1 && id.ContainerID == c.id {
				return c
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("container %s: no pid 1 under %s", id, children)
	return c
}

// TestRealNamespacesMatchEachContainersPid1 runs the correlator on this
// node's /proc through procresource.Index, with two pods' containers (each
// process pid 1 in its own namespace) and a second container in one pod.
func TestRealNamespacesMatchEachContainersPid1(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: namespaces and cgroups")
	}
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("needs unshare (util-linux)")
	}
	if in, known := procresource.InHostPIDNamespace(); known && !in {
		t.Skip("the test's /proc is not the host's pid namespace")
	}
	root := unifiedCgroup(t)
	podP, podQ := newPodUID(t), newPodUID(t)
	a := startContainer(t, root, podP)
	b := startContainer(t, root, podQ)
	c2 := startContainer(t, root, podP)

	h := newHarness(t, nil)
	h.c.ids.sockets = nil // no connection: the resources' own identity only
	nodeName := h.c.node.HostName
	h.sendWindows(resource{host: nodeName, pid: int64(a.hostPID), vpid: 1, container: a.id, pod: a.pod}, win(gilWait, 1*ms, 1*ms, 7))
	h.sendWindows(resource{host: nodeName, pid: int64(b.hostPID), vpid: 1, container: b.id, pod: b.pod}, win(safepoint, 1*ms, 1*ms, 0))

	h.sendSpans(spanTraces(resource{host: "pod-a", pid: 1, container: a.id}, spanAt{"a", 0, 5 * ms}))
	h.sendSpans(spanTraces(resource{host: "pod-b", pid: 1, container: b.id}, spanAt{"b", 0, 5 * ms}))
	h.sendSpans(spanTraces(resource{host: "pod-b", pid: 1, pod: b.pod}, spanAt{"b-by-pod", 0, 5 * ms}))
	h.sendSpans(spanTraces(resource{host: "pod-c", pid: 1, container: c2.id}, spanAt{"c2", 0, 5 * ms}))
	h.sendSpans(spanTraces(resource{host: "pod-p", pid: 1, pod: podP}, spanAt{"p-by-pod", 0, 5 * ms}))
	h.sendSpans(spanTraces(resource{host: "pod-x", pid: 1, container: randomHex(t, 32)}, spanAt{"x", 0, 5 * ms}))

	got := spansByName(h.traceSink.AllTraces())
	assert.Equal(t, waitTotals, attrsOf(got["a"]), "a's own GIL wait only")
	assert.Equal(t, safepointTotals, attrsOf(got["b"]), "b's own safepoint only")
	assert.Equal(t, safepointTotals, attrsOf(got["b-by-pod"]), "pod Q has one pid 1")
	assert.Equal(t, map[string]any{}, attrsOf(got["c2"]), "a live container without windows: matched, nothing overlapped")
	assert.Equal(t, map[string]any{"runtime.overlap.unmatched": "ambiguous"}, attrsOf(got["p-by-pod"]), "pod P has two pid 1s")
	assert.Equal(t, map[string]any{"runtime.overlap.unmatched": "unknown_process"}, attrsOf(got["x"]))
	metadatatest.AssertEqualProcessorRuntimecorrelationSpansUnmatched(t, h.tel,
		unmatchedPoints(map[string]int64{"ambiguous": 1, "unknown_process": 1}), metricdatatest.IgnoreTimestamp())

	// a exits; a span naming it still finds its windows (learned), and a
	// new pid 1 in a new container is not confused with it.
	_ = a.cmd.Process.Kill()
	_ = exec.Command("kill", "-9", strconv.Itoa(a.hostPID)).Run()
	_ = a.cmd.Wait()
	h.sendSpans(spanTraces(resource{host: "pod-a", pid: 1, container: a.id}, spanAt{"a-after-exit", 0, 5 * ms}))
	assert.Equal(t, waitTotals, attrsOf(spansByName(h.traceSink.AllTraces())["a-after-exit"]))
}
