package procsocket

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/otelcol-ai/otelcol-ai/internal/procresource"
)

func requireRoottest(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("reading other processes' fd and ns links needs root (CAP_SYS_PTRACE)")
	}
}

func listentest(t testing.TB, network, addr string) net.Listener {
	t.Helper()
	ln, err := net.Listen(network, addr)
	if err != nil {
		t.Skipf("cannot listen on %s %s: %v", network, addr, err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

// wantOwnertest checks that a fresh resolver names h as peer's owner, in
// this process's network namespace.
func wantOwnertest(t *testing.T, peer netip.AddrPort, h *helperProcess) {
	t.Helper()
	got, err := NewResolver("").Lookup(peer)
	if err != nil {
		t.Fatalf("Lookup(%v): %v", peer, err)
	}
	want := ownerOftest(t, h.pid, vpidtest(t, h.pid), netNStest(t, os.Getpid()))
	if got != want {
		t.Fatalf("Lookup(%v) = %+v, want %+v", peer, got, want)
	}
}

func TestLookupLoopback(t *testing.T) {
	requireRoottest(t)
	tests := []struct {
		name, network, listen, dial string
		mode                        string
	}{
		{"ipv4", "tcp4", "127.0.0.1:0", "127.0.0.1", modeConnect},
		{"ipv6", "tcp6", "[::1]:0", "::1", modeConnect},
		{"dual-stack listener, ipv4 client", "tcp", "[::]:0", "127.0.0.1", modeConnect},
		{"dual-stack listener, v4-mapped client", "tcp", "[::]:0", "127.0.0.1", modeConnectMapped},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ln := listentest(t, tt.network, tt.listen)
			port := ln.Addr().(*net.TCPAddr).Port
			h := startHelpertest(t, tt.mode, net.JoinHostPort(tt.dial, strconv.Itoa(port)))
			peer := acceptPeertest(t, ln)
			if peer.Port() == uint16(port) {
				t.Fatalf("peer %v has the listener's port", peer)
			}
			wantOwnertest(t, peer, h)
			// Whichever form the listener gave, the other names the same
			// socket.
			if a := peer.Addr(); a.Is4() {
				wantOwnertest(t, netip.AddrPortFrom(netip.AddrFrom16(a.As16()), peer.Port()), h)
			} else if a.Is4In6() {
				wantOwnertest(t, netip.AddrPortFrom(a.Unmap(), peer.Port()), h)
			}
		})
	}
}

func TestLookupShared(t *testing.T) {
	requireRoottest(t)
	h, peer := connectedHelpertest(t, modeConnectShared)
	_, err := NewResolver("").Lookup(peer)
	if !errors.Is(err, ErrAmbiguous) {
		t.Fatalf("Lookup(%v) err = %v, want ErrAmbiguous", peer, err)
	}
	for _, pid := range []int{h.pid, h.child} {
		if !strings.Contains(err.Error(), strconv.Itoa(pid)) {
			t.Errorf("error %q does not name pid %d", err, pid)
		}
	}
}

func TestLookupNotFound(t *testing.T) {
	requireRoottest(t)
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Skip(err)
	}
	closed := ln.Addr().(*net.TCPAddr).AddrPort()
	ln.Close()
	for _, peer := range []netip.AddrPort{
		closed,
		netip.MustParseAddrPort("198.18.0.1:40000"), // nobody's here
		netip.MustParseAddrPort("[2001:db8::1]:40000"),
		{}, // invalid
		netip.MustParseAddrPort("127.0.0.1:0"),
	} {
		_, err := NewResolver("").Lookup(peer)
		if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), peer.String()) {
			t.Errorf("Lookup(%v) err = %v, want ErrNotFound naming the peer", peer, err)
		}
	}
}

// fakeClocktest is a settable clock for the cache and the rate limit.
type fakeClocktest struct{ t time.Time }

func (c *fakeClocktest) now() time.Time          { return c.t }
func (c *fakeClocktest) advance(d time.Duration) { c.t = c.t.Add(d) }

func TestNegativeCacheAndRateLimit(t *testing.T) {
	requireRoottest(t)
	clock := &fakeClocktest{t: time.Unix(1e9, 0)}
	r := NewResolver("", WithMaxScansPerSecond(3), WithNegativeTTL(time.Second))
	r.now = clock.now
	unknown := func(i int) netip.AddrPort {
		return netip.AddrPortFrom(netip.MustParseAddr("198.18.0.1"), uint16(10000+i))
	}
	lookupAll := func(from, to int) (notFound, busy int) {
		t.Helper()
		for i := from; i < to; i++ {
			_, err := r.Lookup(unknown(i))
			switch {
			case errors.Is(err, ErrNotFound):
				notFound++
			case errors.Is(err, ErrBusy):
				busy++
			default:
				t.Fatalf("Lookup(%v) err = %v", unknown(i), err)
			}
		}
		return notFound, busy
	}

	// A flood of 100 unknown peers: the burst (3) scans, the rest wait.
	if nf, busy := lookupAll(0, 100); nf != 3 || busy != 97 || r.scans.Load() != 3 {
		t.Fatalf("flood: %d not found, %d busy, %d scans; want 3, 97, 3", nf, busy, r.scans.Load())
	}
	// The three misses are remembered: asking again scans nothing, even
	// with the rate spent.
	if nf, busy := lookupAll(0, 3); nf != 3 || busy != 0 || r.scans.Load() != 3 {
		t.Fatalf("negative cache: %d not found, %d busy, %d scans; want 3, 0, 3", nf, busy, r.scans.Load())
	}
	// Half a second gives 1.5 scans' worth.
	clock.advance(500 * time.Millisecond)
	if nf, busy := lookupAll(100, 110); nf != 1 || busy != 9 || r.scans.Load() != 4 {
		t.Fatalf("after 0.5s: %d not found, %d busy, %d scans; want 1, 9, 4", nf, busy, r.scans.Load())
	}
	// Past the negative TTL the first misses are scanned again, within
	// the rate: 0.5 + 3*0.6 = 2.3 tokens.
	clock.advance(600 * time.Millisecond)
	if nf, busy := lookupAll(0, 3); nf != 2 || busy != 1 || r.scans.Load() != 6 {
		t.Fatalf("after 1.1s: %d not found, %d busy, %d scans; want 2, 1, 6", nf, busy, r.scans.Load())
	}
	// Cached: the two rescanned misses and the one from 0.5s; the third
	// expired miss was dropped and, being busy this time, not stored.
	if n := r.cache.len(); n != 3 {
		t.Fatalf("%d cache entries, want 3 (busy lookups are not cached)", n)
	}
}

func TestCacheHitRevalidated(t *testing.T) {
	requireRoottest(t)
	clock := &fakeClocktest{t: time.Unix(1e9, 0)}
	r := NewResolver("", WithTTL(time.Minute))
	r.now = clock.now
	h, peer := connectedHelpertest(t, modeConnect)

	first, err := r.Lookup(peer)
	if err != nil || first.PID != h.pid {
		t.Fatalf("Lookup = %+v, %v; want pid %d", first, err, h.pid)
	}
	for range 10 {
		got, err := r.Lookup(peer)
		if err != nil || got != first {
			t.Fatalf("cached Lookup = %+v, %v; want %+v", got, err, first)
		}
	}
	if n := r.scans.Load(); n != 1 {
		t.Fatalf("%d scans for 11 lookups of one live peer, want 1", n)
	}

	// The owner exits: its socket is orphaned (no inode), so the cached
	// owner fails revalidation and a rescan finds no one.
	h.stop()
	_, err = r.Lookup(peer)
	if !errors.Is(err, ErrNotFound) {
		t.Fatalf("Lookup after the owner exited: err = %v, want ErrNotFound", err)
	}
	if n := r.scans.Load(); n != 2 {
		t.Fatalf("%d scans, want 2 (the stale entry rescanned)", n)
	}

	// Past the TTL a live owner is scanned afresh.
	h2, peer2 := connectedHelpertest(t, modeConnect)
	if got, err := r.Lookup(peer2); err != nil || got.PID != h2.pid {
		t.Fatalf("Lookup = %+v, %v; want pid %d", got, err, h2.pid)
	}
	clock.advance(time.Minute)
	if got, err := r.Lookup(peer2); err != nil || got.PID != h2.pid || r.scans.Load() != 4 {
		t.Fatalf("Lookup after TTL = %+v, %v after %d scans; want pid %d after 4", got, err, r.scans.Load(), h2.pid)
	}
}

func TestCacheEviction(t *testing.T) {
	c := newPeerCache(2)
	now := time.Unix(1e9, 0)
	peer := func(i int) netip.AddrPort { return netip.AddrPortFrom(netip.MustParseAddr("198.18.0.1"), uint16(i)) }
	for i := 1; i <= 3; i++ {
		c.put(peer(i), cacheEntry{owner: Owner{Identity: procresource.Identity{PID: i}}, expires: now.Add(time.Minute)})
		if i == 2 {
			c.get(peer(1), now) // 1 is now more recent than 2
		}
	}
	if _, ok := c.get(peer(2), now); ok {
		t.Error("least recently used entry kept")
	}
	for _, i := range []int{1, 3} {
		if e, ok := c.get(peer(i), now); !ok || e.owner.PID != i {
			t.Errorf("entry %d = %+v, %v", i, e, ok)
		}
	}
	if _, ok := c.get(peer(1), now.Add(time.Minute)); ok || c.len() != 1 {
		t.Errorf("expired entry returned, or kept (len %d)", c.len())
	}
}

func TestConcurrentLookups(t *testing.T) {
	requireRoottest(t)
	h, peer := connectedHelpertest(t, modeConnect)
	r := NewResolver("")
	concurrentlytest(t, 16, func(int) error {
		got, err := r.Lookup(peer)
		if err == nil && got.PID != h.pid {
			err = fmt.Errorf("owner %+v, want pid %d", got, h.pid)
		}
		return err
	})
	// Waiters find the first scan's result in the cache.
	if n := r.scans.Load(); n != 1 {
		t.Errorf("%d scans for 16 concurrent lookups of one peer, want 1", n)
	}
}

func TestNoDescriptorLeak(t *testing.T) {
	requireRoottest(t)
	_, peer := connectedHelpertest(t, modeConnect)
	before := openFDstest(t)
	r := NewResolver("", WithNegativeTTL(0), WithMaxScansPerSecond(math.Inf(1)))
	for range 10 {
		if _, err := NewResolver("").Lookup(peer); err != nil {
			t.Fatal(err)
		}
		if _, err := r.Lookup(peer); err != nil { // cached after the first
			t.Fatal(err)
		}
		if _, err := r.Lookup(netip.MustParseAddrPort("198.18.0.1:1")); !errors.Is(err, ErrNotFound) {
			t.Fatal(err)
		}
	}
	if after := openFDstest(t); after != before {
		t.Fatalf("%d descriptors open after lookups, %d before", after, before)
	}
}

func TestFakeProcRoot(t *testing.T) {
	// A proc tree that is not procfs, with hostile parts: pid 1 in netns
	// 123 holds socket 98765 (10.250.0.2:40000, established); its tcp6 is
	// a FIFO (refused without blocking); pid 2 in the same namespace has a
	// FIFO for an fd directory; pid 3's namespace link is garbage. Pid 4,
	// in netns 124, holds socket 98766 for 10.250.0.3:40000, an address
	// its namespace does not have: its tables are not read.
	proc := newFakeProctest(t)
	root := proc.root
	proc.link("net:[123]", "1/ns/net")
	proc.write("1/net/tcp", headerTCP+"\n"+rowListen4+"\n"+rowEstab4+"\n")
	proc.fifo("1/net/tcp6")
	proc.link("socket:[555]", "1/fd/0")
	proc.link("socket:[98765]", "1/fd/7")
	proc.write("1/stat", "1 (py thon) S"+strings.Repeat(" 0", 18)+" 4242 0 0\n")
	proc.link("net:[123]", "2/ns/net")
	proc.fifo("2/fd")
	proc.link("net:[", "3/ns/net")
	proc.write("notapid/stat", "")
	proc.link("net:[124]", "4/ns/net")
	proc.write("4/net/fib_trie", fibTrie)
	proc.write("4/net/tcp", strings.NewReplacer("0200FA0A", "0300FA0A", "98765", "98766").Replace(rowEstab4)+"\n")
	proc.link("socket:[98766]", "4/fd/3")
	proc.write("4/stat", "4 (x) S"+strings.Repeat(" 0", 18)+" 99 0 0\n")

	got, err := NewResolver(root).Lookup(netip.MustParseAddrPort("10.250.0.2:40000"))
	if want := (Owner{Identity: procresource.Identity{PID: 1, StartTicks: 4242}, NetNS: 123}); err != nil || got != want {
		t.Fatalf("Lookup = %+v, %v; want %+v", got, err, want)
	}
	for _, peer := range []string{"10.250.0.2:40001", "10.250.0.3:40000"} {
		_, err = NewResolver(root).Lookup(netip.MustParseAddrPort(peer))
		if !errors.Is(err, ErrNotFound) {
			t.Fatalf("%s: err = %v, want ErrNotFound", peer, err)
		}
	}
	// With the address on pid 4's namespace, its socket is found.
	proc.write("4/net/fib_trie", strings.Replace(fibTrie, "|-- 10.250.0.2", "|-- 10.250.0.3", 1))
	got, err = NewResolver(root).Lookup(netip.MustParseAddrPort("10.250.0.3:40000"))
	if want := (Owner{Identity: procresource.Identity{PID: 4, StartTicks: 99}, NetNS: 124}); err != nil || got != want {
		t.Fatalf("Lookup = %+v, %v; want %+v", got, err, want)
	}
	_, err = NewResolver(filepath.Join(root, "missing")).Lookup(netip.MustParseAddrPort("198.18.0.1:1"))
	if err == nil || errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "missing") {
		t.Fatalf("missing proc root: err = %v, want a listing error", err)
	}
}

func BenchmarkLookup(b *testing.B) {
	requireRoottest(b)
	_, peer := connectedHelpertest(b, modeConnect)
	lookup := func(peer netip.AddrPort) func(*Resolver) error {
		return func(r *Resolver) error { _, err := r.Lookup(peer); return err }
	}
	// Not found: a peer from another node (no namespace has its address:
	// no socket table is read), and a local address with no socket (the
	// tables of this namespace are read).
	benchResolvertest(b, lookup(peer), map[string]func(*Resolver) error{
		"miss/not-found/other-node":    lookup(netip.MustParseAddrPort("198.18.0.1:1")),
		"miss/not-found/local-address": lookup(netip.MustParseAddrPort("127.0.0.1:1")),
	})
}

// benchResolvertest times query on a cache hit, on a miss that finds the
// owner (a fresh resolver each time), and the not-found queries with
// negative caching and the scan limit off.
func benchResolvertest(b *testing.B, query func(*Resolver) error, notFound map[string]func(*Resolver) error) {
	b.Run("hit", func(b *testing.B) {
		r := NewResolver("")
		if err := query(r); err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			if err := query(r); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("miss/found", func(b *testing.B) {
		for b.Loop() {
			if err := query(NewResolver("")); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, name := range slices.Sorted(maps.Keys(notFound)) {
		b.Run(name, func(b *testing.B) {
			r := NewResolver("", WithNegativeTTL(0), WithMaxScansPerSecond(math.Inf(1)))
			for b.Loop() {
				if err := notFound[name](r); !errors.Is(err, ErrNotFound) {
					b.Fatal(err)
				}
			}
		})
	}
}
