// Package procresource turns a process id into the resource attributes that
// every otelcol-ai receiver puts on what it reports about that process: the
// executable, its command line, the container it runs in and the Kubernetes
// pod that container belongs to.
//
// Its Identity is the process as the node sees it and as it sees itself
// (host pid, the pid in its own pid namespace, container, pod), and Node the
// node's name; PutIdentity (SetIdentity for generated resource builders) is
// the one place that writes them onto a resource, with the names and rules
// of the window model (internal/window). Index answers the reverse question
// for the correlator: which local process does an identity reported from
// inside a container (container id and pid, pod and pid) name.
//
// Everything is read from a proc filesystem whose root is configurable, so a
// collector in a container can read the host's processes through a host
// mount (hostPID, or /hostfs/proc) and tests can use a fake tree.
package procresource // import "github.com/otelcol-ai/otelcol-ai/internal/procresource"

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"github.com/otelcol-ai/otelcol-ai/internal/procroot"
)

// DefaultProcRoot is where the proc filesystem is normally mounted.
const DefaultProcRoot = "/proc"

// DefaultMaxCommandLine is the number of bytes of a command line kept when
// the caller does not choose: long enough to show a java main class or a
// python script, short enough to be a metric label.
const DefaultMaxCommandLine = 256

// ErrNoProcess is returned (wrapped) when the pid has no entry in the proc
// root: the process has exited or lives in another pid namespace.
var ErrNoProcess = errors.New("no such process")

// Resource describes one process. Empty strings mean "not known".
type Resource struct {
	// PID is the process id in the proc root's pid namespace.
	PID int
	// VPID is the process id in its own, innermost pid namespace (the last
	// field of NSpid in /proc/<pid>/status): PID for a process outside a
	// container, usually 1 for a container's main process; 0 when unknown.
	VPID int
	// ExecutableName is the base name of /proc/<pid>/exe, or the kernel's
	// comm name when the link cannot be read (another user's process
	// without CAP_SYS_PTRACE).
	ExecutableName string
	// ExecutablePath is the target of /proc/<pid>/exe ("" when unreadable).
	ExecutablePath string
	// RuntimeName is the language runtime the executable is known to be
	// ("java", "cpython"), or "" (see RuntimeOf).
	RuntimeName string
	// CommandLine is /proc/<pid>/cmdline with arguments joined by spaces,
	// truncated to the reader's limit at a UTF-8 boundary.
	CommandLine string
	// StartTicks is the process start time in clock ticks since boot
	// (field 22 of /proc/<pid>/stat); with PID it identifies the process
	// across pid reuse.
	StartTicks uint64
	// Container is what the process's cgroup says about its container and
	// pod.
	Container Container
}

// Reader resolves pids against one proc root.
type Reader struct {
	root           string
	maxCommandLine int
}

// NewReader returns a Reader for the proc filesystem at root ("" means
// DefaultProcRoot) that keeps at most maxCommandLine bytes of a command line
// (<= 0 means DefaultMaxCommandLine).
func NewReader(root string, maxCommandLine int) *Reader {
	if root == "" {
		root = DefaultProcRoot
	}
	if maxCommandLine <= 0 {
		maxCommandLine = DefaultMaxCommandLine
	}
	return &Reader{root: root, maxCommandLine: maxCommandLine}
}

// Root returns the proc root the reader reads.
func (r *Reader) Root() string { return r.root }

func (r *Reader) path(pid int, name string) string {
	return filepath.Join(r.root, strconv.Itoa(pid), name)
}

// Resolve reads everything known about pid. Only a missing process is an
// error; a file that cannot be read (permissions, a kernel thread without a
// command line) leaves its fields empty. The identity fields (PID, VPID,
// StartTicks, Container) are read as Identity reads them.
func (r *Reader) Resolve(pid int) (Resource, error) {
	s := newScratch()
	p, err := r.readProcess(unix.AT_FDCWD, filepath.Join(r.root, strconv.Itoa(pid)), pid, &s, nil)
	if err != nil {
		return Resource{}, err
	}
	res := Resource{PID: pid, VPID: p.id.VPID, StartTicks: p.id.StartTicks, Container: p.container}
	if exe, err := os.Readlink(r.path(pid, "exe")); err == nil {
		exe = strings.TrimSuffix(exe, " (deleted)")
		res.ExecutablePath = exe
		res.ExecutableName = filepath.Base(exe)
	}
	if res.ExecutableName == "" {
		if comm, err := procroot.ReadProcFile(r.path(pid, "comm"), maxComm); err == nil {
			res.ExecutableName = strings.TrimRight(string(comm), "\n")
		}
	}
	res.RuntimeName = RuntimeOf(res.ExecutableName)
	if cmdline, err := readPrefix(r.path(pid, "cmdline"), max(maxCommandLineRead, int64(r.maxCommandLine)+utf8.UTFMax)); err == nil {
		res.CommandLine = formatCommandLine(cmdline, r.maxCommandLine)
	}
	return res, nil
}

// Caps on what is read of another process's proc files: whatever a process
// puts in its command line or environment, memory stays bounded.
const (
	// maxComm: the kernel's comm is 16 bytes.
	maxComm = 4 << 10
	// maxCommandLineRead is how much of a command line is read; only the
	// reader's limit (256 bytes by default) is kept.
	maxCommandLineRead = 64 << 10
	// maxCgroup: one line per hierarchy, each a path.
	maxCgroup = 64 << 10
	// maxEnviron: the kernel lets arguments and environment together
	// fill a quarter of the stack limit, 2 MiB by default.
	maxEnviron = 4 << 20
)

// readPrefix reads at most n bytes of the proc file at path: a command
// line longer than what is kept is truncated, not refused.
func readPrefix(path string, n int64) ([]byte, error) {
	f, err := procroot.OpenProcFile(unix.AT_FDCWD, path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, n))
}

// Getenv returns the value of one variable from the process's initial
// environment (/proc/<pid>/environ), and whether it was set. Reading another
// process's environment needs the same privileges as ptrace; without them
// the variable is reported as unset.
func (r *Reader) Getenv(pid int, name string) (string, bool) {
	data, err := procroot.ReadProcFile(r.path(pid, "environ"), maxEnviron)
	if err != nil {
		return "", false
	}
	prefix := []byte(name + "=")
	for entry := range bytes.SplitSeq(data, []byte{0}) {
		if v, ok := bytes.CutPrefix(entry, prefix); ok {
			return string(v), true
		}
	}
	return "", false
}

// Runtime names, as the project's resources spell process.runtime.name.
const (
	RuntimeJava    = "java"
	RuntimeCPython = "cpython"
)

// RuntimeOf tells the runtime from an executable's base name: the JVM
// launchers (java, javaw) and CPython interpreters (python, python3,
// python3.12, python3.13t). Anything else, including programs that embed a
// runtime (a JVM loading libpython through Jep, a C++ server embedding a JVM),
// is "" here: those are found by the receivers that look inside processes.
func RuntimeOf(executableName string) string {
	switch executableName {
	case "java", "javaw":
		return RuntimeJava
	}
	rest, ok := strings.CutPrefix(executableName, "python")
	if !ok {
		return ""
	}
	rest = strings.TrimSuffix(rest, "t") // free-threaded builds
	for _, c := range rest {
		if (c < '0' || c > '9') && c != '.' {
			return ""
		}
	}
	return RuntimeCPython
}

// formatCommandLine joins NUL-separated arguments with spaces and truncates
// to max bytes without splitting a UTF-8 sequence.
func formatCommandLine(raw []byte, limit int) string {
	raw = bytes.TrimRight(raw, "\x00")
	if len(raw) > limit {
		cut := limit
		// Back off to the start of the rune the limit falls inside.
		for cut > 0 && !utf8.RuneStart(raw[cut]) && limit-cut < utf8.UTFMax {
			cut--
		}
		raw = raw[:cut]
	}
	out := make([]byte, len(raw))
	for i, b := range raw {
		if b == 0 {
			b = ' '
		}
		out[i] = b
	}
	return string(out)
}

// initialPIDNamespace is the inode of the kernel's initial pid namespace
// (PROC_PID_INIT_INO), the one host processes live in.
const initialPIDNamespace = "pid:[4026531836]"

// InHostPIDNamespace reports whether this process runs in the host's pid
// namespace, so that pids other tools report for the host (NVML, the
// kernel's perf events) name the same processes in /proc. known is false
// when the namespace cannot be read (a sandboxed kernel).
func InHostPIDNamespace() (inHost, known bool) {
	link, err := os.Readlink("/proc/self/ns/pid")
	if err != nil {
		return false, false
	}
	return link == initialPIDNamespace, true
}
