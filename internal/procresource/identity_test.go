package procresource

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

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
			if err != nil {
				t.Fatalf("r.Identity: %v", err)
			}
			if got != tt.want {
				t.Errorf("r.Identity: got %v, want %v", got, tt.want)
			}
		})
	}

	t.Run("a process that is gone is ErrNoProcess", func(t *testing.T) {
		_, err := r.Identity(999)
		if !errors.Is(err, ErrNoProcess) {
			t.Errorf("r.Identity: got error %v, want %v", err, ErrNoProcess)
		}
		if err == nil || !strings.Contains(err.Error(), "pid 999") {
			t.Errorf("r.Identity: got error %v, want one containing %q", err, "pid 999")
		}
	})

	t.Run("Resource gives the same identity", func(t *testing.T) {
		res, err := r.Resolve(4242)
		if err != nil {
			t.Fatalf("r.Resolve: %v", err)
		}
		id, err := r.Identity(4242)
		if err != nil {
			t.Fatalf("r.Identity: %v", err)
		}
		if got := res.Identity(); got != id {
			t.Errorf("res.Identity(): got %v, want %v", got, id)
		}
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
		// a FIFO left by the last case would block the rewrite
		if err := os.RemoveAll(dir); err != nil {
			t.Fatalf("os.RemoveAll: %v", err)
		}
		writeFakeProc(t, root, fakeProcess{pid: 10, comm: "java", start: 9, nspid: []int{10, 1}, cgroup: kubeCgroup})
		if err := os.RemoveAll(filepath.Join(dir, name)); err != nil {
			t.Fatalf("os.RemoveAll: %v", err)
		}
		if err := mk(filepath.Join(dir, name)); err != nil {
			t.Fatalf("mk: %v", err)
		}
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
				if err == nil {
					t.Fatalf("r.Identity: got nil error, want an error")
				}
				if err == nil || !strings.Contains(err.Error(), tt.errMsg) {
					t.Errorf("err: got error %v, want one containing %q", err, tt.errMsg)
				}
				if err == nil || !strings.Contains(err.Error(), "pid 10") {
					t.Errorf("err: got error %v, want one containing %q", err, "pid 10")
				}
				return
			}
			if err != nil {
				t.Fatalf("r.Identity: %v", err)
			}
			if got != tt.want {
				t.Errorf("r.Identity: got %v, want %v", got, tt.want)
			}
		})
	}
}

// TestIdentityWithCgroup: the cgroup file comes with the identity read
// from it, or the reason it could not be read (the container and pod
// unknown then).
func TestIdentityWithCgroup(t *testing.T) {
	root := t.TempDir()
	r := NewReader(root, 0)
	dir := filepath.Join(root, "10")
	const staticPod = "0::/kubepods.slice/kubepods-pod0123456789abcdef0123456789abcdef.slice\n"
	content := func(s string) func(string) error {
		return func(p string) error { return os.WriteFile(p, []byte(s), 0o644) }
	}
	tests := []struct {
		name    string
		mk      func(path string) error
		want    Identity
		data    string
		readErr string // non-empty: the cgroup could not be read, for this
	}{
		{"a pod's container", content(kubeCgroup), Identity{PID: 10, VPID: 1, StartTicks: 9, ContainerID: cid, PodUID: podUID}, kubeCgroup, ""},
		{"a static pod, named by its config hash", content(staticPod), Identity{PID: 10, VPID: 1, StartTicks: 9}, staticPod, ""},
		{"a directory", func(p string) error { return os.Mkdir(p, 0o755) }, Identity{PID: 10, VPID: 1, StartTicks: 9}, "", "pid 10 cgroup"},
		{"missing", func(string) error { return nil }, Identity{PID: 10, VPID: 1, StartTicks: 9}, "", "pid 10 cgroup"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := os.RemoveAll(dir); err != nil {
				t.Fatal(err)
			}
			writeFakeProc(t, root, fakeProcess{pid: 10, comm: "java", start: 9, nspid: []int{10, 1}})
			if err := os.Remove(filepath.Join(dir, "cgroup")); err != nil {
				t.Fatal(err)
			}
			if err := tt.mk(filepath.Join(dir, "cgroup")); err != nil {
				t.Fatal(err)
			}
			id, cg, err := r.IdentityWithCgroup(10)
			if err != nil {
				t.Fatalf("IdentityWithCgroup: %v", err)
			}
			if id != tt.want {
				t.Errorf("identity %v, want %v", id, tt.want)
			}
			if plain, err := r.Identity(10); err != nil || plain != id {
				t.Errorf("Identity: %v, %v; want %v as IdentityWithCgroup", plain, err, id)
			}
			switch {
			case tt.readErr == "" && (cg.Err != nil || string(cg.Data) != tt.data):
				t.Errorf("cgroup %q, %v; want %q", cg.Data, cg.Err, tt.data)
			case tt.readErr != "" && (cg.Err == nil || !strings.Contains(cg.Err.Error(), tt.readErr) || cg.Data != nil):
				t.Errorf("cgroup %q, %v; want no data and an error naming %q", cg.Data, cg.Err, tt.readErr)
			}
		})
	}
	if _, _, err := r.IdentityWithCgroup(999); !errors.Is(err, ErrNoProcess) {
		t.Errorf("a process that is gone: %v, want ErrNoProcess", err)
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
		if ok != tt.ok {
			t.Errorf("%q: got %v, want %v", tt.status, ok, tt.ok)
		}
		if got != tt.want {
			t.Errorf("%q: got %v, want %v", tt.status, got, tt.want)
		}
	}
}

func TestLocalNode(t *testing.T) {
	hostname := func() (string, error) { return "agent-pod-x7k2p", nil }
	failing := func() (string, error) { return "", errors.New("uname failed") }

	if got := nodeFrom("gpu-node-3", hostname); got != (Node{HostName: "gpu-node-3", K8sNodeName: "gpu-node-3"}) {
		t.Errorf("in Kubernetes the node's name, never the agent pod's hostname: got %v, want %v", got, Node{HostName: "gpu-node-3", K8sNodeName: "gpu-node-3"})
	}
	if got := nodeFrom("", hostname); got != (Node{HostName: "agent-pod-x7k2p"}) {
		t.Errorf("a bare host: its hostname, no k8s.node.name: got %v, want %v", got, Node{HostName: "agent-pod-x7k2p"})
	}
	if got := nodeFrom("", failing); got != (Node{}) {
		t.Errorf("nodeFrom(\"\", failing): got %v, want %v", got, Node{})
	}

	t.Run("from the environment", func(t *testing.T) {
		t.Setenv(EnvNodeName, "gpu-node-7")
		if got := LocalNode(); got != (Node{HostName: "gpu-node-7", K8sNodeName: "gpu-node-7"}) {
			t.Errorf("LocalNode(): got %v, want %v", got, Node{HostName: "gpu-node-7", K8sNodeName: "gpu-node-7"})
		}
		t.Setenv(EnvNodeName, "")
		h, err := os.Hostname()
		if err != nil {
			t.Fatalf("os.Hostname: %v", err)
		}
		if got := LocalNode(); got != (Node{HostName: h}) {
			t.Errorf("LocalNode(): got %v, want %v", got, Node{HostName: h})
		}
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
			if got := m.AsRaw(); !reflect.DeepEqual(got, want) {
				t.Errorf("m.AsRaw(): got %v, want %v", got, want)
			}
		})
	}
}
