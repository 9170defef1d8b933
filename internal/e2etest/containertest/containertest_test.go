package containertest

import (
	"bufio"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
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
		pod := StartPod(t, PodSpec{QoS: Burstable, Hostname: "pod-a"})
		c := pod.Start(t, Spec{Args: []string{"sh", "-c", `echo "$$ $(hostname) $(cat /etc/hostname)"; cat /proc/self/cgroup | tail -1; grep -c " - cgroup2* " /proc/self/mountinfo | grep -qx "$(ls /sys/fs/cgroup | wc -l)"; grep " - cgroup2* " /proc/self/mountinfo | grep -v " / /"; set -- /proc/[0-9]*; echo $#; ls -A /tmp | wc -l; exec sleep 30`}})
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
		// pid 1, the pod's hostname both ways, cgroup namespace root, one
		// process in its pid namespace (the shell, counting by its own
		// glob: a pipeline's processes start in any order), an empty /tmp.
		if want := "1 pod-a pod-a\n0::/\n1\n0\n"; out != want {
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
		if err := pod.Sandbox.WaitExec(5 * time.Second); err != nil {
			t.Fatal(err)
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

// TestPodNetwork: a pod's containers share its network namespace, which is
// neither the host's nor another pod's; it has lo up and the pod's address
// on eth0, and reaches a listener on the host's end of its veth (the
// gateway) from its own address, as a DaemonSet agent sees a pod. A
// hostNetwork pod stays in the host's namespace. After cleanup no veth of
// the test is left, and no process holds the pods' namespaces.
func TestPodNetwork(t *testing.T) {
	if why := Supported(); why != "" {
		t.Skip(why)
	}
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("bash (its /dev/tcp) not found")
	}
	hostNS := netNSOf(t, os.Getpid())
	var links []string
	var namespaces []string
	t.Run("pods", func(t *testing.T) {
		a := StartPod(t, PodSpec{Hostname: "net-a"})
		b := StartPod(t, PodSpec{Hostname: "net-b"})
		hostnet := StartPod(t, PodSpec{Hostname: "net-host", HostNetwork: true})
		links = append(links, a.HostInterface, b.HostInterface)
		for _, p := range []*Pod{a, b} {
			if !podNetworks.Contains(p.IP) || p.HostIP.Next() != p.IP || !strings.HasPrefix(p.HostInterface, "oaiv") {
				t.Errorf("pod %s: IP %v, HostIP %v, veth %q: want x.x.x.4n+2 and +1 in %v, oaiv…", p.Hostname, p.IP, p.HostIP, p.HostInterface, podNetworks)
			}
		}
		if a.IP == b.IP || a.HostInterface == b.HostInterface {
			t.Errorf("two pods share %v / %s", a.IP, a.HostInterface)
		}
		if hostnet.NetNS != "" || hostnet.IP.IsValid() || hostnet.HostInterface != "" {
			t.Errorf("hostNetwork pod: NetNS %q, IP %v, veth %q; want none", hostnet.NetNS, hostnet.IP, hostnet.HostInterface)
		}

		ln, err := net.Listen("tcp4", "0.0.0.0:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		port := ln.Addr().(*net.TCPAddr).Port
		// Each container prints its network namespace, addresses, default
		// route, whether lo is up, its hostname's address (from the pod's
		// /etc/hosts) and that a name not there is not found (at once: the
		// run's deadline is 15 s), then sends its
		// hostname to the host's end of its pod's veth.
		script := `readlink /proc/self/ns/net; ip -o -4 addr show | awk '{print $2, $4}'; ip -4 route show default; ip -o link show lo | grep -c "state UNKNOWN\|,UP"; ` +
			`getent hosts "$(hostname)" | awk '{print $1}'; getent hosts no-such-name.example || echo unresolved; ` +
			`exec 3<>/dev/tcp/"$1"/"$2"; hostname >&3; read -r _ <&3`
		type sent struct {
			name string
			c    *Container
			from netip.Addr
		}
		var clients []sent
		for _, p := range []*Pod{a, b, a} {
			c := p.Start(t, Spec{Args: []string{"bash", "-c", script, "bash", p.HostIP.String(), fmt.Sprint(port)}})
			clients = append(clients, sent{p.Hostname, c, p.IP})
		}
		c := hostnet.Start(t, Spec{Args: []string{"bash", "-c", script, "bash", "127.0.0.1", fmt.Sprint(port)}})
		clients = append(clients, sent{hostnet.Hostname, c, netip.MustParseAddr("127.0.0.1")})

		got := map[string][]netip.Addr{}
		_ = ln.(*net.TCPListener).SetDeadline(time.Now().Add(15 * time.Second))
		for range clients {
			conn, err := ln.Accept()
			if err != nil {
				t.Fatalf("accept: %v (got %v)", err, got)
			}
			name, _ := bufio.NewReader(conn).ReadString('\n')
			from := conn.RemoteAddr().(*net.TCPAddr).AddrPort().Addr()
			got[strings.TrimSpace(name)] = append(got[strings.TrimSpace(name)], from)
			_, _ = conn.Write([]byte("ok\n"))
			_ = conn.Close()
		}
		for _, cl := range clients {
			if err := cl.c.Wait(10 * time.Second); err != nil {
				t.Errorf("%s client: %v", cl.name, err)
			}
			if fromAll := got[cl.name]; len(fromAll) == 0 || fromAll[0] != cl.from {
				t.Errorf("%s connected from %v, want %v", cl.name, fromAll, cl.from)
			}
		}
		nsA, nsB := netNSOf(t, a.Sandbox.PID), netNSOf(t, b.Sandbox.PID)
		inside := make([]string, len(clients))
		for i, cl := range clients {
			out, _ := os.ReadFile(cl.c.Stdout)
			ns, rest, _ := strings.Cut(string(out), "\n")
			inside[i] = ns
			if i == 3 {
				continue // the host's addresses: whatever the host has
			}
			p := []*Pod{a, b, a}[i]
			want := fmt.Sprintf("lo 127.0.0.1/8\neth0 %s/30\ndefault via %s dev eth0 \n1\n%s\nunresolved\n", p.IP, p.HostIP, p.IP)
			if rest != want {
				t.Errorf("pod %s inside: %q, want %q", p.Hostname, rest, want)
			}
		}
		if inside[0] != nsA || inside[2] != nsA || inside[1] != nsB {
			t.Errorf("containers in network namespaces %v; want pod a's %s, pod b's %s, pod a's", inside[:3], nsA, nsB)
		}
		if got := inside[3]; got != hostNS {
			t.Errorf("hostNetwork pod's container in %s, host in %s", got, hostNS)
		}
		if nsA == nsB || nsA == hostNS || nsB == hostNS {
			t.Errorf("network namespaces: pod a %s, pod b %s, host %s: want three", nsA, nsB, hostNS)
		}
		if got := netNSOf(t, hostnet.Sandbox.PID); got != hostNS {
			t.Errorf("hostNetwork pod in %s, host in %s", got, hostNS)
		}
		namespaces = append(namespaces, netNSOf(t, a.Sandbox.PID), netNSOf(t, b.Sandbox.PID))
	})
	out, err := exec.Command("ip", "-o", "link", "show").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range links {
		if l != "" && strings.Contains(string(out), " "+l+"@") {
			t.Errorf("veth %s left behind", l)
		}
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/ns/net")
	for _, p := range procs {
		ns, _ := os.Readlink(p)
		for _, gone := range namespaces {
			if ns == gone {
				t.Errorf("%s still in a pod's network namespace %s", p, ns)
			}
		}
	}
}

func netNSOf(t *testing.T, pid int) string {
	t.Helper()
	ns, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", pid))
	if err != nil {
		t.Fatal(err)
	}
	return ns
}

// TestPodSubnets: the n-th /30 of the range, and which host prefixes make
// one taken.
func TestPodSubnets(t *testing.T) {
	for n, want := range map[int]string{0: "10.250.0.0/30", 1: "10.250.0.4/30", 64: "10.250.1.0/30", 16383: "10.250.255.252/30"} {
		if got := blockPrefix(podNetworks, n); got.String() != want {
			t.Errorf("blockPrefix(%d) = %v, want %s", n, got, want)
		}
	}
	subnet := netip.MustParsePrefix("10.250.3.4/30")
	for _, tc := range []struct {
		used string
		want bool
	}{
		{"10.250.3.5/32", true},  // an address in it (another pod's host end)
		{"10.250.3.4/30", true},  // the same /30's route
		{"10.250.3.0/24", true},  // someone's /24 over it
		{"10.250.0.0/16", true},  // the whole test range taken
		{"10.250.3.8/30", false}, // the next /30
		{"10.250.3.0/30", false}, // the one before
		{"10.0.0.0/8", false},    // a cluster's broad route: the /30 is more specific
		{"0.0.0.0/0", false},     // the default route
		{"192.0.2.0/24", false},  // elsewhere
		{"10.251.0.0/16", false}, // beside the range
	} {
		if got := overlapsAny(subnet, []netip.Prefix{netip.MustParsePrefix(tc.used)}); got != tc.want {
			t.Errorf("overlapsAny(%v, %s) = %v, want %v", subnet, tc.used, got, tc.want)
		}
	}
}

// TestVolumesUnderTmp: a folder of the host under /tmp (a checkout, a
// cache) given as a volume is seen at its path through the container's
// private /tmp, while the rest of the host's /tmp is not.
func TestVolumesUnderTmp(t *testing.T) {
	vol, err := os.MkdirTemp("/tmp", "containertest-volume-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(vol)
	if err := os.WriteFile(filepath.Join(vol, "marker"), []byte("from the host"), 0o644); err != nil {
		t.Fatal(err)
	}
	hidden, err := os.MkdirTemp("/tmp", "containertest-hidden-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(hidden)
	pod := StartPod(t, PodSpec{QoS: BestEffort, Hostname: "pod-v"})
	c := pod.Start(t, Spec{Volumes: []string{vol}, Args: []string{"sh", "-c",
		`cat "$0/marker"; echo; test -e "$1" && echo visible || echo hidden; exec sleep 30`, vol, hidden}})
	var out string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		data, _ := os.ReadFile(c.Stdout)
		if out = string(data); strings.Count(out, "\n") == 2 {
			break
		}
	}
	if want := "from the host\nhidden\n"; out != want {
		t.Errorf("inside: %q, want %q", out, want)
	}
}

// TestCgroupParentAndWaitExec: a pod under a CgroupParent has its slices
// and its containers' scopes under it, as /proc shows them, and the parent
// goes with them; WaitExec returns once pid 1 runs the command (the
// sandbox's comm is then "pause"), and reports a command that never ran.
func TestCgroupParentAndWaitExec(t *testing.T) {
	if why := Supported(); why != "" {
		t.Skip(why)
	}
	root, _ := CgroupRoot()
	parent := "/containertest-" + NewID()[:8]
	t.Run("pod", func(t *testing.T) {
		pod := StartPod(t, PodSpec{HostNetwork: true, CgroupParent: parent + "/"})
		c := pod.Start(t, Spec{Args: []string{"sleep", "30"}})
		if want := parent + PodSlice(BestEffort, pod.UID); pod.Cgroup != want {
			t.Errorf("pod cgroup %s, want %s", pod.Cgroup, want)
		}
		for _, c := range []*Container{pod.Sandbox, c} {
			if err := c.WaitExec(5 * time.Second); err != nil {
				t.Fatal(err)
			}
			cg, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", c.PID))
			if want := pod.Cgroup + "/" + ScopeName(c.ID); c.Cgroup != want || !strings.Contains(string(cg), "0::"+want+"\n") {
				t.Errorf("container %s: Cgroup %s, /proc shows %q; want %s", c.ID[:12], c.Cgroup, cg, want)
			}
		}
		for pid, want := range map[int]string{pod.Sandbox.PID: "pause\n", c.PID: "sleep\n"} {
			if comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); string(comm) != want {
				t.Errorf("comm of %d %q after WaitExec, want %q", pid, comm, want)
			}
		}
		failed := pod.Start(t, Spec{Args: []string{"containertest-no-such-command"}})
		if err := failed.WaitExec(5 * time.Second); err == nil || !failed.Exited() {
			t.Errorf("WaitExec of a command not found: %v (exited %v), want an error once it exits", err, failed.Exited())
		}
	})
	if _, err := os.Stat(root + parent); !os.IsNotExist(err) {
		t.Errorf("%s left behind: %v", root+parent, err)
	}
}
