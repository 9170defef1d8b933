package procresource

import (
	"strings"
	"testing"
)

const (
	cid    = "3f1b2c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f809"
	podUID = "1a2b3c4d-5e6f-4a1b-8c9d-0e1f2a3b4c5d"
	podUS  = "1a2b3c4d_5e6f_4a1b_8c9d_0e1f2a3b4c5d"
	cid2   = "aa00bb11cc22dd33ee44ff5566778899aa00bb11cc22dd33ee44ff5566778899"

	// A victim's pod and container, which an attacker's paths copy below
	// its own container.
	victimUID = "9f8e7d6c-5b4a-4392-8170-6f5e4d3c2b1a"
	victimUS  = "9f8e7d6c_5b4a_4392_8170_6f5e4d3c2b1a"
	victimID  = "5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e"
)

// The victim's slice and scope as kubelet and containerd name them under
// the systemd driver, and as the cgroupfs driver does.
const (
	victimSystemd  = "kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" + victimUS + ".slice/cri-containerd-" + victimID + ".scope"
	victimCgroupfs = "kubepods/besteffort/pod" + victimUID + "/" + victimID
)

func TestParseCgroup(t *testing.T) {
	tests := []struct {
		name string
		data string
		want Container
	}{
		{
			name: "host process on cgroup v2",
			data: "0::/user.slice/user-1000.slice/session-3.scope\n",
			want: Container{},
		},
		{
			name: "systemd init scope",
			data: "0::/init.scope\n",
			want: Container{},
		},
		{
			name: "docker on cgroup v1 (cgroupfs driver)",
			data: "12:memory:/docker/" + cid + "\n11:cpu,cpuacct:/docker/" + cid + "\n1:name=systemd:/docker/" + cid + "\n",
			want: Container{ID: cid, Runtime: RuntimeDocker},
		},
		{
			name: "docker on cgroup v2 (systemd driver)",
			data: "0::/system.slice/docker-" + cid + ".scope\n",
			want: Container{ID: cid, Runtime: RuntimeDocker},
		},
		{
			name: "kubernetes containerd, cgroup v2, systemd driver",
			data: "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + podUS + ".slice/cri-containerd-" + cid + ".scope\n",
			want: Container{ID: cid, Runtime: RuntimeContainerd, PodUID: podUID},
		},
		{
			name: "kubernetes guaranteed pod, systemd driver (no qos slice)",
			data: "0::/kubepods.slice/kubepods-pod" + podUS + ".slice/cri-containerd-" + cid + ".scope\n",
			want: Container{ID: cid, Runtime: RuntimeContainerd, PodUID: podUID},
		},
		{
			name: "kubernetes cri-o, cgroup v2",
			data: "0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" + podUS + ".slice/crio-" + cid + ".scope\n",
			want: Container{ID: cid, Runtime: RuntimeCRIO, PodUID: podUID},
		},
		{
			name: "cri-o conmon is not the container",
			data: "0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" + podUS + ".slice/crio-conmon-" + cid + ".scope\n",
			want: Container{PodUID: podUID},
		},
		{
			name: "kubernetes cgroup v1, cgroupfs driver",
			data: "12:pids:/kubepods/burstable/pod" + podUID + "/" + cid + "\n" +
				"11:memory:/kubepods/burstable/pod" + podUID + "/" + cid + "\n",
			want: Container{ID: cid, PodUID: podUID},
		},
		{
			name: "kubernetes cgroup v1 hybrid with an empty v2 line first",
			data: "0::/\n" +
				"10:devices:/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + podUS + ".slice/cri-containerd-" + cid + ".scope\n",
			want: Container{ID: cid, Runtime: RuntimeContainerd, PodUID: podUID},
		},
		{
			name: "podman rootless",
			data: "0::/user.slice/user-1000.slice/user@1000.service/user.slice/libpod-" + cid + ".scope/container\n",
			want: Container{ID: cid, Runtime: RuntimePodman},
		},
		{
			name: "containerd without kubernetes (ctr, k8s.io namespace)",
			data: "0::/k8s.io/" + cid + "\n",
			want: Container{ID: cid, Runtime: RuntimeContainerd},
		},
		{
			name: "pod uid present but no container (pause sandbox parent)",
			data: "0::/kubepods/besteffort/pod" + podUID + "\n",
			want: Container{PodUID: podUID},
		},
		{
			name: "garbage is ignored",
			data: "not a cgroup line\n::\n0::/docker/not-an-id\n0::/kubepods/podnot-a-uid/abc\n",
			want: Container{},
		},
		{
			name: "upper-case hex is not an id",
			data: "0::/docker/" + "3F1B2C4D5E6F708192A3B4C5D6E7F8091A2B3C4D5E6F708192A3B4C5D6E7F809" + "\n",
			want: Container{},
		},
		{
			name: "empty file",
			data: "",
			want: Container{},
		},
		// Every layout of CONTAINERS.md, as the node's cgroup namespace
		// shows it.
		{
			name: "v2 systemd besteffort cri-containerd",
			data: "0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" + podUS + ".slice/cri-containerd-" + cid + ".scope\n",
			want: Container{ID: cid, Runtime: RuntimeContainerd, PodUID: podUID},
		},
		{
			name: "v2 systemd burstable crio",
			data: "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + podUS + ".slice/crio-" + cid + ".scope\n",
			want: Container{ID: cid, Runtime: RuntimeCRIO, PodUID: podUID},
		},
		{
			name: "v2 systemd burstable docker (cri-dockerd)",
			data: "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + podUS + ".slice/docker-" + cid + ".scope\n",
			want: Container{ID: cid, Runtime: RuntimeDocker, PodUID: podUID},
		},
		{
			name: "v2 systemd guaranteed crio",
			data: "0::/kubepods.slice/kubepods-pod" + podUS + ".slice/crio-" + cid + ".scope\n",
			want: Container{ID: cid, Runtime: RuntimeCRIO, PodUID: podUID},
		},
		{
			name: "v2 systemd guaranteed docker",
			data: "0::/kubepods.slice/kubepods-pod" + podUS + ".slice/docker-" + cid + ".scope\n",
			want: Container{ID: cid, Runtime: RuntimeDocker, PodUID: podUID},
		},
		{
			name: "v2 cgroupfs besteffort",
			data: "0::/kubepods/besteffort/pod" + podUID + "/" + cid + "\n",
			want: Container{ID: cid, PodUID: podUID},
		},
		{
			name: "v2 cgroupfs guaranteed",
			data: "0::/kubepods/pod" + podUID + "/" + cid + "\n",
			want: Container{ID: cid, PodUID: podUID},
		},
		{
			name: "cgroupfs crio names its cgroup crio-<id>",
			data: "0::/kubepods/burstable/pod" + podUID + "/crio-" + cid + "\n",
			want: Container{ID: cid, Runtime: RuntimeCRIO, PodUID: podUID},
		},
		{
			name: "cgroupfs crio conmon is not the container",
			data: "0::/kubepods/burstable/pod" + podUID + "/crio-conmon-" + cid + "\n",
			want: Container{PodUID: podUID},
		},
		{
			name: "v1 systemd driver, one line per hierarchy",
			data: "12:pids:/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" + podUS + ".slice/cri-containerd-" + cid + ".scope\n" +
				"11:cpu,cpuacct:/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" + podUS + ".slice/cri-containerd-" + cid + ".scope\n" +
				"1:name=systemd:/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" + podUS + ".slice/cri-containerd-" + cid + ".scope\n",
			want: Container{ID: cid, Runtime: RuntimeContainerd, PodUID: podUID},
		},
		{
			name: "v1 cgroupfs guaranteed",
			data: "4:memory:/kubepods/pod" + podUID + "/" + cid + "\n3:cpuset:/kubepods/pod" + podUID + "/" + cid + "\n",
			want: Container{ID: cid, PodUID: podUID},
		},
		{
			name: "plain docker cgroupfs on v2",
			data: "0::/docker/" + cid + "\n",
			want: Container{ID: cid, Runtime: RuntimeDocker},
		},
		{
			name: "kubelet under a cgroup root (kind)",
			data: "0::/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-besteffort.slice/kubelet-kubepods-besteffort-pod" + podUS + ".slice/cri-containerd-" + cid + ".scope\n",
			want: Container{ID: cid, Runtime: RuntimeContainerd, PodUID: podUID},
		},
		{
			name: "a process in its own cgroup namespace sees only the root",
			data: "0::/\n",
			want: Container{},
		},
		{
			name: "read from inside another cgroup namespace: the path climbs out with ..",
			data: "0::/../../kubepods-besteffort-pod" + podUS + ".slice/cri-containerd-" + cid + ".scope\n",
			want: Container{ID: cid, Runtime: RuntimeContainerd, PodUID: podUID},
		},
		{
			name: "sandbox scope is a container of the pod like any other",
			data: "0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" + podUS + ".slice/cri-containerd-" + cid2 + ".scope\n",
			want: Container{ID: cid2, Runtime: RuntimeContainerd, PodUID: podUID},
		},
		{
			name: "malformed lines are skipped, the good one is read",
			data: "garbage\n7\n:\n0:\n\x00\xff\n0::/kubepods/besteffort/pod" + podUID + "/" + cid + "\n",
			want: Container{ID: cid, PodUID: podUID},
		},
		{
			name: "63 hex digits are not an id",
			data: "0::/kubepods/besteffort/pod" + podUID + "/" + cid[:63] + "\n",
			want: Container{PodUID: podUID},
		},
		{
			name: "65 hex digits are not an id",
			data: "0::/system.slice/docker-" + cid + "0.scope\n",
			want: Container{},
		},
		{
			name: "a pod uid of the wrong shape is not a pod",
			data: "0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" + podUS[:35] + ".slice/cri-containerd-" + cid + ".scope\n",
			want: Container{ID: cid, Runtime: RuntimeContainerd},
		},
		// A tenant that can write below its container's cgroup (a delegated
		// subtree) copies another pod's slice and scope there and moves its
		// process in: identity stays with the outer, kubelet-made levels.
		{
			name: "nested attack, v2 systemd containerd: the outer pod and container",
			data: "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + podUS + ".slice/cri-containerd-" + cid + ".scope/" + victimSystemd + "\n",
			want: Container{ID: cid, Runtime: RuntimeContainerd, PodUID: podUID},
		},
		{
			name: "nested attack, v2 systemd guaranteed crio",
			data: "0::/kubepods.slice/kubepods-pod" + podUS + ".slice/crio-" + cid + ".scope/kubepods.slice/kubepods-pod" + victimUS + ".slice/crio-" + victimID + ".scope\n",
			want: Container{ID: cid, Runtime: RuntimeCRIO, PodUID: podUID},
		},
		{
			name: "nested attack, v2 systemd docker (cri-dockerd)",
			data: "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + podUS + ".slice/docker-" + cid + ".scope/kubepods-burstable-pod" + victimUS + ".slice/docker-" + victimID + ".scope\n",
			want: Container{ID: cid, Runtime: RuntimeDocker, PodUID: podUID},
		},
		{
			name: "nested attack, victim's pod slice alone, no kubepods parents",
			data: "0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" + podUS + ".slice/cri-containerd-" + cid + ".scope/kubepods-pod" + victimUS + ".slice\n",
			want: Container{ID: cid, Runtime: RuntimeContainerd, PodUID: podUID},
		},
		{
			name: "nested attack, v1 cgroupfs, every hierarchy",
			data: "12:pids:/kubepods/burstable/pod" + podUID + "/" + cid + "/" + victimCgroupfs + "\n" +
				"11:memory:/kubepods/burstable/pod" + podUID + "/" + cid + "/" + victimCgroupfs + "\n",
			want: Container{ID: cid, PodUID: podUID},
		},
		{
			name: "nested attack, v2 cgroupfs crio",
			data: "0::/kubepods/burstable/pod" + podUID + "/crio-" + cid + "/kubepods/pod" + victimUID + "/crio-" + victimID + "\n",
			want: Container{ID: cid, Runtime: RuntimeCRIO, PodUID: podUID},
		},
		{
			name: "nested attack, v1 systemd: only the writable hierarchy is nested",
			data: "0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" + podUS + ".slice/cri-containerd-" + cid + ".scope/" + victimSystemd + "\n" +
				"10:devices:/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" + podUS + ".slice/cri-containerd-" + cid + ".scope\n",
			want: Container{ID: cid, Runtime: RuntimeContainerd, PodUID: podUID},
		},
		{
			name: "nested attack, many levels deep",
			data: "0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" + podUS + ".slice/cri-containerd-" + cid + ".scope/a/b/c/" + victimSystemd + "/" + victimCgroupfs + "\n",
			want: Container{ID: cid, Runtime: RuntimeContainerd, PodUID: podUID},
		},
		{
			name: "nested attack, seen from another cgroup namespace (..)",
			data: "0::/../../kubepods-besteffort-pod" + podUS + ".slice/cri-containerd-" + cid + ".scope/" + victimSystemd + "\n",
			want: Container{ID: cid, Runtime: RuntimeContainerd, PodUID: podUID},
		},
		{
			name: "nested attack from a container outside kubernetes: that container, no pod",
			data: "0::/system.slice/docker-" + cid + ".scope/" + victimSystemd + "\n",
			want: Container{ID: cid, Runtime: RuntimeDocker},
		},
		{
			name: "nested attack from a cgroupfs docker container",
			data: "0::/docker/" + cid + "/" + victimCgroupfs + "\n",
			want: Container{ID: cid, Runtime: RuntimeDocker},
		},
		{
			name: "a pod slice nested in a pod slice: the outer pod, no container",
			data: "0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" + podUS + ".slice/kubepods-pod" + victimUS + ".slice/cri-containerd-" + victimID + ".scope\n",
			want: Container{PodUID: podUID},
		},
		{
			name: "a container's own sub-cgroup is the container",
			data: "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + podUS + ".slice/crio-" + cid + ".scope/container\n",
			want: Container{ID: cid, Runtime: RuntimeCRIO, PodUID: podUID},
		},
		{
			name: "a container below conmon is not the pod's container",
			data: "0::/kubepods/burstable/pod" + podUID + "/crio-conmon-" + cid + "/crio-" + victimID + "\n",
			want: Container{PodUID: podUID},
		},
		{
			name: "kind's pods seen from the host are the node's container",
			data: "0::/system.slice/docker-" + cid + ".scope/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-besteffort.slice/kubelet-kubepods-besteffort-pod" + victimUS + ".slice/cri-containerd-" + victimID + ".scope\n",
			want: Container{ID: cid, Runtime: RuntimeDocker},
		},
		{
			name: "docker in docker seen from the host is the outer container",
			data: "0::/docker/" + cid + "/docker/" + victimID + "\n",
			want: Container{ID: cid, Runtime: RuntimeDocker},
		},
		{
			name: "line without a trailing newline",
			data: "0::/kubepods/pod" + podUID + "/" + cid,
			want: Container{ID: cid, PodUID: podUID},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ParseCgroup([]byte(tt.data)); got != tt.want {
				t.Errorf("ParseCgroup([]byte(tt.data)): got %v, want %v", got, tt.want)
			}
		})
	}
}

// FuzzParseCgroup: any input parses without panic to a well-formed
// Container, and whatever a process's own subtree adds below a path that
// names a container changes nothing.
func FuzzParseCgroup(f *testing.F) {
	outer := "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + podUS + ".slice/cri-containerd-" + cid + ".scope"
	for _, seed := range []struct{ path, nested string }{
		{outer, ""},
		{outer, victimSystemd},
		{outer, "init"},
		{"/kubepods/burstable/pod" + podUID + "/" + cid, victimCgroupfs},
		{"/kubepods/pod" + podUID + "/crio-" + cid, "kubepods/pod" + victimUID + "/crio-" + victimID},
		{"/system.slice/docker-" + cid + ".scope", victimSystemd},
		{"/docker/" + cid, "docker/" + victimID},
		{"/../../kubepods-besteffort-pod" + podUS + ".slice/cri-containerd-" + cid + ".scope", victimSystemd},
		{"/user.slice/user-1000.slice/user@1000.service/user.slice/libpod-" + cid + ".scope", "container"},
		{"/kubepods/besteffort/pod" + podUID, ""},
		{"/", "::/x"},
		{"", ""},
	} {
		f.Add(seed.path, seed.nested)
	}
	f.Fuzz(func(t *testing.T, path, nested string) {
		got := ParseCgroup([]byte("0::" + path + "\n"))
		if got.ID != "" && !isContainerID(got.ID) {
			t.Fatalf("ParseCgroup(%q): id %q is not 64 hex digits", path, got.ID)
		}
		if got.PodUID != "" && !isUUID(got.PodUID) {
			t.Fatalf("ParseCgroup(%q): pod %q is not a UUID", path, got.PodUID)
		}
		if got.ID == "" || strings.ContainsAny(path+nested, "\n") {
			return
		}
		deeper := ParseCgroup([]byte("0::" + strings.TrimRight(path, "/") + "/" + strings.TrimLeft(nested, "/") + "\n"))
		if deeper != got {
			t.Fatalf("nesting %q below %q: got %v, want %v (the outer container's)", nested, path, deeper, got)
		}
	})
}

// BenchmarkParseCgroup is the cost per process of reading its container
// and pod from its cgroup file.
func BenchmarkParseCgroup(b *testing.B) {
	for _, bc := range []struct{ name, data string }{
		{"v2-systemd", "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + podUS + ".slice/cri-containerd-" + cid + ".scope\n"},
		{"v1-cgroupfs", "12:pids:/kubepods/burstable/pod" + podUID + "/" + cid + "\n11:memory:/kubepods/burstable/pod" + podUID + "/" + cid + "\n1:name=systemd:/kubepods/burstable/pod" + podUID + "/" + cid + "\n"},
		{"host", "0::/user.slice/user-1000.slice/session-3.scope\n"},
	} {
		data := []byte(bc.data)
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				ParseCgroup(data)
			}
		})
	}
}
