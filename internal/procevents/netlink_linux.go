//go:build linux

package procevents

import (
	"encoding/binary"
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// The proc connector's constants (linux/connector.h, linux/cn_proc.h).
const (
	cnIdxProc         = 1
	cnValProc         = 1
	procCnMcastListen = 1

	procEventExec = 0x00000002
	procEventExit = 0x80000000

	sizeofCnMsg     = 20 // idx, val, seq, ack (u32 each), len, flags (u16 each)
	sizeofProcEvent = 16 // what, cpu (u32), timestamp_ns (u64), then the union
)

// netlinkSource reads the proc connector: every exec and exit on the node,
// without the command name. It needs CAP_NET_ADMIN in the initial network
// namespace.
type netlinkSource struct {
	file *os.File
	buf  []byte
}

func openNetlink() (source, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_DGRAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, unix.NETLINK_CONNECTOR)
	if err != nil {
		return nil, os.NewSyscallError("socket", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK, Groups: cnIdxProc, Pid: 0}); err != nil {
		_ = unix.Close(fd)
		return nil, os.NewSyscallError("bind", err)
	}
	// nlmsghdr, cn_msg, then the op.
	msg := make([]byte, unix.NLMSG_HDRLEN+sizeofCnMsg+4)
	ne := binary.NativeEndian
	ne.PutUint32(msg[0:], uint32(len(msg)))
	ne.PutUint16(msg[4:], unix.NLMSG_DONE)
	ne.PutUint32(msg[12:], uint32(os.Getpid()))
	cn := msg[unix.NLMSG_HDRLEN:]
	ne.PutUint32(cn[0:], cnIdxProc)
	ne.PutUint32(cn[4:], cnValProc)
	ne.PutUint16(cn[16:], 4)
	ne.PutUint32(cn[sizeofCnMsg:], procCnMcastListen)
	if err := unix.Sendto(fd, msg, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		_ = unix.Close(fd)
		return nil, os.NewSyscallError("sendto", err)
	}
	return &netlinkSource{file: os.NewFile(uintptr(fd), "proc-connector"), buf: make([]byte, 64<<10)}, nil
}

func (s *netlinkSource) read(buf []Event) ([]Event, error) {
	n, err := s.file.Read(s.buf)
	if err != nil {
		if errors.Is(err, os.ErrClosed) {
			return buf, ErrClosed
		}
		if errors.Is(err, unix.ENOBUFS) {
			// The socket's buffer overflowed: events were lost.
			return buf, errLost
		}
		return buf, err
	}
	return appendNetlink(buf, s.buf[:n]), nil
}

// appendNetlink decodes the proc events in one datagram of netlink
// messages; anything short or of another kind is skipped.
func appendNetlink(buf []Event, data []byte) []Event {
	ne := binary.NativeEndian
	for len(data) >= unix.NLMSG_HDRLEN {
		size := int(ne.Uint32(data[0:]))
		if size < unix.NLMSG_HDRLEN || size > len(data) {
			return buf
		}
		msg := data[unix.NLMSG_HDRLEN:size]
		data = data[min(nlmsgAlign(size), len(data)):]
		if len(msg) < sizeofCnMsg+sizeofProcEvent+8 || ne.Uint32(msg[0:]) != cnIdxProc {
			continue
		}
		ev := msg[sizeofCnMsg:]
		what := ne.Uint32(ev[0:])
		body := ev[sizeofProcEvent:]
		pid, tgid := int(ne.Uint32(body[0:])), int(ne.Uint32(body[4:]))
		switch {
		case what == procEventExec:
			buf = append(buf, Event{PID: tgid, Kind: Exec})
		case what == procEventExit && pid == tgid:
			buf = append(buf, Event{PID: tgid, Kind: Exit})
		}
	}
	return buf
}

func nlmsgAlign(n int) int { return (n + unix.NLMSG_ALIGNTO - 1) &^ (unix.NLMSG_ALIGNTO - 1) }

// lost is unknown: an overflow shows as ENOBUFS from read.
func (s *netlinkSource) lost() uint64 { return 0 }

func (s *netlinkSource) close() error { return s.file.Close() }
