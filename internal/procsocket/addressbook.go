package procsocket

import (
	"io"
	"net/netip"
	"time"

	"golang.org/x/sys/unix"

	"github.com/otelcol-ai/otelcol-ai/internal/procroot"
)

// addressBookTTL is how long the addresses of the proc root's network
// namespaces are used once read: a new pod's address spends the unplaced
// peers' budget for at most that long.
const addressBookTTL = time.Second

// Bounds on the address book: a namespace with more addresses than a pod
// or a node has (one that adds them to take more budgets) has the rest
// unplaced.
const (
	maxAddressesPerNetNS = 64
	maxBookAddresses     = 1 << 16
)

// addressBook maps each address local to exactly one network namespace of
// the proc root (not loopback) to that namespace: which budget a scan for a
// peer at that address spends, known before the scan. Reading it costs a
// readlink per process and the address tables of each namespace, none of
// its socket tables.
type addressBook struct {
	netns map[netip.Addr]uint64 // unplaced: local to several namespaces
	read  time.Time
}

// placeAddress returns the network namespace whose scan budget a peer at
// addr spends: this process's for loopback, which can only be local to
// it; the one that has addr among its addresses; or unplaced. It rereads
// the address book when it is older than addressBookTTL. The caller holds
// scanMu.
func (r *Resolver) placeAddress(addr netip.Addr) uint64 {
	if addr.IsLoopback() {
		return r.selfNetNS
	}
	now := r.now()
	if age := now.Sub(r.book.read); r.book.read.IsZero() || age < 0 || age >= addressBookTTL {
		r.book = addressBook{netns: r.readAddresses(), read: now}
	}
	return r.book.netns[addr]
}

// readAddresses maps the addresses of each network namespace of the proc
// root to it, through the first member of each that can be read.
func (r *Resolver) readAddresses() map[netip.Addr]uint64 {
	book := make(map[netip.Addr]uint64)
	namespaces, err := r.namespaces()
	if err != nil {
		return book
	}
	for _, ns := range namespaces {
		for _, pid := range ns.members {
			proc, err := r.openPID(pid, ns.inode)
			if err != nil {
				continue
			}
			ok := addAddresses(proc, ns.inode, book)
			unix.Close(proc)
			if ok {
				break
			}
		}
	}
	return book
}

// addAddresses adds the addresses of network namespace ns, read through
// the process directory proc, to book (an address another namespace has too
// becomes unplaced), at most maxAddressesPerNetNS of them. ok is false when
// neither address table could be read.
func addAddresses(proc int, ns uint64, book map[netip.Addr]uint64) (ok bool) {
	added := 0
	add := func(a netip.Addr) bool {
		if a.IsLoopback() {
			return true
		}
		switch owner, known := book[a]; {
		case known && owner == ns:
			return true // listed twice (fib_trie's Main and Local tables)
		case known:
			book[a] = unplaced
		case len(book) >= maxBookAddresses:
			return false
		default:
			book[a] = ns
		}
		added++
		return added < maxAddressesPerNetNS
	}
	for _, t := range [...]struct {
		name string
		each func(io.Reader, func(netip.Addr) bool) error
	}{
		{"net/fib_trie", eachFIBTrieAddress},
		{"net/if_inet6", eachIfInet6},
	} {
		f, err := procroot.OpenProcFile(proc, t.name)
		if err != nil {
			continue
		}
		ok = true
		// A table cut at its cap has given the addresses before the cut.
		_ = t.each(&io.LimitedReader{R: f, N: maxAddressTableBytes + 1}, add)
		f.Close()
		if added >= maxAddressesPerNetNS {
			break
		}
	}
	return ok
}

// eachFIBTrieAddress calls fn with each address of fib_trie's LOCAL /32
// routes, one per address of the namespace, until fn returns false. Wider
// LOCAL prefixes (127.0.0.0/8, AnyIP routes) name no one address.
func eachFIBTrieAddress(r io.Reader, fn func(netip.Addr) bool) error {
	return eachFIBTrieLocal(r, func(p netip.Prefix) bool {
		return !p.IsSingleIP() || fn(p.Addr())
	})
}
