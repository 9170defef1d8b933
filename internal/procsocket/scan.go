package procsocket

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/otelcol-ai/otelcol-ai/internal/procroot"
)

// found is the result of a successful scan.
type found struct {
	owner Owner
	fd    int // the owner's descriptor that held the socket
	inode uint64
}

// netns is one network namespace and the processes seen in it.
type netns struct {
	inode   uint64
	members []int
}

// scan finds peer's owner by walking the proc root.
func (r *Resolver) scan(peer netip.AddrPort) (found, error) {
	namespaces, err := r.namespacesFor(peer.Addr())
	if err != nil {
		return found{}, fmt.Errorf("procsocket: peer %v: %w", peer, err)
	}
	tcp4Key, tcp6Key := tableKeys(peer)
	unreadable := 0
	for _, ns := range namespaces {
		inodes, ok := r.findSocket(ns, peer, tcp4Key, tcp6Key)
		if !ok {
			unreadable++
			continue
		}
		if len(inodes) > 0 {
			return r.findOwner(peer, ns, inodes)
		}
	}
	return found{}, fmt.Errorf("procsocket: peer %v: %w in %d network namespaces under %s (%d unreadable)",
		peer, ErrNotFound, len(namespaces), r.procRoot, unreadable)
}

// namespacesFor lists the network namespaces where a socket with local
// address addr can have connected to this process: all of them, or only
// this process's for a loopback address, since another namespace's
// loopback socket with the same address is not the one that connected to
// us.
func (r *Resolver) namespacesFor(addr netip.Addr) ([]netns, error) {
	namespaces, err := r.namespaces()
	if err != nil {
		return nil, fmt.Errorf("listing processes under %s: %w", r.procRoot, err)
	}
	if addr.IsLoopback() && r.selfNetNS != 0 {
		namespaces = slices.DeleteFunc(namespaces, func(ns netns) bool { return ns.inode != r.selfNetNS })
	}
	return namespaces, nil
}

// namespaces lists the proc root's processes by network namespace, this
// process's namespace first, the others in order of their lowest pid.
func (r *Resolver) namespaces() ([]netns, error) {
	dir, err := os.Open(r.procRoot)
	if err != nil {
		return nil, err
	}
	names, err := dir.Readdirnames(-1)
	dir.Close()
	if err != nil {
		return nil, err
	}
	pids := make([]int, 0, len(names))
	for _, name := range names {
		if pid, err := strconv.Atoi(name); err == nil && pid > 0 {
			pids = append(pids, pid)
		}
	}
	slices.Sort(pids)
	var (
		out   []netns
		index = make(map[uint64]int)
		buf   [64]byte
	)
	for _, pid := range pids {
		n, err := unix.Readlink(r.pidPath(pid, "ns/net"), buf[:])
		if err != nil {
			continue // exited, or not ours to read
		}
		ino, ok := parseBracketInode("net:", buf[:n])
		if !ok {
			continue
		}
		i, ok := index[ino]
		if !ok {
			i = len(out)
			index[ino] = i
			out = append(out, netns{inode: ino})
		}
		out[i].members = append(out[i].members, pid)
	}
	if i, ok := index[r.selfNetNS]; ok && i > 0 {
		self := out[i]
		copy(out[1:i+1], out[:i])
		out[0] = self
	}
	return out, nil
}

// findSocket returns the inodes of the rows of ns's socket tables that
// have peer as local address, best state only (ESTABLISHED over others;
// LISTEN rows and rows without an inode ignored). ok is false when no
// member of ns could be read.
func (r *Resolver) findSocket(ns netns, peer netip.AddrPort, tcp4Key, tcp6Key []byte) (inodes []uint64, ok bool) {
	best := 2 // rank of the rows kept; lower is better
	match := func(row tcpRow) {
		if row.State == stateListen || row.Inode == 0 {
			return
		}
		rank := 1
		if row.State == stateEstablished {
			rank = 0
		}
		switch {
		case rank < best:
			best, inodes = rank, append(inodes[:0], row.Inode)
		case rank == best && !slices.Contains(inodes, row.Inode):
			inodes = append(inodes, row.Inode)
		}
	}
	// Found in tcp, tcp6 can hold the same address and port only for
	// sockets bound with SO_REUSEADDR, which the peer alone cannot tell
	// apart: not worth another walk of the hash.
	enough := func() bool { return len(inodes) > 0 }
	ok = r.readTables(ns, peer.Addr(), tcp4Key, tcp6Key, match, enough)
	return inodes, ok
}

// readTables streams ns's socket tables (tcp with tcp4Key, then tcp6 with
// tcp6Key; a nil key skips its table) through the first member that can be
// read, calling match for the rows whose local address matches, and stops
// before tcp6 when enough says so. A namespace that does not have addr
// among its addresses has no such rows, and its tables are not read. ok is
// false when no member could be read; match may then have seen some rows
// more than once.
func (r *Resolver) readTables(ns netns, addr netip.Addr, tcp4Key, tcp6Key []byte, match func(tcpRow), enough func() bool) (ok bool) {
	for _, pid := range ns.members {
		proc, err := r.openPID(pid, ns.inode)
		if err != nil {
			continue
		}
		ok = r.readTablesIn(proc, addr, tcp4Key, tcp6Key, match, enough)
		unix.Close(proc)
		if ok {
			return true
		}
	}
	return false
}

// readTablesIn is readTables through the process directory proc.
func (r *Resolver) readTablesIn(proc int, addr netip.Addr, tcp4Key, tcp6Key []byte, match func(tcpRow), enough func() bool) (ok bool) {
	if has, known := hasLocalAddress(proc, addr); known && !has {
		return true
	}
	for _, t := range [...]struct {
		name string
		key  []byte
	}{{"net/tcp", tcp4Key}, {"net/tcp6", tcp6Key}} {
		if t.key == nil {
			continue
		}
		// A table cut at its cap still yields the rows before the cut;
		// one that cannot be opened (no IPv6) yields none.
		if err := r.readTable(proc, t.name, t.key, match); err == nil || errors.Is(err, errTableTooLarge) {
			ok = true
		}
		if enough() {
			break
		}
	}
	return ok
}

// readTable streams the socket table name under the process directory dirfd.
func (r *Resolver) readTable(dirfd int, name string, key []byte, match func(tcpRow)) error {
	f, err := procroot.OpenProcFile(dirfd, name)
	if err != nil {
		return err
	}
	defer f.Close()
	r.tableReads.Add(1)
	if err := scanTCPTable(f, key, maxTableBytes, match); err != nil {
		return fmt.Errorf("%s: %w", f.Name(), err)
	}
	return nil
}

// findOwner looks for the processes of ns that hold one of inodes. It
// scans them all, since a second holder makes the answer ambiguous, and
// stops at the second.
func (r *Resolver) findOwner(peer netip.AddrPort, ns netns, inodes []uint64) (found, error) {
	held := func(inode uint64) bool { return slices.Contains(inodes, inode) }
	var holders []found
	for _, pid := range ns.members {
		h, ok := r.holder(pid, ns.inode, held)
		if !ok {
			continue
		}
		holders = append(holders, h)
		if len(holders) == 2 {
			break
		}
	}
	switch len(holders) {
	case 0:
		return found{}, fmt.Errorf("procsocket: peer %v: socket inode %v in netns %d: %w: held by none of its %d processes",
			peer, inodes, ns.inode, ErrNotFound, len(ns.members))
	case 1:
		return holders[0], nil
	default:
		return found{}, fmt.Errorf("procsocket: peer %v: socket inode %v in netns %d: %w: pids %d and %d at least",
			peer, inodes, ns.inode, ErrAmbiguous, holders[0].owner.PID, holders[1].owner.PID)
	}
}

// holder reports whether pid, still in network namespace ns, holds a
// descriptor for a socket whose inode is held, and if so returns the first
// such descriptor with its process as an owner.
func (r *Resolver) holder(pid int, ns uint64, held func(inode uint64) bool) (found, bool) {
	proc, err := r.openPID(pid, ns)
	if err != nil {
		return found{}, false
	}
	defer unix.Close(proc)
	fdDir, err := unix.Openat(proc, "fd", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return found{}, false
	}
	dir := os.NewFile(uintptr(fdDir), r.pidPath(pid, "fd"))
	defer dir.Close()
	var buf [64]byte
	for {
		names, err := dir.Readdirnames(256)
		for _, name := range names {
			n, err := unix.Readlinkat(fdDir, name, buf[:])
			if err != nil {
				continue
			}
			inode, ok := socketInode(buf[:n])
			if !ok || !held(inode) {
				continue
			}
			fd, err := strconv.Atoi(name)
			if err != nil {
				continue
			}
			return r.owner(proc, pid, ns, fd, inode)
		}
		if err != nil || len(names) == 0 {
			return found{}, false
		}
	}
}

// owner completes a holder with its identity (start time, VPID, container
// and pod), read by pid, and checks the process behind proc was alive
// after that read, so that they are its own and not a successor's.
func (r *Resolver) owner(proc, pid int, ns uint64, fd int, inode uint64) (found, bool) {
	id, err := r.stat.Identity(pid)
	if err != nil {
		return found{}, false
	}
	var st unix.Stat_t
	if err := unix.Fstatat(proc, "stat", &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return found{}, false
	}
	owner := Owner{Identity: id, NetNS: ns}
	return found{owner: owner, fd: fd, inode: inode}, true
}

// stillHolds revalidates a cache entry: the owner's descriptor still
// links to the socket, and the pid still has the owner's start time. The
// link is read first: a process alive at the later start-time read, and
// started before the entry was made, was the one at the pid before it.
func (r *Resolver) stillHolds(e cacheEntry) bool {
	var buf [64]byte
	n, err := unix.Readlink(r.pidPath(e.owner.PID, "fd/"+strconv.Itoa(e.fd)), buf[:])
	if err != nil {
		return false
	}
	var want [64]byte
	if !bytes.Equal(buf[:n], fmt.Appendf(want[:0], "socket:[%d]", e.inode)) {
		return false
	}
	ticks, err := r.stat.StartTicks(e.owner.PID)
	return err == nil && ticks == e.owner.StartTicks
}

// openPID opens pid's proc directory and checks the process is in network
// namespace ns. The descriptor keeps naming that process: once it exits,
// lookups under it fail even if its pid is reused.
func (r *Resolver) openPID(pid int, ns uint64) (int, error) {
	proc, err := unix.Open(r.pidPath(pid, ""), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	var buf [64]byte
	n, err := unix.Readlinkat(proc, "ns/net", buf[:])
	if err != nil {
		unix.Close(proc)
		return -1, err
	}
	if ino, ok := parseBracketInode("net:", buf[:n]); !ok || ino != ns {
		unix.Close(proc)
		return -1, fmt.Errorf("pid %d left network namespace %d", pid, ns)
	}
	return proc, nil
}

func (r *Resolver) pidPath(pid int, name string) string {
	return filepath.Join(r.procRoot, strconv.Itoa(pid), name)
}

// socketInode parses a descriptor link "socket:[12345]" without
// allocating: holder reads one per descriptor of every process it scans.
func socketInode(link []byte) (uint64, bool) {
	const prefix = "socket:["
	if len(link) <= len(prefix)+1 || string(link[:len(prefix)]) != prefix || link[len(link)-1] != ']' {
		return 0, false
	}
	digits := link[len(prefix) : len(link)-1]
	if !isDecimal(digits) {
		return 0, false
	}
	var v uint64
	for _, c := range digits {
		d := uint64(c - '0')
		if v > (math.MaxUint64-d)/10 {
			return 0, false
		}
		v = v*10 + d
	}
	return v, true
}

// parseBracketInode parses links such as "net:[4026531840]" and
// "socket:[12345]" with the given prefix.
func parseBracketInode(prefix string, link []byte) (uint64, bool) {
	s, ok := strings.CutPrefix(string(link), prefix+"[")
	if !ok {
		return 0, false
	}
	s, ok = strings.CutSuffix(s, "]")
	if !ok || s == "" {
		return 0, false
	}
	v, err := strconv.ParseUint(s, 10, 64)
	return v, err == nil
}
