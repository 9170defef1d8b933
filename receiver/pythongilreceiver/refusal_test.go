package pythongilreceiver

import (
	"context"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"
	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/otelcol-ai/otelcol-ai/internal/procresource"
	"github.com/otelcol-ai/otelcol-ai/internal/window"
	"github.com/otelcol-ai/otelcol-ai/receiver/pythongilreceiver/internal/discovery"
	"github.com/otelcol-ai/otelcol-ai/receiver/pythongilreceiver/internal/gil"
	"github.com/otelcol-ai/otelcol-ai/receiver/pythongilreceiver/internal/metadata"
	"github.com/otelcol-ai/otelcol-ai/receiver/pythongilreceiver/internal/metadatatest"
	"github.com/otelcol-ai/otelcol-ai/receiver/pythongilreceiver/internal/workloadtest"
)

// procTree is a proc filesystem written by the test: fake processes, each
// with its own root directory, beside real ones linked in.
type procTree struct {
	t    *testing.T
	root string
}

const hostileLib = "/usr/lib/libpython3.11.so.1.0"

// add makes pid a process mapping hostileLib; place puts something at
// that path in its root and returns the maps line's "dev inode".
func (p *procTree) add(pid int, place func(path string) string) {
	p.t.Helper()
	dir := filepath.Join(p.root, strconv.Itoa(pid))
	lib := filepath.Join(dir, "root", hostileLib)
	if err := os.MkdirAll(filepath.Dir(lib), 0o755); err != nil {
		p.t.Fatalf("os.MkdirAll: %v", err)
	}
	stat := strconv.Itoa(pid) + " (java) S 1 1 1 0 -1 4194304 0 0 0 0 0 0 0 0 20 0 1 0 " + strconv.Itoa(1000+pid) + " 0 0\n"
	maps := "7f1e2c000000-7f1e2c0c0000 r-xp 00000000 " + place(lib) + " " + hostileLib + "\n"
	for name, data := range map[string]string{"stat": stat, "cmdline": "java\x00", "maps": maps, "cgroup": "0::/\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			p.t.Fatalf("os.WriteFile: %v", err)
		}
	}
	if err := os.Symlink("/usr/bin/java", filepath.Join(dir, "exe")); err != nil {
		p.t.Fatalf("os.Symlink: %v", err)
	}
}

// link makes the real process pid visible in the tree.
func (p *procTree) link(pid int) {
	if err := os.Symlink(filepath.Join("/proc", strconv.Itoa(pid)), filepath.Join(p.root, strconv.Itoa(pid))); err != nil {
		p.t.Fatalf("os.Symlink: %v", err)
	}
}

// idOf is path's "dev inode" as maps shows them.
func idOf(t *testing.T, path string) string {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		t.Fatalf("unix.Stat: %v", err)
	}
	return fmt.Sprintf("%02x:%02x %d", unix.Major(st.Dev), unix.Minor(st.Dev), st.Ino)
}

// elfClaiming copies the USDT fixture to path with its symbol table claiming
// claim bytes, the file then extended (sparse) to size bytes.
func elfClaiming(t *testing.T, path string, claim uint64, size int64) {
	t.Helper()
	const fixture = "internal/gil/testdata/usdt/usdt.elf"
	data, err := os.ReadFile(fixture)
	if err != nil {
		t.Fatalf("os.ReadFile: %v", err)
	}
	f, err := elf.Open(fixture)
	if err != nil {
		t.Fatalf("elf.Open: %v", err)
	}
	defer f.Close()
	shoff := binary.LittleEndian.Uint64(data[40:]) // e_shoff
	for i, s := range f.Sections {
		if s.Type == elf.SHT_SYMTAB || s.Type == elf.SHT_DYNSYM {
			// sh_size is at byte 32 of an Elf64_Shdr.
			binary.LittleEndian.PutUint64(data[shoff+uint64(i)*64+32:], claim)
		}
	}
	if err := os.WriteFile(path, data, 0o755); err != nil {
		t.Fatalf("os.WriteFile: %v", err)
	}
	if size > int64(len(data)) {
		if err := os.Truncate(path, size); err != nil {
			t.Fatalf("os.Truncate: %v", err)
		}
	}
}

// TestHostileSourcesAreRefusedAndCounted runs discovery over processes
// that each aim something at the agent, beside a real CPython process:
// each hostile one is refused once, counted by reason and skipped; a
// panic is reported as the component's status; the real process is
// probed all the same.
func TestHostileSourcesAreRefusedAndCounted(t *testing.T) {
	probe, err := gil.Load(gil.Options{MinDuration: defaultMinDuration})
	if errors.Is(err, gil.ErrUnavailable) {
		t.Skipf("eBPF unavailable: %v", err)
	}
	if err != nil {
		t.Fatalf("gil.Load: %v", err)
	}
	w := workloadtest.Start(t, "sleep", "3", "10")

	tree := &procTree{t: t, root: t.TempDir()}
	tree.link(w.PID)
	tree.add(101, func(p string) string { // a FIFO: opening it must not block
		if err := unix.Mkfifo(p, 0o644); err != nil {
			t.Fatalf("unix.Mkfifo: %v", err)
		}
		return idOf(t, p)
	})
	tree.add(102, func(p string) string { // /dev/zero's numbers
		if err := unix.Mknod(p, unix.S_IFCHR|0o644, int(unix.Mkdev(1, 5))); err != nil {
			t.Fatalf("unix.Mknod: %v", err)
		}
		return idOf(t, p)
	})
	tree.add(103, func(p string) string { // a 600 MiB sparse file with a 512 MiB symbol table
		elfClaiming(t, p, 512<<20/24*24, 600<<20)
		return idOf(t, p)
	})
	tree.add(104, func(p string) string { // a 14 KiB file claiming the same
		elfClaiming(t, p, 512<<20/24*24, 0)
		return idOf(t, p)
	})
	tree.add(105, func(p string) string { // mapped one file, then swapped another in
		if err := os.WriteFile(p, []byte("mapped"), 0o755); err != nil {
			t.Fatalf("os.WriteFile: %v", err)
		}
		id := idOf(t, p)
		if err := os.Rename(p, p+".mapped"); err != nil {
			t.Fatalf("os.Rename: %v", err)
		}
		if err := os.WriteFile(p, []byte("swapped"), 0o755); err != nil {
			t.Fatalf("os.WriteFile: %v", err)
		}
		return id
	})
	tree.add(106, func(p string) string { // decoding this one panics (below)
		if err := os.WriteFile(p, []byte("boom"), 0o755); err != nil {
			t.Fatalf("os.WriteFile: %v", err)
		}
		return idOf(t, p)
	})
	tree.add(107, func(p string) string { return "fd:01 7007" })
	filler := "7f1e2a000000-7f1e2a0c0000 r-xp 00000000 fd:01 2002 /usr/lib/libfiller.so\n"
	// more mappings than the cap
	if err := os.WriteFile(filepath.Join(tree.root, "107", "maps"),
		[]byte(strings.Repeat(filler, discovery.MaxMapsSize/len(filler)+1)), 0o644); err != nil {
		t.Fatalf("os.WriteFile: %v", err)
	}

	tt := componenttest.NewTelemetry()
	t.Cleanup(func() {
		if err := tt.Shutdown(context.Background()); err != nil {
			t.Fatalf("tt.Shutdown: %v", err)
		}
	})
	tel, err := metadata.NewTelemetryBuilder(tt.NewTelemetrySettings())
	if err != nil {
		t.Fatalf("metadata.NewTelemetryBuilder: %v", err)
	}
	var reported []error
	refused := &refusals{tel: tel, logger: zap.NewNop(), report: func(err error) { reported = append(reported, err) }}
	clock, err := window.NewClock()
	if err != nil {
		t.Fatalf("window.NewClock: %v", err)
	}
	cfg := fastConfig()
	cfg.ProcRoot = tree.root
	scanner := discovery.NewScanner(procresource.NewReader(tree.root, 0), discovery.Filter{})
	st := newRunState(cfg, probe, clock, scanner, procresource.Node{HostName: "host"}, zap.NewNop(), refused)
	t.Cleanup(func() {
		if err := st.close(); err != nil {
			t.Errorf("st.close: %v", err)
		}
	})
	st.open = func(in discovery.Interpreter) (*os.File, error) {
		if in.Resource.PID == 106 {
			var decoded []byte
			_ = decoded[in.Resource.PID] // a decoder bug: index out of range
		}
		return scanner.Open(in)
	}

	// Refused once each: later scans skip what was refused.
	for range 3 {
		st.discover()
	}
	point := func(reason string, n int64) metricdata.DataPoint[int64] {
		return metricdata.DataPoint[int64]{Value: n, Attributes: attribute.NewSet(attribute.String("reason", reason))}
	}
	metadatatest.AssertEqualReceiverPythongilSourcesRefused(t, tt, []metricdata.DataPoint[int64]{
		point(reasonNotRegular, 2), point(reasonTooLarge, 1), point(reasonMalformed, 1),
		point(reasonMismatch, 1), point(reasonPanic, 1), point(reasonMapsTooLarge, 1),
	}, metricdatatest.IgnoreTimestamp())
	if got := len(reported); got != 1 {
		t.Fatalf("one status report, for the panic: got %d, want %d", got, 1)
	}
	if err := reported[0]; !errors.Is(err, discovery.ErrPanic) {
		t.Errorf("reported[0]: got error %v, want %v", err, discovery.ErrPanic)
	}

	probed := false
	for _, l := range st.libraries {
		if _, ok := l.pids[uint32(w.PID)]; ok {
			probed = true
		}
	}
	if !probed {
		t.Errorf("the real CPython process is probed beside the refused ones (probed is false)")
	}
	if got := len(st.libraries); got != 1 {
		t.Errorf("only the real process's library is attached: got %d, want %d", got, 1)
	}
}
