// Package attach speaks HotSpot's dynamic attach protocol, as `jcmd` does,
// to run diagnostic commands (JFR.start, JFR.stop) in a running JVM,
// including one in a container, reached through /proc/<pid>/root.
//
// The JVM listens on the UNIX socket <tmp>/.java_pid<nspid> once its attach
// listener runs. To start it, a client creates the file .attach_pid<nspid>
// (in the JVM's working directory, or its tmp) and sends SIGQUIT; the JVM
// sees the file, opens the socket, and the client removes the file. A
// request is "1\x00" then the command and three arguments, each ending in
// NUL; the answer is a result code on the first line and the command's
// output after it. The JVM accepts a connection only from its own user or
// root.
package attach // import "github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/attach"

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// ErrRefused is wrapped by errors for a command the JVM ran and failed
// (non-zero result code); the error text carries its output.
var ErrRefused = errors.New("jvm refused the command")

// Target is a JVM to attach to.
type Target struct {
	// ProcRoot is the proc filesystem the PID is in.
	ProcRoot string
	// PID is the JVM's pid in ProcRoot's namespace.
	PID int
	// NSPID is the pid the JVM sees (its own namespace); 0 means PID.
	NSPID int
	// Timeout bounds the whole exchange, the attach handshake included.
	Timeout time.Duration
}

func (t Target) nspid() int {
	if t.NSPID > 0 {
		return t.NSPID
	}
	return t.PID
}

func (t Target) proc(name string) string {
	return filepath.Join(t.ProcRoot, strconv.Itoa(t.PID), name)
}

// socketPath is where the JVM's attach socket is, seen from here.
func (t Target) socketPath() string {
	return filepath.Join(t.proc("root"), "tmp", ".java_pid"+strconv.Itoa(t.nspid()))
}

// Jcmd runs one diagnostic command line ("JFR.start name=x settings=y") in
// the JVM and returns its output.
func (t Target) Jcmd(command string) (string, error) {
	deadline := time.Now().Add(t.Timeout)
	sock := t.socketPath()
	if _, err := os.Stat(sock); err != nil {
		if err := t.startListener(sock, deadline); err != nil {
			return "", err
		}
	}
	d := net.Dialer{Deadline: deadline}
	conn, err := d.Dial("unix", sock)
	if err != nil {
		return "", fmt.Errorf("attach: pid %d: connect %s: %w", t.PID, sock, err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(deadline)
	var req bytes.Buffer
	for _, part := range []string{"1", "jcmd", command, "", ""} {
		req.WriteString(part)
		req.WriteByte(0)
	}
	if _, err := conn.Write(req.Bytes()); err != nil {
		return "", fmt.Errorf("attach: pid %d: send: %w", t.PID, err)
	}
	rd := bufio.NewReader(io.LimitReader(conn, 1<<20))
	codeLine, err := rd.ReadString('\n')
	if err != nil && codeLine == "" {
		return "", fmt.Errorf("attach: pid %d: read result: %w", t.PID, err)
	}
	rest, _ := io.ReadAll(rd)
	code, err := strconv.Atoi(strings.TrimSpace(codeLine))
	if err != nil {
		return "", fmt.Errorf("attach: pid %d: result %q is not a code", t.PID, strings.TrimSpace(codeLine))
	}
	out := string(rest)
	if code != 0 {
		return out, fmt.Errorf("attach: pid %d: %s: code %d: %s: %w", t.PID, command, code, strings.TrimSpace(out), ErrRefused)
	}
	// jcmd commands report some failures in their output with code 0.
	return out, nil
}

// startListener asks the JVM to open its attach socket and waits for it.
func (t Target) startListener(sock string, deadline time.Time) error {
	uid, gid := t.owner()
	name := ".attach_pid" + strconv.Itoa(t.nspid())
	// The trigger file is made and removed relative to an open handle on
	// its directory: /proc/<pid>/cwd stops resolving when the process
	// exits (a process that is not a JVM dies of SIGQUIT), the directory
	// does not.
	var dirFD = -1
	for _, dir := range []string{t.proc("cwd"), filepath.Join(t.proc("root"), "tmp")} {
		fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			continue
		}
		f, err := unix.Openat(fd, name, unix.O_CREAT|unix.O_WRONLY|unix.O_CLOEXEC, 0o660)
		if err != nil {
			unix.Close(fd)
			continue
		}
		// HotSpot only trusts a trigger file of its own user.
		if uid >= 0 && os.Getuid() == 0 {
			_ = unix.Fchown(f, uid, gid)
		}
		unix.Close(f)
		dirFD = fd
		break
	}
	if dirFD < 0 {
		return fmt.Errorf("attach: pid %d: cannot create %s in its working or tmp directory", t.PID, name)
	}
	defer func() {
		_ = unix.Unlinkat(dirFD, name, 0)
		unix.Close(dirFD)
	}()
	if err := syscall.Kill(t.PID, syscall.SIGQUIT); err != nil {
		return fmt.Errorf("attach: pid %d: SIGQUIT: %w", t.PID, err)
	}
	for wait := 20 * time.Millisecond; ; wait = min(2*wait, 500*time.Millisecond) {
		if _, err := os.Stat(sock); err == nil {
			return nil
		}
		if time.Now().Add(wait).After(deadline) {
			return fmt.Errorf("attach: pid %d: no attach socket %s after SIGQUIT (is it a HotSpot JVM with attach enabled?)", t.PID, sock)
		}
		time.Sleep(wait)
	}
}

// owner returns the JVM's effective uid and gid from /proc/<pid>/status
// (-1 when unknown).
func (t Target) owner() (uid, gid int) {
	uid, gid = -1, -1
	data, err := os.ReadFile(t.proc("status"))
	if err != nil {
		return
	}
	for _, line := range strings.Split(string(data), "\n") {
		for _, key := range []string{"Uid:", "Gid:"} {
			if rest, ok := strings.CutPrefix(line, key); ok {
				f := strings.Fields(rest)
				if len(f) >= 2 {
					v, _ := strconv.Atoi(f[1]) // effective
					if key == "Uid:" {
						uid = v
					} else {
						gid = v
					}
				}
			}
		}
	}
	return
}

// Ready reports whether the JVM has come far enough in its start to take
// SIGQUIT as an attach request rather than die of it: its perf-data file
// /tmp/hsperfdata_<user>/<nspid> exists (HotSpot creates it after
// installing its signal handlers). JVMs run with -XX:-UsePerfData never
// look ready.
func (t Target) Ready() bool {
	matches, _ := filepath.Glob(filepath.Join(t.proc("root"), "tmp", "hsperfdata_*", strconv.Itoa(t.nspid())))
	return len(matches) > 0
}

// NotYet reports whether err says the JVM does not know the command yet:
// its attach listener answers before the JVM has registered every
// diagnostic command (JFR's come late in its start). Try again later.
func NotYet(err error) bool {
	return errors.Is(err, ErrRefused) && strings.Contains(err.Error(), "Unknown diagnostic command")
}
