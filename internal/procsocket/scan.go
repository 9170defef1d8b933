package procsocket

import (
	"bytes"
	"errors"
	"fmt"
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
	namespaces, err := r.namespaces()
	if err != nil {
		return found{}, fmt.Errorf("procsocket: peer %v: listing processes under %s: %w", peer, r.procRoot, err)
	}
	if peer.Addr().IsLoopback() && r.selfNetNS != 0 {
		// Another namespace's loopback socket with the same address is
		// not the one that connected to us.
		namespaces = slices.DeleteFunc(namespaces, func(ns netns) bool { return ns.inode != r.selfNetNS })
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

// findSocket reads ns's socket tables through the first member that can
// be read, and returns the inodes of the rows that have the key as local
// address, best state only (ESTABLISHED over others; LISTEN rows and rows
// without an inode ignored). A namespace that does not have peer's address
// has no such rows, and its tables are not read. ok is false when no member
// could be read.
func (r *Resolver) findSocket(ns netns, peer netip.AddrPort, tcp4Key, tcp6Key []byte) (inodes []uint64, ok bool) {
	for _, pid := range ns.members {
		proc, err := r.openPID(pid, ns.inode)
		if err != nil {
			continue
		}
		inodes, ok = findSocketIn(proc, peer, tcp4Key, tcp6Key)
		unix.Close(proc)
		if ok {
			return inodes, true
		}
	}
	return nil, false
}

// findSocketIn is findSocket through the process directory proc.
func findSocketIn(proc int, peer netip.AddrPort, tcp4Key, tcp6Key []byte) (inodes []uint64, ok bool) {
	if has, known := hasLocalAddress(proc, peer.Addr()); known && !has {
		return nil, true
	}
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
	for _, t := range [...]struct {
		name string
		key  []byte
	}{{"net/tcp", tcp4Key}, {"net/tcp6", tcp6Key}} {
		if t.key == nil {
			continue
		}
		// A table cut at its cap still yields the rows before the cut;
		// one that cannot be opened (no IPv6) yields none.
		if err := readTable(proc, t.name, t.key, match); err == nil || errors.Is(err, errTableTooLarge) {
			ok = true
		}
		// Found in tcp, tcp6 can hold the same address and port only for
		// sockets bound with SO_REUSEADDR, which the peer alone cannot
		// tell apart: not worth another walk of the hash.
		if len(inodes) > 0 {
			break
		}
	}
	return inodes, ok
}

// readTable streams the socket table name under the process directory dirfd.
func readTable(dirfd int, name string, key []byte, match func(tcpRow)) error {
	f, err := openProcFile(dirfd, name)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := scanTCPTable(f, key, maxTableBytes, match); err != nil {
		return fmt.Errorf("%s: %w", f.Name(), err)
	}
	return nil
}

// findOwner looks for the processes of ns that hold one of inodes. It
// scans them all, since a second holder makes the answer ambiguous, and
// stops at the second.
func (r *Resolver) findOwner(peer netip.AddrPort, ns netns, inodes []uint64) (found, error) {
	targets := make([][]byte, len(inodes))
	for i, ino := range inodes {
		targets[i] = fmt.Appendf(nil, "socket:[%d]", ino)
	}
	var holders []found
	for _, pid := range ns.members {
		h, ok := r.holder(pid, ns.inode, targets, inodes)
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
// descriptor whose link is one of targets (the links of inodes), and if
// so returns it as an owner with its start time.
func (r *Resolver) holder(pid int, ns uint64, targets [][]byte, inodes []uint64) (found, bool) {
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
			i := slices.IndexFunc(targets, func(t []byte) bool { return bytes.Equal(buf[:n], t) })
			if i < 0 {
				continue
			}
			fd, err := strconv.Atoi(name)
			if err != nil {
				continue
			}
			return r.owner(proc, pid, ns, fd, inodes[i])
		}
		if err != nil || len(names) == 0 {
			return found{}, false
		}
	}
}

// owner completes a holder with its start time, read by pid, and checks
// the process behind proc was alive after that read, so that the start
// time is its own and not a successor's.
func (r *Resolver) owner(proc, pid int, ns uint64, fd int, inode uint64) (found, bool) {
	ticks, err := r.stat.StartTicks(pid)
	if err != nil {
		return found{}, false
	}
	var st unix.Stat_t
	if err := unix.Fstatat(proc, "stat", &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return found{}, false
	}
	return found{owner: Owner{PID: pid, StartTicks: ticks, NetNS: ns}, fd: fd, inode: inode}, true
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

// openProcFile opens name under dirfd read-only, non-blocking and without
// following a final symlink, and only if it is a regular file.
func openProcFile(dirfd int, name string) (*os.File, error) {
	fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC|unix.O_NOFOLLOW|unix.O_NOCTTY, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: name, Err: err}
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, &os.PathError{Op: "stat", Path: name, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		unix.Close(fd)
		return nil, &os.PathError{Op: "open", Path: name, Err: procroot.ErrNotRegular}
	}
	return os.NewFile(uintptr(fd), name), nil
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
