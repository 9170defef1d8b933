// Package discovery finds the JVMs running on a host and the JFR disk
// repositories they write, through a proc filesystem: JVM processes are
// those whose executable is a java launcher; a JVM's repository is
// -XX:FlightRecorderOptions's repository option when given, else its
// java.io.tmpdir (default /tmp), and inside it HotSpot's folder
// yyyy_MM_dd_HH_mm_ss_<pid>, named with the pid the JVM sees in its own pid
// namespace. Paths are kept as the JVM sees them and resolved inside its
// root (package procroot, through /proc/<pid>/root), so that JVMs in
// containers are found from the host and a container's symlinks and `..`
// never lead outside it. The scan, the process events and the liveness
// rule are package procdiscovery's; this package is what makes a process a
// JVM and what is read of one.
package discovery // import "github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/discovery"

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/otelcol-ai/otelcol-ai/internal/procdiscovery"
	"github.com/otelcol-ai/otelcol-ai/internal/procresource"
	"github.com/otelcol-ai/otelcol-ai/internal/procroot"
)

// JVM is a running JVM found in the proc filesystem.
type JVM struct {
	// PID is the process id in the proc root's pid namespace.
	PID int
	// StartTicks is the process start time (with PID, its identity).
	StartTicks uint64
	// NSPID is the pid the JVM sees (its own pid namespace), which names
	// its repository folder.
	NSPID int
	// ProcRoot is the proc filesystem PID is in.
	ProcRoot string
	// RepositoryBase is where the JVM puts its repository folder, as the
	// JVM sees it (e.g. /tmp).
	RepositoryBase string
	// StartsRecording says the JVM was started with -XX:StartFlightRecording
	// (its repository may not exist yet).
	StartsRecording bool
	// XLogFiles are the files its -Xlog options write to, as glob patterns
	// of absolute paths as the JVM sees them (%p replaced, %t a wildcard;
	// relative paths joined to its working directory). Open them with
	// OpenRoot's Root.
	XLogFiles []string
}

// OpenRoot opens the JVM's root directory, inside which its paths
// (RepositoryBase, XLogFiles, Repositories) resolve. The caller closes it.
func (j JVM) OpenRoot() (*procroot.Root, error) {
	return procroot.Open(j.ProcRoot, j.PID)
}

// Repositories returns the JVM's repository folders (normally one), as
// paths inside root (OpenRoot), newest name last.
func (j JVM) Repositories(root *procroot.Root) []string {
	base := filepath.Join("/", j.RepositoryBase)
	entries, err := root.ReadDir(base)
	if err != nil {
		return nil
	}
	var out []string
	suffix := "_" + strconv.Itoa(j.NSPID)
	started, known := j.started()
	for _, e := range entries {
		name := e.Name()
		if !e.IsDir() || !strings.HasSuffix(name, suffix) || !IsRepositoryName(name) {
			continue
		}
		dir := filepath.Join(base, name)
		if known {
			// A folder left by an earlier process with the same pid (killed,
			// or a container restarted on the same /tmp, where pids repeat)
			// was last changed before this JVM started: it is not this
			// JVM's, and its chunks are not this JVM's events. A
			// filesystem that keeps no times (the epoch) tells nothing.
			info, err := root.Stat(dir)
			if err != nil {
				continue
			}
			if m := info.ModTime(); m.Unix() > 0 && m.Before(started.Add(-startSlack)) {
				continue
			}
		}
		out = append(out, dir)
	}
	return out
}

// startSlack absorbs the error of a JVM's start time as started reads it
// (the kernel's ticks are 10 ms; the two clocks are read one after the
// other) and of a folder's time on a filesystem whose server's clock is
// off (NFS): a folder changed less than this before the JVM started is
// taken as its own. A predecessor's folder is older: a restarted
// container waits at least 10 s, and its JVM made its folder at its start.
const startSlack = time.Minute

// started returns when the JVM started, on the realtime clock: its start
// time is in ticks since boot, which the boot-time clock counts. False when
// either is unknown.
func (j JVM) started() (time.Time, bool) {
	if j.StartTicks == 0 {
		return time.Time{}, false
	}
	var boot unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &boot); err != nil {
		return time.Time{}, false
	}
	now := time.Now()
	since := time.Duration(boot.Nano()) - procresource.Ticks(j.StartTicks)
	return now.Add(-since), true
}

var repositoryName = regexp.MustCompile(`^\d{4}_\d{2}_\d{2}_\d{2}_\d{2}_\d{2}_(\d+)$`)

// IsRepositoryName reports whether a folder name has HotSpot's repository
// layout, yyyy_MM_dd_HH_mm_ss_<pid>.
func IsRepositoryName(name string) bool { return repositoryName.MatchString(name) }

// RepositoryPID returns the pid in a repository folder's name (0 if the
// name does not have the layout).
func RepositoryPID(dir string) int {
	m := repositoryName.FindStringSubmatch(filepath.Base(dir))
	if m == nil {
		return 0
	}
	pid, _ := strconv.Atoi(m[1])
	return pid
}

// maxCmdline caps the read of a process's command line: one longer (the
// kernel allows about 2 MiB) is not a JVM worth reading the rest of.
const maxCmdline = 256 << 10

// Scanner finds JVMs under one proc root: all of them (Scan, the periodic
// safety net) or one process a process event names (Candidate). It is safe
// for concurrent use.
type Scanner struct {
	reader *procresource.Reader
	root   string
	scan   *procdiscovery.Scanner[JVM]
}

// NewScanner returns a Scanner for the proc filesystem at procRoot.
func NewScanner(procRoot string) *Scanner {
	r := procresource.NewReader(procRoot, 0)
	s := &Scanner{reader: r, root: r.Root()}
	s.scan = procdiscovery.NewScanner(r, s.inspect)
	return s
}

// Refusal is a process that could not be inspected safely.
type Refusal = procdiscovery.Refusal

// Scan returns the running JVMs, and the processes this scan refused
// (each once). Processes that vanish while being read are left out; only
// an unreadable proc root is an error.
func (s *Scanner) Scan() ([]JVM, []Refusal, error) { return s.scan.Scan() }

// Candidate reports whether pid is a JVM, and which: the path for a
// process event (exec) or an announcement (Watch). A process refused (its
// command line past the cap) gives an error the first time, nothing after.
func (s *Scanner) Candidate(pid int) (JVM, bool, error) { return s.scan.Candidate(pid) }

// Alive reports whether the process pid with the given start time still
// runs. One that has exited is not, though its /proc entry stays until it
// is reaped: its repository is then read to the end at once, not when the
// entry goes (which may be never, under a parent that does not wait).
func (s *Scanner) Alive(pid int, startTicks uint64) bool { return s.scan.Alive(pid, startTicks) }

// Alive reports whether pid, read through reader, still runs with the
// start time startTicks (0: any): procdiscovery's liveness rule.
func Alive(reader *procresource.Reader, pid int, startTicks uint64) bool {
	return procdiscovery.Alive(reader, pid, startTicks)
}

func (s *Scanner) inspect(pid int) (JVM, bool, error) {
	dir := filepath.Join(s.root, strconv.Itoa(pid))
	if !s.isJava(dir) {
		return JVM{}, false, nil
	}
	id, err := s.reader.Identity(pid)
	if err != nil {
		return JVM{}, false, nil
	}
	raw, err := procroot.ReadProcFile(filepath.Join(dir, "cmdline"), maxCmdline)
	if err != nil {
		if errors.Is(err, procroot.ErrTooLarge) {
			return JVM{}, false, fmt.Errorf("discovery: pid %d: command line: %w", pid, err)
		}
		return JVM{}, false, nil
	}
	args := strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00")
	// JAVA_TOOL_OPTIONS and JDK_JAVA_OPTIONS come before the command line.
	var opts []string
	for _, env := range []string{"JAVA_TOOL_OPTIONS", "JDK_JAVA_OPTIONS"} {
		if v, ok := s.reader.Getenv(pid, env); ok {
			opts = append(opts, strings.Fields(v)...)
		}
	}
	opts = append(opts, args...)
	j := JVM{
		PID:            pid,
		StartTicks:     id.StartTicks,
		NSPID:          id.VPID,
		ProcRoot:       s.root,
		RepositoryBase: RepositoryBase(opts),
	}
	if j.NSPID == 0 {
		// No NSpid line (kernels before 4.1): no pid namespaces to tell.
		j.NSPID = pid
	}
	for _, a := range opts {
		if strings.HasPrefix(a, "-XX:StartFlightRecording") {
			j.StartsRecording = true
		}
	}
	cwd := ""
	for _, p := range XLogFiles(opts, j.NSPID) {
		if !filepath.IsAbs(p) {
			// Relative to the JVM's working directory, as it names it.
			if cwd == "" {
				if cwd, err = procroot.Cwd(s.root, pid); err != nil {
					continue
				}
			}
			p = filepath.Join(cwd, p)
		}
		j.XLogFiles = append(j.XLogFiles, filepath.Clean(p))
	}
	return j, true, nil
}

// maxComm bounds a comm read (the kernel's is 16 bytes).
const maxComm = 64

func (s *Scanner) isJava(dir string) bool {
	if exe, err := os.Readlink(filepath.Join(dir, "exe")); err == nil {
		return procresource.RuntimeOf(filepath.Base(strings.TrimSuffix(exe, " (deleted)"))) == procresource.RuntimeJava
	}
	// The kernel's comm is at most 16 bytes; the proc root may be a
	// tenant's bind mount, so the read is capped all the same.
	comm, err := procroot.ReadProcFile(filepath.Join(dir, "comm"), maxComm)
	return err == nil && procresource.RuntimeOf(strings.TrimSpace(string(comm))) == procresource.RuntimeJava
}

// RepositoryBase returns where a JVM started with these options puts its
// repository folder: -XX:FlightRecorderOptions's repository, else
// -Djava.io.tmpdir, else /tmp. The last occurrence of an option wins, as in
// the JVM.
func RepositoryBase(args []string) string {
	repo, tmp := "", ""
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "-Djava.io.tmpdir="); ok {
			tmp = v
			continue
		}
		rest, ok := strings.CutPrefix(a, "-XX:FlightRecorderOptions")
		if !ok || rest == "" || (rest[0] != '=' && rest[0] != ':') {
			continue
		}
		for _, kv := range strings.Split(rest[1:], ",") {
			if v, ok := strings.CutPrefix(kv, "repository="); ok {
				repo = v
			}
		}
	}
	switch {
	case repo != "":
		return repo
	case tmp != "":
		return tmp
	}
	return "/tmp"
}

// XLogFiles returns the files that -Xlog options write to, as the JVM sees
// them, with HotSpot's %p (pid) replaced and %t (start time) turned into a
// wildcard: -Xlog:<selections>:<output>[:…] where output is file=<path>, or
// a path; stdout and stderr are left out.
func XLogFiles(args []string, pid int) []string {
	var out []string
	for _, a := range args {
		rest, ok := strings.CutPrefix(a, "-Xlog:")
		if !ok {
			continue
		}
		parts := strings.SplitN(rest, ":", 3)
		if len(parts) < 2 {
			continue
		}
		target := strings.TrimPrefix(parts[1], "file=")
		target = strings.Trim(target, `"`)
		if target == "" || target == "stdout" || target == "stderr" {
			continue
		}
		var b strings.Builder
		for i := 0; i < len(target); i++ {
			if target[i] != '%' || i+1 == len(target) {
				b.WriteByte(target[i])
				continue
			}
			i++
			switch target[i] {
			case 'p':
				b.WriteString(strconv.Itoa(pid))
			case 't':
				b.WriteByte('*')
			case '%':
				b.WriteByte('%')
			default:
				b.WriteByte('%')
				b.WriteByte(target[i])
			}
		}
		out = append(out, b.String())
	}
	return out
}
