package discovery

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/otelcol-ai/otelcol-ai/internal/procresource"
	"github.com/otelcol-ai/otelcol-ai/internal/procroot"
)

// These tests play the container: it owns its root filesystem, its
// symlinks and what it names in its maps, and aims them at the host.

const libPath = "/usr/lib/libpython3.11.so.1.0"

// hostile is a fake process (pid 800) with its own root directory, and a
// file on the "host" that the process wants the agent to read instead.
type hostile struct {
	t    *testing.T
	fp   *fakeProc
	root string
	// host is the host file's absolute path; decoy the file at the same
	// path inside the process's root.
	host, decoy string
}

func newHostile(t *testing.T) *hostile {
	h := &hostile{t: t, fp: newFakeProc(t)}
	h.fp.add(800, "/usr/bin/python3.11", "python3.11\x00", "")
	h.root = filepath.Join(h.fp.root, "800", "root")
	h.host = filepath.Join(t.TempDir(), "host-secret")
	h.write(h.host, "HOST")
	h.decoy = filepath.Join(h.root, h.host)
	h.write(h.decoy, "CONTAINER")
	return h
}

func (h *hostile) write(path, data string) {
	h.t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		h.t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		h.t.Fatal(err)
	}
}

// inRoot is path inside the process's root, as this process reaches it.
func (h *hostile) inRoot(path string) string { return filepath.Join(h.root, path) }

// open opens what the process names at path, with the identity its maps
// give, on another goroutine: an open that blocks fails the test after
// 10 s instead of hanging it.
func (h *hostile) open(path string, id FileID) (*os.File, error) {
	h.t.Helper()
	s := NewScanner(procresource.NewReader(h.fp.root, 0), Filter{})
	type result struct {
		f   *os.File
		err error
	}
	done := make(chan result, 1)
	go func() {
		f, err := s.Open(Interpreter{Resource: procresource.Resource{PID: 800}, Path: path, FileID: id})
		done <- result{f, err}
	}()
	select {
	case r := <-done:
		if r.f != nil {
			h.t.Cleanup(func() { _ = r.f.Close() })
		}
		return r.f, r.err
	case <-time.After(10 * time.Second):
		h.t.Fatalf("opening %s blocked", path)
		return nil, nil
	}
}

func contents(t *testing.T, f *os.File) string {
	t.Helper()
	data, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func TestOpenStaysInsideTheProcessRoot(t *testing.T) {
	tests := []struct {
		name string
		// setup places the library path's target in the root and returns
		// the path the maps line names.
		setup func(h *hostile) string
	}{
		{"absolute symlink to a host path", func(h *hostile) string {
			if err := os.MkdirAll(filepath.Dir(h.inRoot(libPath)), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(h.host, h.inRoot(libPath)); err != nil {
				t.Fatal(err)
			}
			return libPath
		}},
		{"relative symlink climbing out", func(h *hostile) string {
			if err := os.MkdirAll(filepath.Dir(h.inRoot(libPath)), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(strings.Repeat("../", 40)+h.host, h.inRoot(libPath)); err != nil {
				t.Fatal(err)
			}
			return libPath
		}},
		{"dot-dot path", func(h *hostile) string { return strings.Repeat("/..", 40) + h.host }},
		{"magic link to the agent's own root", func(h *hostile) string {
			if err := os.MkdirAll(filepath.Dir(h.inRoot(libPath)), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink("/proc/self/root"+h.host, h.inRoot(libPath)); err != nil {
				t.Fatal(err)
			}
			return libPath
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHostile(t)
			path := tt.setup(h)
			hostID, decoyID := fileID(t, h.host), fileID(t, h.decoy)

			// Maps naming the host file's inode: what resolves inside the
			// root is not it, and is refused.
			if f, err := h.open(path, hostID); !errors.Is(err, ErrMismatch) && !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("open with the host file's identity = %v, %v; want ErrMismatch or not found", f, err)
			}
			if strings.Contains(tt.name, "magic") {
				// /proc/self inside the fake root does not exist: the
				// magic link is never reached, let alone followed.
				return
			}
			// Maps naming what the process really maps, the file inside
			// its root: that file is opened, never the host's.
			f, err := h.open(path, decoyID)
			if err != nil {
				t.Fatalf("open inside the root: %v", err)
			}
			var st unix.Stat_t
			if err := unix.Fstat(int(f.Fd()), &st); err != nil {
				t.Fatal(err)
			}
			if st.Ino != decoyID.Inode || st.Ino == hostID.Inode {
				t.Fatalf("opened inode %d; the root's file is %d, the host's %d", st.Ino, decoyID.Inode, hostID.Inode)
			}
			if got := contents(t, f); got != "CONTAINER" {
				t.Fatalf("read %q, want the container's file", got)
			}
		})
	}
}

func TestOpenRefusesWhatIsNotARegularFile(t *testing.T) {
	tests := []struct {
		name string
		make func(path string) error
	}{
		{"FIFO", func(p string) error { return unix.Mkfifo(p, 0o644) }},
		{"character device 1,5 (/dev/zero's numbers)", func(p string) error {
			return unix.Mknod(p, unix.S_IFCHR|0o644, int(unix.Mkdev(1, 5)))
		}},
		{"directory", func(p string) error { return os.Mkdir(p, 0o755) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHostile(t)
			p := h.inRoot(libPath)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := tt.make(p); err != nil {
				t.Skipf("cannot make a %s here: %v", tt.name, err)
			}
			start := time.Now()
			f, err := h.open(libPath, fileID(t, p))
			if !errors.Is(err, procroot.ErrNotRegular) {
				t.Fatalf("open = %v, %v; want ErrNotRegular", f, err)
			}
			if d := time.Since(start); d > time.Second {
				t.Errorf("refusing took %s", d)
			}
		})
	}
}

// TestOpenRefusesASwappedFile: the process mapped one file, then put
// another at its path; the agent refuses the one it finds.
func TestOpenRefusesASwappedFile(t *testing.T) {
	h := newHostile(t)
	p := h.inRoot(libPath)
	h.write(p, "mapped")
	mapped := fileID(t, p)
	if err := os.Rename(p, p+".old"); err != nil {
		t.Fatal(err)
	}
	h.write(p, "swapped in")
	if f, err := h.open(libPath, mapped); !errors.Is(err, ErrMismatch) {
		t.Fatalf("open of a swapped file = %v, %v; want ErrMismatch", f, err)
	}
}

// TestMappedIDOfAPlainFile: the identity a mapping made here reports is
// fstat's on a filesystem without layers.
func TestMappedIDOfAPlainFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lib")
	if err := os.WriteFile(path, bytes.Repeat([]byte{1}, 100), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got, err := mappedID(f)
	if err != nil {
		t.Fatal(err)
	}
	if want := fileID(t, path); got != want {
		t.Fatalf("mapped id %v, want %v", got, want)
	}
}

// TestMapsPastTheCapIsRefusedOnce: a process with more mappings than
// MaxMapsSize holds is refused, once, and skipped at later scans.
func TestMapsPastTheCapIsRefusedOnce(t *testing.T) {
	fp := newFakeProc(t)
	line := "7f1e2a000000-7f1e2a0c0000 r-xp 00000000 fd:01 2002 /usr/lib/libfiller.so\n"
	huge := strings.Repeat(line, MaxMapsSize/len(line)+1) + "7f1e2c000000-7f1e2c0c0000 r-xp 00000000 fd:01 5005 " + libPath + "\n"
	fp.add(900, "/usr/bin/python3.11", "python3.11\x00", huge)
	fp.add(100, "/usr/local/bin/python3.11", "python3.11\x00app.py\x00", sharedPython)
	s := NewScanner(procresource.NewReader(fp.root, 0), Filter{})
	got, refused, err := s.Scan()
	if err != nil {
		t.Fatal(err)
	}
	if len(refused) != 1 || refused[0].PID != 900 || !errors.Is(refused[0].Err, procroot.ErrTooLarge) {
		t.Fatalf("refused %+v, want pid 900 with ErrTooLarge", refused)
	}
	if len(got) != 1 || got[0].Resource.PID != 100 {
		t.Fatalf("found %+v, want only pid 100", got)
	}
	if _, refused, _ := s.Scan(); len(refused) != 0 {
		t.Fatalf("second scan refused %+v again", refused)
	}
}
