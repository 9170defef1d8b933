package procsocket

import (
	"io"
	"net/netip"
	"strings"
	"testing"
)

// fibTrie is the Local table of a namespace's /proc/net/fib_trie (6.18)
// with 10.250.0.2/30 on a veth, lo up, and an AnyIP route
// (ip route add local 198.18.0.0/24 dev lo).
const fibTrie = `Local:
  +-- 0.0.0.0/0 3 0 5
     +-- 10.250.0.0/30 2 0 1
        |-- 10.250.0.0
           /30 link UNICAST
        |-- 10.250.0.2
           /32 host LOCAL
        |-- 10.250.0.3
           /32 link BROADCAST
     +-- 127.0.0.0/8 2 0 2
        +-- 127.0.0.0/31 1 0 0
           |-- 127.0.0.0
              /8 host LOCAL
           |-- 127.0.0.1
              /32 host LOCAL
        |-- 127.255.255.255
           /32 link BROADCAST
     |-- 198.18.0.0
        /24 host LOCAL
`

// ifInet6 is the same namespace's /proc/net/if_inet6, with 2001:db8::5/64.
const ifInet6 = `fe80000000000000406688fffe1975bd 02 40 20 c0       vb
20010db8000000000000000000000005 03 40 00 82       va
fe8000000000000034dc7afffeb4229c 03 40 20 c0       va
00000000000000000000000000000001 01 80 10 80       lo
`

func TestParseFIBTrieLocal(t *testing.T) {
	tests := []struct {
		addr string
		want bool
	}{
		{"10.250.0.2", true},
		{"10.250.0.1", false}, // the other end of the pair
		{"10.250.0.3", false}, // broadcast, not local
		{"10.250.0.0", false},
		{"127.0.0.1", true},
		{"127.3.4.5", true}, // 127.0.0.0/8 is local
		{"198.18.0.77", true},
		{"198.18.1.1", false},
		{"192.0.2.1", false},
	}
	for _, tt := range tests {
		got, err := parseFIBTrieLocal(strings.NewReader(fibTrie), netip.MustParseAddr(tt.addr))
		if err != nil || got != tt.want {
			t.Errorf("%s: local = %v, %v; want %v", tt.addr, got, err, tt.want)
		}
	}
	// Garbage is no address, and not an error; a cut table is.
	if got, err := parseFIBTrieLocal(strings.NewReader("|-- x\n/32 host LOCAL\n/x host LOCAL\n|-- 10.0.0.1\n/99 host LOCAL\n"), netip.MustParseAddr("10.0.0.1")); got || err != nil {
		t.Errorf("garbage: %v, %v", got, err)
	}
	if _, err := parseFIBTrieLocal(&io.LimitedReader{R: strings.NewReader(fibTrie), N: 10}, netip.MustParseAddr("10.9.9.9")); err == nil {
		t.Error("cut table: no error")
	}
}

func TestParseIfInet6(t *testing.T) {
	for _, tt := range []struct {
		addr string
		want bool
	}{
		{"2001:db8::5", true},
		{"::1", true},
		{"fe80::4066:88ff:fe19:75bd", true},
		{"2001:db8::6", false},
	} {
		got, err := parseIfInet6(strings.NewReader(ifInet6), netip.MustParseAddr(tt.addr))
		if err != nil || got != tt.want {
			t.Errorf("%s: listed = %v, %v; want %v", tt.addr, got, err, tt.want)
		}
	}
}
