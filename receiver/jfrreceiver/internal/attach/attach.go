// Package attach speaks HotSpot's dynamic attach protocol, as `jcmd` does,
// to run diagnostic commands (JFR.start, JFR.stop) in a running JVM,
// including one in a container, reached through /proc/<pid>/root.
//
// The JVM listens on the UNIX socket /tmp/.java_pid<nspid> once its attach
// listener runs. To start it, a client creates the file .attach_pid<nspid>
// (in the JVM's working directory, or its /tmp) and sends SIGQUIT; the JVM
// sees the file, opens the socket, and the client removes the file. A
// request is "1\x00" then the command and three arguments, each ending in
// NUL; the answer is a result code on the first line and the command's
// output after it. The JVM accepts a connection only from its own user or
// root.
//
// The JVM's files are the JVM's to shape, and it may be hostile: every path
// is resolved inside its root (package procroot), so a symlink or `..` in
// the container never makes the agent create, write, chown or dial anything
// outside it; only a socket is dialled; the trigger file is created
// exclusively, never through a link. SIGQUIT, which kills a process that is
// not a JVM, goes only to the process whose start time was checked.
package attach // import "github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/attach"

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/otelcol-ai/otelcol-ai/internal/procresource"
	"github.com/otelcol-ai/otelcol-ai/internal/procroot"
)

// Errors callers branch on with errors.Is.
var (
	// ErrRefused is wrapped by errors for a command the JVM ran and failed
	// (non-zero result code); the error text carries its output.
	ErrRefused = errors.New("jvm refused the command")
	// ErrGone: the process exited, or its pid now names another process
	// (another start time), so nothing was sent to it.
	ErrGone = errors.New("process is gone")
	// ErrNoListener: SIGQUIT was sent and no attach socket came within
	// the exchange's time (a JVM still starting, or one with attach off).
	ErrNoListener = errors.New("no attach listener")
)

// Caps on what is read from the process: its stat line is a few hundred
// bytes, its status a few KiB, an answer to a diagnostic command a few KiB
// too.
const (
	maxStat   = 4 << 10
	maxAnswer = 1 << 20
)

// Target is a JVM to attach to.
type Target struct {
	// ProcRoot is the proc filesystem the PID is in.
	ProcRoot string
	// PID is the JVM's pid in ProcRoot's namespace.
	PID int
	// NSPID is the pid the JVM sees (its own namespace); 0 means PID.
	NSPID int
	// StartTicks is the JVM's start time (field 22 of /proc/<pid>/stat):
	// when set, a process of that pid started at another time (the JVM
	// exited and the pid was reused) is left alone (ErrGone). 0 takes the
	// process that has the pid when the exchange begins.
	StartTicks uint64
	// Timeout bounds the whole exchange, the attach handshake included.
	Timeout time.Duration
}

// NewTarget is the exchange with the JVM whose pid in procRoot's
// namespace is pid, nspid in its own, started at startTicks, within
// timeout: every Target made for a JVM, the recorder's and the JVM
// accounts' reader's, is made here.
func NewTarget(procRoot string, pid, nspid int, startTicks uint64, timeout time.Duration) Target {
	return Target{ProcRoot: procRoot, PID: pid, NSPID: nspid, StartTicks: startTicks, Timeout: timeout}
}

func (t Target) nspid() string {
	if t.NSPID > 0 {
		return strconv.Itoa(t.NSPID)
	}
	return strconv.Itoa(t.PID)
}

// Jcmd runs one diagnostic command line ("JFR.start name=x settings=y") in
// the JVM and returns its output.
func (t Target) Jcmd(command string) (string, error) {
	deadline := time.Now().Add(t.Timeout)
	x, err := t.open()
	if err != nil {
		return "", err
	}
	defer x.close()
	sock := "/tmp/.java_pid" + t.nspid()
	switch _, err := x.root.Stat(sock); {
	case errors.Is(err, fs.ErrNotExist):
		if err := x.startListener(sock, deadline); err != nil {
			return "", err
		}
	case err != nil:
		return "", fmt.Errorf("attach: pid %d: %w", t.PID, err)
	}
	conn, err := x.root.DialUnix(sock, deadline)
	if err != nil {
		return "", fmt.Errorf("attach: pid %d: %w", t.PID, err)
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
	rd := bufio.NewReader(io.LimitReader(conn, maxAnswer))
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

// exchange is one attach exchange's hold on the process. proc, its
// /proc/<pid> directory held open, names that process and no other
// whatever becomes of the pid, and signals it; root is its root directory,
// which keeps naming the same files after the process exits (a process
// that is not a JVM dies of SIGQUIT), so the trigger file is still removed.
type exchange struct {
	t        Target
	proc     int
	start    uint64
	root     *procroot.Root
	cwd      string // as the process sees it; "" when unknown
	uid, gid int    // the process's effective ids; -1 when not to be set
}

// open pins the process: its start time is read through proc before and
// after its root, working directory and owner are read by pid, so that
// all of them are known to be that process's.
func (t Target) open() (*exchange, error) {
	dir := filepath.Join(t.ProcRoot, strconv.Itoa(t.PID))
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("attach: pid %d: %w: %w", t.PID, ErrGone, err)
	}
	x := &exchange{t: t, proc: fd, uid: -1, gid: -1}
	if x.start, err = x.startTicks(); err != nil {
		x.close()
		return nil, err
	}
	if t.StartTicks != 0 && x.start != t.StartTicks {
		x.close()
		return nil, fmt.Errorf("attach: pid %d started at %d, not %d (another process): %w", t.PID, x.start, t.StartTicks, ErrGone)
	}
	if x.root, err = procroot.Open(t.ProcRoot, t.PID); err != nil {
		x.close()
		return nil, fmt.Errorf("attach: pid %d: %w", t.PID, err)
	}
	if cwd, err := procroot.Cwd(t.ProcRoot, t.PID); err == nil {
		x.cwd = cwd
	}
	// HotSpot only trusts a trigger file of its own user; only root can
	// give it one.
	if os.Getuid() == 0 {
		// An id that cannot be read is left as it is (-1).
		x.uid, x.gid, _ = procresource.NewReader(t.ProcRoot, 0).Owner(t.PID)
	}
	if err := x.alive(); err != nil {
		x.close()
		return nil, err
	}
	return x, nil
}

func (x *exchange) close() {
	if x.root != nil {
		x.root.Close()
	}
	unix.Close(x.proc)
}

// startTicks reads the process's start time through its held directory:
// an error once that process has exited, even if its pid is in use again.
func (x *exchange) startTicks() (uint64, error) {
	var buf [512]byte
	data, err := procroot.ReadProcFileAt(x.proc, "stat", buf[:0], maxStat)
	if err != nil {
		return 0, fmt.Errorf("attach: pid %d: %w: %w", x.t.PID, ErrGone, err)
	}
	st, err := procresource.ParseStat(data)
	if err != nil {
		return 0, fmt.Errorf("attach: pid %d: stat %q: %w", x.t.PID, data, err)
	}
	return st.StartTicks, nil
}

// alive fails unless the pinned process still runs.
func (x *exchange) alive() error {
	start, err := x.startTicks()
	if err != nil {
		return err
	}
	if start != x.start {
		return fmt.Errorf("attach: pid %d: start time changed: %w", x.t.PID, ErrGone)
	}
	return nil
}

// signal sends sig to the pinned process only.
func (x *exchange) signal(sig unix.Signal) error {
	err := unix.PidfdSendSignal(x.proc, sig, nil, 0)
	if errors.Is(err, unix.ENOSYS) {
		// Before Linux 5.1 there is only kill(2): the start time, checked
		// just before, stands for the identity.
		if err = x.alive(); err == nil {
			err = unix.Kill(x.t.PID, sig)
		}
	}
	if errors.Is(err, unix.ESRCH) {
		err = fmt.Errorf("%w: %w", ErrGone, err)
	}
	if err != nil {
		return fmt.Errorf("attach: pid %d: %s: %w", x.t.PID, unix.SignalName(sig), err)
	}
	return nil
}

// startListener asks the JVM to open its attach socket and waits for it.
func (x *exchange) startListener(sock string, deadline time.Time) error {
	trigger, err := x.createTrigger()
	if err != nil {
		return err
	}
	defer func() { _ = x.root.Remove(trigger) }()
	if err := x.signal(unix.SIGQUIT); err != nil {
		return err
	}
	for wait := 20 * time.Millisecond; ; wait = min(2*wait, 500*time.Millisecond) {
		if _, err := x.root.Stat(sock); err == nil {
			return nil
		}
		if time.Now().Add(wait).After(deadline) {
			return fmt.Errorf("attach: pid %d: no attach socket %s after SIGQUIT (is it a HotSpot JVM with attach enabled?): %w", x.t.PID, x.root.Display(sock), ErrNoListener)
		}
		time.Sleep(wait)
	}
}

// createTrigger creates .attach_pid<nspid> in the JVM's working directory,
// else its /tmp, and returns its path inside the root.
func (x *exchange) createTrigger() (string, error) {
	name := ".attach_pid" + x.t.nspid()
	var dirs []string
	if x.cwd != "" {
		dirs = append(dirs, x.cwd)
	}
	dirs = append(dirs, "/tmp")
	var errs []error
	for _, dir := range dirs {
		p := filepath.Join(dir, name)
		f, err := x.root.Create(p, 0o660, x.uid, x.gid)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if err := f.Close(); err != nil {
			_ = x.root.Remove(p)
			errs = append(errs, err)
			continue
		}
		return p, nil
	}
	return "", fmt.Errorf("attach: pid %d: cannot create %s in its working directory or /tmp: %w", x.t.PID, name, errors.Join(errs...))
}

// Ready reports whether the JVM has come far enough in its start to take
// SIGQUIT as an attach request at once, and why not when it has not: its
// perf-data file /tmp/hsperfdata_<user>/<nspid> exists (HotSpot creates it
// after installing its signal handlers: before, SIGQUIT kills it), and its
// "Signal Dispatcher" thread runs. HotSpot handles SIGQUIT from early on by
// noting it; that thread, started later in the JVM's start (seconds later
// in a JVM starting on a loaded node), is what reads the trigger file and
// starts the attach listener. A SIGQUIT sent before it runs waits for it,
// and if the trigger file is gone by then (the exchange gave up) the JVM
// prints a thread dump instead. JVMs run with -XX:-UsePerfData, or with
// -Xrs (no dispatcher), never look ready.
func (t Target) Ready() (bool, string) {
	root, err := procroot.Open(t.ProcRoot, t.PID)
	if err != nil {
		return false, "process gone"
	}
	defer root.Close()
	if matches, _ := root.Glob("/tmp/hsperfdata_*/" + t.nspid()); len(matches) == 0 {
		return false, "no hsperfdata file"
	}
	if !t.hasThread(signalDispatcher) {
		return false, "no Signal Dispatcher thread yet"
	}
	return true, ""
}

// signalDispatcher is the name HotSpot gives the thread that handles
// SIGQUIT, as the kernel keeps it (15 bytes).
const signalDispatcher = "Signal Dispatch"

// maxThreads bounds the threads looked at for one JVM.
const maxThreads = 4096

// hasThread reports whether one of the process's threads is named name
// (/proc/<pid>/task/<tid>/comm, which the process may set to anything: a
// fake name only makes SIGQUIT come earlier to a process that has a
// perf-data file).
func (t Target) hasThread(name string) bool {
	dir := filepath.Join(t.ProcRoot, strconv.Itoa(t.PID), "task")
	f, err := os.Open(dir)
	if err != nil {
		return false
	}
	defer f.Close()
	tids, err := f.Readdirnames(maxThreads)
	if err != nil && !errors.Is(err, io.EOF) {
		return false
	}
	for _, tid := range tids {
		if _, err := strconv.Atoi(tid); err != nil {
			continue
		}
		comm, err := procroot.ReadProcFile(filepath.Join(dir, tid, "comm"), 64)
		if err == nil && strings.TrimSuffix(string(comm), "\n") == name {
			return true
		}
	}
	return false
}

// NotYet reports whether err says the JVM does not know the command yet:
// its attach listener answers before the JVM has registered every
// diagnostic command (JFR's come late in its start). Try again later.
func NotYet(err error) bool {
	return errors.Is(err, ErrRefused) && strings.Contains(err.Error(), "Unknown diagnostic command")
}
