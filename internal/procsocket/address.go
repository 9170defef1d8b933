package procsocket

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"fmt"
	"io"
	"net/netip"
	"strconv"

	"github.com/otelcol-ai/otelcol-ai/internal/procroot"
)

// maxAddressTableBytes caps fib_trie and if_inet6: a host namespace with a
// route per pod has a few hundred kilobytes, one with a full BGP table
// much more, and is then searched the slow way.
const maxAddressTableBytes = 16 << 20

// hasLocalAddress reports whether addr is a local address of the network
// namespace of the process directory proc: a socket's local address always
// is, so only such namespaces need their socket tables read. Reading the
// socket tables of a namespace costs a walk of the kernel's whole TCP hash
// (milliseconds, however few sockets there are); its addresses cost
// microseconds. known is false when the namespace's addresses cannot be
// read, and then its tables must be.
func hasLocalAddress(proc int, addr netip.Addr) (has, known bool) {
	name, parse := "net/fib_trie", parseFIBTrieLocal
	if !addr.Is4() {
		name, parse = "net/if_inet6", parseIfInet6
	}
	f, err := procroot.OpenProcFile(proc, name)
	if err != nil {
		return false, false
	}
	defer f.Close()
	has, err = parse(&io.LimitedReader{R: f, N: maxAddressTableBytes + 1}, addr)
	return has, err == nil
}

// parseFIBTrieLocal reports whether /proc/net/fib_trie has a LOCAL route
// whose prefix holds addr: the kernel adds one, scope host, for every
// address of the namespace (and 127.0.0.0/8 for lo).
func parseFIBTrieLocal(r io.Reader, addr netip.Addr) (bool, error) {
	found := false
	err := eachFIBTrieLocal(r, func(p netip.Prefix) bool {
		found = p.Contains(addr)
		return !found
	})
	return found, err
}

// eachFIBTrieLocal calls fn with the prefix of each LOCAL route of
// /proc/net/fib_trie, in the order listed, until fn returns false. Its
// leaves read
//
//	|-- 10.250.0.2
//	   /32 host LOCAL
//
// with one line per alias of the leaf's prefix.
func eachFIBTrieLocal(r io.Reader, fn func(netip.Prefix) bool) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), maxTableLine)
	var leaf netip.Addr
	for sc.Scan() {
		field, rest := nextField(sc.Bytes())
		switch {
		case bytes.Equal(field, []byte("|--")):
			ip, _ := nextField(rest)
			leaf, _ = netip.ParseAddr(string(ip))
		case bytes.Equal(field, []byte("+--")):
			leaf = netip.Addr{}
		case len(field) > 1 && field[0] == '/' && leaf.Is4():
			bits, err := strconv.Atoi(string(field[1:]))
			if err != nil {
				continue
			}
			_, rest = nextField(rest) // scope
			typ, _ := nextField(rest)
			if !bytes.Equal(typ, []byte("LOCAL")) {
				continue
			}
			if p, err := leaf.Prefix(bits); err == nil && !fn(p) {
				return nil
			}
		}
	}
	return addressTableErr(sc, r)
}

// parseIfInet6 reports whether /proc/net/if_inet6 lists addr.
func parseIfInet6(r io.Reader, addr netip.Addr) (bool, error) {
	found := false
	err := eachIfInet6(r, func(a netip.Addr) bool {
		found = a == addr
		return !found
	})
	return found, err
}

// eachIfInet6 calls fn with each address of /proc/net/if_inet6, until fn
// returns false. It lists one address a line as 32 hex digits in network
// byte order:
//
//	fd000000000000000000000000000002 04 40 00 82     eth0
func eachIfInet6(r io.Reader, fn func(netip.Addr) bool) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), maxTableLine)
	var a [16]byte
	for sc.Scan() {
		field, _ := nextField(sc.Bytes())
		if len(field) != 2*len(a) {
			continue
		}
		if _, err := hex.Decode(a[:], field); err != nil {
			continue
		}
		if !fn(netip.AddrFrom16(a)) {
			return nil
		}
	}
	return addressTableErr(sc, r)
}

// addressTableErr is the error that ended a scan of an address table, or
// errTableTooLarge when its cap did.
func addressTableErr(sc *bufio.Scanner, r io.Reader) error {
	if err := sc.Err(); err != nil {
		return err
	}
	if lr, ok := r.(*io.LimitedReader); ok && lr.N <= 0 {
		return fmt.Errorf("address table: %w", errTableTooLarge)
	}
	return nil
}
