package procsocket

import (
	"errors"
	"fmt"
	"math"
	"net"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/otelcol-ai/otelcol-ai/internal/procresource"
)

// ownerOftest is what Lookup and OwnersFrom should say of the helper with
// host pid pid, which sees itself as vpid, in the network namespace netNS:
// its start time read independently of the code under test, and the
// container and pod of its cgroup.
func ownerOftest(t testing.TB, pid, vpid int, netNS uint64) Owner {
	t.Helper()
	cgroup, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	c := procresource.ParseCgroup(cgroup)
	return Owner{Identity: procresource.Identity{PID: pid, VPID: vpid, StartTicks: startTickstest(t, pid), ContainerID: c.ID, PodUID: c.PodUID}, NetNS: netNS}
}

// wantOwnersFromtest checks that r finds exactly want from ip, in any order.
func wantOwnersFromtest(t *testing.T, r *Resolver, ip netip.Addr, want ...Owner) {
	t.Helper()
	got, err := r.OwnersFrom(ip)
	if err != nil {
		t.Fatalf("OwnersFrom(%v): %v", ip, err)
	}
	byPID := func(a, b Owner) int { return a.PID - b.PID }
	slices.SortFunc(got, byPID)
	want = slices.SortedFunc(slices.Values(want), byPID)
	if !slices.Equal(got, want) {
		t.Fatalf("OwnersFrom(%v) = %+v, want %+v", ip, got, want)
	}
}

// TestOwnersFromLoopback: this process listens on 127.0.0.1 (tcp4) and on
// :: (dual-stack). From 127.0.0.1 connect a plain client, a client that is
// pid 1 of its own pid namespace, and a dual-stack client (its socket in
// tcp6, v4-mapped) to the wildcard listener; a fourth process has a
// loopback connection to a port of its own.
func TestOwnersFromLoopback(t *testing.T) {
	requireRoottest(t)
	ln4 := listentest(t, "tcp4", "127.0.0.1:0")
	lnAny := listentest(t, "tcp", "[::]:0")
	anyPort := strconv.Itoa(lnAny.Addr().(*net.TCPAddr).Port)

	plain := startHelpertest(t, modeConnect, ln4.Addr().String())
	acceptPeertest(t, ln4)
	namespaced := startInPIDNStest(t, modeConnect, ln4.Addr().String())
	acceptPeertest(t, ln4)
	mapped := startHelpertest(t, modeConnectMapped, net.JoinHostPort("127.0.0.1", anyPort))
	acceptPeertest(t, lnAny)
	// Not an owner: its connection from 127.0.0.1 is to its own port.
	startHelpertest(t, modeConnectSelf, "127.0.0.1:0")

	self := netNStest(t, os.Getpid())
	hostPID := namespaced.cmd.Process.Pid
	if got := vpidtest(t, hostPID); got != 1 {
		t.Fatalf("namespaced helper's NSpid ends in %d, want 1", got)
	}
	want := []Owner{
		ownerOftest(t, plain.pid, plain.pid, self),
		ownerOftest(t, hostPID, 1, self),
		ownerOftest(t, mapped.pid, mapped.pid, self),
	}
	r := NewResolver("")
	wantOwnersFromtest(t, r, netip.MustParseAddr("127.0.0.1"), want...)
	// The v4-mapped form names the same address, from the cache.
	wantOwnersFromtest(t, r, netip.MustParseAddr("::ffff:127.0.0.1"), want...)
	if n := r.scans.Load(); n != 1 {
		t.Fatalf("%d scans for one address asked twice, want 1", n)
	}
	got, err := NewResolver("").OwnersFrom(netip.MustParseAddr("::1"))
	if !errors.Is(err, ErrNotFound) {
		t.Fatalf("OwnersFrom(::1) = %+v, %v; want ErrNotFound", got, err)
	}
}

// TestLookupFillsVPID: Lookup names the client that is pid 1 of its pid
// namespace with VPID 1.
func TestLookupFillsVPID(t *testing.T) {
	requireRoottest(t)
	ln := listentest(t, "tcp4", "127.0.0.1:0")
	h := startInPIDNStest(t, modeConnect, ln.Addr().String())
	peer := acceptPeertest(t, ln)
	got, err := NewResolver("").Lookup(peer)
	if want := ownerOftest(t, h.cmd.Process.Pid, 1, netNStest(t, os.Getpid())); err != nil || got != want {
		t.Fatalf("Lookup(%v) = %+v, %v; want %+v", peer, got, err, want)
	}
}

// TestOwnersFromPodNamespace: of the two processes of a pod with
// connections from the pod's address, only the one connected to this
// process's listener is its owner.
func TestOwnersFromPodNamespace(t *testing.T) {
	pn := podNetworktest(t)
	client := startHelpertest(t, modeConnect, pn.srvListener.Addr().String(), pn.podExec...)
	acceptPeertest(t, pn.srvListener)
	startHelpertest(t, modeConnectSelf, podAddrtest.String()+":0", pn.podExec...)

	r := NewResolver("")
	wantOwnersFromtest(t, r, podAddrtest, ownerOftest(t, client.pid, client.pid, pn.podNS))
	// The agent's side of the connection has the listener's port as its
	// own, not as its remote end; and no process lives in srv anyway.
	if got, err := r.OwnersFrom(srvAddrtest); !errors.Is(err, ErrNotFound) {
		t.Fatalf("OwnersFrom(%v) = %+v, %v; want ErrNotFound", srvAddrtest, got, err)
	}
}

func TestOwnersFromNotFound(t *testing.T) {
	requireRoottest(t)
	connectedHelpertest(t, modeConnect)
	tests := []struct {
		name       string
		ip         netip.Addr
		tableReads uint64 // socket tables opened
	}{
		// No namespace has the address: no table is read.
		{"other node ipv4", netip.MustParseAddr("198.18.0.1"), 0},
		{"other node ipv6", netip.MustParseAddr("2001:db8::1"), 0},
		// 127.0.0.0/8 is local to this namespace: tcp and tcp6 are read.
		{"local, no connection", netip.MustParseAddr("127.0.0.2"), 2},
		{"invalid", netip.Addr{}, 0},
		{"unspecified", netip.IPv4Unspecified(), 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := NewResolver("")
			_, err := r.OwnersFrom(tt.ip)
			if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), tt.ip.String()) {
				t.Fatalf("OwnersFrom(%v) err = %v, want ErrNotFound naming the address", tt.ip, err)
			}
			if n := r.tableReads.Load(); n != tt.tableReads {
				t.Fatalf("%d socket tables read, want %d", n, tt.tableReads)
			}
		})
	}
}

// TestOwnersFromNoListener: a process that listens on nothing has no
// clients, whatever connections there are from the address.
func TestOwnersFromNoListener(t *testing.T) {
	requireRoottest(t)
	startHelpertest(t, modeConnectSelf, "127.0.0.1:0")
	r := NewResolver("")
	if listeners, err := readListeners(); err != nil || listeners.len() != 0 {
		t.Skipf("this test process already listens (%d sockets, %v)", listeners.len(), err)
	}
	_, err := r.OwnersFrom(netip.MustParseAddr("127.0.0.1"))
	if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "listens on no TCP socket") {
		t.Fatalf("err = %v, want ErrNotFound for lack of listeners", err)
	}
	if n := r.tableReads.Load(); n != 0 {
		t.Fatalf("%d socket tables read, want 0", n)
	}
}

// TestOwnersFromSharesLimitAndNegativeCache: Lookup and OwnersFrom draw on
// one scan budget, here the one of addresses no namespace has, and a flood
// of unknown addresses scans within it; misses are remembered.
func TestOwnersFromSharesLimitAndNegativeCache(t *testing.T) {
	requireRoottest(t)
	listentest(t, "tcp4", "127.0.0.1:0")
	clock := &fakeClocktest{t: time.Unix(1e9, 0)}
	r := NewResolver("", WithMaxScansPerSecond(3), WithNegativeTTL(time.Second))
	r.now = clock.now
	unknown := func(i int) netip.Addr { return netip.AddrFrom4([4]byte{198, 18, byte(i >> 8), byte(i)}) }

	if _, err := r.Lookup(netip.MustParseAddrPort("198.18.255.1:1")); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Lookup err = %v, want ErrNotFound", err)
	}
	notFound, busy := 0, 0
	for i := range 100 {
		_, err := r.OwnersFrom(unknown(i))
		switch {
		case errors.Is(err, ErrNotFound):
			notFound++
		case errors.Is(err, ErrBusy) && strings.Contains(err.Error(), "from "+unknown(i).String()):
			busy++
		default:
			t.Fatalf("OwnersFrom(%v) err = %v", unknown(i), err)
		}
	}
	if notFound != 2 || busy != 98 || r.scans.Load() != 3 {
		t.Fatalf("flood: %d not found, %d busy, %d scans; want 2, 98, 3 (one token spent by Lookup)",
			notFound, busy, r.scans.Load())
	}
	// Remembered: no scan, though the rate is spent.
	for i := range 2 {
		if _, err := r.OwnersFrom(unknown(i)); !errors.Is(err, ErrNotFound) {
			t.Fatalf("cached miss %v: err = %v, want ErrNotFound", unknown(i), err)
		}
	}
	if _, err := r.Lookup(netip.MustParseAddrPort("198.18.255.1:1")); !errors.Is(err, ErrNotFound) {
		t.Fatalf("cached Lookup miss: err = %v, want ErrNotFound", err)
	}
	if n := r.scans.Load(); n != 3 {
		t.Fatalf("%d scans after cached misses, want 3", n)
	}
	// Past the negative TTL a miss is scanned again.
	clock.advance(time.Second)
	if _, err := r.OwnersFrom(unknown(0)); !errors.Is(err, ErrNotFound) || r.scans.Load() != 4 {
		t.Fatalf("after the negative TTL: err = %v after %d scans, want ErrNotFound after 4", err, r.scans.Load())
	}
}

// TestOwnersFromCache: an answer is kept for the owners TTL, unrevalidated,
// and callers get their own copy.
func TestOwnersFromCache(t *testing.T) {
	requireRoottest(t)
	clock := &fakeClocktest{t: time.Unix(1e9, 0)}
	r := NewResolver("", WithOwnersTTL(2*time.Second))
	r.now = clock.now
	h, _ := connectedHelpertest(t, modeConnect)
	loopback := netip.MustParseAddr("127.0.0.1")
	want := ownerOftest(t, h.pid, h.pid, netNStest(t, os.Getpid()))

	got, err := r.OwnersFrom(loopback)
	if err != nil || !slices.Equal(got, []Owner{want}) {
		t.Fatalf("OwnersFrom = %+v, %v; want [%+v]", got, err, want)
	}
	got[0].PID = -1
	h.stop()
	clock.advance(time.Second)
	if got, err := r.OwnersFrom(loopback); err != nil || !slices.Equal(got, []Owner{want}) || r.scans.Load() != 1 {
		t.Fatalf("within the TTL: %+v, %v after %d scans; want [%+v] after 1", got, err, r.scans.Load(), want)
	}
	clock.advance(time.Second)
	if got, err := r.OwnersFrom(loopback); !errors.Is(err, ErrNotFound) || r.scans.Load() != 2 {
		t.Fatalf("past the TTL, client gone: %+v, %v after %d scans; want ErrNotFound after 2", got, err, r.scans.Load())
	}
}

// TestOwnersFromListenersReread: a listener closed is forgotten once the
// listener set expires, though its accepted connection lives on.
func TestOwnersFromListenersReread(t *testing.T) {
	requireRoottest(t)
	clock := &fakeClocktest{t: time.Unix(1e9, 0)}
	r := NewResolver("", WithOwnersTTL(time.Millisecond), WithNegativeTTL(0))
	r.now = clock.now
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Skip(err)
	}
	h := startHelpertest(t, modeConnect, ln.Addr().String())
	acceptPeertest(t, ln)
	loopback := netip.MustParseAddr("127.0.0.1")
	if got, err := r.OwnersFrom(loopback); err != nil || len(got) != 1 || got[0].PID != h.pid {
		t.Fatalf("OwnersFrom = %+v, %v; want pid %d", got, err, h.pid)
	}
	ln.Close()
	clock.advance(time.Millisecond)
	if got, err := r.OwnersFrom(loopback); err != nil || len(got) != 1 || got[0].PID != h.pid {
		t.Fatalf("listener set not expired: %+v, %v; want pid %d", got, err, h.pid)
	}
	clock.advance(listenersTTL)
	if got, err := r.OwnersFrom(loopback); !errors.Is(err, ErrNotFound) {
		t.Fatalf("listener closed: %+v, %v; want ErrNotFound", got, err)
	}
}

func TestConcurrentOwnersFrom(t *testing.T) {
	requireRoottest(t)
	h, peer := connectedHelpertest(t, modeConnect)
	r := NewResolver("")
	concurrentlytest(t, 32, func(i int) error {
		if i%2 == 0 {
			got, err := r.OwnersFrom(peer.Addr())
			if err == nil && (len(got) != 1 || got[0].PID != h.pid) {
				err = fmt.Errorf("owners %+v, want pid %d", got, h.pid)
			}
			return err
		}
		got, err := r.Lookup(peer)
		if err == nil && got.PID != h.pid {
			err = fmt.Errorf("owner %+v, want pid %d", got, h.pid)
		}
		return err
	})
	// Waiters find the first scan's result in the cache: one scan for the
	// address, one for the peer.
	if n := r.scans.Load(); n != 2 {
		t.Errorf("%d scans for 32 concurrent lookups of one address and one peer, want 2", n)
	}
}

func TestOwnersFromNoDescriptorLeak(t *testing.T) {
	requireRoottest(t)
	connectedHelpertest(t, modeConnect)
	before := openFDstest(t)
	r := NewResolver("", WithNegativeTTL(0), WithMaxScansPerSecond(math.Inf(1)))
	for range 10 {
		if _, err := NewResolver("").OwnersFrom(netip.MustParseAddr("127.0.0.1")); err != nil {
			t.Fatal(err)
		}
		if _, err := r.OwnersFrom(netip.MustParseAddr("127.0.0.2")); !errors.Is(err, ErrNotFound) {
			t.Fatal(err)
		}
	}
	if after := openFDstest(t); after != before {
		t.Fatalf("%d descriptors open after lookups, %d before", after, before)
	}
}

func TestListenerSet(t *testing.T) {
	s := listenerSet{addrs: map[netip.AddrPort]bool{}, ports: map[uint16]bool{}}
	for _, ap := range []string{"127.0.0.1:4317", "[::]:4318", "0.0.0.0:9000", "[fd00::1]:55680"} {
		s.add(netip.MustParseAddrPort(ap))
	}
	tests := []struct {
		remote string
		want   bool
	}{
		{"127.0.0.1:4317", true},
		{"127.0.0.2:4317", false}, // bound to one address
		{"10.0.0.1:4318", true},   // :: takes any address
		{"[2001:db8::1]:4318", true},
		{"10.0.0.1:9000", true},
		{"[fd00::1]:55680", true},
		{"[fd00::2]:55680", false},
		{"127.0.0.1:4319", false},
	}
	for _, tt := range tests {
		if got := s.has(netip.MustParseAddrPort(tt.remote)); got != tt.want {
			t.Errorf("has(%s) = %v, want %v", tt.remote, got, tt.want)
		}
	}
	if s.len() != 4 {
		t.Errorf("len = %d, want 4", s.len())
	}
}

func TestAddressKeys(t *testing.T) {
	tests := []struct {
		ip, tcp4, tcp6 string
		matches        []string // local_address fields that match a key
		misses         []string
	}{
		{"127.0.0.1", "0100007F:", "0000000000000000FFFF00000100007F:",
			[]string{"0100007F:1F90", "0100007f:0001", "0000000000000000FFFF00000100007F:C822"},
			[]string{"0200007F:1F90", "0100007F:1F9", "0100007F:1F900", "00000000000000000000FFFF0100007F:C822"}},
		{"::1", "", "00000000000000000000000001000000:",
			[]string{"00000000000000000000000001000000:10DE"},
			[]string{"00000000000000000000000002000000:10DE", "0100007F:10DE"}},
	}
	for _, tt := range tests {
		t.Run(tt.ip, func(t *testing.T) {
			tcp4, tcp6 := addressKeys(netip.MustParseAddr(tt.ip))
			if string(tcp4) != tt.tcp4 || string(tcp6) != tt.tcp6 {
				t.Fatalf("addressKeys = %q, %q; want %q, %q", tcp4, tcp6, tt.tcp4, tt.tcp6)
			}
			matches := func(local string) bool {
				return (tcp4 != nil && localMatches([]byte(local), tcp4)) || localMatches([]byte(local), tcp6)
			}
			for _, local := range tt.matches {
				if !matches(local) {
					t.Errorf("%s does not match", local)
				}
			}
			for _, local := range tt.misses {
				if matches(local) {
					t.Errorf("%s matches", local)
				}
			}
		})
	}
}

func TestSocketInode(t *testing.T) {
	tests := []struct {
		link string
		want uint64
		ok   bool
	}{
		{"socket:[12345]", 12345, true},
		{"socket:[18446744073709551615]", math.MaxUint64, true},
		{"socket:[18446744073709551616]", 0, false},
		{"socket:[]", 0, false},
		{"socket:[12a]", 0, false},
		{"socket:[12", 0, false},
		{"pipe:[12345]", 0, false},
		{"/dev/null", 0, false},
	}
	for _, tt := range tests {
		if got, ok := socketInode([]byte(tt.link)); got != tt.want || ok != tt.ok {
			t.Errorf("socketInode(%q) = %d, %v; want %d, %v", tt.link, got, ok, tt.want, tt.ok)
		}
	}
}

func BenchmarkOwnersFrom(b *testing.B) {
	requireRoottest(b)
	ln := listentest(b, "tcp4", "127.0.0.1:0")
	startHelpertest(b, modeConnect, ln.Addr().String())
	acceptPeertest(b, ln)
	from := func(ip string) func(*Resolver) error {
		addr := netip.MustParseAddr(ip)
		return func(r *Resolver) error { _, err := r.OwnersFrom(addr); return err }
	}
	// Not found: an address of another node (no namespace has it: no
	// socket table is read), and a local address with no connection (this
	// namespace's tcp and tcp6 are read).
	benchResolvertest(b, from("127.0.0.1"), map[string]func(*Resolver) error{
		"miss/not-found/other-node":    from("198.18.0.1"),
		"miss/not-found/local-address": from("127.0.0.2"),
	})
}
