package procroot

import (
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// fakeContainer builds what a hostile container can leave in its own root:
// symlinks that name the host's files absolutely or by `..`, a FIFO and a
// device where data files are expected, and a host directory beside it
// holding the files an escape would reach.
type fakeContainer struct {
	host, root string
}

func newFakeContainer(t *testing.T) fakeContainer {
	t.Helper()
	host := t.TempDir()
	root := filepath.Join(host, "container")
	for _, d := range []string{"tmp", "etc", "app/logs", "real"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatalf("os.MkdirAll: %v", err)
		}
	}
	write := func(p, s string) {
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatalf("os.WriteFile: %v", err)
		}
	}
	write(filepath.Join(host, "secret"), "host secret")
	write(filepath.Join(root, "etc", "secret"), "container secret")
	write(filepath.Join(root, "real", "data"), "container data")
	link := func(target, p string) {
		if err := os.Symlink(target, filepath.Join(root, p)); err != nil {
			t.Fatalf("os.Symlink: %v", err)
		}
	}
	// Absolute: the host's /…/secret, were it resolved from here.
	link(filepath.Join(host, "secret"), "tmp/abs-host")
	// Absolute, inside the container's view: /etc/secret of the container.
	link("/etc/secret", "tmp/abs-container")
	link("../../../../../../../../secret", "tmp/dotdot")
	link("/real", "app/data-dir")
	link("loop-b", "tmp/loop-a")
	link("loop-a", "tmp/loop-b")
	if err := syscall.Mkfifo(filepath.Join(root, "tmp", "fifo"), 0o644); err != nil {
		t.Fatalf("syscall.Mkfifo: %v", err)
	}
	return fakeContainer{host: host, root: root}
}

// bothResolvers runs a test with openat2 and with the walk used where the
// kernel lacks it.
func bothResolvers(t *testing.T, fn func(t *testing.T)) {
	t.Run("openat2", func(t *testing.T) {
		var how unix.OpenHow
		if _, err := unix.Openat2(unix.AT_FDCWD, "/", &how); errors.Is(err, unix.ENOSYS) {
			t.Skip("the kernel has no openat2")
		}
		fn(t)
	})
	t.Run("walk", func(t *testing.T) {
		noOpenat2.Store(true)
		defer noOpenat2.Store(false)
		fn(t)
	})
}

func openRoot(t *testing.T, dir string) *Root {
	t.Helper()
	r, err := OpenDir(dir)
	if err != nil {
		t.Fatalf("OpenDir: %v", err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

func TestPathsResolveInsideTheRoot(t *testing.T) {
	c := newFakeContainer(t)
	bothResolvers(t, func(t *testing.T) {
		r := openRoot(t, c.root)
		for _, tc := range []struct {
			name, path string
			want       string // "" when the path must not resolve
		}{
			{"plain", "/etc/secret", "container secret"},
			{"relative", "etc/secret", "container secret"},
			{"dotdot above the root stays at the root", "/../../../etc/secret", "container secret"},
			{"absolute symlink to the container's own file", "/tmp/abs-container", "container secret"},
			{"absolute symlink naming a host path", "/tmp/abs-host", ""},
			{"symlink climbing with ..", "/tmp/dotdot", ""},
			{"directory symlink", "/app/data-dir/data", "container data"},
			{"dotdot after a directory symlink", "/app/data-dir/../etc/secret", "container secret"},
			{"symlink loop", "/tmp/loop-a", ""},
		} {
			t.Run(tc.name, func(t *testing.T) {
				data, err := r.ReadFile(tc.path, 1<<10)
				if tc.want == "" {
					if err == nil {
						t.Fatalf("r.ReadFile: got nil error, want an error")
					}
					if got := string(data); strings.Contains(got, "host secret") {
						t.Errorf("data: got %q, want it not to contain %q", got, "host secret")
					}
					return
				}
				if err != nil {
					t.Fatalf("r.ReadFile: %v", err)
				}
				if got := string(data); got != tc.want {
					t.Errorf("data: got %q, want %q", got, tc.want)
				}
			})
		}
	})
}

func TestNonRegularFilesAreRefusedWithoutBlocking(t *testing.T) {
	c := newFakeContainer(t)
	dev := filepath.Join(c.root, "tmp", "zero")
	// /dev/zero's numbers: endless data for a reader that believes sizes.
	devErr := unix.Mknod(dev, unix.S_IFCHR|0o644, int(unix.Mkdev(1, 5)))
	bothResolvers(t, func(t *testing.T) {
		r := openRoot(t, c.root)
		done := make(chan error, 1)
		go func() {
			_, err := r.OpenFile("/tmp/fifo")
			done <- err
		}()
		select {
		case err := <-done:
			if !errors.Is(err, ErrNotRegular) {
				t.Fatalf("r.OpenFile(\"/tmp/fifo\"): got error %v, want %v", err, ErrNotRegular)
			}
			if got := err.Error(); !strings.Contains(got, "FIFO") {
				t.Errorf("error: got %q, want it to contain %q", got, "FIFO")
			}
		case <-time.After(10 * time.Second):
			t.Fatal("opening a FIFO blocked")
		}
		_, err := r.OpenFile("/tmp")
		if !errors.Is(err, ErrNotRegular) {
			t.Fatalf("r.OpenFile: got error %v, want %v", err, ErrNotRegular)
		}
		if devErr == nil {
			_, err = r.ReadFile("/tmp/zero", 1<<20)
			if !errors.Is(err, ErrNotRegular) {
				t.Fatalf("r.ReadFile: got error %v, want %v", err, ErrNotRegular)
			}
			if got := err.Error(); !strings.Contains(got, "character device") {
				t.Errorf("error: got %q, want it to contain %q", got, "character device")
			}
		}
	})
}

func TestReadFileIsCapped(t *testing.T) {
	dir := t.TempDir()
	f, err := os.Create(filepath.Join(dir, "sparse"))
	if err != nil {
		t.Fatalf("os.Create: %v", err)
	}
	// claims a GiB, holds none
	if err := f.Truncate(1 << 30); err != nil {
		t.Fatalf("f.Truncate: %v", err)
	}
	if err := f.Close(); err != nil {
		t.Fatalf("f.Close: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "small"), []byte("0123456789"), 0o644); err != nil {
		t.Fatalf("os.WriteFile: %v", err)
	}
	r := openRoot(t, dir)
	_, err = r.ReadFile("sparse", 4096)
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("r.ReadFile: got error %v, want %v", err, ErrTooLarge)
	}
	data, err := r.ReadFile("small", 10)
	if err != nil {
		t.Fatalf("r.ReadFile: %v", err)
	}
	if got := string(data); got != "0123456789" {
		t.Errorf("r.ReadFile: got %q, want %q", got, "0123456789")
	}
	_, err = r.ReadFile("small", 9)
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("r.ReadFile: got error %v, want %v", err, ErrTooLarge)
	}

	data, err = ReadProcFile("/proc/self/status", 1<<20)
	if err != nil {
		t.Fatalf("ReadProcFile: %v", err)
	}
	if got := string(data); !strings.Contains(got, "Pid:") {
		t.Errorf("ReadProcFile: got %q, want it to contain %q", got, "Pid:")
	}
	_, err = ReadProcFile("/proc/self/status", 8)
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("ReadProcFile: got error %v, want %v", err, ErrTooLarge)
	}
}

// ReadProcFileAt is the one reader of small proc files: it reads through a
// held directory, reuses the caller's buffer, refuses what is not a
// regular file (a FIFO is not waited on) and a final symlink, and caps the
// read whatever the file claims.
func TestReadProcFileAt(t *testing.T) {
	dir := t.TempDir()
	write := func(name, data string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatalf("os.WriteFile: %v", err)
		}
	}
	write("stat", "42 (java) S 1")
	write("big", strings.Repeat("x", 5000))
	if err := unix.Mkfifo(filepath.Join(dir, "fifo"), 0o644); err != nil {
		t.Fatalf("unix.Mkfifo: %v", err)
	}
	if err := os.Symlink("stat", filepath.Join(dir, "link")); err != nil {
		t.Fatalf("os.Symlink: %v", err)
	}
	d, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatalf("unix.Open: %v", err)
	}
	defer unix.Close(d)

	buf := make([]byte, 0, 64)
	got, err := ReadProcFileAt(d, "stat", buf, 64)
	if err != nil || string(got) != "42 (java) S 1" {
		t.Fatalf("ReadProcFileAt(stat) = %q, %v", got, err)
	}
	if &got[:1][0] != &buf[:1][0] {
		t.Error("ReadProcFileAt did not read into the buffer it was given")
	}
	// Grown past the buffer, up to the cap and not past it.
	if got, err := ReadProcFileAt(d, "big", buf, 5000); err != nil || len(got) != 5000 {
		t.Errorf("ReadProcFileAt(big, 5000) = %d bytes, %v", len(got), err)
	}
	if _, err := ReadProcFileAt(d, "big", buf, 4999); !errors.Is(err, ErrTooLarge) {
		t.Errorf("ReadProcFileAt(big, 4999): got %v, want ErrTooLarge", err)
	}
	if got, err := ReadProcFileAt(d, "stat", nil, 13); err != nil || string(got) != "42 (java) S 1" {
		t.Errorf("ReadProcFileAt(stat, nil buffer, exact cap) = %q, %v", got, err)
	}
	if _, err := ReadProcFileAt(d, "fifo", buf, 64); !errors.Is(err, ErrNotRegular) {
		t.Errorf("ReadProcFileAt(fifo): got %v, want ErrNotRegular", err)
	}
	if _, err := ReadProcFileAt(d, "link", buf, 64); !errors.Is(err, unix.ELOOP) {
		t.Errorf("ReadProcFileAt(link): got %v, want ELOOP (a final symlink is not followed)", err)
	}
	if _, err := ReadProcFileAt(d, "missing", buf, 64); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("ReadProcFileAt(missing): got %v, want ErrNotExist", err)
	}
	// A path, as ReadProcFile takes it.
	if got, err := ReadProcFileAt(unix.AT_FDCWD, filepath.Join(dir, "stat"), nil, 64); err != nil || string(got) != "42 (java) S 1" {
		t.Errorf("ReadProcFileAt(AT_FDCWD, path) = %q, %v", got, err)
	}
	if f, err := OpenProcFile(d, "fifo"); !errors.Is(err, ErrNotRegular) {
		t.Errorf("OpenProcFile(fifo) = %v, %v; want ErrNotRegular", f, err)
	}
	f, err := OpenProcFile(d, "stat")
	if err != nil {
		t.Fatalf("OpenProcFile(stat): %v", err)
	}
	defer f.Close()
	if data, err := io.ReadAll(f); err != nil || string(data) != "42 (java) S 1" {
		t.Errorf("reading OpenProcFile(stat): %q, %v", data, err)
	}
}

func TestCreateNeverWritesThroughALink(t *testing.T) {
	c := newFakeContainer(t)
	bothResolvers(t, func(t *testing.T) {
		r := openRoot(t, c.root)
		// A container that expects the agent to create /tmp/x plants a
		// symlink there to a host file.
		if err := os.Symlink(filepath.Join(c.host, "secret"), filepath.Join(c.root, "tmp", "planted")); err != nil {
			t.Fatalf("os.Symlink: %v", err)
		}
		defer os.Remove(filepath.Join(c.root, "tmp", "planted"))
		_, err := r.Create("/tmp/planted", 0o644, -1, -1)
		if err == nil {
			t.Fatalf("r.Create: got nil error, want an error")
		}
		// Through a directory symlink that names a host directory: the
		// file lands inside the root or nowhere.
		if err := os.Symlink(c.host, filepath.Join(c.root, "tmp", "hostdir")); err != nil {
			t.Fatalf("os.Symlink: %v", err)
		}
		defer os.Remove(filepath.Join(c.root, "tmp", "hostdir"))
		if f, err := r.Create("/tmp/hostdir/made", 0o644, -1, -1); err == nil {
			f.Close()
		}
		_, err = os.Stat(filepath.Join(c.host, "made"))
		if !os.IsNotExist(err) {
			t.Errorf("a file was created outside the root (os.IsNotExist(err) is false)")
		}

		f, err := r.Create("/tmp/trigger", 0o600, os.Getuid(), os.Getgid())
		if err != nil {
			t.Fatalf("r.Create: %v", err)
		}
		_, err = f.WriteString("x")
		if err != nil {
			t.Fatalf("f.WriteString: %v", err)
		}
		if err := f.Close(); err != nil {
			t.Fatalf("f.Close: %v", err)
		}
		got, err := os.ReadFile(filepath.Join(c.root, "tmp", "trigger"))
		if err != nil {
			t.Fatalf("os.ReadFile: %v", err)
		}
		if got2 := string(got); got2 != "x" {
			t.Errorf("os.ReadFile: got %q, want %q", got2, "x")
		}
		_, err = r.Create("/tmp/trigger", 0o600, -1, -1)
		if !errors.Is(err, os.ErrExist) {
			t.Fatalf("r.Create: got error %v, want %v", err, os.ErrExist)
		}
		if err := r.Remove("/tmp/trigger"); err != nil {
			t.Fatalf("r.Remove: %v", err)
		}
		_, err = os.Stat(filepath.Join(c.root, "tmp", "trigger"))
		if !os.IsNotExist(err) {
			t.Errorf("os.IsNotExist(err) is false")
		}

		host, err := os.ReadFile(filepath.Join(c.host, "secret"))
		if err != nil {
			t.Fatalf("os.ReadFile: %v", err)
		}
		if got := string(host); got != "host secret" {
			t.Errorf("the host file changed: got %q, want %q", got, "host secret")
		}
	})
}

func TestRemoveDoesNotFollowALink(t *testing.T) {
	c := newFakeContainer(t)
	bothResolvers(t, func(t *testing.T) {
		r := openRoot(t, c.root)
		if err := os.Symlink(filepath.Join(c.host, "secret"), filepath.Join(c.root, "tmp", "rm-me")); err != nil {
			t.Fatalf("os.Symlink: %v", err)
		}
		if err := r.Remove("/tmp/rm-me"); err != nil {
			t.Fatalf("r.Remove: %v", err)
		}
		_, err := os.Stat(filepath.Join(c.host, "secret"))
		if err != nil {
			t.Fatalf("the link's target was removed: %v", err)
		}
		// A parent that is a symlink out of the root resolves inside it.
		if err := os.Symlink(c.host, filepath.Join(c.root, "tmp", "hostdir")); err != nil {
			t.Fatalf("os.Symlink: %v", err)
		}
		defer os.Remove(filepath.Join(c.root, "tmp", "hostdir"))
		if r.Remove("/tmp/hostdir/secret") == nil {
			t.Fatalf("r.Remove: got nil error, want an error")
		}
		_, err = os.Stat(filepath.Join(c.host, "secret"))
		if err != nil {
			t.Fatalf("a host file was removed: %v", err)
		}
	})
}

func TestDialUnixOnlyDialsSocketsInsideTheRoot(t *testing.T) {
	c := newFakeContainer(t)
	// A socket on the host that a planted link names.
	hostSock := filepath.Join(c.host, "host.sock")
	hl, err := net.Listen("unix", hostSock)
	if err != nil {
		t.Fatalf("net.Listen: %v", err)
	}
	defer hl.Close()
	sock := filepath.Join(c.root, "tmp", "jvm.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatalf("net.Listen: %v", err)
	}
	defer l.Close()
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			_, _ = io.WriteString(conn, "hello from the container")
			conn.Close()
		}
	}()
	if err := os.Symlink(hostSock, filepath.Join(c.root, "tmp", "to-host.sock")); err != nil {
		t.Fatalf("os.Symlink: %v", err)
	}
	bothResolvers(t, func(t *testing.T) {
		r := openRoot(t, c.root)
		conn, err := r.DialUnix("/tmp/jvm.sock", time.Now().Add(5*time.Second))
		if err != nil {
			t.Fatalf("r.DialUnix: %v", err)
		}
		got, err := io.ReadAll(conn)
		conn.Close()
		if err != nil {
			t.Fatalf("io.ReadAll: %v", err)
		}
		if got2 := string(got); got2 != "hello from the container" {
			t.Errorf("io.ReadAll: got %q, want %q", got2, "hello from the container")
		}

		_, err = r.DialUnix("/tmp/to-host.sock", time.Now().Add(time.Second))
		if err == nil {
			t.Fatalf("r.DialUnix: got nil error, want an error")
		}
		_, err = r.DialUnix("/etc/secret", time.Now().Add(time.Second))
		if !errors.Is(err, ErrNotSocket) {
			t.Fatalf("r.DialUnix: got error %v, want %v", err, ErrNotSocket)
		}
		_, err = r.DialUnix("/tmp/fifo", time.Now().Add(time.Second))
		if !errors.Is(err, ErrNotSocket) {
			t.Fatalf("r.DialUnix: got error %v, want %v", err, ErrNotSocket)
		}
	})
}

func TestMagicLinksAreNotFollowed(t *testing.T) {
	c := newFakeContainer(t)
	procDir := filepath.Join(c.root, "proc")
	if err := os.MkdirAll(procDir, 0o755); err != nil {
		t.Fatalf("os.MkdirAll: %v", err)
	}
	if err := unix.Mount("proc", procDir, "proc", 0, ""); err != nil {
		t.Skipf("cannot mount a proc filesystem in the fake root (needs root): %v", err)
	}
	defer unix.Unmount(procDir, unix.MNT_DETACH)
	// The container's /proc/1/root is the host's root seen from the
	// host's pid namespace; a link to it would read the host's files.
	if err := os.Symlink("/proc/1/root"+filepath.Join(c.host, "secret"), filepath.Join(c.root, "tmp", "magic")); err != nil {
		t.Fatalf("os.Symlink: %v", err)
	}
	bothResolvers(t, func(t *testing.T) {
		r := openRoot(t, c.root)
		data, err := r.ReadFile("/tmp/magic", 1<<10)
		if err == nil {
			t.Fatalf("r.ReadFile: got nil error, want an error")
		}
		if got := string(data); strings.Contains(got, "host secret") {
			t.Errorf("r.ReadFile: got %q, want it not to contain %q", got, "host secret")
		}
		data, err = r.ReadFile("/proc/self/root"+filepath.Join(c.host, "secret"), 1<<10)
		if err == nil {
			t.Fatalf("r.ReadFile: got nil error, want an error")
		}
		if got := string(data); strings.Contains(got, "host secret") {
			t.Errorf("r.ReadFile: got %q, want it not to contain %q", got, "host secret")
		}
	})
}

func TestOpenProcessRoot(t *testing.T) {
	r, err := Open("/proc", os.Getpid())
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer r.Close()
	if got := r.Path(); got != filepath.Join("/proc", strconv.Itoa(os.Getpid()), "root") {
		t.Errorf("r.Path(): got %q, want %q", got, filepath.Join("/proc", strconv.Itoa(os.Getpid()), "root"))
	}
	fi, err := r.Stat("/proc/self")
	if err != nil {
		t.Fatalf("r.Stat: %v", err)
	}
	if !fi.IsDir() {
		t.Errorf("/proc/self resolves to the process directory (fi.IsDir() is false)")
	}
	entries, err := r.ReadDir("/")
	if err != nil {
		t.Fatalf("r.ReadDir: %v", err)
	}
	if len(entries) == 0 {
		t.Errorf("r.ReadDir: got empty, want at least one element")
	}
	cwd, err := Cwd("/proc", os.Getpid())
	if err != nil {
		t.Fatalf("Cwd: %v", err)
	}
	wd, err := os.Getwd()
	if err != nil {
		t.Fatalf("os.Getwd: %v", err)
	}
	if cwd != wd {
		t.Errorf("cwd: got %q, want %q", cwd, wd)
	}
	_, err = Open("/proc", 1<<30)
	if err == nil {
		t.Fatalf("Open: got nil error, want an error")
	}
}

func TestGlobMatchesOnlyInsideTheRoot(t *testing.T) {
	c := newFakeContainer(t)
	for _, n := range []string{"gc-1.log", "gc-2.log", "other.txt"} {
		if err := os.WriteFile(filepath.Join(c.root, "app", "logs", n), nil, 0o644); err != nil {
			t.Fatalf("os.WriteFile: %v", err)
		}
	}
	// A directory link out of the root: its host-side files never match.
	if err := os.Symlink(c.host, filepath.Join(c.root, "app", "hostlink")); err != nil {
		t.Fatalf("os.Symlink: %v", err)
	}
	bothResolvers(t, func(t *testing.T) {
		r := openRoot(t, c.root)
		got, err := r.Glob("/app/logs/gc-*.log")
		if err != nil {
			t.Fatalf("r.Glob: %v", err)
		}
		if !reflect.DeepEqual(got, []string{"/app/logs/gc-1.log", "/app/logs/gc-2.log"}) {
			t.Errorf("r.Glob: got %v, want %v", got, []string{"/app/logs/gc-1.log", "/app/logs/gc-2.log"})
		}
		got, err = r.Glob("/app/*/gc-1.log")
		if err != nil {
			t.Fatalf("r.Glob: %v", err)
		}
		if !reflect.DeepEqual(got, []string{"/app/logs/gc-1.log"}) {
			t.Errorf("r.Glob: got %v, want %v", got, []string{"/app/logs/gc-1.log"})
		}
		got, err = r.Glob("/app/hostlink/*")
		if err != nil {
			t.Fatalf("r.Glob: %v", err)
		}
		if len(got) != 0 {
			t.Errorf("r.Glob: got %v, want empty", got)
		}
		got, err = r.Glob("/../../app/logs/other.txt")
		if err != nil {
			t.Fatalf("r.Glob: %v", err)
		}
		if !reflect.DeepEqual(got, []string{"/app/logs/other.txt"}) {
			t.Errorf("r.Glob: got %v, want %v", got, []string{"/app/logs/other.txt"})
		}
		_, err = r.Glob("/app/[")
		if !errors.Is(err, filepath.ErrBadPattern) {
			t.Fatalf("r.Glob: got error %v, want %v", err, filepath.ErrBadPattern)
		}
	})
}
