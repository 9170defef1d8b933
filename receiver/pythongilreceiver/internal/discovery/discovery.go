// Package discovery finds the CPython interpreters running on a host: every
// process that maps a libpython3.*.so* (plain python built shared, or any
// host embedding it, such as a JVM running Jep) or runs a python executable
// whose symbol table has the GIL functions (python built static).
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

	"github.com/otelcol-ai/otelcol-ai/internal/procresource"
	"github.com/otelcol-ai/otelcol-ai/receiver/pythongilreceiver/internal/gil"
)

// FileID identifies an ELF file across mount namespaces: the device and
// inode that /proc/<pid>/maps reports.
type FileID struct {
	Dev   string
	Inode uint64
}

// Interpreter is one process running CPython.
type Interpreter struct {
	// Resource is what procresource knows about the process.
	Resource procresource.Resource
	// File is the path, openable from this process, of the ELF file with
	// the interpreter: <proc root>/<pid>/root/<path in the process>.
	File string
	// FileID identifies File.
	FileID FileID
	// Version is "3.11" and the like, from the file's name; "" when the
	// name does not say.
	Version string
	// FreeThreaded is set for free-threaded builds (3.13t, 3.14t), which
	// have no GIL to probe.
	FreeThreaded bool
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

// Scanner scans a proc filesystem. It is not safe for concurrent use.
type Scanner struct {
	root   string
	reader *procresource.Reader
	filter Filter
	self   int
	// exeHasGIL caches the symbol check of python executables.
	exeHasGIL map[FileID]bool
}

// NewScanner returns a scanner over the proc root of reader.
func NewScanner(reader *procresource.Reader, filter Filter) *Scanner {
	return &Scanner{root: reader.Root(), reader: reader, filter: filter, self: os.Getpid(), exeHasGIL: map[FileID]bool{}}
}

// Scan returns every selected interpreter now running. Processes that
// vanish while being read are skipped; only an unreadable proc root is an
// error.
func (s *Scanner) Scan() ([]Interpreter, error) {
	ents, err := os.ReadDir(s.root)
	if err != nil {
		return nil, fmt.Errorf("discovery: read %s: %w", s.root, err)
	}
	var out []Interpreter
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == s.self {
			continue
		}
		if in, ok := s.Inspect(pid); ok {
			out = append(out, in)
		}
	}
	return out, nil
}

// Inspect reports whether pid runs a selected interpreter, and which.
func (s *Scanner) Inspect(pid int) (Interpreter, bool) {
	maps, err := os.ReadFile(filepath.Join(s.root, strconv.Itoa(pid), "maps"))
	if err != nil {
		return Interpreter{}, false
	}
	path, id, ok := libPython(maps)
	if !ok {
		path, id, ok = s.pythonExecutable(pid, maps)
		if !ok {
			return Interpreter{}, false
		}
	}
	res, err := s.reader.Resolve(pid)
	if err != nil || !s.filter.match(res) {
		return Interpreter{}, false
	}
	version, ft := versionOf(filepath.Base(path))
	return Interpreter{
		Resource:     res,
		File:         filepath.Join(s.root, strconv.Itoa(pid), "root", path),
		FileID:       id,
		Version:      version,
		FreeThreaded: ft,
	}, true
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
// static build has the GIL functions in the executable itself.
func (s *Scanner) pythonExecutable(pid int, maps []byte) (string, FileID, bool) {
	exe, err := os.Readlink(filepath.Join(s.root, strconv.Itoa(pid), "exe"))
	if err != nil || !strings.HasPrefix(filepath.Base(exe), "python") {
		return "", FileID{}, false
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
		return "", FileID{}, false
	}
	has, cached := s.exeHasGIL[id]
	if !cached {
		syms, err := gil.ReadSymbols(filepath.Join(s.root, strconv.Itoa(pid), "root", exe))
		has = err == nil && syms.HasGIL()
		if err == nil || !errors.Is(err, os.ErrNotExist) {
			s.exeHasGIL[id] = has
		}
	}
	return exe, id, has
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
