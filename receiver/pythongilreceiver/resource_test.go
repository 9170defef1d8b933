package pythongilreceiver

import (
	"reflect"
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/otelcol-ai/otelcol-ai/internal/procresource"
	"github.com/otelcol-ai/otelcol-ai/internal/window"
	"github.com/otelcol-ai/otelcol-ai/receiver/pythongilreceiver/internal/gil"
)

// TestResourceIdentity: a CPython that is pid 1 of its container carries
// both pids, its container and pod and the node's identity; the probes'
// own metrics name only the node.
func TestResourceIdentity(t *testing.T) {
	const (
		containerID = "3f1b2c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f809"
		podUID      = "1a2b3c4d-5e6f-4a1b-8c9d-0e1f2a3b4c5d"
	)
	node := procresource.Node{HostName: "gpu-node-3", K8sNodeName: "gpu-node-3"}
	st := newTestRunState(t, createDefaultConfig().(*Config))
	st.node = node
	tests := []struct {
		name string
		p    *process
		want map[string]any
	}{
		{
			name: "container pid 1",
			p: &process{pid: 4242, version: "3.12", res: procresource.Resource{
				PID: 4242, VPID: 1, StartTicks: 9, ExecutableName: "python3.12",
				Container: procresource.Container{ID: containerID, Runtime: procresource.RuntimeContainerd, PodUID: podUID},
			}},
			want: map[string]any{
				window.ResourcePID: int64(4242), window.ResourceVPID: int64(1),
				window.ResourceContainerID: containerID, window.ResourceK8sPodUID: podUID,
				window.ResourceHostName: "gpu-node-3", window.ResourceNodeName: "gpu-node-3",
				window.ResourceRuntimeName: window.RuntimeCPython, window.ResourceRuntimeVersion: "3.12",
				"process.executable.name": "python3.12",
			},
		},
		{
			name: "a process that could not be inspected: its pid and the node",
			p:    &process{pid: 77, res: procresource.Resource{PID: 77}},
			want: map[string]any{
				window.ResourcePID:      int64(77),
				window.ResourceHostName: "gpu-node-3", window.ResourceNodeName: "gpu-node-3",
				window.ResourceRuntimeName: window.RuntimeCPython,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := pcommon.NewResource()
			st.putResource(res, tt.p)
			if got := res.Attributes().AsRaw(); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("res.Attributes().AsRaw(): got %v, want %v", got, tt.want)
			}
			if got := st.metricsResource(tt.p).Attributes().AsRaw(); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("metrics carry the same resource: got %v, want %v", got, tt.want)
			}
		})
	}

	md := pmetric.NewMetrics()
	st.probeMetrics(md, gil.Counters{}, pcommon.Timestamp(1))
	if got, want := md.ResourceMetrics().At(0).Resource().Attributes().AsRaw(), map[string]any{window.ResourceHostName: "gpu-node-3", window.ResourceNodeName: "gpu-node-3"}; !reflect.DeepEqual(got, want) {
		t.Errorf("md.ResourceMetrics().At(0).Resource().Attributes().AsRaw(): got %v, want %v", got, want)
	}
}
