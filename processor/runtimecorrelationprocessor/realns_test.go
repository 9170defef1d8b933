package runtimecorrelationprocessor

import (
	"reflect"
	"testing"
	"time"

	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"

	"github.com/otelcol-ai/otelcol-ai/internal/e2etest/containertest"
	"github.com/otelcol-ai/otelcol-ai/internal/procresource"
	"github.com/otelcol-ai/otelcol-ai/processor/runtimecorrelationprocessor/internal/metadatatest"
)

// startContainer starts `sleep` as pid 1 of a container (its own pid,
// mount and UTS namespaces, in a cgroup named as kubelet's systemd driver
// and containerd name it) of pod, with no sandbox.
func startContainer(t *testing.T, pod string) *containertest.Container {
	t.Helper()
	c := containertest.Start(t, containertest.Spec{PodUID: pod, Args: []string{"sleep", "300"}})
	if err := c.WaitExec(5 * time.Second); err != nil {
		t.Fatalf("c.WaitExec: %v", err)
	}
	return c
}

// TestRealNamespacesMatchEachContainersPid1 runs the correlator on this
// node's /proc through procresource.Index, with two pods' containers (each
// process pid 1 in its own namespace) and a second container in one pod.
func TestRealNamespacesMatchEachContainersPid1(t *testing.T) {
	if in, known := procresource.InHostPIDNamespace(); known && !in {
		t.Skip("the test's /proc is not the host's pid namespace")
	}
	podP, podQ := containertest.NewPodUID(), containertest.NewPodUID()
	a := startContainer(t, podP)
	b := startContainer(t, podQ)
	c2 := startContainer(t, podP)

	h := newHarness(t, nil)
	h.c.ids.sockets = nil // no connection: the resources' own identity only
	nodeName := h.c.node.HostName
	h.sendWindows(resource{host: nodeName, pid: int64(a.PID), vpid: 1, container: a.ID, pod: a.PodUID}, win(gilWait, 1*ms, 1*ms, 7))
	h.sendWindows(resource{host: nodeName, pid: int64(b.PID), vpid: 1, container: b.ID, pod: b.PodUID}, win(safepoint, 1*ms, 1*ms, 0))

	h.sendSpans(spanTraces(resource{host: "pod-a", pid: 1, container: a.ID}, spanAt{"a", 0, 5 * ms}))
	h.sendSpans(spanTraces(resource{host: "pod-b", pid: 1, container: b.ID}, spanAt{"b", 0, 5 * ms}))
	h.sendSpans(spanTraces(resource{host: "pod-b", pid: 1, pod: b.PodUID}, spanAt{"b-by-pod", 0, 5 * ms}))
	h.sendSpans(spanTraces(resource{host: "pod-c", pid: 1, container: c2.ID}, spanAt{"c2", 0, 5 * ms}))
	h.sendSpans(spanTraces(resource{host: "pod-p", pid: 1, pod: podP}, spanAt{"p-by-pod", 0, 5 * ms}))
	h.sendSpans(spanTraces(resource{host: "pod-x", pid: 1, container: containertest.NewID()}, spanAt{"x", 0, 5 * ms}))

	got := spansByName(h.traceSink.AllTraces())
	if got2 := attrsOf(got["a"]); !reflect.DeepEqual(got2, waitTotals) {
		t.Errorf("a's own GIL wait only: got %v, want %v", got2, waitTotals)
	}
	if got2 := attrsOf(got["b"]); !reflect.DeepEqual(got2, safepointTotals) {
		t.Errorf("b's own safepoint only: got %v, want %v", got2, safepointTotals)
	}
	if got2 := attrsOf(got["b-by-pod"]); !reflect.DeepEqual(got2, safepointTotals) {
		t.Errorf("pod Q has one pid 1: got %v, want %v", got2, safepointTotals)
	}
	if got2 := attrsOf(got["c2"]); !reflect.DeepEqual(got2, map[string]any{}) {
		t.Errorf("a live container without windows: matched, nothing overlapped: got %v, want %v", got2, map[string]any{})
	}
	if got2 := attrsOf(got["p-by-pod"]); !reflect.DeepEqual(got2, map[string]any{"runtime.overlap.unmatched": "ambiguous"}) {
		t.Errorf("pod P has two pid 1s: got %v, want %v", got2, map[string]any{"runtime.overlap.unmatched": "ambiguous"})
	}
	if got2 := attrsOf(got["x"]); !reflect.DeepEqual(got2, map[string]any{"runtime.overlap.unmatched": "unknown_process"}) {
		t.Errorf("attrsOf(got[\"x\"]): got %v, want %v", got2, map[string]any{"runtime.overlap.unmatched": "unknown_process"})
	}
	metadatatest.AssertEqualProcessorRuntimecorrelationSpansUnmatched(t, h.tel,
		unmatchedPoints(map[string]int64{"ambiguous": 1, "unknown_process": 1}), metricdatatest.IgnoreTimestamp())

	// a exits; a span naming it still finds its windows (learned), and a
	// new pid 1 in a new container is not confused with it.
	a.Kill()
	h.sendSpans(spanTraces(resource{host: "pod-a", pid: 1, container: a.ID}, spanAt{"a-after-exit", 0, 5 * ms}))
	if got := attrsOf(spansByName(h.traceSink.AllTraces())["a-after-exit"]); !reflect.DeepEqual(got, waitTotals) {
		t.Errorf("attrsOf(spansByName(h.traceSink.AllTraces())[\"a-after-exit\"]): got %v, want %v", got, waitTotals)
	}
}
