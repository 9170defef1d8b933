package discovery

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestRepositoryBase(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"default", []string{"java", "-jar", "app.jar"}, "/tmp"},
		{"tmpdir", []string{"java", "-Djava.io.tmpdir=/scratch", "Main"}, "/scratch"},
		{"repository with =", []string{"java", "-XX:FlightRecorderOptions=stackdepth=96,repository=/jfr", "-Djava.io.tmpdir=/scratch"}, "/jfr"},
		{"repository with :", []string{"java", "-XX:FlightRecorderOptions:repository=/jfr"}, "/jfr"},
		{"last wins", []string{"-XX:FlightRecorderOptions:repository=/a", "-XX:FlightRecorderOptions:repository=/b"}, "/b"},
		{"other options only", []string{"-XX:FlightRecorderOptions=stackdepth=96"}, "/tmp"},
		{"similar flag", []string{"-XX:FlightRecorderOptionsX=repository=/no"}, "/tmp"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := RepositoryBase(tt.args); got != tt.want {
				t.Errorf("RepositoryBase(%q) = %q, want %q", tt.args, got, tt.want)
			}
		})
	}
}

func TestRepositoryPID(t *testing.T) {
	for in, want := range map[string]int{
		"/tmp/2026_11_29_10_26_03_13106": 13106,
		"2026_11_29_10_26_03_1":          1,
		"/tmp/2026_11_29_10_26_03":       0,
		"/tmp/hsperfdata_root":           0,
		"/tmp/2026_11_29_10_26_03_x":     0,
	} {
		if got := RepositoryPID(in); got != want {
			t.Errorf("RepositoryPID(%q) = %d, want %d", in, got, want)
		}
	}
}

// fakeProcess writes a /proc/<pid> entry: exe link, stat, cmdline, status
// with NSpid, and a root link to a folder holding tmp.
func fakeProcess(t *testing.T, proc string, pid, nspid int, exe string, args ...string) string {
	t.Helper()
	dir := filepath.Join(proc, strconv.Itoa(pid))
	root := filepath.Join(t.TempDir(), "rootfs")
	must(t, os.MkdirAll(dir, 0o755))
	must(t, os.MkdirAll(filepath.Join(root, "tmp"), 0o755))
	must(t, os.Symlink(exe, filepath.Join(dir, "exe")))
	must(t, os.Symlink(root, filepath.Join(dir, "root")))
	stat := strconv.Itoa(pid) + " (java) S 1 1 1 0 -1 4194304 0 0 0 0 0 0 0 0 20 0 1 0 4242 0 0"
	must(t, os.WriteFile(filepath.Join(dir, "stat"), []byte(stat), 0o644))
	cmd := ""
	for _, a := range args {
		cmd += a + "\x00"
	}
	must(t, os.WriteFile(filepath.Join(dir, "cmdline"), []byte(cmd), 0o644))
	status := "Name:\tjava\nNSpid:\t" + strconv.Itoa(pid) + "\t" + strconv.Itoa(nspid) + "\n"
	must(t, os.WriteFile(filepath.Join(dir, "status"), []byte(status), 0o644))
	return root
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestScannerFindsContainerizedJVM: a JVM in a container (pid 1 inside,
// 4321 on the host) with its repository in the container's /tmp is found
// through /proc/<pid>/root; a python process beside it is not.
func TestScannerFindsContainerizedJVM(t *testing.T) {
	proc := t.TempDir()
	root := fakeProcess(t, proc, 4321, 1, "/usr/lib/jvm/java-17/bin/java", "java", "-XX:StartFlightRecording", "-jar", "app.jar")
	fakeProcess(t, proc, 4400, 4400, "/usr/bin/python3.11", "python3", "x.py")
	must(t, os.MkdirAll(filepath.Join(root, "tmp", "2026_11_29_10_00_00_1"), 0o755))
	must(t, os.MkdirAll(filepath.Join(root, "tmp", "2026_11_29_10_00_00_77"), 0o755)) // another JVM's

	f := NewScanner(proc)
	jvms, _, err := f.Scan()
	if err != nil {
		t.Fatal(err)
	}
	if len(jvms) != 1 {
		t.Fatalf("found %+v, want one JVM", jvms)
	}
	j := jvms[0]
	if j.PID != 4321 || j.NSPID != 1 || j.StartTicks != 4242 || j.RepositoryBase != "/tmp" || !j.StartsRecording {
		t.Errorf("JVM %+v", j)
	}
	root2, err := j.OpenRoot()
	if err != nil {
		t.Fatal(err)
	}
	defer root2.Close()
	want := []string{"/tmp/2026_11_29_10_00_00_1"}
	if got := j.Repositories(root2); !slices.Equal(got, want) {
		t.Errorf("repositories %q, want %q", got, want)
	}
	// A container that points its repository option through a link to
	// the host's folders still gets only what lies inside its root.
	host := t.TempDir()
	must(t, os.MkdirAll(filepath.Join(host, "2026_11_29_10_00_00_1"), 0o755))
	must(t, os.Symlink(host, filepath.Join(root, "hostlink")))
	j.RepositoryBase = "/hostlink"
	if got := j.Repositories(root2); len(got) != 0 {
		t.Errorf("repositories through a link to the host %q, want none", got)
	}
	if !f.Alive(4321, 4242) || f.Alive(4321, 1) || f.Alive(9999, 0) {
		t.Error("Alive does not tell live, reused and missing pids apart")
	}
}

func TestXLogFiles(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"file=", []string{"java", "-Xlog:gc*,safepoint:file=/var/log/gc.log:time,uptimenanos"}, []string{"/var/log/gc.log"}},
		{"bare path", []string{"-Xlog:gc:/logs/gc.log"}, []string{"/logs/gc.log"}},
		{"quoted with pid and time", []string{`-Xlog:gc:file="/logs/gc-%p-%t.log":uptime`}, []string{"/logs/gc-7-*.log"}},
		{"stdout and no output", []string{"-Xlog:gc:stdout", "-Xlog:gc", "-Xlog:disable", "-Xlog:gc:stderr"}, nil},
		{"relative", []string{"-Xlog:safepoint:file=sp.log"}, []string{"sp.log"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := XLogFiles(tt.args, 7); !slices.Equal(got, tt.want) {
				t.Errorf("XLogFiles(%q) = %q, want %q", tt.args, got, tt.want)
			}
		})
	}
}

// TestStaleRepositoryOfAnEarlierProcessIsNotTheJVMs: a repository folder
// named with the JVM's pid but last changed before the JVM started (left by
// a killed JVM, or by the container's earlier run on the same /tmp, where
// pids repeat) is not the JVM's; the folder its own recording made is.
func TestStaleRepositoryOfAnEarlierProcessIsNotTheJVMs(t *testing.T) {
	proc := t.TempDir()
	root := fakeProcess(t, proc, 4321, 1, "/usr/lib/jvm/java-17/bin/java", "java", "-jar", "app.jar")
	// The JVM started a minute ago.
	var boot unix.Timespec
	must(t, unix.ClockGettime(unix.CLOCK_BOOTTIME, &boot))
	start := uint64((time.Duration(boot.Nano()) - time.Minute) / (10 * time.Millisecond))
	stat := "4321 (java) S 1 1 1 0 -1 4194304 0 0 0 0 0 0 0 0 20 0 1 0 " + strconv.FormatUint(start, 10) + " 0 0"
	must(t, os.WriteFile(filepath.Join(proc, "4321", "stat"), []byte(stat), 0o644))
	stale := filepath.Join(root, "tmp", "2026_11_29_09_00_00_1")
	must(t, os.MkdirAll(stale, 0o755))
	old := time.Now().Add(-time.Hour)
	must(t, os.Chtimes(stale, old, old))
	must(t, os.MkdirAll(filepath.Join(root, "tmp", "2026_11_29_10_00_00_1"), 0o755))

	jvms, _, err := NewScanner(proc).Scan()
	if err != nil || len(jvms) != 1 {
		t.Fatalf("found %+v, %v; want one JVM", jvms, err)
	}
	r, err := jvms[0].OpenRoot()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	want := []string{"/tmp/2026_11_29_10_00_00_1"}
	if got := jvms[0].Repositories(r); !slices.Equal(got, want) {
		t.Errorf("repositories %q, want %q (the stale folder left out)", got, want)
	}
	// Changed shortly before the JVM started (within the slack for the
	// clocks' errors) counts as the JVM's, and so does a folder on a
	// filesystem that keeps no times.
	for _, m := range []time.Time{time.Now().Add(-time.Minute - 30*time.Second), time.Unix(0, 0)} {
		must(t, os.Chtimes(stale, m, m))
		if got := jvms[0].Repositories(r); len(got) != 2 {
			t.Errorf("repositories %q with the other folder changed at %v, want both", got, m)
		}
	}
}
