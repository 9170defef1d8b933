package procsocket

import (
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// scanFrom finds the processes that hold an ESTABLISHED socket with local
// address ip connected to one of this process's listeners, in every
// namespace where ip is local (the collector's own only, for loopback).
func (r *Resolver) scanFrom(ip netip.Addr) ([]Owner, error) {
	listeners, err := r.ownListeners()
	if err != nil {
		return nil, fmt.Errorf("procsocket: from %v: %w", ip, err)
	}
	if listeners.len() == 0 {
		return nil, fmt.Errorf("procsocket: from %v: %w: this process listens on no TCP socket", ip, ErrNotFound)
	}
	namespaces, err := r.namespacesFor(ip)
	if err != nil {
		return nil, fmt.Errorf("procsocket: from %v: %w", ip, err)
	}
	tcp4Key, tcp6Key := addressKeys(ip)
	var (
		owners     []Owner
		inodes     = make(map[uint64]bool)
		unreadable int
	)
	match := func(row tcpRow) {
		if row.State == stateEstablished && row.Inode != 0 && listeners.has(row.Remote) {
			inodes[row.Inode] = true
		}
	}
	// A v4 client's socket is in tcp, or in tcp6 when dual-stack (a JVM's
	// default): both are read.
	never := func() bool { return false }
	for _, ns := range namespaces {
		clear(inodes)
		if !r.readTables(ns, ip, tcp4Key, tcp6Key, match, never) {
			unreadable++
			continue
		}
		if len(inodes) > 0 {
			owners = r.appendHolders(owners, ns, inodes)
		}
	}
	if len(owners) == 0 {
		return nil, fmt.Errorf("procsocket: from %v: %w: no connection to this process's %d listening sockets held in %d network namespaces under %s (%d unreadable)",
			ip, ErrNotFound, listeners.len(), len(namespaces), r.procRoot, unreadable)
	}
	return owners, nil
}

// appendHolders appends to owners every process of ns that holds one of
// inodes, each once.
func (r *Resolver) appendHolders(owners []Owner, ns netns, inodes map[uint64]bool) []Owner {
	held := func(inode uint64) bool { return inodes[inode] }
	for _, pid := range ns.members {
		if h, ok := r.holder(pid, ns.inode, held); ok {
			owners = append(owners, h.owner)
		}
	}
	return owners
}

// listenerSet is this process's listening TCP sockets, matched against
// the remote address of a client's socket.
type listenerSet struct {
	// addrs are the sockets bound to one address (v4-mapped ones
	// unmapped), ports those bound to 0.0.0.0 or ::, which accept on any.
	addrs   map[netip.AddrPort]bool
	ports   map[uint16]bool
	expires time.Time
}

func (s *listenerSet) add(ap netip.AddrPort) {
	if ap.Addr().IsUnspecified() {
		s.ports[ap.Port()] = true
	} else {
		s.addrs[ap] = true
	}
}

// has reports whether remote, unmapped, names one of the listeners.
func (s *listenerSet) has(remote netip.AddrPort) bool {
	return s.ports[remote.Port()] || s.addrs[remote]
}

func (s *listenerSet) len() int { return len(s.addrs) + len(s.ports) }

// ownListeners returns this process's listeners, read again once
// listenersTTL has passed. The caller holds scanMu.
func (r *Resolver) ownListeners() (*listenerSet, error) {
	now := r.now()
	if now.Before(r.listeners.expires) {
		return &r.listeners, nil
	}
	s, err := readListeners()
	if err != nil {
		return nil, err
	}
	s.expires = now.Add(listenersTTL)
	r.listeners = s
	return &r.listeners, nil
}

// readListeners lists this process's listening TCP sockets from its own
// descriptors. getsockname names each, in whichever network namespace it
// was made, without reading a socket table (a walk of the kernel's whole
// established hash).
func readListeners() (listenerSet, error) {
	dir, err := os.Open("/proc/self/fd")
	if err != nil {
		return listenerSet{}, fmt.Errorf("listing this process's descriptors: %w", err)
	}
	names, err := dir.Readdirnames(-1)
	dir.Close()
	if err != nil {
		return listenerSet{}, fmt.Errorf("listing this process's descriptors: %w", err)
	}
	s := listenerSet{addrs: make(map[netip.AddrPort]bool), ports: make(map[uint16]bool)}
	for _, name := range names {
		fd, err := strconv.Atoi(name)
		if err != nil {
			continue
		}
		if ap, ok := listeningAddr(fd); ok {
			s.add(ap)
		}
	}
	return s, nil
}

// listeningAddr returns the address descriptor fd of this process listens
// on, if it is a listening TCP socket. A descriptor closed or reused since
// it was listed gives another answer, or none, for one listenersTTL.
func listeningAddr(fd int) (netip.AddrPort, bool) {
	if v, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ACCEPTCONN); err != nil || v == 0 {
		return netip.AddrPort{}, false
	}
	// Go listens with MPTCP where the kernel has it (since Go 1.24); a
	// plain TCP client's connection falls back to TCP.
	if p, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_PROTOCOL); err != nil || (p != unix.IPPROTO_TCP && p != unix.IPPROTO_MPTCP) {
		return netip.AddrPort{}, false
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		return netip.AddrPort{}, false
	}
	switch sa := sa.(type) {
	case *unix.SockaddrInet4:
		return netip.AddrPortFrom(netip.AddrFrom4(sa.Addr), uint16(sa.Port)), true
	case *unix.SockaddrInet6:
		return netip.AddrPortFrom(netip.AddrFrom16(sa.Addr).Unmap(), uint16(sa.Port)), true
	}
	return netip.AddrPort{}, false
}
