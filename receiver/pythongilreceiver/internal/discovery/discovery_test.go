package discovery

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"syscall"
	"testing"

	"github.com/otelcol-ai/otelcol-ai/internal/procresource"
)

// fakeProc is a proc tree with the files discovery reads.
type fakeProc struct {
	t    *testing.T
	root string
}

func newFakeProc(t *testing.T) *fakeProc {
	return &fakeProc{t: t, root: t.TempDir()}
}

func (f *fakeProc) add(pid int, exe, cmdline, maps string) {
	f.t.Helper()
	dir := filepath.Join(f.root, strconv.Itoa(pid))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		f.t.Fatal(err)
	}
	stat := strconv.Itoa(pid) + " (x) S 1 1 1 0 -1 4194304 0 0 0 0 0 0 0 0 20 0 1 0 12345 0 0\n"
	for name, data := range map[string]string{"stat": stat, "cmdline": cmdline, "maps": maps, "cgroup": "0::/\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			f.t.Fatal(err)
		}
	}
	if err := os.Symlink(exe, filepath.Join(dir, "exe")); err != nil {
		f.t.Fatal(err)
	}
}

const (
	sharedPython = `55d0c5a00000-55d0c5a01000 r--p 00000000 fd:01 1001 /usr/local/bin/python3.11
7f1e2a000000-7f1e2a0c0000 r--p 00000000 fd:01 2002 /usr/local/lib/libpython3.11.so.1.0
7f1e2a0c0000-7f1e2a300000 r-xp 000c0000 fd:01 2002 /usr/local/lib/libpython3.11.so.1.0
7f1e2b000000-7f1e2b001000 rw-p 00000000 00:00 0 [heap]
`
	javaWithJep = `55d0c5a00000-55d0c5a01000 r--p 00000000 fd:01 3003 /usr/lib/jvm/java-17/bin/java
7f1e2a000000-7f1e2a0c0000 r-xp 00000000 fd:01 4004 /usr/lib/libjvm.so
7f1e2c000000-7f1e2c0c0000 r-xp 00000000 fd:01 5005 /opt/venv/lib/libpython3.12.so.1.0
`
	freeThreaded = `7f1e2c000000-7f1e2c0c0000 r-xp 00000000 fd:01 6006 /usr/lib/libpython3.13t.so.1.0
`
	plainC = `55d0c5a00000-55d0c5a01000 r-xp 00000000 fd:01 7007 /usr/bin/bash
7f1e2a000000-7f1e2a0c0000 r-xp 00000000 fd:01 8008 /usr/lib/libc.so.6
`
)

func TestScanFindsInterpreters(t *testing.T) {
	fp := newFakeProc(t)
	fp.add(100, "/usr/local/bin/python3.11", "python3.11\x00app.py\x00", sharedPython)
	fp.add(200, "/usr/lib/jvm/java-17/bin/java", "java\x00-jar\x00svc.jar\x00", javaWithJep)
	fp.add(300, "/usr/bin/python3.13t", "python3.13t\x00", freeThreaded)
	fp.add(400, "/usr/bin/bash", "bash\x00", plainC)
	// A static python whose executable cannot be read has no symbols to
	// find: not an interpreter.
	fp.add(500, "/usr/bin/python3-static", "python3\x00", "55d0c5a00000-55d0c5a01000 r-xp 00000000 fd:01 9009 /usr/bin/python3-static\n")

	s := NewScanner(procresource.NewReader(fp.root, 0), Filter{})
	got, refused, err := s.Scan()
	if err != nil || len(refused) != 0 {
		t.Fatal(err, refused)
	}
	want := map[int]struct {
		path, version string
		id            FileID
		ft            bool
	}{
		100: {"/usr/local/lib/libpython3.11.so.1.0", "3.11", FileID{"fd:01", 2002}, false},
		200: {"/opt/venv/lib/libpython3.12.so.1.0", "3.12", FileID{"fd:01", 5005}, false},
		300: {"/usr/lib/libpython3.13t.so.1.0", "3.13", FileID{"fd:01", 6006}, true},
	}
	if len(got) != len(want) {
		t.Fatalf("found %d interpreters, want %d: %+v", len(got), len(want), got)
	}
	for _, in := range got {
		w, ok := want[in.Resource.PID]
		if !ok {
			t.Errorf("unexpected interpreter %+v", in)
			continue
		}
		if in.Path != w.path {
			t.Errorf("pid %d path = %s, want %s", in.Resource.PID, in.Path, w.path)
		}
		if in.Version != w.version || in.FreeThreaded != w.ft || in.FileID != w.id {
			t.Errorf("pid %d = version %q free-threaded %v id %v, want %q %v %v", in.Resource.PID, in.Version, in.FreeThreaded, in.FileID, w.version, w.ft, w.id)
		}
	}
}

func TestFilterSelects(t *testing.T) {
	fp := newFakeProc(t)
	fp.add(100, "/usr/local/bin/python3.11", "python3.11\x00app.py\x00", sharedPython)
	fp.add(200, "/usr/lib/jvm/java-17/bin/java", "java\x00-jar\x00svc.jar\x00", javaWithJep)
	fp.add(201, "/usr/lib/jvm/java-17/bin/java", "java\x00-jar\x00other.jar\x00", javaWithJep)
	tests := []struct {
		name   string
		filter Filter
		want   []int
	}{
		{"empty selects all", Filter{}, []int{100, 200, 201}},
		{"executable", Filter{Executables: []*regexp.Regexp{regexp.MustCompile(`^java$`)}}, []int{200, 201}},
		{"command line", Filter{CommandLines: []*regexp.Regexp{regexp.MustCompile(`svc\.jar`)}}, []int{200}},
		{"pid", Filter{PIDs: []int{100}}, []int{100}},
		{"any of them", Filter{PIDs: []int{100}, CommandLines: []*regexp.Regexp{regexp.MustCompile(`other`)}}, []int{100, 201}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, _, err := NewScanner(procresource.NewReader(fp.root, 0), tt.filter).Scan()
			if err != nil {
				t.Fatal(err)
			}
			var pids []int
			for _, in := range got {
				pids = append(pids, in.Resource.PID)
			}
			if len(pids) != len(tt.want) {
				t.Fatalf("selected %v, want %v", pids, tt.want)
			}
			for i := range pids {
				if pids[i] != tt.want[i] {
					t.Fatalf("selected %v, want %v", pids, tt.want)
				}
			}
		})
	}
}

func TestVersionOf(t *testing.T) {
	tests := []struct {
		name    string
		version string
		ft      bool
	}{
		{"libpython3.11.so.1.0", "3.11", false},
		{"libpython3.9.so", "3.9", false},
		{"libpython3.13t.so.1.0", "3.13", true},
		{"python3.14t", "3.14", true},
		{"python3.12", "3.12", false},
		{"python3", "", false},
		{"java", "", false},
	}
	for _, tt := range tests {
		v, ft := versionOf(tt.name)
		if v != tt.version || ft != tt.ft {
			t.Errorf("versionOf(%q) = %q, %v; want %q, %v", tt.name, v, ft, tt.version, tt.ft)
		}
	}
}

// TestStaticPythonExecutable checks the symbols of a python executable
// that maps no libpython, seen through a fake proc entry whose root is the
// real filesystem: a python-named executable without the GIL functions
// (this test binary, renamed by a symlink) is not an interpreter, and the
// file checked is the one the maps line names (by device and inode).
func TestStaticPythonExecutable(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	fp := newFakeProc(t)
	link := filepath.Join(t.TempDir(), "python-fake")
	if err := os.Symlink(exe, link); err != nil {
		t.Fatal(err)
	}
	id := fileID(t, exe)
	fp.add(700, link, "python-fake\x00", "55d0c5a00000-55d0c5a01000 r-xp 00000000 "+id.Dev+" "+strconv.FormatUint(id.Inode, 10)+" "+link+"\n")
	if err := os.Symlink("/", filepath.Join(fp.root, "700", "root")); err != nil {
		t.Fatal(err)
	}
	s := NewScanner(procresource.NewReader(fp.root, 0), Filter{})
	got, refused, err := s.Scan()
	if err != nil || len(refused) != 0 {
		t.Fatal(err, refused)
	}
	if len(got) != 0 {
		t.Fatalf("a python-named executable without GIL symbols was taken for an interpreter: %+v", got)
	}
	if has, checked := s.exeHasGIL[id]; !checked || has {
		t.Fatalf("executable %v: checked %v, has GIL %v; want checked, without", id, checked, has)
	}
}

// fileID is path's device and inode as maps would show them.
func fileID(t *testing.T, path string) FileID {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	return FileID{Dev: devName(st.Dev), Inode: st.Ino}
}
