package attach

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/otelcol-ai/otelcol-ai/internal/procroot"
	"github.com/otelcol-ai/otelcol-ai/pkg/jfr/jfrtest"
)

func TestMain(m *testing.M) { jfrtest.Main(m) }

// TestStartAndStopRecording attaches to a real JVM that records nothing,
// starts a recording with JFR.start (its disk repository appears where
// the receiver's discovery looks), then stops it; a command the JVM
// rejects is ErrRefused.
func TestStartAndStopRecording(t *testing.T) {
	j := jfrtest.Find(t, 17)
	src, _, err := jfrtest.Workload()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(j.Java(), "-Xmx64m", src, "20000")
	cmd.Dir = t.TempDir()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	jfrtest.Start(t, cmd)
	pid := cmd.Process.Pid
	target := Target{ProcRoot: "/proc", PID: pid, Timeout: 30 * time.Second}

	// SIGQUIT before the JVM installs its handlers would kill it, and one
	// before its Signal Dispatcher runs waits; Ready says when both are
	// done.
	deadline := time.Now().Add(30 * time.Second)
	for ok, _ := target.Ready(); !ok; ok, _ = target.Ready() {
		if time.Now().After(deadline) {
			t.Fatalf("JVM not ready\n%s", out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}

	// The attach listener answers before the JVM has registered the JFR
	// commands; until then they are unknown: NotYet.
	var got string
	for {
		got, err = target.Jcmd("JFR.start name=otelcol-ai-test settings=profile")
		if !NotYet(err) || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("JFR.start: %v\n%s", err, out.String())
	}
	if !strings.Contains(got, "Started recording") {
		t.Fatalf("JFR.start said %q", got)
	}
	repos, _ := filepath.Glob(filepath.Join("/proc", strconv.Itoa(pid), "root", "tmp", "*_"+strconv.Itoa(pid)))
	if len(repos) == 0 {
		t.Error("no disk repository after JFR.start")
	}
	if got, err := target.Jcmd("JFR.check"); err != nil || !strings.Contains(got, "otelcol-ai-test") {
		t.Errorf("JFR.check: %q, %v", got, err)
	}
	if _, err := target.Jcmd("JFR.stop name=otelcol-ai-test"); err != nil {
		t.Fatalf("JFR.stop: %v", err)
	}
	if _, err := target.Jcmd("No.such.command"); !errors.Is(err, ErrRefused) {
		t.Errorf("unknown command: %v, want ErrRefused", err)
	}
	if left, _ := filepath.Glob(filepath.Join(cmd.Dir, ".attach_pid*")); len(left) != 0 {
		t.Errorf("trigger file left behind: %v", left)
	}
}

// TestNotAJVM: a process that is not a JVM never opens the socket; the
// error says so within the timeout. SIGQUIT kills it, and the trigger file
// is removed all the same, through the root held since before: by then
// the process's /proc/<pid>/cwd no longer resolves.
func TestNotAJVM(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	cmd.Dir = t.TempDir()
	exited := jfrtest.Start(t, cmd)
	pid := cmd.Process.Pid
	_, err := Target{ProcRoot: "/proc", PID: pid, Timeout: time.Second}.Jcmd("JFR.check")
	if err == nil || !strings.Contains(err.Error(), "no attach socket") {
		t.Fatalf("attach to sleep: %v", err)
	}
	if _, err := os.Readlink(filepath.Join("/proc", strconv.Itoa(pid), "cwd")); err == nil {
		t.Error("sleep's cwd still resolves: it did not die of SIGQUIT")
	}
	if left, _ := filepath.Glob(filepath.Join(cmd.Dir, ".attach_pid*")); len(left) != 0 {
		t.Errorf("trigger file left behind: %v", left)
	}
	err = <-exited
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGQUIT {
		t.Errorf("sleep ended with %v, want killed by SIGQUIT", err)
	}
}

// TestNoSignalToAnotherProcess: a target whose start time is not the
// running process's (the JVM exited and its pid went to another process)
// gets no SIGQUIT and no trigger file: ErrGone.
func TestNoSignalToAnotherProcess(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	cmd.Dir = t.TempDir()
	jfrtest.Start(t, cmd)
	pid := cmd.Process.Pid
	x, err := Target{ProcRoot: "/proc", PID: pid}.open()
	if err != nil {
		t.Fatal(err)
	}
	start := x.start
	x.close()
	if start == 0 {
		t.Fatal("no start time read")
	}
	_, err = Target{ProcRoot: "/proc", PID: pid, StartTicks: start + 1, Timeout: time.Second}.Jcmd("JFR.check")
	if !errors.Is(err, ErrGone) {
		t.Fatalf("attach to a reused pid: %v, want ErrGone", err)
	}
	time.Sleep(100 * time.Millisecond) // a signal, had one been sent, is delivered by now
	if _, err := os.Readlink(filepath.Join("/proc", strconv.Itoa(pid), "cwd")); err != nil {
		t.Errorf("the other process was signalled: %v", err)
	}
	if left, _ := filepath.Glob(filepath.Join(cmd.Dir, ".attach_pid*")); len(left) != 0 {
		t.Errorf("trigger file made for another process: %v", left)
	}
}

// fakeContainer is a proc tree of one process, pid 4321 (1 in its own
// namespace), owned by uid:gid 4242:4343, whose root is a folder the test
// shapes as a hostile container would, beside a host folder that an
// escape would reach. The fake /proc/4321 is no process: nothing can be
// signalled through it.
type fakeContainer struct {
	proc, root, host string
}

const fakePID, fakeUID, fakeGID = 4321, 4242, 4343

func newFakeContainer(t *testing.T, cwd string) fakeContainer {
	t.Helper()
	// Short paths: a UNIX socket's path is at most 107 bytes. Not under
	// /tmp where possible: inside the container, a link to a host folder
	// under /tmp would name the container's /tmp again (ELOOP), and the
	// tests want the plain miss an escape gets.
	tmp := ""
	if fi, err := os.Stat("/var/tmp"); err == nil && fi.IsDir() {
		tmp = "/var/tmp"
	}
	base, err := os.MkdirTemp(tmp, "attach")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	c := fakeContainer{proc: filepath.Join(base, "proc"), root: filepath.Join(base, "rootfs"), host: filepath.Join(base, "host")}
	dir := filepath.Join(c.proc, strconv.Itoa(fakePID))
	for _, d := range []string{dir, filepath.Join(c.root, "app"), c.host} {
		must(t, os.MkdirAll(d, 0o755))
	}
	must(t, os.Symlink(c.root, filepath.Join(dir, "root")))
	must(t, os.Symlink(cwd, filepath.Join(dir, "cwd")))
	stat := strconv.Itoa(fakePID) + " (java) S 1 1 1 0 -1 4194304 0 0 0 0 0 0 0 0 20 0 1 0 4242 0 0"
	must(t, os.WriteFile(filepath.Join(dir, "stat"), []byte(stat), 0o644))
	status := "Name:\tjava\nUid:\t0\t" + strconv.Itoa(fakeUID) + "\t0\t0\nGid:\t0\t" + strconv.Itoa(fakeGID) + "\t0\t0\nNSpid:\t4321\t1\n"
	must(t, os.WriteFile(filepath.Join(dir, "status"), []byte(status), 0o644))
	c.thread(t, fakePID, "java")
	return c
}

// thread adds a thread named comm to the fake process (its main thread is
// "java", as a launcher's is).
func (c fakeContainer) thread(t *testing.T, tid int, comm string) {
	t.Helper()
	dir := filepath.Join(c.proc, strconv.Itoa(fakePID), "task", strconv.Itoa(tid))
	must(t, os.MkdirAll(dir, 0o755))
	must(t, os.WriteFile(filepath.Join(dir, "comm"), []byte(comm+"\n"), 0o644))
}

func (c fakeContainer) target() Target {
	return Target{ProcRoot: c.proc, PID: fakePID, NSPID: 1, StartTicks: 4242, Timeout: 2 * time.Second}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// listen serves a UNIX socket that counts its connections and answers
// each with answer.
func listen(t *testing.T, path, answer string) *atomic.Int32 {
	t.Helper()
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	conns := new(atomic.Int32)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
			_, _ = io.ReadFull(conn, make([]byte, 2))
			_, _ = io.WriteString(conn, answer)
			conn.Close()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		<-done
	})
	return conns
}

// TestAttachStaysInsideTheContainer: what a container leaves in its own
// root never makes the agent create, write, chown or dial anything on the
// host; the exchange fails with an error that says where.
func TestAttachStaysInsideTheContainer(t *testing.T) {
	for _, tc := range []struct {
		name string
		cwd  string
		// plant shapes the container and returns a check of the host.
		plant   func(t *testing.T, c fakeContainer) func(t *testing.T)
		wantErr string
	}{{
		name: "its tmp links to a host directory",
		cwd:  "/tmp",
		plant: func(t *testing.T, c fakeContainer) func(t *testing.T) {
			must(t, os.Symlink(c.host, filepath.Join(c.root, "tmp")))
			return func(t *testing.T) {
				if entries, _ := os.ReadDir(c.host); len(entries) != 0 {
					t.Errorf("files made in the host directory: %v", entries)
				}
			}
		},
		wantErr: "cannot create .attach_pid1 in its working directory or /tmp",
	}, {
		name: "its tmp climbs to a host directory by ..",
		cwd:  "/tmp",
		plant: func(t *testing.T, c fakeContainer) func(t *testing.T) {
			must(t, os.Symlink(strings.Repeat("../", 12)+c.host[1:], filepath.Join(c.root, "tmp")))
			return func(t *testing.T) {
				if entries, _ := os.ReadDir(c.host); len(entries) != 0 {
					t.Errorf("files made in the host directory: %v", entries)
				}
			}
		},
		wantErr: "cannot create .attach_pid1 in its working directory or /tmp",
	}, {
		name: "its attach socket links to a host socket",
		cwd:  "/app",
		plant: func(t *testing.T, c fakeContainer) func(t *testing.T) {
			hostSock := filepath.Join(c.host, "agent.sock")
			conns := listen(t, hostSock, "0\nhost socket\n")
			must(t, os.MkdirAll(filepath.Join(c.root, "tmp"), 0o755))
			must(t, os.Symlink(hostSock, filepath.Join(c.root, "tmp", ".java_pid1")))
			return func(t *testing.T) {
				if conns.Load() != 0 {
					t.Errorf("the host socket got %d connections", conns.Load())
				}
				if _, err := os.Lstat(filepath.Join(c.root, "app", ".attach_pid1")); !os.IsNotExist(err) {
					t.Errorf("trigger file not removed: %v", err)
				}
			}
		},
		// No such socket inside the container: the listener is asked for
		// through a fake process that cannot be signalled.
		wantErr: "SIGQUIT",
	}, {
		name: "its attach socket climbs to a host socket by ..",
		cwd:  "/app",
		plant: func(t *testing.T, c fakeContainer) func(t *testing.T) {
			hostSock := filepath.Join(c.host, "agent.sock")
			conns := listen(t, hostSock, "0\nhost socket\n")
			must(t, os.MkdirAll(filepath.Join(c.root, "tmp"), 0o755))
			must(t, os.Symlink(strings.Repeat("../", 12)+hostSock[1:], filepath.Join(c.root, "tmp", ".java_pid1")))
			return func(t *testing.T) {
				if conns.Load() != 0 {
					t.Errorf("the host socket got %d connections", conns.Load())
				}
			}
		},
		wantErr: "SIGQUIT",
	}, {
		name: "its trigger file is a link to a host file",
		cwd:  "/tmp",
		plant: func(t *testing.T, c fakeContainer) func(t *testing.T) {
			hostFile := filepath.Join(c.host, "passwd")
			must(t, os.WriteFile(hostFile, []byte("root:x:0:0\n"), 0o600))
			before, err := os.Stat(hostFile)
			must(t, err)
			must(t, os.MkdirAll(filepath.Join(c.root, "tmp"), 0o755))
			must(t, os.Symlink(hostFile, filepath.Join(c.root, "tmp", ".attach_pid1")))
			return func(t *testing.T) {
				after, err := os.Stat(hostFile)
				must(t, err)
				data, _ := os.ReadFile(hostFile)
				st := after.Sys().(*syscall.Stat_t)
				if string(data) != "root:x:0:0\n" || after.Mode() != before.Mode() || st.Uid != uint32(os.Getuid()) || st.Gid != uint32(os.Getgid()) || !after.ModTime().Equal(before.ModTime()) {
					t.Errorf("host file changed: %q, %v, owner %d:%d", data, after.Mode(), st.Uid, st.Gid)
				}
				if target, err := os.Readlink(filepath.Join(c.root, "tmp", ".attach_pid1")); err != nil || target != hostFile {
					t.Errorf("the container's link was not left as it was: %q, %v", target, err)
				}
			}
		},
		wantErr: "cannot create .attach_pid1",
	}, {
		name: "its attach socket is a FIFO",
		cwd:  "/app",
		plant: func(t *testing.T, c fakeContainer) func(t *testing.T) {
			must(t, os.MkdirAll(filepath.Join(c.root, "tmp"), 0o755))
			must(t, syscall.Mkfifo(filepath.Join(c.root, "tmp", ".java_pid1"), 0o666))
			return func(t *testing.T) {}
		},
		wantErr: procroot.ErrNotSocket.Error(),
	}} {
		t.Run(tc.name, func(t *testing.T) {
			c := newFakeContainer(t, tc.cwd)
			check := tc.plant(t, c)
			_, err := c.target().Jcmd("JFR.check")
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("Jcmd: %v, want an error with %q", err, tc.wantErr)
			}
			check(t)
		})
	}
}

// TestAttachInsideTheContainer: the same fake container, with a socket
// where its JVM's would be, is dialled and answered through its root (the
// tests above fail for what the container holds, not for the fake).
func TestAttachInsideTheContainer(t *testing.T) {
	c := newFakeContainer(t, "/app")
	must(t, os.MkdirAll(filepath.Join(c.root, "tmp", "hsperfdata_app"), 0o755))
	if ok, why := c.target().Ready(); ok || why != "no hsperfdata file" {
		t.Errorf("before its perf-data file exists: ready %v (%q)", ok, why)
	}
	must(t, os.WriteFile(filepath.Join(c.root, "tmp", "hsperfdata_app", "1"), nil, 0o644))
	if ok, why := c.target().Ready(); ok || why != "no Signal Dispatcher thread yet" {
		t.Errorf("before its Signal Dispatcher runs: ready %v (%q)", ok, why)
	}
	c.thread(t, 4322, "Signal Dispatch")
	if ok, why := c.target().Ready(); !ok {
		t.Errorf("not ready with /tmp/hsperfdata_app/1 and a Signal Dispatcher thread: %q", why)
	}
	conns := listen(t, filepath.Join(c.root, "tmp", ".java_pid1"), "0\nRecording 1: name=x\n")
	got, err := c.target().Jcmd("JFR.check")
	if err != nil || got != "Recording 1: name=x\n" || conns.Load() != 1 {
		t.Errorf("Jcmd: %q, %v after %d connections", got, err, conns.Load())
	}
	if _, err := (Target{ProcRoot: c.proc, PID: fakePID, NSPID: 1, StartTicks: 1, Timeout: time.Second}).Jcmd("JFR.check"); !errors.Is(err, ErrGone) {
		t.Errorf("another start time: %v, want ErrGone", err)
	}
	if conns.Load() != 1 {
		t.Errorf("a process of another start time was dialled (%d connections)", conns.Load())
	}
}

// TestTriggerFileOwnedByTheJVM: the trigger file is made where the JVM
// looks (its working directory inside its root), owned by the JVM's
// effective uid and gid, and removed after.
func TestTriggerFileOwnedByTheJVM(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("giving a file to another user needs root")
	}
	c := newFakeContainer(t, "/app")
	x, err := c.target().open()
	if err != nil {
		t.Fatal(err)
	}
	defer x.close()
	p, err := x.createTrigger()
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Lstat(filepath.Join(c.root, "app", ".attach_pid1"))
	if err != nil || p != "/app/.attach_pid1" {
		t.Fatalf("trigger %q: %v", p, err)
	}
	if st := fi.Sys().(*syscall.Stat_t); !fi.Mode().IsRegular() || st.Uid != fakeUID || st.Gid != fakeGID {
		t.Errorf("trigger %v owned by %d:%d, want a regular file of %d:%d", fi.Mode(), st.Uid, st.Gid, fakeUID, fakeGID)
	}
	if err := x.root.Remove(p); err != nil {
		t.Fatal(err)
	}
}
