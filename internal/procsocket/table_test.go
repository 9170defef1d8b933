package procsocket

import (
	"bytes"
	"errors"
	"net/netip"
	"strings"
	"testing"
)

// Rows as a little-endian kernel prints them (captured from 6.x kernels).
const (
	headerTCP = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode                                                     "
	// 127.0.0.1:8080 listening.
	rowListen4 = "   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1610 1 00000000a3c3f235 100 0 0 10 0                      "
	// 10.250.0.2:40000 -> 10.250.0.1:4317 established.
	rowEstab4 = "   1: 0200FA0A:9C40 0100FA0A:10DD 01 00000000:00000000 00:00000000 00000000     0        0 98765 1 0000000000000000 20 4 30 10 -1                    "
	// [::1]:4318 <- [::1]:50000 established (in tcp6).
	rowEstab6 = "   0: 00000000000000000000000001000000:10DE 00000000000000000000000001000000:C350 01 00000000:00000000 00:00000000 00000000  1000        0 424242 1 0000000000000000 20 4 31 10 -1"
	// 127.0.0.1:51234 (v4-mapped, dual-stack client) -> 127.0.0.1:4317.
	rowMapped = "   3: 0000000000000000FFFF00000100007F:C822 0000000000000000FFFF00000100007F:10DD 01 00000000:00000000 00:00000000 00000000     0        0 7 1 0000000000000000 20 4 30 10 -1"
	// fe80::1:2 port 443, TIME_WAIT (no inode).
	rowTimeWait6 = "  12: 000080FE000000000000000002000100:01BB 000080FE000000000000000001000000:D431 06 00000000:00000000 03:00001770 00000000     0        0 0 3 0000000000000000"
)

func TestParseTCPRow(t *testing.T) {
	ap := netip.MustParseAddrPort
	tests := []struct {
		name string
		line string
		want tcpRow
		ok   bool
	}{
		{"ipv4 listen", rowListen4, tcpRow{ap("127.0.0.1:8080"), ap("0.0.0.0:0"), stateListen, 1610}, true},
		{"ipv4 established", rowEstab4, tcpRow{ap("10.250.0.2:40000"), ap("10.250.0.1:4317"), stateEstablished, 98765}, true},
		{"ipv6 loopback", rowEstab6, tcpRow{ap("[::1]:4318"), ap("[::1]:50000"), stateEstablished, 424242}, true},
		{"v4-mapped unmapped", rowMapped, tcpRow{ap("127.0.0.1:51234"), ap("127.0.0.1:4317"), stateEstablished, 7}, true},
		{"ipv6 link-local time-wait", rowTimeWait6, tcpRow{ap("[fe80::1:2]:443"), ap("[fe80::1]:54321"), 0x06, 0}, true},
		{"lowercase hex", strings.ToLower(rowListen4), tcpRow{ap("127.0.0.1:8080"), ap("0.0.0.0:0"), stateListen, 1610}, true},
		{"header", headerTCP, tcpRow{}, false},
		{"empty", "", tcpRow{}, false},
		{"blank", "      ", tcpRow{}, false},
		{"space inside address", strings.Replace(rowEstab4, "0200FA0A", "02 00FA0A", 1), tcpRow{}, false},
		{"truncated before inode", "   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0", tcpRow{}, false},
		{"short address", "   0: 00007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000 0 0 1", tcpRow{}, false},
		{"short port", "   0: 0100007F:F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000 0 0 1", tcpRow{}, false},
		{"no port", "   0: 0100007F 00000000:0000 0A 00000000:00000000 00:00000000 00000000 0 0 1", tcpRow{}, false},
		{"non-hex address", "   0: 0100007G:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000 0 0 1", tcpRow{}, false},
		{"mixed widths", "   0: 0100007F:1F90 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000 0 0 1", tcpRow{}, false},
		{"three-digit state", "   0: 0100007F:1F90 00000000:0000 0A0 00000000:00000000 00:00000000 00000000 0 0 1", tcpRow{}, false},
		{"negative inode", "   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000 0 0 -1", tcpRow{}, false},
		{"inode overflow", "   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000 0 0 18446744073709551616", tcpRow{}, false},
		{"slot without colon", "   0 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000 0 0 1", tcpRow{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := parseTCPRow([]byte(tt.line))
			if ok != tt.ok || got != tt.want {
				t.Fatalf("parseTCPRow = %+v, %v; want %+v, %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}

func TestTableKeys(t *testing.T) {
	tests := []struct {
		peer       string
		tcp4, tcp6 string
	}{
		{"127.0.0.1:8080", "0100007F:1F90", "0000000000000000FFFF00000100007F:1F90"},
		{"10.250.0.2:40000", "0200FA0A:9C40", "0000000000000000FFFF00000200FA0A:9C40"},
		{"[::1]:4318", "", "00000000000000000000000001000000:10DE"},
	}
	for _, tt := range tests {
		t.Run(tt.peer, func(t *testing.T) {
			tcp4, tcp6 := tableKeys(netip.MustParseAddrPort(tt.peer))
			if string(tcp4) != tt.tcp4 || string(tcp6) != tt.tcp6 {
				t.Fatalf("tableKeys = %q, %q; want %q, %q", tcp4, tcp6, tt.tcp4, tt.tcp6)
			}
		})
	}
}

func TestScanTCPTable(t *testing.T) {
	table := strings.Join([]string{headerTCP, rowListen4, "garbage", rowMapped,
		strings.Replace(rowMapped, "3: ", "4: ", 1) + "\n"}, "\n")
	_, key := tableKeys(netip.MustParseAddrPort("127.0.0.1:51234"))
	var got []tcpRow
	if err := scanTCPTable(strings.NewReader(table), key, maxTableBytes, func(r tcpRow) { got = append(got, r) }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Inode != 7 || got[1].Inode != 7 {
		t.Fatalf("matched %+v, want the two mapped rows", got)
	}

	t.Run("cap on total size", func(t *testing.T) {
		big := strings.Repeat(rowListen4+"\n", 1000)
		key4, _ := tableKeys(netip.MustParseAddrPort("127.0.0.1:8080"))
		n := 0
		err := scanTCPTable(strings.NewReader(big), key4, 10*int64(len(rowListen4)+1), func(tcpRow) { n++ })
		if !errors.Is(err, errTableTooLarge) {
			t.Fatalf("err = %v, want errTableTooLarge", err)
		}
		// Rows before the cap are still reported; the cut one is not.
		if n < 9 || n > 11 {
			t.Fatalf("%d rows before the cap, want about 10", n)
		}
	})
	t.Run("cap on a line", func(t *testing.T) {
		long := rowListen4 + "\n" + strings.Repeat("x", maxTableLine+1) + "\n" + rowListen4 + "\n"
		key4, _ := tableKeys(netip.MustParseAddrPort("127.0.0.1:8080"))
		n := 0
		err := scanTCPTable(strings.NewReader(long), key4, maxTableBytes, func(tcpRow) { n++ })
		if err == nil || !strings.Contains(err.Error(), "line over") || n != 1 {
			t.Fatalf("err = %v after %d rows, want a line-cap error after 1", err, n)
		}
	})
}

func FuzzParseTCPTable(f *testing.F) {
	for _, row := range []string{rowListen4, rowEstab4, rowEstab6, rowMapped, rowTimeWait6,
		headerTCP + "\n" + rowListen4 + "\n" + rowMapped + "\n"} {
		f.Add([]byte(row))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var rows []tcpRow
		for line := range bytes.SplitSeq(data, []byte("\n")) {
			// As bufio.ScanLines, which drops a carriage return.
			line = bytes.TrimSuffix(line, []byte("\r"))
			row, ok := parseTCPRow(line)
			if !ok {
				continue
			}
			rows = append(rows, row)
			// The local field is what tableKeys would build for the
			// parsed address, in the row's table width.
			_, rest := nextField(line)
			field, _ := nextField(rest)
			if key := appendHexAddrPort(nil, row.Local, len(field) > 13); !bytes.EqualFold(key, field) {
				t.Fatalf("local %q parsed as %v, which formats as %q", field, row.Local, key)
			}
			if row.Local.Addr().Is4In6() || row.Remote.Addr().Is4In6() {
				t.Fatalf("v4-mapped address left mapped: %+v", row)
			}
		}
		if len(rows) == 0 || len(data) > maxTableLine {
			return
		}
		// Streaming with the keys of the first row's address finds exactly
		// the rows parsed to that address, in either table width.
		local := rows[0].Local
		want := 0
		for _, r := range rows {
			if r.Local == local {
				want++
			}
		}
		got := 0
		key4, key6 := tableKeys(local)
		for _, k := range [][]byte{key4, key6} {
			if k == nil {
				continue
			}
			if err := scanTCPTable(bytes.NewReader(data), k, maxTableBytes, func(r tcpRow) {
				if r.Local != local {
					t.Fatalf("key %q matched a row with local %v", k, r.Local)
				}
				got++
			}); err != nil {
				t.Fatal(err)
			}
		}
		if got != want {
			t.Fatalf("streaming matched %d rows, parsing line by line %d", got, want)
		}
	})
}
