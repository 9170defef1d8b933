// Package procroot opens the files of another process the way that process
// would see them, and as hostile input: every path is resolved inside the
// process's root (its /proc/<pid>/root), so that `..` segments and absolute
// symlinks stay in the container they belong to instead of landing on the
// host's filesystem; magic links (/proc/self/…, /proc/<pid>/fd/…) are never
// followed; opens never block (a FIFO named like a data file is refused, not
// waited on); only regular files are read as data and only sockets are
// dialled; files are created exclusively and without following a final
// symlink, and reads are capped.
//
// Resolution uses openat2(2) with RESOLVE_IN_ROOT|RESOLVE_NO_MAGICLINKS
// where the kernel has it (Linux 5.6+), and an equivalent component-by-
// component walk with openat(O_PATH|O_NOFOLLOW) elsewhere: absolute
// symlinks restart at the root, `..` never climbs above it, and at most 40
// symlinks are followed, as the kernel does.
//
// A Root holds a descriptor of the process's root directory, so it keeps
// naming the same filesystem while the process runs and after it exits (as
// long as the mount namespace lives), whatever happens to the pid.
package procroot // import "github.com/otelcol-ai/otelcol-ai/internal/procroot"

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Errors callers branch on with errors.Is.
var (
	// ErrNotRegular: the path names something other than a regular file
	// (a FIFO, a device, a directory, a socket) where data was expected.
	ErrNotRegular = errors.New("not a regular file")
	// ErrNotSocket: the path names something other than a socket where a
	// socket was expected.
	ErrNotSocket = errors.New("not a socket")
	// ErrTooLarge: a capped read found more bytes than the cap.
	ErrTooLarge = errors.New("file larger than allowed")
)

// maxSymlinks is how many symlinks one resolution may follow (the kernel's
// MAXSYMLINKS).
const maxSymlinks = 40

// noOpenat2 is set when the kernel says openat2 does not exist, and by
// tests to exercise the walk.
var noOpenat2 atomic.Bool

// Root is a process's root directory, held open.
type Root struct {
	fd   int
	path string
}

// Open opens the root directory of pid in the proc filesystem at procRoot
// (<procRoot>/<pid>/root).
func Open(procRoot string, pid int) (*Root, error) {
	return OpenDir(filepath.Join(procRoot, strconv.Itoa(pid), "root"))
}

// OpenDir opens dir as a root: paths are resolved inside it as if it were
// "/". Open is the usual way in; OpenDir serves tests and directories that
// act as a root of their own.
func OpenDir(dir string) (*Root, error) {
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open root", Path: dir, Err: err}
	}
	return &Root{fd: fd, path: dir}, nil
}

// Close releases the root's descriptor.
func (r *Root) Close() error {
	if r.fd < 0 {
		return nil
	}
	err := unix.Close(r.fd)
	r.fd = -1
	return err
}

// Path returns the root as this process reaches it, for messages
// (/proc/<pid>/root).
func (r *Root) Path() string { return r.path }

// Display returns name as a path from here (Path joined with name), for
// messages and logs only: it is never opened.
func (r *Root) Display(name string) string { return filepath.Join(r.path, name) }

// resolve opens name, as the process sees it, with flags (O_CLOEXEC and
// O_NOCTTY are added). With final false a symlink as the last component is
// not followed (O_NOFOLLOW, or O_PATH on the link itself with O_PATH).
func (r *Root) resolve(name string, flags int, mode uint32) (int, error) {
	flags |= unix.O_CLOEXEC
	if flags&unix.O_PATH == 0 {
		// openat2 refuses O_PATH with anything but O_DIRECTORY,
		// O_NOFOLLOW and O_CLOEXEC.
		flags |= unix.O_NOCTTY
	}
	if !noOpenat2.Load() {
		fd, err := r.openat2(name, flags, mode)
		if !errors.Is(err, unix.ENOSYS) {
			return fd, err
		}
		noOpenat2.Store(true)
	}
	return r.walk(name, flags, mode)
}

func (r *Root) openat2(name string, flags int, mode uint32) (int, error) {
	how := unix.OpenHow{
		Flags:   uint64(flags),
		Mode:    uint64(mode),
		Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS,
	}
	if flags&unix.O_CREAT == 0 {
		how.Mode = 0
	}
	for {
		fd, err := unix.Openat2(r.fd, name, &how)
		// EAGAIN: a rename raced the resolution (RESOLVE_IN_ROOT asks the
		// caller to retry); EINTR: a signal.
		if err == unix.EAGAIN || err == unix.EINTR {
			continue
		}
		return fd, err
	}
}

// walk resolves name one component at a time from the root, as
// RESOLVE_IN_ROOT does, for kernels without openat2.
func (r *Root) walk(name string, flags int, mode uint32) (int, error) {
	parts := splitPath(name)
	links := 0
	// stack holds the descriptors of the directories walked so far; its
	// first entry is the root (not owned).
	stack := []int{r.fd}
	defer func() {
		for _, fd := range stack[1:] {
			unix.Close(fd)
		}
	}()
	for len(parts) > 0 {
		part := parts[0]
		parts = parts[1:]
		switch part {
		case "", ".":
			continue
		case "..":
			if len(stack) > 1 {
				unix.Close(stack[len(stack)-1])
				stack = stack[:len(stack)-1]
			}
			continue
		}
		dir := stack[len(stack)-1]
		last := len(parts) == 0
		fd, err := unix.Openat(dir, part, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if last && flags&unix.O_CREAT != 0 && errors.Is(err, unix.ENOENT) {
			return Openat(dir, part, flags|unix.O_NOFOLLOW, mode)
		}
		if err != nil {
			return -1, err
		}
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			unix.Close(fd)
			return -1, err
		}
		if st.Mode&unix.S_IFMT == unix.S_IFLNK {
			unix.Close(fd)
			if last && flags&unix.O_NOFOLLOW != 0 {
				if flags&unix.O_PATH != 0 {
					return Openat(dir, part, flags, 0)
				}
				return -1, unix.ELOOP
			}
			links++
			if links > maxSymlinks {
				return -1, unix.ELOOP
			}
			target, err := readlinkat(dir, part)
			if err != nil {
				return -1, err
			}
			if strings.HasPrefix(target, "/") {
				for _, fd := range stack[1:] {
					unix.Close(fd)
				}
				stack = stack[:1]
			}
			parts = append(splitPath(target), parts...)
			continue
		}
		if last {
			unix.Close(fd)
			if flags&unix.O_CREAT != 0 && flags&unix.O_EXCL != 0 {
				return -1, unix.EEXIST
			}
			return Openat(dir, part, flags|unix.O_NOFOLLOW, mode)
		}
		if st.Mode&unix.S_IFMT != unix.S_IFDIR {
			unix.Close(fd)
			return -1, unix.ENOTDIR
		}
		stack = append(stack, fd)
	}
	// The name resolved to a directory already on the stack (the root,
	// or one reached through `..` or a symlink).
	return Openat(stack[len(stack)-1], ".", flags&^(unix.O_CREAT|unix.O_EXCL), 0)
}

// Openat is openat(2) retried while a signal interrupts it (EINTR).
func Openat(dir int, name string, flags int, mode uint32) (int, error) {
	for {
		fd, err := unix.Openat(dir, name, flags, mode)
		if err != unix.EINTR {
			return fd, err
		}
	}
}

func readlinkat(dir int, name string) (string, error) {
	buf := make([]byte, 256)
	for {
		n, err := unix.Readlinkat(dir, name, buf)
		if err != nil {
			return "", err
		}
		if n < len(buf) {
			return string(buf[:n]), nil
		}
		if len(buf) >= unix.PathMax {
			return "", unix.ENAMETOOLONG
		}
		buf = make([]byte, 2*len(buf))
	}
}

func splitPath(p string) []string {
	return strings.Split(p, "/")
}

func (r *Root) pathError(op, name string, err error) error {
	return &fs.PathError{Op: op, Path: r.Display(name), Err: err}
}

// OpenFile opens name read-only as data: it must be a regular file
// (ErrNotRegular otherwise). The open itself never blocks, even on a FIFO.
func (r *Root) OpenFile(name string) (*os.File, error) {
	fd, err := r.resolve(name, unix.O_RDONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, r.pathError("open", name, err)
	}
	if err := checkType(fd, unix.S_IFREG); err != nil {
		unix.Close(fd)
		return nil, r.pathError("open", name, err)
	}
	// O_NONBLOCK means nothing to a regular file's reads; it stays set.
	return os.NewFile(uintptr(fd), r.Display(name)), nil
}

// OpenDirectory opens name as a directory (to list it, or to watch it by
// its descriptor).
func (r *Root) OpenDirectory(name string) (*os.File, error) {
	fd, err := r.resolve(name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, r.pathError("open", name, err)
	}
	return os.NewFile(uintptr(fd), r.Display(name)), nil
}

// ReadDir lists the directory name, sorted by file name (as os.ReadDir).
func (r *Root) ReadDir(name string) ([]fs.DirEntry, error) {
	d, err := r.OpenDirectory(name)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	entries, err := d.ReadDir(-1)
	slices.SortFunc(entries, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	return entries, err
}

// Stat returns what name resolves to (a final symlink followed, inside the
// root), without opening it for reading.
func (r *Root) Stat(name string) (fs.FileInfo, error) {
	fd, err := r.resolve(name, unix.O_PATH, 0)
	if err != nil {
		return nil, r.pathError("stat", name, err)
	}
	f := os.NewFile(uintptr(fd), r.Display(name))
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, r.pathError("stat", name, err)
	}
	return fi, nil
}

// ReadFile reads the regular file name whole, refusing (ErrTooLarge) one
// longer than limit bytes, whatever size it claims.
func (r *Root) ReadFile(name string, limit int64) ([]byte, error) {
	f, err := r.OpenFile(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ReadCapped(f, limit)
}

// ReadCapped reads rd to its end, or fails with ErrTooLarge past limit
// bytes. Memory follows what is read, not what a file claims.
func ReadCapped(rd io.Reader, limit int64) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(rd, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("procroot: more than %d bytes: %w", limit, ErrTooLarge)
	}
	return data, nil
}

// ReadProcFile reads a file of the proc filesystem itself (/proc/<pid>/
// cmdline, maps, status, …: the kernel's, not the process's root) with a
// cap, refusing anything but a regular file (ReadProcFileAt with a path).
func ReadProcFile(path string, limit int64) ([]byte, error) {
	return ReadProcFileAt(unix.AT_FDCWD, path, nil, limit)
}

// OpenProcFile opens name, relative to the directory descriptor dir
// (unix.AT_FDCWD: a path), as a file of the proc filesystem is read:
// read-only, without blocking (a FIFO in a proc root that is a tenant's
// bind mount is refused, not waited on), without following a final
// symlink, and only a regular file (ErrNotRegular). For files read as a
// stream (/proc/net/tcp, smaps); small ones are read whole with
// ReadProcFileAt.
func OpenProcFile(dir int, name string) (*os.File, error) {
	fd, err := openProcFile(dir, name)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), name), nil
}

func openProcFile(dir int, name string) (int, error) {
	fd, err := Openat(dir, name, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC|unix.O_NOCTTY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return -1, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	if err := checkType(fd, unix.S_IFREG); err != nil {
		unix.Close(fd)
		return -1, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	return fd, nil
}

// ReadProcFileAt reads the proc file name under dir (as OpenProcFile opens
// it) whole into buf's storage, grown as needed, and fails with
// ErrTooLarge past limit bytes: memory follows what is read, never more
// than the cap, whatever the file claims. Reading into a buffer kept
// between calls costs no allocation, so a scan of every process's stat,
// status and cgroup allocates only where a file outgrows its buffer. A
// read interrupted by a signal (EINTR) is retried.
func ReadProcFileAt(dir int, name string, buf []byte, limit int64) ([]byte, error) {
	fd, err := openProcFile(dir, name)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	if cap(buf) == 0 {
		buf = make([]byte, 0, max(1, min(512, limit+1)))
	}
	buf = buf[:0]
	for {
		if len(buf) == cap(buf) {
			if int64(len(buf)) > limit {
				return nil, &fs.PathError{Op: "read", Path: name, Err: fmt.Errorf("procroot: more than %d bytes: %w", limit, ErrTooLarge)}
			}
			// Doubled, and never past the cap: what a read allocates
			// in all is at most about twice the file, or the cap.
			grown := make([]byte, len(buf), min(2*int64(cap(buf)), limit+1))
			copy(grown, buf)
			buf = grown
		}
		n, err := unix.Read(fd, buf[len(buf):cap(buf)])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, &fs.PathError{Op: "read", Path: name, Err: err}
		}
		if n == 0 {
			break
		}
		buf = buf[:len(buf)+n]
	}
	if int64(len(buf)) > limit {
		return nil, &fs.PathError{Op: "read", Path: name, Err: fmt.Errorf("procroot: more than %d bytes: %w", limit, ErrTooLarge)}
	}
	return buf, nil
}

// Create makes the file name exclusively (it must not exist; a symlink in
// its place is not followed) with perm, owned by uid:gid when those are not
// negative (set on the descriptor, never by path). The caller writes and
// closes it, and removes it with Remove.
func (r *Root) Create(name string, perm os.FileMode, uid, gid int) (*os.File, error) {
	fd, err := r.resolve(name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW, uint32(perm.Perm()))
	if err != nil {
		return nil, r.pathError("create", name, err)
	}
	if err := checkType(fd, unix.S_IFREG); err != nil {
		unix.Close(fd)
		return nil, r.pathError("create", name, err)
	}
	if uid >= 0 || gid >= 0 {
		if err := unix.Fchown(fd, uid, gid); err != nil {
			unix.Close(fd)
			_ = r.Remove(name)
			return nil, r.pathError("chown", name, err)
		}
	}
	return os.NewFile(uintptr(fd), r.Display(name)), nil
}

// Remove unlinks the file name (not a directory) from its directory,
// resolved inside the root; a final symlink is removed, not followed.
func (r *Root) Remove(name string) error {
	dir, base := filepath.Split(name)
	if base == "" || base == "." || base == ".." {
		return r.pathError("remove", name, unix.EINVAL)
	}
	dfd, err := r.resolve(dirOrDot(dir), unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		return r.pathError("remove", name, err)
	}
	defer unix.Close(dfd)
	if err := unix.Unlinkat(dfd, base, 0); err != nil {
		return r.pathError("remove", name, err)
	}
	return nil
}

func dirOrDot(dir string) string {
	if dir == "" {
		return "."
	}
	return dir
}

// DialUnix connects to the UNIX stream socket name, resolved inside the
// root; ErrNotSocket when name is anything else. The connection is made
// through the resolved descriptor, so what is dialled is what was checked.
func (r *Root) DialUnix(name string, deadline time.Time) (net.Conn, error) {
	fd, err := r.resolve(name, unix.O_PATH, 0)
	if err != nil {
		return nil, r.pathError("dial", name, err)
	}
	defer unix.Close(fd)
	if err := checkType(fd, unix.S_IFSOCK); err != nil {
		return nil, r.pathError("dial", name, err)
	}
	d := net.Dialer{Deadline: deadline}
	conn, err := d.Dial("unix", FDPath(fd))
	if err != nil {
		return nil, r.pathError("dial", name, err)
	}
	return conn, nil
}

// FDPath names an open descriptor of this process as a path
// (/proc/self/fd/<fd>), for interfaces that take a path — uprobes, inotify,
// connect — so that they act on the file already opened and checked, not
// on whatever a path names by then.
func FDPath(fd int) string { return "/proc/self/fd/" + strconv.Itoa(fd) }

func checkType(fd int, want uint32) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	if got := st.Mode & unix.S_IFMT; got != want {
		if want == unix.S_IFSOCK {
			return fmt.Errorf("%w (%s)", ErrNotSocket, typeName(got))
		}
		return fmt.Errorf("%w (%s)", ErrNotRegular, typeName(got))
	}
	return nil
}

func typeName(mode uint32) string {
	switch mode {
	case unix.S_IFREG:
		return "regular file"
	case unix.S_IFDIR:
		return "directory"
	case unix.S_IFIFO:
		return "FIFO"
	case unix.S_IFCHR:
		return "character device"
	case unix.S_IFBLK:
		return "block device"
	case unix.S_IFSOCK:
		return "socket"
	case unix.S_IFLNK:
		return "symlink"
	}
	return "file of mode " + strconv.FormatUint(uint64(mode), 8)
}

// Cwd returns the working directory of pid as the process sees it (the
// target of <procRoot>/<pid>/cwd), to resolve its relative paths inside
// its root.
func Cwd(procRoot string, pid int) (string, error) {
	p, err := os.Readlink(filepath.Join(procRoot, strconv.Itoa(pid), "cwd"))
	if err != nil {
		return "", err
	}
	if !strings.HasPrefix(p, "/") {
		// "(unreachable)/…" and the like: not a path in the process's view.
		return "", &fs.PathError{Op: "readlink", Path: filepath.Join(procRoot, strconv.Itoa(pid), "cwd"), Err: syscall.ENOENT}
	}
	return p, nil
}

// Glob returns the paths inside the root (as the process sees them) that
// match pattern, an absolute or root-relative path whose components may
// hold filepath.Match wildcards. Directories are listed through the root,
// so no match lies outside it; a malformed pattern is an error
// (filepath.ErrBadPattern), an unreadable directory matches nothing.
func (r *Root) Glob(pattern string) ([]string, error) {
	if _, err := filepath.Match(pattern, ""); err != nil {
		return nil, err
	}
	matches := []string{"/"}
	for _, part := range splitPath(filepath.Clean("/" + pattern))[1:] {
		var next []string
		for _, dir := range matches {
			if !hasMeta(part) {
				p := filepath.Join(dir, part)
				if _, err := r.Stat(p); err == nil {
					next = append(next, p)
				}
				continue
			}
			entries, err := r.ReadDir(dir)
			if err != nil {
				continue
			}
			for _, e := range entries {
				if ok, _ := filepath.Match(part, e.Name()); ok {
					next = append(next, filepath.Join(dir, e.Name()))
				}
			}
		}
		matches = next
	}
	return matches, nil
}

func hasMeta(s string) bool { return strings.ContainsAny(s, `*?[\`) }
