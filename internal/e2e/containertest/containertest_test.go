package containertest

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

func TestCgroup2Mount(t *testing.T) {
	for _, tc := range []struct {
		name, mountinfo, want string
	}{
		{"hybrid", "30 24 0:26 / /sys/fs/cgroup ro,nosuid - tmpfs tmpfs ro,mode=755\n" +
			"31 30 0:27 / /sys/fs/cgroup/unified rw,nosuid,nodev,noexec,relatime shared:10 - cgroup2 cgroup2 rw\n" +
			"32 30 0:28 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n", "/sys/fs/cgroup/unified"},
		{"unified", "35 24 0:30 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 rw,nsdelegate\n", "/sys/fs/cgroup"},
		{"escaped", "35 24 0:30 / /mnt/cg\\040two rw - cgroup2 none rw\n", "/mnt/cg two"},
		// A bind mount of a sub-cgroup is no root to build kubepods under.
		{"bind of a subtree first", "40 24 0:30 /kubepods.slice /mnt/k rw - cgroup2 cgroup2 rw\n" +
			"35 24 0:30 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n", "/sys/fs/cgroup"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := cgroup2Mount([]byte(tc.mountinfo))
			if err != nil || got != tc.want {
				t.Fatalf("cgroup2Mount = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
	if _, err := cgroup2Mount([]byte("32 30 0:28 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n")); err == nil {
		t.Fatal("no cgroup2 line: want an error")
	}
}

func TestPodSliceNames(t *testing.T) {
	uid := "1f2e3d4c-5b6a-4789-8abc-0123456789ab"
	for qos, want := range map[string]string{
		BestEffort: "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod1f2e3d4c_5b6a_4789_8abc_0123456789ab.slice",
		Burstable:  "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1f2e3d4c_5b6a_4789_8abc_0123456789ab.slice",
		Guaranteed: "/kubepods.slice/kubepods-pod1f2e3d4c_5b6a_4789_8abc_0123456789ab.slice",
	} {
		if got := PodSlice(qos, uid); got != want {
			t.Errorf("PodSlice(%s) = %s, want %s", qos, got, want)
		}
	}
	if id := NewID(); len(id) != 64 || strings.Trim(id, "0123456789abcdef") != "" {
		t.Errorf("NewID() = %q, want 64 hex digits", id)
	}
	if uid := NewPodUID(); len(uid) != 36 || uid[14] != '4' {
		t.Errorf("NewPodUID() = %q, want a version 4 UUID", uid)
	}
}

// TestPodContainers: a container's pid 1 is the command, seen from the host
// in its scope with NSpid ending in 1, with its pod's hostname, its own /proc
// and /tmp, and a cgroup namespace; everything is gone after cleanup.
func TestPodContainers(t *testing.T) {
	var dirs []string
	t.Run("pod", func(t *testing.T) {
		pod := StartPod(t, "", Burstable, "pod-a")
		c := pod.Start(t, Spec{Args: []string{"sh", "-c", `echo "$$ $(hostname) $(cat /etc/hostname)"; cat /proc/self/cgroup | tail -1; grep -c " - cgroup2* " /proc/self/mountinfo | grep -qx "$(ls /sys/fs/cgroup | wc -l)"; grep " - cgroup2* " /proc/self/mountinfo | grep -v " / /"; ls /proc | grep -c '^[0-9]'; ls -A /tmp | wc -l; exec sleep 30`}})
		root, _ := CgroupRoot()
		dirs = append(dirs, root+c.Cgroup, root+pod.Cgroup)
		var out string
		deadline := time.Now().Add(10 * time.Second)
		for ; time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			data, _ := os.ReadFile(c.Stdout)
			if out = string(data); strings.Count(out, "\n") == 4 {
				break
			}
		}
		// pid 1, the pod's hostname both ways, cgroup namespace root, three
		// processes (sh, ls and grep), an empty /tmp.
		if want := "1 pod-a pod-a\n0::/\n3\n0\n"; out != want {
			t.Errorf("inside: %q, want %q", out, want)
		}
		cg, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", c.PID))
		if err != nil || !strings.Contains(string(cg), "0::"+c.Cgroup+"\n") {
			t.Errorf("host's view of /proc/%d/cgroup: %q (%v), want 0::%s", c.PID, cg, err, c.Cgroup)
		}
		status, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", c.PID))
		if !strings.Contains(string(status), fmt.Sprintf("NSpid:\t%d\t1\n", c.PID)) {
			t.Errorf("status of %d: no NSpid %d 1:\n%s", c.PID, c.PID, status)
		}
		comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pod.Sandbox.PID))
		if string(comm) != "pause\n" {
			t.Errorf("sandbox comm %q, want pause", comm)
		}
		if err := c.Stop(time.Second); err == nil {
			t.Errorf("sleep as pid 1 ignores SIGTERM: Stop should report it")
		}
	})
	for _, d := range dirs {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("%s left behind: %v", d, err)
		}
	}
}
