package procroot

import (
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
		require.NoError(t, os.MkdirAll(filepath.Join(root, d), 0o755))
	}
	write := func(p, s string) { require.NoError(t, os.WriteFile(p, []byte(s), 0o644)) }
	write(filepath.Join(host, "secret"), "host secret")
	write(filepath.Join(root, "etc", "secret"), "container secret")
	write(filepath.Join(root, "real", "data"), "container data")
	link := func(target, p string) { require.NoError(t, os.Symlink(target, filepath.Join(root, p))) }
	// Absolute: the host's /…/secret, were it resolved from here.
	link(filepath.Join(host, "secret"), "tmp/abs-host")
	// Absolute, inside the container's view: /etc/secret of the container.
	link("/etc/secret", "tmp/abs-container")
	link("../../../../../../../../secret", "tmp/dotdot")
	link("/real", "app/data-dir")
	link("loop-b", "tmp/loop-a")
	link("loop-a", "tmp/loop-b")
	require.NoError(t, syscall.Mkfifo(filepath.Join(root, "tmp", "fifo"), 0o644))
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
	require.NoError(t, err)
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
					require.Error(t, err)
					assert.NotContains(t, string(data), "host secret")
					return
				}
				require.NoError(t, err)
				assert.Equal(t, tc.want, string(data))
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
			require.ErrorIs(t, err, ErrNotRegular)
			assert.Contains(t, err.Error(), "FIFO")
		case <-time.After(10 * time.Second):
			t.Fatal("opening a FIFO blocked")
		}
		_, err := r.OpenFile("/tmp")
		require.ErrorIs(t, err, ErrNotRegular)
		if devErr == nil {
			_, err = r.ReadFile("/tmp/zero", 1<<20)
			require.ErrorIs(t, err, ErrNotRegular)
			assert.Contains(t, err.Error(), "character device")
		}
	})
}

func TestReadFileIsCapped(t *testing.T) {
	dir := t.TempDir()
	f, err := os.Create(filepath.Join(dir, "sparse"))
	require.NoError(t, err)
	require.NoError(t, f.Truncate(1<<30)) // claims a GiB, holds none
	require.NoError(t, f.Close())
	require.NoError(t, os.WriteFile(filepath.Join(dir, "small"), []byte("0123456789"), 0o644))
	r := openRoot(t, dir)
	_, err = r.ReadFile("sparse", 4096)
	require.ErrorIs(t, err, ErrTooLarge)
	data, err := r.ReadFile("small", 10)
	require.NoError(t, err)
	assert.Equal(t, "0123456789", string(data))
	_, err = r.ReadFile("small", 9)
	require.ErrorIs(t, err, ErrTooLarge)

	data, err = ReadProcFile("/proc/self/status", 1<<20)
	require.NoError(t, err)
	assert.Contains(t, string(data), "Pid:")
	_, err = ReadProcFile("/proc/self/status", 8)
	require.ErrorIs(t, err, ErrTooLarge)
}

func TestCreateNeverWritesThroughALink(t *testing.T) {
	c := newFakeContainer(t)
	bothResolvers(t, func(t *testing.T) {
		r := openRoot(t, c.root)
		// A container that expects the agent to create /tmp/x plants a
		// symlink there to a host file.
		require.NoError(t, os.Symlink(filepath.Join(c.host, "secret"), filepath.Join(c.root, "tmp", "planted")))
		defer os.Remove(filepath.Join(c.root, "tmp", "planted"))
		_, err := r.Create("/tmp/planted", 0o644, -1, -1)
		require.Error(t, err)
		// Through a directory symlink that names a host directory: the
		// file lands inside the root or nowhere.
		require.NoError(t, os.Symlink(c.host, filepath.Join(c.root, "tmp", "hostdir")))
		defer os.Remove(filepath.Join(c.root, "tmp", "hostdir"))
		if f, err := r.Create("/tmp/hostdir/made", 0o644, -1, -1); err == nil {
			f.Close()
		}
		_, err = os.Stat(filepath.Join(c.host, "made"))
		assert.True(t, os.IsNotExist(err), "a file was created outside the root")

		f, err := r.Create("/tmp/trigger", 0o600, os.Getuid(), os.Getgid())
		require.NoError(t, err)
		_, err = f.WriteString("x")
		require.NoError(t, err)
		require.NoError(t, f.Close())
		got, err := os.ReadFile(filepath.Join(c.root, "tmp", "trigger"))
		require.NoError(t, err)
		assert.Equal(t, "x", string(got))
		_, err = r.Create("/tmp/trigger", 0o600, -1, -1)
		require.ErrorIs(t, err, os.ErrExist)
		require.NoError(t, r.Remove("/tmp/trigger"))
		_, err = os.Stat(filepath.Join(c.root, "tmp", "trigger"))
		assert.True(t, os.IsNotExist(err))

		host, err := os.ReadFile(filepath.Join(c.host, "secret"))
		require.NoError(t, err)
		assert.Equal(t, "host secret", string(host), "the host file changed")
	})
}

func TestRemoveDoesNotFollowALink(t *testing.T) {
	c := newFakeContainer(t)
	bothResolvers(t, func(t *testing.T) {
		r := openRoot(t, c.root)
		require.NoError(t, os.Symlink(filepath.Join(c.host, "secret"), filepath.Join(c.root, "tmp", "rm-me")))
		require.NoError(t, r.Remove("/tmp/rm-me"))
		_, err := os.Stat(filepath.Join(c.host, "secret"))
		require.NoError(t, err, "the link's target was removed")
		// A parent that is a symlink out of the root resolves inside it.
		require.NoError(t, os.Symlink(c.host, filepath.Join(c.root, "tmp", "hostdir")))
		defer os.Remove(filepath.Join(c.root, "tmp", "hostdir"))
		require.Error(t, r.Remove("/tmp/hostdir/secret"))
		_, err = os.Stat(filepath.Join(c.host, "secret"))
		require.NoError(t, err, "a host file was removed")
	})
}

func TestDialUnixOnlyDialsSocketsInsideTheRoot(t *testing.T) {
	c := newFakeContainer(t)
	// A socket on the host that a planted link names.
	hostSock := filepath.Join(c.host, "host.sock")
	hl, err := net.Listen("unix", hostSock)
	require.NoError(t, err)
	defer hl.Close()
	sock := filepath.Join(c.root, "tmp", "jvm.sock")
	l, err := net.Listen("unix", sock)
	require.NoError(t, err)
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
	require.NoError(t, os.Symlink(hostSock, filepath.Join(c.root, "tmp", "to-host.sock")))
	bothResolvers(t, func(t *testing.T) {
		r := openRoot(t, c.root)
		conn, err := r.DialUnix("/tmp/jvm.sock", time.Now().Add(5*time.Second))
		require.NoError(t, err)
		got, err := io.ReadAll(conn)
		conn.Close()
		require.NoError(t, err)
		assert.Equal(t, "hello from the container", string(got))

		_, err = r.DialUnix("/tmp/to-host.sock", time.Now().Add(time.Second))
		require.Error(t, err)
		_, err = r.DialUnix("/etc/secret", time.Now().Add(time.Second))
		require.ErrorIs(t, err, ErrNotSocket)
		_, err = r.DialUnix("/tmp/fifo", time.Now().Add(time.Second))
		require.ErrorIs(t, err, ErrNotSocket)
	})
}

func TestMagicLinksAreNotFollowed(t *testing.T) {
	c := newFakeContainer(t)
	procDir := filepath.Join(c.root, "proc")
	require.NoError(t, os.MkdirAll(procDir, 0o755))
	if err := unix.Mount("proc", procDir, "proc", 0, ""); err != nil {
		t.Skipf("cannot mount a proc filesystem in the fake root (needs root): %v", err)
	}
	defer unix.Unmount(procDir, unix.MNT_DETACH)
	// The container's /proc/1/root is the host's root seen from the
	// host's pid namespace; a link to it would read the host's files.
	require.NoError(t, os.Symlink("/proc/1/root"+filepath.Join(c.host, "secret"), filepath.Join(c.root, "tmp", "magic")))
	bothResolvers(t, func(t *testing.T) {
		r := openRoot(t, c.root)
		data, err := r.ReadFile("/tmp/magic", 1<<10)
		require.Error(t, err)
		assert.NotContains(t, string(data), "host secret")
		data, err = r.ReadFile("/proc/self/root"+filepath.Join(c.host, "secret"), 1<<10)
		require.Error(t, err)
		assert.NotContains(t, string(data), "host secret")
	})
}

func TestOpenProcessRoot(t *testing.T) {
	r, err := Open("/proc", os.Getpid())
	require.NoError(t, err)
	defer r.Close()
	assert.Equal(t, filepath.Join("/proc", strconv.Itoa(os.Getpid()), "root"), r.Path())
	fi, err := r.Stat("/proc/self")
	require.NoError(t, err)
	assert.True(t, fi.IsDir(), "/proc/self resolves to the process directory")
	entries, err := r.ReadDir("/")
	require.NoError(t, err)
	assert.NotEmpty(t, entries)
	cwd, err := Cwd("/proc", os.Getpid())
	require.NoError(t, err)
	wd, err := os.Getwd()
	require.NoError(t, err)
	assert.Equal(t, wd, cwd)
	_, err = Open("/proc", 1<<30)
	require.Error(t, err)
}

func TestGlobMatchesOnlyInsideTheRoot(t *testing.T) {
	c := newFakeContainer(t)
	for _, n := range []string{"gc-1.log", "gc-2.log", "other.txt"} {
		require.NoError(t, os.WriteFile(filepath.Join(c.root, "app", "logs", n), nil, 0o644))
	}
	// A directory link out of the root: its host-side files never match.
	require.NoError(t, os.Symlink(c.host, filepath.Join(c.root, "app", "hostlink")))
	bothResolvers(t, func(t *testing.T) {
		r := openRoot(t, c.root)
		got, err := r.Glob("/app/logs/gc-*.log")
		require.NoError(t, err)
		assert.Equal(t, []string{"/app/logs/gc-1.log", "/app/logs/gc-2.log"}, got)
		got, err = r.Glob("/app/*/gc-1.log")
		require.NoError(t, err)
		assert.Equal(t, []string{"/app/logs/gc-1.log"}, got)
		got, err = r.Glob("/app/hostlink/*")
		require.NoError(t, err)
		assert.Empty(t, got)
		got, err = r.Glob("/../../app/logs/other.txt")
		require.NoError(t, err)
		assert.Equal(t, []string{"/app/logs/other.txt"}, got)
		_, err = r.Glob("/app/[")
		require.ErrorIs(t, err, filepath.ErrBadPattern)
	})
}
