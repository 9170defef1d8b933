package procsocket

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"strconv"
)

// Socket states as /proc/net/tcp prints them (include/net/tcp_states.h).
const (
	stateEstablished = 0x01
	stateListen      = 0x0A
)

// Caps on reading a socket table: a kernel row is under 200 bytes, and a
// node with a million connections has a table of about 150 MiB, far beyond
// what one lookup should stream.
const (
	maxTableLine  = 4 << 10
	maxTableBytes = 64 << 20
	// tableReadSize is the read size under the line scanner: seq_file
	// fills whatever is asked, so big reads mean few system calls.
	tableReadSize = 64 << 10
)

// tcpRow is the part of a /proc/<pid>/net/tcp{,6} row a lookup needs.
type tcpRow struct {
	Local  netip.AddrPort // IPv4-mapped addresses are unmapped
	Remote netip.AddrPort
	State  uint8
	Inode  uint64
}

// parseTCPRow parses one row of /proc/net/tcp or /proc/net/tcp6:
//
//	sl  local_address rem_address   st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode ...
//	 0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000  0 0 12345 ...
//
// The header and anything that does not have this shape is refused.
func parseTCPRow(line []byte) (tcpRow, bool) {
	var f [10][]byte
	rest := line
	for i := range f {
		f[i], rest = nextField(rest)
		if f[i] == nil {
			return tcpRow{}, false
		}
	}
	sl := f[0]
	if len(sl) < 2 || sl[len(sl)-1] != ':' || !isDecimal(sl[:len(sl)-1]) {
		return tcpRow{}, false
	}
	local, ok := parseHexAddrPort(f[1])
	if !ok {
		return tcpRow{}, false
	}
	// Both addresses of a row have the table's width, even where a
	// v4-mapped one unmaps to IPv4 and the other (::) does not.
	remote, ok := parseHexAddrPort(f[2])
	if !ok || len(f[1]) != len(f[2]) {
		return tcpRow{}, false
	}
	st, ok := parseHex(f[3], 2)
	if !ok {
		return tcpRow{}, false
	}
	if !isDecimal(f[9]) {
		return tcpRow{}, false
	}
	inode, err := strconv.ParseUint(string(f[9]), 10, 64)
	if err != nil {
		return tcpRow{}, false
	}
	return tcpRow{Local: local, Remote: remote, State: uint8(st), Inode: inode}, true
}

// nextField returns the first space-separated field of b and what follows
// it, or nil when b holds no more fields.
func nextField(b []byte) (field, rest []byte) {
	i := 0
	for i < len(b) && (b[i] == ' ' || b[i] == '\t') {
		i++
	}
	if i == len(b) {
		return nil, nil
	}
	j := i
	for j < len(b) && b[j] != ' ' && b[j] != '\t' {
		j++
	}
	return b[i:j], b[j:]
}

// parseHexAddrPort parses the kernel's "ADDR:PORT": ADDR is 8 hex digits
// (IPv4) or 32 (IPv6), each 32-bit word printed as a number in host byte
// order; PORT is 4 hex digits, a number. IPv4-mapped IPv6 addresses are
// unmapped, so that both tables name a v4 peer the same way.
func parseHexAddrPort(b []byte) (netip.AddrPort, bool) {
	colon := bytes.IndexByte(b, ':')
	if colon < 0 {
		return netip.AddrPort{}, false
	}
	hexAddr, hexPort := b[:colon], b[colon+1:]
	port, ok := parseHex(hexPort, 4)
	if !ok {
		return netip.AddrPort{}, false
	}
	var addr netip.Addr
	switch len(hexAddr) {
	case 8:
		w, ok := parseHex(hexAddr, 8)
		if !ok {
			return netip.AddrPort{}, false
		}
		var a [4]byte
		binary.NativeEndian.PutUint32(a[:], uint32(w))
		addr = netip.AddrFrom4(a)
	case 32:
		var a [16]byte
		for i := 0; i < 4; i++ {
			w, ok := parseHex(hexAddr[8*i:8*i+8], 8)
			if !ok {
				return netip.AddrPort{}, false
			}
			binary.NativeEndian.PutUint32(a[4*i:], uint32(w))
		}
		addr = netip.AddrFrom16(a).Unmap()
	default:
		return netip.AddrPort{}, false
	}
	return netip.AddrPortFrom(addr, uint16(port)), true
}

// parseHex parses exactly n hex digits (either case).
func parseHex(b []byte, n int) (uint64, bool) {
	if len(b) != n {
		return 0, false
	}
	var v uint64
	for _, c := range b {
		var d byte
		switch {
		case '0' <= c && c <= '9':
			d = c - '0'
		case 'a' <= c && c <= 'f':
			d = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			d = c - 'A' + 10
		default:
			return 0, false
		}
		v = v<<4 | uint64(d)
	}
	return v, true
}

func isDecimal(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	for _, c := range b {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// appendHexAddrPort appends ap in the kernel's table format: the form of
// an IPv4 address in /proc/net/tcp when wide is false, and in
// /proc/net/tcp6 (v4-mapped when ap is IPv4) when it is true.
func appendHexAddrPort(dst []byte, ap netip.AddrPort, wide bool) []byte {
	addr := ap.Addr()
	if wide {
		a := addr.As16()
		for i := 0; i < 4; i++ {
			dst = fmt.Appendf(dst, "%08X", binary.NativeEndian.Uint32(a[4*i:]))
		}
	} else {
		a := addr.As4()
		dst = fmt.Appendf(dst, "%08X", binary.NativeEndian.Uint32(a[:]))
	}
	return fmt.Appendf(dst, ":%04X", ap.Port())
}

// tableKeys returns the local_address fields a socket bound to peer has in
// /proc/net/tcp (IPv4 only) and in /proc/net/tcp6 (nil when none can).
// Rows are matched on these bytes first, so that only matching rows are
// parsed: a busy table has hundreds of thousands of rows.
func tableKeys(peer netip.AddrPort) (tcp4, tcp6 []byte) {
	if peer.Addr().Is4() {
		tcp4 = appendHexAddrPort(nil, peer, false)
	}
	tcp6 = appendHexAddrPort(nil, peer, true)
	return tcp4, tcp6
}

// addressKeys is tableKeys for every port of addr: the local_address
// fields up to and including the colon, which localMatches takes to match
// any port.
func addressKeys(addr netip.Addr) (tcp4, tcp6 []byte) {
	tcp4, tcp6 = tableKeys(netip.AddrPortFrom(addr, 0))
	if tcp4 != nil {
		tcp4 = tcp4[:len(tcp4)-4]
	}
	return tcp4, tcp6[:len(tcp6)-4]
}

// localMatches reports whether a row's local_address field is key, compared
// without regard to case: the whole field, or only its address when key
// ends at the colon (addressKeys).
func localMatches(local, key []byte) bool {
	if len(key) > 0 && key[len(key)-1] == ':' {
		return len(local) == len(key)+4 && bytes.EqualFold(local[:len(key)], key)
	}
	return bytes.EqualFold(local, key)
}

// scanTCPTable streams a socket table from r and calls match for every
// well-formed row whose local_address field matches key (localMatches). It
// reads at most limit bytes and lines of at most maxTableLine bytes; past
// either it stops with an error, after the rows it has seen.
func scanTCPTable(r io.Reader, key []byte, limit int64, match func(tcpRow)) error {
	lr := &io.LimitedReader{R: r, N: limit + 1}
	sc := bufio.NewScanner(bufio.NewReaderSize(lr, tableReadSize))
	sc.Buffer(make([]byte, 0, maxTableLine+1), maxTableLine+1) // a line of maxTableLine bytes and its newline
	for sc.Scan() {
		line := sc.Bytes()
		_, rest := nextField(line)
		local, _ := nextField(rest)
		if !localMatches(local, key) {
			continue
		}
		if row, ok := parseTCPRow(line); ok {
			match(row)
		}
	}
	if err := sc.Err(); errors.Is(err, bufio.ErrTooLong) {
		return fmt.Errorf("line over %d bytes: %w", maxTableLine, err)
	} else if err != nil {
		return err
	}
	if lr.N <= 0 {
		return fmt.Errorf("table larger than %d bytes: %w", limit, errTableTooLarge)
	}
	return nil
}
