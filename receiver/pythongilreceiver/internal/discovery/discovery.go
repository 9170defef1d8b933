// Package discovery finds the CPython interpreters running on a host: every
// process that maps a libpython3.*.so* (plain python built shared, or any
// host embedding it, such as a JVM running Jep) or runs a python executable
// whose symbol table has the GIL functions (python built static). The scan,
// the process events and the liveness rule are package procdiscovery's;
// this package is what makes a process an interpreter and what is read of
// one, and where each stands with the receiver (Statuses).
package discovery // import "github.com/otelcol-ai/otelcol-ai/receiver/pythongilreceiver/internal/discovery"

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/otelcol-ai/otelcol-ai/internal/procdiscovery"
	"github.com/otelcol-ai/otelcol-ai/internal/procresource"
	"github.com/otelcol-ai/otelcol-ai/internal/procroot"
	"github.com/otelcol-ai/otelcol-ai/receiver/pythongilreceiver/internal/gil"
)

// MaxMapsSize caps the read of /proc/<pid>/maps: 8 MiB is some 80 000
// mappings, far more than any interpreter has; a process with more is
// refused rather than read whole at every scan.
const MaxMapsSize = 8 << 20

// Errors callers branch on with errors.Is.
var (
	// ErrMismatch: the file opened at a mapping's path, inside the
	// process's root, is not the file the process maps (the path was
	// replaced after mapping it).
	ErrMismatch = errors.New("opened file is not the mapped file")
	// ErrPanic is wrapped by the error for a source whose decoding
	// panicked: the panic is recovered and the source refused, so that one
	// bad file cannot stop the others.
	ErrPanic = procdiscovery.ErrPanic
	// ErrStalled: reading the process's maps or files has not returned
	// within procdiscovery.InspectTimeout (a process stuck holding its
	// memory map lock, a library on a hung FUSE or NFS mount); the scan
	// goes on without it and it is looked at again once that read returns.
	ErrStalled = procdiscovery.ErrStalled
)

// Recovered turns a value recovered from a panic while handling what
// names into an error wrapping ErrPanic, with the stack, for the log.
func Recovered(what string, p any) error { return procdiscovery.Recovered(what, p) }

// FileID identifies an ELF file across mount namespaces: the device and
// inode that /proc/<pid>/maps reports (on overlayfs, those of the file
// underneath, which is what a uprobe attaches to).
type FileID struct {
	Dev   string
	Inode uint64
}

func (id FileID) String() string { return id.Dev + " " + strconv.FormatUint(id.Inode, 10) }

// Interpreter is one process running CPython.
type Interpreter struct {
	// Resource is what procresource knows about the process.
	Resource procresource.Resource
	// Path is the ELF file with the interpreter, as the process sees it
	// (inside its root); Scanner.Open opens it.
	Path string
	// FileID identifies the file the process maps at Path.
	FileID FileID
	// Version is "3.11" and the like, from the file's name; "" when the
	// name does not say.
	Version string
	// FreeThreaded is set for free-threaded builds (3.13t, 3.14t), which
	// have no GIL to probe.
	FreeThreaded bool
	// DataLo and DataHi bound the file's writable data in the process
	// (gil.WritableRange), where its GIL is; both 0 when not found.
	DataLo, DataHi uint64
}

// Filter selects processes. An empty Filter selects every interpreter.
type Filter struct {
	// Executables match the executable's base name.
	Executables []*regexp.Regexp
	// CommandLines match the command line.
	CommandLines []*regexp.Regexp
	// PIDs are selected whatever their name.
	PIDs []int
}

// Empty reports whether the filter selects everything.
func (f Filter) Empty() bool {
	return len(f.Executables) == 0 && len(f.CommandLines) == 0 && len(f.PIDs) == 0
}

func (f Filter) match(res procresource.Resource) bool {
	if f.Empty() || slices.Contains(f.PIDs, res.PID) {
		return true
	}
	for _, re := range f.Executables {
		if re.MatchString(res.ExecutableName) {
			return true
		}
	}
	for _, re := range f.CommandLines {
		if re.MatchString(res.CommandLine) {
			return true
		}
	}
	return false
}

// Scanner finds interpreters under one proc root: all of them (Scan, the
// periodic safety net) or one process a process event names (Candidate).
// It is safe for concurrent use.
type Scanner struct {
	root   string
	reader *procresource.Reader
	filter Filter
	scan   *procdiscovery.Scanner[Interpreter]

	mu sync.Mutex
	// exeHasGIL caches the symbol check of python executables.
	exeHasGIL map[FileID]bool
}

// NewScanner returns a scanner over the proc root of reader.
func NewScanner(reader *procresource.Reader, filter Filter) *Scanner {
	s := &Scanner{root: reader.Root(), reader: reader, filter: filter, exeHasGIL: map[FileID]bool{}}
	s.scan = procdiscovery.NewScanner(reader, s.inspect)
	return s
}

// Refusal is a process that could not be inspected safely.
type Refusal = procdiscovery.Refusal

// Scan returns every selected interpreter now running, and the processes
// refused by this scan (each once). Processes that vanish while being read
// are skipped; only an unreadable proc root is an error.
func (s *Scanner) Scan() ([]Interpreter, []Refusal, error) { return s.scan.Scan() }

// Candidate reports whether pid runs a selected interpreter, and which:
// the path for a process event (Events) and for each process a Scan lists.
// A process refused (its maps past MaxMapsSize, a python executable that
// cannot be read safely, a panic while decoding) gives an error the first
// time and is skipped afterwards.
func (s *Scanner) Candidate(pid int) (Interpreter, bool, error) { return s.scan.Candidate(pid) }

// Alive reports whether the process pid started at startTicks (0: any)
// still runs (procdiscovery.Alive: an exited process does not, though its
// entry stays until reaped, and a later process under its pid is not it).
func (s *Scanner) Alive(pid int, startTicks uint64) bool { return s.scan.Alive(pid, startTicks) }

// Ended reports whether an exit event of pid ends the process pid started
// at startTicks (procdiscovery.Ended: not while that process still runs,
// the exit being an earlier process's under its pid).
func (s *Scanner) Ended(pid int, startTicks uint64) bool { return s.scan.Ended(pid, startTicks) }

func (s *Scanner) inspect(pid int) (Interpreter, bool, error) {
	maps, err := procroot.ReadProcFile(filepath.Join(s.root, strconv.Itoa(pid), "maps"), MaxMapsSize)
	if err != nil {
		if errors.Is(err, procroot.ErrTooLarge) {
			return Interpreter{}, false, fmt.Errorf("discovery: pid %d: %w", pid, err)
		}
		return Interpreter{}, false, nil
	}
	path, id, ok := libPython(maps)
	if !ok {
		path, id, ok, err = s.pythonExecutable(pid, maps)
		if !ok {
			return Interpreter{}, false, err
		}
	}
	res, err := s.reader.Resolve(pid)
	if err != nil || !s.filter.match(res) {
		return Interpreter{}, false, nil
	}
	version, ft := versionOf(filepath.Base(path))
	lo, hi, _ := gil.WritableRange(maps, id.Dev, id.Inode)
	return Interpreter{
		Resource:     res,
		Path:         path,
		FileID:       id,
		Version:      version,
		FreeThreaded: ft,
		DataLo:       lo,
		DataHi:       hi,
	}, true, nil
}

// Open opens in's ELF file inside its process's root (no `..` or symlink
// escapes, regular files only, without blocking) and checks that it is the
// file the process maps (ErrMismatch otherwise). The caller closes it.
func (s *Scanner) Open(in Interpreter) (*os.File, error) {
	return s.open(in.Resource.PID, in.Path, in.FileID)
}

func (s *Scanner) open(pid int, path string, id FileID) (*os.File, error) {
	root, err := procroot.Open(s.root, pid)
	if err != nil {
		return nil, fmt.Errorf("discovery: pid %d: %w", pid, err)
	}
	defer root.Close()
	f, err := root.OpenFile(path)
	if err != nil {
		return nil, fmt.Errorf("discovery: pid %d: %w", pid, err)
	}
	if err := id.check(f); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("discovery: pid %d: %s: %w", pid, root.Display(path), err)
	}
	return f, nil
}

// check verifies that f is the file id names. fstat says so for most
// files; on overlayfs it gives the overlay's device, while maps (and the
// kernel's uprobes) use the file underneath, so a mapping of f made here
// is compared instead.
func (id FileID) check(f *os.File) error {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return fmt.Errorf("fstat: %w", err)
	}
	if statID(&st) == id {
		return nil
	}
	got, err := mappedID(f)
	if err != nil {
		return fmt.Errorf("%w: maps say %s, fstat %s, and mapping it failed: %w", ErrMismatch, id, statID(&st), err)
	}
	if got != id {
		return fmt.Errorf("%w: maps say %s, the file opened is %s", ErrMismatch, id, got)
	}
	return nil
}

func statID(st *unix.Stat_t) FileID {
	return FileID{Dev: devName(st.Dev), Inode: st.Ino}
}

// devName formats a device number as /proc/<pid>/maps does.
func devName(dev uint64) string {
	return fmt.Sprintf("%02x:%02x", unix.Major(dev), unix.Minor(dev))
}

// mappedID maps the first page of f here, never touching it, and reads
// the device and inode /proc/self/maps gives the mapping.
func mappedID(f *os.File) (FileID, error) {
	mem, err := unix.Mmap(int(f.Fd()), 0, os.Getpagesize(), unix.PROT_READ, unix.MAP_PRIVATE)
	if err != nil {
		return FileID{}, fmt.Errorf("mmap: %w", err)
	}
	defer func() { _ = unix.Munmap(mem) }()
	start := strconv.FormatUint(uint64(uintptr(unsafe.Pointer(&mem[0]))), 16) + "-"
	maps, err := procroot.ReadProcFile("/proc/self/maps", MaxMapsSize)
	if err != nil {
		return FileID{}, err
	}
	for line := range bytes.SplitSeq(maps, []byte{'\n'}) {
		if !bytes.HasPrefix(line, []byte(start)) {
			continue
		}
		f := strings.Fields(string(line))
		if len(f) < 5 {
			break
		}
		ino, err := strconv.ParseUint(f[4], 10, 64)
		if err != nil {
			break
		}
		return FileID{Dev: f[3], Inode: ino}, nil
	}
	return FileID{}, fmt.Errorf("no line for the mapping at %s in /proc/self/maps", start)
}

// mapping is one file-backed line of /proc/<pid>/maps.
type mapping struct {
	path string
	id   FileID
}

func mappings(maps []byte, yield func(mapping) bool) {
	sc := bufio.NewScanner(bytes.NewReader(maps))
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		// address perms offset dev inode path
		f := strings.Fields(sc.Text())
		if len(f) < 6 || !strings.HasPrefix(f[5], "/") {
			continue
		}
		ino, err := strconv.ParseUint(f[4], 10, 64)
		if err != nil || ino == 0 {
			continue
		}
		if !yield(mapping{path: strings.Join(f[5:], " "), id: FileID{Dev: f[3], Inode: ino}}) {
			return
		}
	}
}

var libPythonName = regexp.MustCompile(`^libpython3\.\d+t?\.so`)

// libPython finds a mapped libpython3.X.so*.
func libPython(maps []byte) (path string, id FileID, ok bool) {
	mappings(maps, func(m mapping) bool {
		if libPythonName.MatchString(filepath.Base(m.path)) {
			path, id, ok = m.path, m.id, true
			return false
		}
		return true
	})
	return path, id, ok
}

// pythonExecutable checks a process whose executable is named python*: a
// static build has the GIL functions in the executable itself. An
// executable that cannot be read safely is an error, once per file.
func (s *Scanner) pythonExecutable(pid int, maps []byte) (string, FileID, bool, error) {
	exe, err := os.Readlink(filepath.Join(s.root, strconv.Itoa(pid), "exe"))
	if err != nil || !strings.HasPrefix(filepath.Base(exe), "python") {
		return "", FileID{}, false, nil
	}
	var (
		id    FileID
		found bool
	)
	mappings(maps, func(m mapping) bool {
		if m.path == exe {
			id, found = m.id, true
			return false
		}
		return true
	})
	if !found {
		return "", FileID{}, false, nil
	}
	s.mu.Lock()
	has, cached := s.exeHasGIL[id]
	s.mu.Unlock()
	if cached {
		return exe, id, has, nil
	}
	f, err := s.open(pid, exe, id)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			// Gone, or not reachable in its root: another scan will tell.
			return "", FileID{}, false, nil
		}
		s.cacheGIL(id, false)
		return "", FileID{}, false, err
	}
	defer f.Close()
	img, err := gil.ReadFile(f)
	has = err == nil && img.Symbols.HasGIL()
	s.cacheGIL(id, has)
	if err != nil {
		return "", FileID{}, false, fmt.Errorf("discovery: pid %d: %w", pid, err)
	}
	return exe, id, has, nil
}

func (s *Scanner) cacheGIL(id FileID, has bool) {
	s.mu.Lock()
	s.exeHasGIL[id] = has
	s.mu.Unlock()
}

var versionName = regexp.MustCompile(`python(3\.\d+)(t?)`)

// versionOf reads "3.11" and the free-threading flag from a file name such
// as libpython3.11.so.1.0, libpython3.13t.so or python3.12.
func versionOf(name string) (version string, freeThreaded bool) {
	m := versionName.FindStringSubmatch(name)
	if m == nil {
		return "", false
	}
	return m[1], m[2] == "t"
}
