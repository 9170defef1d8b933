package procsocket

import (
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestAddressBookFakeProcRoot: each namespace's addresses are read through
// one member that can be read; an address two namespaces have, loopback
// and wider LOCAL prefixes are placed nowhere; a namespace's addresses
// past the cap are not placed.
func TestAddressBookFakeProcRoot(t *testing.T) {
	proc := newFakeProctest(t)
	root := proc.root
	// Netns 201 (pid 10): fibTrie and ifInet6 (10.250.0.2, 2001:db8::5,
	// two link-local addresses, lo). Listed under Main and Local, as the
	// kernel does.
	proc.link("net:[201]", "10/ns/net")
	proc.write("10/net/fib_trie", strings.Replace(fibTrie, "Local:", "Main:", 1)+fibTrie)
	proc.write("10/net/if_inet6", ifInet6)
	// Netns 202: pid 20's tables are FIFOs (not read), pid 21 is read; it
	// has 10.250.0.6 and 10.250.0.2, which netns 201 has too.
	proc.link("net:[202]", "20/ns/net")
	if err := os.MkdirAll(filepath.Join(root, "20/net"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"20/net/fib_trie", "20/net/if_inet6"} {
		if err := unix.Mkfifo(filepath.Join(root, name), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	proc.link("net:[202]", "21/ns/net")
	proc.write("21/net/fib_trie", leavestest("10.250.0.6", "10.250.0.2"))
	// Netns 203 has 100 addresses.
	many := make([]string, 100)
	for i := range many {
		many[i] = fmt.Sprintf("10.1.%d.%d", i/250, i%250+1)
	}
	proc.link("net:[203]", "30/ns/net")
	proc.write("30/net/fib_trie", leavestest(many...))

	r := NewResolver(root)
	got := r.readAddresses()
	want := map[netip.Addr]uint64{
		netip.MustParseAddr("10.250.0.2"):                unplaced,
		netip.MustParseAddr("2001:db8::5"):               201,
		netip.MustParseAddr("fe80::4066:88ff:fe19:75bd"): 201,
		netip.MustParseAddr("fe80::34dc:7aff:feb4:229c"): 201,
		netip.MustParseAddr("10.250.0.6"):                202,
	}
	for _, a := range many[:maxAddressesPerNetNS] {
		want[netip.MustParseAddr(a)] = 203
	}
	if !maps.Equal(got, want) {
		t.Errorf("readAddresses:\n got %v\nwant %v", got, want)
	}
	for addr, netns := range map[string]uint64{
		"10.250.0.6":  202,
		"10.250.0.2":  unplaced, // two namespaces have it
		"198.18.0.77": unplaced, // AnyIP: a prefix, not an address
		"10.1.0.64":   203,
		"10.1.0.66":   unplaced, // past the cap
		"192.0.2.1":   unplaced, // no namespace here
	} {
		if got := r.placeAddress(netip.MustParseAddr(addr)); got != netns {
			t.Errorf("placeAddress(%s) = %d, want %d", addr, got, netns)
		}
	}
}

// leavestest is a fib_trie Local table with a /32 host LOCAL leaf for each
// address.
func leavestest(addrs ...string) string {
	var b strings.Builder
	b.WriteString("Local:\n  +-- 0.0.0.0/0 3 0 5\n")
	for _, a := range addrs {
		fmt.Fprintf(&b, "     |-- %s\n        /32 host LOCAL\n", a)
	}
	return b.String()
}

// BenchmarkReadAddresses is the cost of reading the address book of this
// machine's proc root, paid at most once a second while scans are wanted.
func BenchmarkReadAddresses(b *testing.B) {
	requireRoottest(b)
	r := NewResolver("")
	for b.Loop() {
		r.readAddresses()
	}
}

// BenchmarkLookupRefused is the cost of a lookup refused during a storm:
// a new port of an address whose namespace's budget is spent.
func BenchmarkLookupRefused(b *testing.B) {
	requireRoottest(b)
	r := NewResolver("", WithMaxScansPerSecond(1))
	clock := &fakeClocktest{t: time.Unix(1e9, 0)} // no refill
	r.now = clock.now
	peer := netip.MustParseAddrPort("127.0.0.1:1")
	r.Lookup(peer) // spends the burst
	port := uint16(2)
	for b.Loop() {
		if _, err := r.Lookup(netip.AddrPortFrom(peer.Addr(), port)); !errors.Is(err, ErrBusy) {
			b.Fatal(err)
		}
		port = max(port+1, 2)
	}
}
