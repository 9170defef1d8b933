package procsocket

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// podNetwork is a pod and a node agent made for a test: two network
// namespaces ("srv", where this process listens, and "pod", where the
// clients run) joined by a veth pair on 10.250.0.0/30. The host's own
// network is not touched.
type podNetwork struct {
	srvListener net.Listener // on 10.250.0.1, port chosen by the kernel
	// podExec runs a command in the pod ("ip netns exec NAME").
	podExec []string
	podNS   uint64 // the pod's network namespace inode
}

// The pod's address, and the agent's.
var (
	podAddrtest = netip.MustParseAddr("10.250.0.2")
	srvAddrtest = netip.MustParseAddr("10.250.0.1")
)

// podNetworktest makes a podNetwork, deleted at cleanup, or skips.
func podNetworktest(t *testing.T) podNetwork {
	t.Helper()
	requireRoottest(t)
	ip, err := exec.LookPath("ip")
	if err != nil {
		t.Skip("iproute2 (ip) not installed: cannot make network namespaces")
	}
	iptest := func(args ...string) {
		t.Helper()
		if out, err := exec.Command(ip, args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	tag := fmt.Sprint(os.Getpid())
	srv, pod := "procsocket-srv-"+tag, "procsocket-pod-"+tag
	for _, ns := range []string{srv, pod} {
		if out, err := exec.Command(ip, "netns", "add", ns).CombinedOutput(); err != nil {
			t.Skipf("cannot make network namespace %s: %v: %s", ns, err, out)
		}
		t.Cleanup(func() { exec.Command(ip, "netns", "del", ns).Run() })
	}
	// Deleting the namespaces deletes the pair.
	vethSrv, vethPod := "pss"+tag, "psp"+tag
	iptest("-n", srv, "link", "add", vethSrv, "type", "veth", "peer", "name", vethPod, "netns", pod)
	iptest("-n", srv, "addr", "add", "10.250.0.1/30", "dev", vethSrv)
	iptest("-n", srv, "link", "set", vethSrv, "up")
	iptest("-n", pod, "addr", "add", "10.250.0.2/30", "dev", vethPod)
	iptest("-n", pod, "link", "set", vethPod, "up")
	// For connections from the pod to its own address.
	iptest("-n", pod, "link", "set", "lo", "up")

	ln := listenInNetNStest(t, "/run/netns/"+srv, "tcp4", srvAddrtest.String()+":0")
	var st unix.Stat_t
	if err := unix.Stat("/run/netns/"+pod, &st); err != nil {
		t.Fatal(err)
	}
	if st.Ino == netNStest(t, os.Getpid()) {
		t.Fatal("pod namespace is this process's")
	}
	return podNetwork{srvListener: ln, podExec: []string{ip, "netns", "exec", pod}, podNS: st.Ino}
}

// TestLookupPodNamespace plays a pod talking to a node agent (podNetwork).
func TestLookupPodNamespace(t *testing.T) {
	pn := podNetworktest(t)
	ln, podNS := pn.srvListener, pn.podNS
	addr := ln.Addr().String()
	// A process of the pod with a connection of its own, started first so
	// that it is scanned first.
	bystander := startHelpertest(t, modeConnect, addr, pn.podExec...)
	bystanderPeer := acceptPeertest(t, ln)
	client := startHelpertest(t, modeConnect, addr, pn.podExec...)
	peer := acceptPeertest(t, ln)

	if got := netNStest(t, client.pid); got != podNS {
		t.Fatalf("client in netns %d, want the pod's %d", got, podNS)
	}

	r := NewResolver("")
	for _, tt := range []struct {
		peer netip.AddrPort
		h    *helperProcess
	}{{peer, client}, {bystanderPeer, bystander}} {
		got, err := r.Lookup(tt.peer)
		if err != nil {
			t.Fatalf("Lookup(%v): %v", tt.peer, err)
		}
		want := Owner{PID: tt.h.pid, VPID: vpidtest(t, tt.h.pid), StartTicks: startTickstest(t, tt.h.pid), NetNS: podNS}
		if got != want {
			t.Fatalf("Lookup(%v) = %+v, want %+v", tt.peer, got, want)
		}
	}
}

// listenInNetNStest listens in the network namespace at nsPath from a
// thread that enters it and comes back: the socket stays in that
// namespace, this process in its own.
func listenInNetNStest(t *testing.T, nsPath, network, addr string) net.Listener {
	t.Helper()
	type result struct {
		ln  net.Listener
		err error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		// Unlocked only once back home: a thread left elsewhere ends with
		// this goroutine.
		ln, home, err := listenOnThreadtest(nsPath, network, addr)
		if home {
			runtime.UnlockOSThread()
		}
		done <- result{ln, err}
	}()
	res := <-done
	if res.err != nil {
		t.Fatal(res.err)
	}
	t.Cleanup(func() { res.ln.Close() })
	return res.ln
}

// listenOnThreadtest listens from the calling thread, locked, in the network
// namespace at nsPath; home says the thread is back in its own.
func listenOnThreadtest(nsPath, network, addr string) (ln net.Listener, home bool, err error) {
	self, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, true, err
	}
	defer unix.Close(self)
	target, err := unix.Open(nsPath, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, true, err
	}
	defer unix.Close(target)
	if err := unix.Setns(target, unix.CLONE_NEWNET); err != nil {
		return nil, true, fmt.Errorf("entering %s: %w", nsPath, err)
	}
	ln, err = net.Listen(network, addr)
	if serr := unix.Setns(self, unix.CLONE_NEWNET); serr != nil {
		if ln != nil {
			ln.Close()
		}
		return nil, false, fmt.Errorf("returning from %s: %w", nsPath, serr)
	}
	return ln, true, err
}
