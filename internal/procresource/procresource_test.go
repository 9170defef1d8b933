package procresource

import (
	"errors"
	"os"
	"path/filepath"
	"runtime/metrics"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// fakeProcess is one process in a fake proc tree.
type fakeProcess struct {
	pid     int
	comm    string
	exe     string // symlink target; "" means no link (unreadable)
	cmdline string // NUL-separated
	cgroup  string
	environ string // NUL-separated
	start   uint64
	nspid   []int // NSpid's fields, host first; nil: no status file
}

func writeFakeProc(t *testing.T, root string, p fakeProcess) {
	t.Helper()
	dir := filepath.Join(root, strconv.Itoa(p.pid))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatalf("os.MkdirAll: %v", err)
	}
	stat := strconv.Itoa(p.pid) + " (" + p.comm + ") S 1 1 1 0 -1 4194304 100 0 0 0 5 3 0 0 20 0 1 0 " +
		strconv.FormatUint(p.start, 10) + " 1000000 100 18446744073709551615 0 0 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0\n"
	if err := os.WriteFile(filepath.Join(dir, "stat"), []byte(stat), 0o644); err != nil {
		t.Fatalf("os.WriteFile: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "comm"), []byte(p.comm+"\n"), 0o644); err != nil {
		t.Fatalf("os.WriteFile: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "cmdline"), []byte(p.cmdline), 0o644); err != nil {
		t.Fatalf("os.WriteFile: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "cgroup"), []byte(p.cgroup), 0o644); err != nil {
		t.Fatalf("os.WriteFile: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "environ"), []byte(p.environ), 0o644); err != nil {
		t.Fatalf("os.WriteFile: %v", err)
	}
	if p.nspid != nil {
		var ns []string
		for _, v := range p.nspid {
			ns = append(ns, strconv.Itoa(v))
		}
		status := "Name:\t" + p.comm + "\nUmask:\t0022\nState:\tS (sleeping)\nTgid:\t" + strconv.Itoa(p.pid) +
			"\nNgid:\t0\nPid:\t" + strconv.Itoa(p.pid) + "\nPPid:\t1\nNStgid:\t" + strings.Join(ns, "\t") +
			"\nNSpid:\t" + strings.Join(ns, "\t") + "\nNSpgid:\t1\nVmRSS:\t  1024 kB\n"
		if err := os.WriteFile(filepath.Join(dir, "status"), []byte(status), 0o644); err != nil {
			t.Fatalf("os.WriteFile: %v", err)
		}
	} else {
		_ = os.Remove(filepath.Join(dir, "status"))
	}
	_ = os.Remove(filepath.Join(dir, "exe"))
	if p.exe != "" {
		if err := os.Symlink(p.exe, filepath.Join(dir, "exe")); err != nil {
			t.Fatalf("os.Symlink: %v", err)
		}
	}
}

func TestResolve(t *testing.T) {
	root := t.TempDir()
	writeFakeProc(t, root, fakeProcess{
		pid:     4242,
		comm:    "java",
		exe:     "/usr/lib/jvm/java-21-openjdk/bin/java",
		cmdline: "java\x00-Xmx8g\x00-jar\x00/app/inference.jar\x00",
		cgroup:  "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + podUS + ".slice/cri-containerd-" + cid + ".scope\n",
		environ: "PATH=/usr/bin\x00HOSTNAME=inference-7d9f-abcde\x00",
		start:   123456,
		nspid:   []int{4242, 1},
	})
	writeFakeProc(t, root, fakeProcess{
		pid:     77,
		comm:    "python3 (worker)", // parentheses and a space in comm
		exe:     "",                 // another user's process: exe unreadable
		cmdline: "python3\x00serve.py\x00",
		cgroup:  "0::/user.slice/user-1000.slice/session-2.scope\n",
		start:   99,
		nspid:   []int{77},
	})
	writeFakeProc(t, root, fakeProcess{
		pid:    88,
		comm:   "triton",
		exe:    "/opt/tritonserver/bin/tritonserver (deleted)",
		cgroup: "0::/system.slice/docker-" + cid + ".scope\n",
		start:  5,
	})

	r := NewReader(root, 0)
	tests := []struct {
		name string
		pid  int
		want Resource
	}{
		{
			name: "kubernetes JVM",
			pid:  4242,
			want: Resource{
				PID: 4242, VPID: 1, ExecutableName: "java", ExecutablePath: "/usr/lib/jvm/java-21-openjdk/bin/java", RuntimeName: RuntimeJava,
				CommandLine: "java -Xmx8g -jar /app/inference.jar", StartTicks: 123456,
				Container: Container{ID: cid, Runtime: RuntimeContainerd, PodUID: podUID},
			},
		},
		{
			name: "host process with unreadable exe falls back to comm",
			pid:  77,
			want: Resource{PID: 77, VPID: 77, ExecutableName: "python3 (worker)", CommandLine: "python3 serve.py", StartTicks: 99},
		},
		{
			name: "deleted executable keeps its name",
			pid:  88,
			want: Resource{
				PID: 88, ExecutableName: "tritonserver", ExecutablePath: "/opt/tritonserver/bin/tritonserver", StartTicks: 5,
				Container: Container{ID: cid, Runtime: RuntimeDocker},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := r.Resolve(tt.pid)
			if err != nil {
				t.Fatalf("r.Resolve: %v", err)
			}
			if got != tt.want {
				t.Errorf("r.Resolve: got %v, want %v", got, tt.want)
			}
		})
	}

	t.Run("missing process is ErrNoProcess", func(t *testing.T) {
		_, err := r.Resolve(31337)
		if err == nil {
			t.Fatalf("r.Resolve: got nil error, want an error")
		}
		if !errors.Is(err, ErrNoProcess) {
			t.Errorf("got %v (errors.Is(err, ErrNoProcess) is false)", err)
		}
		if got := err.Error(); !strings.Contains(got, "31337") {
			t.Errorf("error: got %q, want it to contain %q", got, "31337")
		}
	})

	t.Run("environment variable", func(t *testing.T) {
		v, ok := r.Getenv(4242, "HOSTNAME")
		if !ok {
			t.Errorf("r.Getenv: ok is false")
		}
		if v != "inference-7d9f-abcde" {
			t.Errorf("r.Getenv: got %q, want %q", v, "inference-7d9f-abcde")
		}
		_, ok = r.Getenv(4242, "HOST")
		if ok {
			t.Errorf("a prefix of a name is not the name (ok is true)")
		}
		_, ok = r.Getenv(31337, "HOSTNAME")
		if ok {
			t.Errorf("r.Getenv: ok is true")
		}
	})
}

func TestCommandLineTruncation(t *testing.T) {
	tests := []struct {
		name  string
		raw   string
		limit int
		want  string
	}{
		{"short stays whole", "a\x00b\x00", 10, "a b"},
		{"cut at limit", "abcdef\x00ghi\x00", 8, "abcdef g"},
		{"never splits a rune", "ab\u00e9\u00e9", 3, "ab"},
		{"whole rune at limit", "ab\u00e9\u00e9", 4, "ab\u00e9"},
		{"empty", "", 10, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := formatCommandLine([]byte(tt.raw), tt.limit); got != tt.want {
				t.Errorf("formatCommandLine([]byte(tt.raw), tt.limit): got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestCache(t *testing.T) {
	root := t.TempDir()
	writeFakeProc(t, root, fakeProcess{pid: 10, comm: "java", exe: "/bin/java", start: 1})
	writeFakeProc(t, root, fakeProcess{pid: 11, comm: "python3", exe: "/bin/python3", start: 2})
	c := NewCache(NewReader(root, 0))

	res, err := c.Get(10)
	if err != nil {
		t.Fatalf("c.Get: %v", err)
	}
	if res.ExecutableName != "java" {
		t.Errorf("res.ExecutableName: got %q, want %q", res.ExecutableName, "java")
	}
	_, err = c.Get(11)
	if err != nil {
		t.Fatalf("c.Get: %v", err)
	}
	c.Sweep()
	if got := c.Len(); got != 2 {
		t.Errorf("c.Len(): got %v, want %v", got, 2)
	}

	// pid 10 exits and a new process reuses its pid.
	writeFakeProc(t, root, fakeProcess{pid: 10, comm: "tritonserver", exe: "/bin/tritonserver", start: 500})
	res, err = c.Get(10)
	if err != nil {
		t.Fatalf("c.Get: %v", err)
	}
	if res.ExecutableName != "tritonserver" {
		t.Errorf("a reused pid is resolved again: got %q, want %q", res.ExecutableName, "tritonserver")
	}

	// pid 11 was not looked up since the last sweep: it is forgotten.
	c.Sweep()
	if got := c.Len(); got != 1 {
		t.Errorf("c.Len(): got %v, want %v", got, 1)
	}

	if err := os.RemoveAll(filepath.Join(root, "10")); err != nil {
		t.Fatalf("os.RemoveAll: %v", err)
	}
	_, err = c.Get(10)
	if !errors.Is(err, ErrNoProcess) {
		t.Errorf("c.Get: got error %v, want %v", err, ErrNoProcess)
	}
	if got := c.Len(); got != 0 {
		t.Errorf("c.Len(): got %v, want %v", got, 0)
	}
}

func TestRuntimeOf(t *testing.T) {
	tests := map[string]string{
		"java":           RuntimeJava,
		"javaw":          RuntimeJava,
		"python":         RuntimeCPython,
		"python3":        RuntimeCPython,
		"python3.12":     RuntimeCPython,
		"python3.13t":    RuntimeCPython,
		"python3-config": "",
		"pythonista":     "",
		"tritonserver":   "",
		"javac":          "",
		"":               "",
	}
	for exe, want := range tests {
		t.Run(exe, func(t *testing.T) {
			if got := RuntimeOf(exe); got != want {
				t.Errorf("RuntimeOf(exe): got %q, want %q", got, want)
			}
		})
	}
}

func TestInHostPIDNamespace(t *testing.T) {
	link, err := os.Readlink("/proc/self/ns/pid")
	if err != nil {
		t.Skip("no /proc/self/ns/pid here")
	}
	inHost, known := InHostPIDNamespace()
	if !known {
		t.Errorf("InHostPIDNamespace: known is false")
	}
	if inHost != (link == "pid:[4026531836]") {
		t.Errorf("InHostPIDNamespace: got %v, want %v", inHost, link == "pid:[4026531836]")
	}
}

// TestResolveBoundsWhatItReads: a process's command line, cgroup and
// environment are read with caps, and nothing it puts there blocks the
// reader or makes it read without end.
func TestResolveBoundsWhatItReads(t *testing.T) {
	root := t.TempDir()
	long := strings.Repeat("x", 8<<20) // 8 MiB of command line
	writeFakeProc(t, root, fakeProcess{pid: 4242, comm: "java", exe: "/usr/bin/java", cmdline: "java\x00" + long, start: 7,
		cgroup: strings.Repeat("0::/a\n", maxCgroup), environ: "A=1\x00" + long})
	r := NewReader(root, 0)
	before := allocated()
	res, err := r.Resolve(4242)
	if err != nil {
		t.Fatalf("r.Resolve: %v", err)
	}
	if res.CommandLine != ("java " + long[:DefaultMaxCommandLine-5]) {
		t.Errorf("an 8 MiB command line is truncated to the kept prefix: got %q, want %q", res.CommandLine, "java "+long[:DefaultMaxCommandLine-5])
	}
	if res.Container != (Container{}) {
		t.Errorf("a cgroup file past its cap is not parsed: got %v, want %v", res.Container, Container{})
	}
	_, ok := r.Getenv(4242, "A")
	if ok {
		t.Errorf("an environment past its cap is not read (ok is true)")
	}
	// Reading whole would allocate both 8 MiB files; a capped read
	// allocates at most about twice its cap (buffer growth).
	if got := allocated() - before; got >= uint64(3*(maxEnviron+maxCommandLineRead+maxCgroup)) {
		t.Errorf("bytes allocated resolving a process with 8 MiB of command line and environment: got %v, want < %v", got, uint64(3*(maxEnviron+maxCommandLineRead+maxCgroup)))
	}

	// A FIFO in place of a proc file is neither waited on nor read.
	dir := filepath.Join(root, "4242")
	for _, name := range []string{"cmdline", "cgroup", "environ"} {
		if err := os.Remove(filepath.Join(dir, name)); err != nil {
			t.Fatalf("os.Remove: %v", err)
		}
		if err := unix.Mkfifo(filepath.Join(dir, name), 0o644); err != nil {
			t.Fatalf("unix.Mkfifo: %v", err)
		}
	}
	done := make(chan Resource, 1)
	go func() {
		res, _ := r.Resolve(4242)
		r.Getenv(4242, "A")
		done <- res
	}()
	select {
	case res := <-done:
		if res.CommandLine != "" {
			t.Errorf("res.CommandLine: got %q, want empty", res.CommandLine)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Resolve blocked on a FIFO")
	}
}

func allocated() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}
