package procsocket

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The test binary re-executed with helperEnv set is a client process: it
// connects, says "ready" on stdout, and lives until its stdin closes.
const (
	helperEnv     = "PROCSOCKET_TEST_HELPER"
	helperAddrEnv = "PROCSOCKET_TEST_ADDR"
)

// Helper modes.
const (
	// modeConnect dials helperAddrEnv.
	modeConnect = "connect"
	// modeConnectShared dials, then starts a modeHold child that inherits
	// the socket, so that two processes hold it.
	modeConnectShared = "connect-shared"
	// modeConnectMapped dials an IPv4 address from an AF_INET6 socket, so
	// that the client's socket is in tcp6 as ::ffff:a.b.c.d.
	modeConnectMapped = "connect-mapped"
	// modeConnectSelf listens on helperAddrEnv and connects to itself: a
	// connection to a port the test process does not listen on.
	modeConnectSelf = "connect-self"
	// modeHold holds descriptor 3.
	modeHold = "hold"
)

func TestMain(m *testing.M) {
	mode := os.Getenv(helperEnv)
	if mode == "" {
		os.Exit(m.Run())
	}
	if err := runHelpertest(mode, os.Getenv(helperAddrEnv)); err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		os.Exit(2)
	}
	os.Exit(0)
}

func runHelpertest(mode, addr string) error {
	child := 0
	switch mode {
	case modeConnect, modeConnectShared:
		conn, err := net.DialTimeout("tcp", addr, 10*time.Second)
		if err != nil {
			return err
		}
		defer conn.Close()
		if mode == modeConnectShared {
			f, err := conn.(*net.TCPConn).File()
			if err != nil {
				return err
			}
			h, err := startProcesstest(modeHold, "", nil, f, nil)
			f.Close()
			if err != nil {
				return err
			}
			defer h.stop()
			child = h.pid
		}
	case modeConnectMapped:
		ap, err := netip.ParseAddrPort(addr)
		if err != nil {
			return err
		}
		fd, err := unix.Socket(unix.AF_INET6, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		sa := &unix.SockaddrInet6{Port: int(ap.Port()), Addr: netip.AddrFrom16(ap.Addr().As16()).As16()}
		if err := unix.Connect(fd, sa); err != nil {
			return err
		}
	case modeConnectSelf:
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return err
		}
		defer ln.Close()
		conn, err := net.DialTimeout("tcp", ln.Addr().String(), 10*time.Second)
		if err != nil {
			return err
		}
		defer conn.Close()
		accepted, err := ln.Accept()
		if err != nil {
			return err
		}
		defer accepted.Close()
	case modeHold:
	default:
		return fmt.Errorf("unknown mode %q", mode)
	}
	fmt.Printf("ready pid=%d child=%d\n", os.Getpid(), child)
	_, err := io.Copy(io.Discard, os.Stdin)
	return err
}

// helperProcess is a running helper.
type helperProcess struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	pid   int // as the helper reports it
	child int // its modeHold child, if any
}

// startProcesstest starts the test binary as a helper in mode, under
// wrapper (a command such as "ip netns exec NAME", which must exec it in
// place), with extra as its descriptor 3 and attr for its clone, and waits
// for it to be ready.
func startProcesstest(mode, addr string, wrapper []string, extra *os.File, attr *syscall.SysProcAttr) (*helperProcess, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	argv := append(append([]string(nil), wrapper...), exe)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), helperEnv+"="+mode, helperAddrEnv+"="+addr)
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = attr
	if extra != nil {
		cmd.ExtraFiles = []*os.File{extra}
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	h := &helperProcess{cmd: cmd, stdin: stdin}
	line := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(stdout).ReadString('\n')
		line <- s
	}()
	select {
	case s := <-line:
		if _, err := fmt.Sscanf(s, "ready pid=%d child=%d", &h.pid, &h.child); err != nil {
			h.stop()
			return nil, fmt.Errorf("helper %s said %q: %w", mode, s, err)
		}
	case <-time.After(20 * time.Second):
		h.stop()
		return nil, fmt.Errorf("helper %s not ready after 20s", mode)
	}
	return h, nil
}

// stop closes the helper's stdin, which ends it, and reaps it.
func (h *helperProcess) stop() {
	h.stdin.Close()
	done := make(chan struct{})
	go func() { h.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		h.cmd.Process.Kill()
		<-done
	}
}

// startHelpertest starts a helper for a test and stops it at cleanup.
func startHelpertest(t testing.TB, mode, addr string, wrapper ...string) *helperProcess {
	t.Helper()
	h, err := startProcesstest(mode, addr, wrapper, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.stop)
	if h.pid != h.cmd.Process.Pid {
		t.Fatalf("helper reports pid %d, started as %d", h.pid, h.cmd.Process.Pid)
	}
	return h
}

// startInPIDNStest starts a helper as pid 1 of a new pid namespace, and
// stops it at cleanup. Its pid here is h.cmd.Process.Pid.
func startInPIDNStest(t testing.TB, mode, addr string) *helperProcess {
	t.Helper()
	h, err := startProcesstest(mode, addr, nil, nil, &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWPID})
	if err != nil {
		t.Skipf("cannot start a process in a new pid namespace: %v", err)
	}
	t.Cleanup(h.stop)
	if h.pid != 1 {
		t.Fatalf("helper in a new pid namespace reports pid %d, want 1", h.pid)
	}
	return h
}

// acceptPeertest accepts one connection on ln and returns the client's
// address as the server sees it.
func acceptPeertest(t testing.TB, ln net.Listener) netip.AddrPort {
	t.Helper()
	if tl, ok := ln.(*net.TCPListener); ok {
		tl.SetDeadline(time.Now().Add(20 * time.Second))
	}
	conn, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn.RemoteAddr().(*net.TCPAddr).AddrPort()
}

// connectedHelpertest starts a helper in mode connected to a fresh
// loopback listener, and returns it with its address as the listener sees
// it.
func connectedHelpertest(t testing.TB, mode string) (*helperProcess, netip.AddrPort) {
	t.Helper()
	ln := listentest(t, "tcp4", "127.0.0.1:0")
	h := startHelpertest(t, mode, ln.Addr().String())
	return h, acceptPeertest(t, ln)
}

// openFDstest counts the descriptors this process holds open.
func openFDstest(t testing.TB) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// concurrentlytest runs f(0) to f(n-1) in n goroutines at once and reports
// every error they return.
func concurrentlytest(t testing.TB, n int, f func(i int) error) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() { errs <- f(i) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}

// fakeProctest builds a proc tree that is not procfs below root.
type fakeProctest struct {
	t    testing.TB
	root string
}

func newFakeProctest(t testing.TB) *fakeProctest {
	return &fakeProctest{t: t, root: t.TempDir()}
}

// write writes data to the file name, making its folders.
func (p *fakeProctest) write(name, data string) {
	p.t.Helper()
	if err := os.MkdirAll(filepath.Dir(filepath.Join(p.root, name)), 0o755); err != nil {
		p.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(p.root, name), []byte(data), 0o644); err != nil {
		p.t.Fatal(err)
	}
}

// link makes name a symbolic link to target, making its folders.
func (p *fakeProctest) link(target, name string) {
	p.t.Helper()
	if err := os.MkdirAll(filepath.Dir(filepath.Join(p.root, name)), 0o755); err != nil {
		p.t.Fatal(err)
	}
	if err := os.Symlink(target, filepath.Join(p.root, name)); err != nil {
		p.t.Fatal(err)
	}
}

// fifo makes name a FIFO.
func (p *fakeProctest) fifo(name string) {
	p.t.Helper()
	if err := unix.Mkfifo(filepath.Join(p.root, name), 0o644); err != nil {
		p.t.Fatal(err)
	}
}

// startTickstest reads field 22 of /proc/<pid>/stat independently of the
// package (the comm field may hold spaces and parentheses).
func startTickstest(t testing.TB, pid int) uint64 {
	t.Helper()
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	fields := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+1:]))
	v, err := strconv.ParseUint(fields[22-3], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// vpidtest reads the last pid of the NSpid line of /proc/<pid>/status
// independently of the package.
func vpidtest(t testing.TB, pid int) int {
	t.Helper()
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "NSpid:"); ok {
			f := strings.Fields(rest)
			v, err := strconv.Atoi(f[len(f)-1])
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
	}
	t.Fatalf("pid %d: no NSpid line", pid)
	return 0
}

// netNStest returns the inode of pid's network namespace.
func netNStest(t testing.TB, pid int) uint64 {
	t.Helper()
	link, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	ino, ok := parseBracketInode("net:", []byte(link))
	if !ok {
		t.Fatalf("ns link %q", link)
	}
	return ino
}
