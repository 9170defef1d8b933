package procresource

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"golang.org/x/sys/unix"

	"github.com/otelcol-ai/otelcol-ai/internal/window"
)

const kubeCgroup = "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + podUS + ".slice/cri-containerd-" + cid + ".scope\n"

func TestIdentityFromFakeTree(t *testing.T) {
	root := t.TempDir()
	writeFakeProc(t, root, fakeProcess{pid: 4242, comm: "java", start: 777, nspid: []int{4242, 1}, cgroup: kubeCgroup})
	writeFakeProc(t, root, fakeProcess{pid: 300, comm: "python3", start: 12, nspid: []int{300, 17, 5}, cgroup: "0::/user.slice\n"})
	writeFakeProc(t, root, fakeProcess{pid: 55, comm: "bash", start: 3, nspid: []int{55}})
	writeFakeProc(t, root, fakeProcess{pid: 66, comm: "old-kernel", start: 4, cgroup: kubeCgroup}) // no status file
	r := NewReader(root, 0)

	tests := []struct {
		name string
		pid  int
		want Identity
	}{
		{"container main process is vpid 1", 4242, Identity{PID: 4242, VPID: 1, StartTicks: 777, ContainerID: cid, PodUID: podUID}},
		{"nested pid namespaces: the innermost pid", 300, Identity{PID: 300, VPID: 5, StartTicks: 12}},
		{"host process: vpid is the pid", 55, Identity{PID: 55, VPID: 55, StartTicks: 3}},
		{"no status: vpid unknown, the rest known", 66, Identity{PID: 66, StartTicks: 4, ContainerID: cid, PodUID: podUID}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := r.Identity(tt.pid)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}

	t.Run("a process that is gone is ErrNoProcess", func(t *testing.T) {
		_, err := r.Identity(999)
		assert.ErrorIs(t, err, ErrNoProcess)
		assert.ErrorContains(t, err, "pid 999")
	})

	t.Run("Resource gives the same identity", func(t *testing.T) {
		res, err := r.Resolve(4242)
		require.NoError(t, err)
		id, err := r.Identity(4242)
		require.NoError(t, err)
		assert.Equal(t, id, res.Identity())
	})
}

// TestIdentityBadFiles: unreadable or malformed status and cgroup files
// leave the fields they give unknown; nothing fails but a missing process
// or an unusable stat.
func TestIdentityBadFiles(t *testing.T) {
	root := t.TempDir()
	r := NewReader(root, 0)
	dir := filepath.Join(root, "10")
	replace := func(t *testing.T, name string, mk func(path string) error) {
		t.Helper()
		require.NoError(t, os.RemoveAll(dir)) // a FIFO left by the last case would block the rewrite
		writeFakeProc(t, root, fakeProcess{pid: 10, comm: "java", start: 9, nspid: []int{10, 1}, cgroup: kubeCgroup})
		require.NoError(t, os.RemoveAll(filepath.Join(dir, name)))
		require.NoError(t, mk(filepath.Join(dir, name)))
	}
	fifo := func(p string) error { return unix.Mkfifo(p, 0o644) }
	mkdir := func(p string) error { return os.Mkdir(p, 0o755) }
	content := func(s string) func(string) error {
		return func(p string) error { return os.WriteFile(p, []byte(s), 0o644) }
	}
	symlink := func(p string) error { return os.Symlink("/etc/hostname", p) }
	full := Identity{PID: 10, VPID: 1, StartTicks: 9, ContainerID: cid, PodUID: podUID}
	noVPID := Identity{PID: 10, StartTicks: 9, ContainerID: cid, PodUID: podUID}
	noContainer := Identity{PID: 10, VPID: 1, StartTicks: 9}

	tests := []struct {
		name   string
		file   string
		mk     func(string) error
		want   Identity
		errMsg string // non-empty: Identity fails with this
	}{
		{"status is a FIFO", "status", fifo, noVPID, ""},
		{"status is a directory", "status", mkdir, noVPID, ""},
		{"status is a symlink", "status", symlink, noVPID, ""},
		{"status without NSpid", "status", content("Name:\tjava\nPid:\t10\n"), noVPID, ""},
		{"NSpid not a number", "status", content("NSpid:\t10\tx1\n"), noVPID, ""},
		{"NSpid empty", "status", content("NSpid:\n"), noVPID, ""},
		{"NSpid zero", "status", content("NSpid:\t10\t0\n"), noVPID, ""},
		{"NSpid first line, no newline", "status", content("NSpid:\t10\t3"), Identity{PID: 10, VPID: 3, StartTicks: 9, ContainerID: cid, PodUID: podUID}, ""},
		{"status past its cap", "status", content("NSpid:\t10\t1\n" + string(make([]byte, maxStatus))), noVPID, ""},
		{"cgroup is a FIFO", "cgroup", fifo, noContainer, ""},
		{"cgroup is unreadable garbage", "cgroup", content("\x00\x01\x02::::\n"), noContainer, ""},
		{"cgroup is missing", "cgroup", func(string) error { return nil }, noContainer, ""},
		{"stat is malformed", "stat", content("10 java S 1"), Identity{}, "stat: no command name"},
		{"stat is a FIFO", "stat", fifo, Identity{}, "not a regular file"},
		{"stat is missing: the process is gone", "stat", func(string) error { return nil }, Identity{}, "no such process"},
		{"nothing wrong", "comm", content("java\n"), full, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			replace(t, tt.file, tt.mk)
			got, err := r.Identity(10)
			if tt.errMsg != "" {
				require.Error(t, err)
				assert.ErrorContains(t, err, tt.errMsg)
				assert.ErrorContains(t, err, "pid 10")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestParseNSpid(t *testing.T) {
	tests := []struct {
		status string
		want   int
		ok     bool
	}{
		{"Name:\tx\nNSpid:\t4242\t1\n", 1, true},
		{"NSpid:\t7\n", 7, true},
		{"NSpid:\t100\t20\t3  \n", 3, true},
		{"NStgid:\t100\t20\nNSpid:\t100\t21\n", 21, true},
		{"XNSpid:\t5\n", 0, false},
		{"NSpid:\t\n", 0, false},
		{"NSpid:\t-1\n", 0, false},
		{"NSpid:\t99999999999999999999\n", 0, false},
		{"", 0, false},
	}
	for _, tt := range tests {
		got, ok := parseNSpid([]byte(tt.status))
		assert.Equal(t, tt.ok, ok, "%q", tt.status)
		assert.Equal(t, tt.want, got, "%q", tt.status)
	}
}

func TestLocalNode(t *testing.T) {
	hostname := func() (string, error) { return "agent-pod-x7k2p", nil }
	failing := func() (string, error) { return "", errors.New("uname failed") }

	assert.Equal(t, Node{HostName: "gpu-node-3", K8sNodeName: "gpu-node-3"}, nodeFrom("gpu-node-3", hostname),
		"in Kubernetes the node's name, never the agent pod's hostname")
	assert.Equal(t, Node{HostName: "agent-pod-x7k2p"}, nodeFrom("", hostname), "a bare host: its hostname, no k8s.node.name")
	assert.Equal(t, Node{}, nodeFrom("", failing))

	t.Run("from the environment", func(t *testing.T) {
		t.Setenv(EnvNodeName, "gpu-node-7")
		assert.Equal(t, Node{HostName: "gpu-node-7", K8sNodeName: "gpu-node-7"}, LocalNode())
		t.Setenv(EnvNodeName, "")
		h, err := os.Hostname()
		require.NoError(t, err)
		assert.Equal(t, Node{HostName: h}, LocalNode())
	})
}

func TestPutIdentity(t *testing.T) {
	tests := []struct {
		name string
		id   Identity
		node Node
		want map[string]any
	}{
		{
			name: "container process in Kubernetes",
			id:   Identity{PID: 4242, VPID: 1, StartTicks: 5, ContainerID: cid, PodUID: podUID},
			node: Node{HostName: "gpu-node-3", K8sNodeName: "gpu-node-3"},
			want: map[string]any{
				window.ResourcePID: int64(4242), window.ResourceVPID: int64(1),
				window.ResourceContainerID: cid, window.ResourceK8sPodUID: podUID,
				window.ResourceHostName: "gpu-node-3", window.ResourceNodeName: "gpu-node-3",
			},
		},
		{
			name: "bare host process",
			id:   Identity{PID: 77, VPID: 77},
			node: Node{HostName: "workstation"},
			want: map[string]any{window.ResourcePID: int64(77), window.ResourceVPID: int64(77), window.ResourceHostName: "workstation"},
		},
		{
			name: "vpid unknown is not written",
			id:   Identity{PID: 77},
			node: Node{HostName: "workstation"},
			want: map[string]any{window.ResourcePID: int64(77), window.ResourceHostName: "workstation"},
		},
		{
			name: "no process: only the node",
			node: Node{HostName: "gpu-node-3", K8sNodeName: "gpu-node-3"},
			want: map[string]any{window.ResourceHostName: "gpu-node-3", window.ResourceNodeName: "gpu-node-3"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := pcommon.NewMap()
			m.PutStr(window.ResourceRuntimeName, window.RuntimeJava)
			PutIdentity(m, tt.id, tt.node)
			want := map[string]any{window.ResourceRuntimeName: window.RuntimeJava}
			for k, v := range tt.want {
				want[k] = v
			}
			assert.Equal(t, want, m.AsRaw())
		})
	}
}
