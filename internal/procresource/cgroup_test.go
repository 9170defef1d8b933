package procresource

import (
	"testing"
)

const (
	cid    = "3f1b2c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f809"
	podUID = "1a2b3c4d-5e6f-4a1b-8c9d-0e1f2a3b4c5d"
	podUS  = "1a2b3c4d_5e6f_4a1b_8c9d_0e1f2a3b4c5d"
	cid2   = "aa00bb11cc22dd33ee44ff5566778899aa00bb11cc22dd33ee44ff5566778899"
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
