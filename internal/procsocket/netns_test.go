package procsocket

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

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
	podAddr netip.Addr
}

// The pod's address, and the agent's.
var (
	podAddrtest = netip.MustParseAddr("10.250.0.2")
	srvAddrtest = netip.MustParseAddr("10.250.0.1")
)

// podNetworktest makes a podNetwork, deleted at cleanup, or skips.
func podNetworktest(t *testing.T) podNetwork {
	t.Helper()
	return podNetworkstest(t, 1)[0]
}

// podNetworkstest makes n pods and one node agent: pod i is joined to the
// agent's namespace by a veth pair on 10.250.0.4i/30 (the pod at .4i+2) and
// routes through it, so that every pod reaches the agent's listener on
// 10.250.0.1. They share srvListener. All is deleted at cleanup.
func podNetworkstest(t *testing.T, n int) []podNetwork {
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
	addns := func(ns string) {
		t.Helper()
		if out, err := exec.Command(ip, "netns", "add", ns).CombinedOutput(); err != nil {
			t.Skipf("cannot make network namespace %s: %v: %s", ns, err, out)
		}
		t.Cleanup(func() { exec.Command(ip, "netns", "del", ns).Run() })
	}
	tag := fmt.Sprint(os.Getpid())
	srv := "procsocket-srv-" + tag
	addns(srv)
	pods := make([]podNetwork, n)
	for i := range pods {
		pod := "procsocket-pod-" + tag
		if i > 0 {
			pod += "-" + fmt.Sprint(i)
		}
		addns(pod)
		srvAddr, podAddr := fmt.Sprintf("10.250.0.%d", 4*i+1), fmt.Sprintf("10.250.0.%d", 4*i+2)
		// Deleting the namespaces deletes the pair.
		vethSrv, vethPod := fmt.Sprintf("pss%s.%d", tag, i), fmt.Sprintf("psp%s.%d", tag, i)
		iptest("-n", srv, "link", "add", vethSrv, "type", "veth", "peer", "name", vethPod, "netns", pod)
		iptest("-n", srv, "addr", "add", srvAddr+"/30", "dev", vethSrv)
		iptest("-n", srv, "link", "set", vethSrv, "up")
		iptest("-n", pod, "addr", "add", podAddr+"/30", "dev", vethPod)
		iptest("-n", pod, "link", "set", vethPod, "up")
		iptest("-n", pod, "route", "add", "default", "via", srvAddr)
		// For connections from the pod to its own address.
		iptest("-n", pod, "link", "set", "lo", "up")
		var st unix.Stat_t
		if err := unix.Stat("/run/netns/"+pod, &st); err != nil {
			t.Fatal(err)
		}
		if st.Ino == netNStest(t, os.Getpid()) {
			t.Fatal("pod namespace is this process's")
		}
		pods[i] = podNetwork{podExec: []string{ip, "netns", "exec", pod}, podNS: st.Ino,
			podAddr: netip.MustParseAddr(podAddr)}
	}
	ln := listenInNetNStest(t, "/run/netns/"+srv, "tcp4", srvAddrtest.String()+":0")
	for i := range pods {
		pods[i].srvListener = ln
	}
	return pods
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
		want := ownerOftest(t, tt.h.pid, vpidtest(t, tt.h.pid), podNS)
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

// TestStormFromOnePodLeavesOthersTheirScans plays a pod that opens
// connections from new ports faster than the scan rate (each a lookup
// that misses the cache): it spends its own namespace's scans, and the
// lookups of another pod's new connections still scan and resolve.
func TestStormFromOnePodLeavesOthersTheirScans(t *testing.T) {
	pods := podNetworkstest(t, 2)
	attackerPod, victimPod := pods[0], pods[1]
	ln := attackerPod.srvListener
	addr := ln.Addr().String()
	attacker := startHelpertest(t, modeConnect, addr, attackerPod.podExec...)
	attackerPeer := acceptPeertest(t, ln)
	type client struct {
		h    *helperProcess
		peer netip.AddrPort
	}
	victims := make([]client, 3)
	for i := range victims {
		victims[i].h = startHelpertest(t, modeConnect, addr, victimPod.podExec...)
		victims[i].peer = acceptPeertest(t, ln)
		if victims[i].peer.Addr() != victimPod.podAddr {
			t.Fatalf("victim's peer %v, want the address of its pod, %v", victims[i].peer, victimPod.podAddr)
		}
	}

	clock := &fakeClocktest{t: time.Unix(1e9, 0)}
	r := NewResolver("", WithNegativeTTL(time.Second))
	r.now = clock.now
	// The storm: 200 new ports of the attacker's address within an
	// instant. Its burst scans (and finds nothing), the rest is refused.
	notFound, busy := 0, 0
	for i := range 200 {
		_, err := r.Lookup(netip.AddrPortFrom(attackerPod.podAddr, uint16(20000+i)))
		switch {
		case errors.Is(err, ErrNotFound):
			notFound++
		case errors.Is(err, ErrBusy):
			busy++
		default:
			t.Fatalf("storm lookup %d: err = %v", i, err)
		}
	}
	if notFound != DefaultScansPerSecond || busy != 200-DefaultScansPerSecond {
		t.Fatalf("storm: %d not found, %d busy; want %d and %d", notFound, busy, DefaultScansPerSecond, 200-DefaultScansPerSecond)
	}
	// The attacker's own connection waits for its namespace's budget...
	if _, err := r.Lookup(attackerPeer); !errors.Is(err, ErrBusy) {
		t.Fatalf("Lookup(attacker's own connection) during its storm: err = %v, want ErrBusy", err)
	}
	// ... the other pod's connections do not.
	for _, v := range victims {
		got, err := r.Lookup(v.peer)
		if err != nil {
			t.Fatalf("Lookup(victim %v) during the storm: %v", v.peer, err)
		}
		if want := ownerOftest(t, v.h.pid, v.h.pid, victimPod.podNS); got != want {
			t.Fatalf("Lookup(victim %v) = %+v, want %+v", v.peer, got, want)
		}
	}
	if n := r.scans.Load(); n != uint64(DefaultScansPerSecond+len(victims)) {
		t.Fatalf("%d scans, want %d (the storm's burst and one per victim)", n, DefaultScansPerSecond+len(victims))
	}
	// A second later the attacker's namespace has its budget back.
	clock.advance(time.Second)
	if got, err := r.Lookup(attackerPeer); err != nil || got.PID != attacker.pid {
		t.Fatalf("Lookup(attacker's own connection) a second later = %+v, %v; want pid %d", got, err, attacker.pid)
	}
}

// TestStormFromOnePodConcurrent is the storm in real time: one goroutine
// per attacking lookup stream, without pause, while the other pod opens
// new connections that must all resolve.
func TestStormFromOnePodConcurrent(t *testing.T) {
	pods := podNetworkstest(t, 2)
	attackerPod, victimPod := pods[0], pods[1]
	ln := attackerPod.srvListener
	addr := ln.Addr().String()
	startHelpertest(t, modeConnect, addr, attackerPod.podExec...)
	acceptPeertest(t, ln)

	r := NewResolver("")
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var stormBusy atomic.Int64
	for g := range 4 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				port := uint16(1024 + (g*16000+i)%60000)
				if _, err := r.Lookup(netip.AddrPortFrom(attackerPod.podAddr, port)); errors.Is(err, ErrBusy) {
					stormBusy.Add(1)
				}
			}
		})
	}
	defer func() { close(stop); wg.Wait() }()
	for range 5 {
		h := startHelpertest(t, modeConnect, addr, victimPod.podExec...)
		peer := acceptPeertest(t, ln)
		got, err := r.Lookup(peer)
		if err != nil || got.PID != h.pid || got.NetNS != victimPod.podNS {
			t.Fatalf("Lookup(victim %v) during the storm = %+v, %v; want pid %d in netns %d", peer, got, err, h.pid, victimPod.podNS)
		}
	}
	if stormBusy.Load() == 0 {
		t.Fatal("the storm was never refused: it did not outrun the scan rate")
	}
}
