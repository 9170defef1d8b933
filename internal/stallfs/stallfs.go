// Package stallfs is a test helper: it mounts a FUSE directory that answers
// like any other until the test stalls it, after which every lookup,
// directory read, stat, open and read on it blocks, uninterruptibly, until
// the test releases it — what a tenant's NFS or FUSE mount does when its
// server stops answering. Tests use it to prove that a hang on one
// tenant's path isolates that tenant.
//
// Mounting needs root and /dev/fuse; Mount skips the test otherwise.
package stallfs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// FS is a mounted directory. Its files are held in memory and set with
// WriteFile; a subfolder exists while a file below it does.
type FS struct {
	dir    string
	server *fuse.Server

	mu      sync.Mutex
	files   map[string][]byte // by slash-separated path below the mount
	inodes  map[string]uint64 // a stable inode number per path ever seen
	gate    chan struct{}     // closed while calls pass; open while stalled
	blocked int               // calls waiting at the gate now
	waiters []chan struct{}   // closed when a call blocks
}

// Mount mounts an empty FS on a new folder under t.TempDir; see MountAt.
func Mount(t testing.TB) *FS {
	t.Helper()
	dir := path.Join(t.TempDir(), "stalled")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return MountAt(t, dir)
}

// MountAt mounts an empty FS on dir, an existing folder (inside a fake
// container's root, say, where a symlink to the mount would not resolve),
// and unmounts it when the test ends, releasing any call still blocked
// first (a lazy unmount if the kernel still holds the mount). It skips the
// test when the process is not root, /dev/fuse is absent, or mounting is
// not permitted.
func MountAt(t testing.TB, dir string) *FS {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("stallfs: mounting a FUSE file system needs root")
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Skipf("stallfs: no /dev/fuse: %v", err)
	}
	open := make(chan struct{})
	close(open)
	f := &FS{dir: dir, files: map[string][]byte{}, inodes: map[string]uint64{}, gate: open}
	zero := time.Duration(0)
	opts := &fs.Options{
		// Every stat and lookup reaches the file system: nothing the
		// kernel cached can answer for a stalled mount.
		EntryTimeout:    &zero,
		AttrTimeout:     &zero,
		NegativeTimeout: &zero,
		MountOptions: fuse.MountOptions{
			DirectMountStrict: true, // no fusermount needed, as root
			FsName:            "stallfs",
			Name:              "stallfs",
			AllowOther:        true,
		},
	}
	server, err := fs.Mount(dir, &dirNode{fs: f, path: "."}, opts)
	if errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EACCES) {
		t.Skipf("stallfs: mounting not permitted here: %v", err)
	}
	if err != nil {
		t.Fatalf("stallfs: mount %s: %v", dir, err)
	}
	f.server = server
	t.Cleanup(func() { f.unmount(t) })
	return f
}

// Dir is where the file system is mounted.
func (f *FS) Dir() string { return f.dir }

// WriteFile sets the content of the file at name (slash-separated, below
// Dir), creating the folders above it.
func (f *FS) WriteFile(name string, data []byte) {
	name = path.Clean(strings.TrimPrefix(name, "/"))
	f.mu.Lock()
	defer f.mu.Unlock()
	f.files[name] = slices.Clone(data)
}

// Stall makes every call that reaches the file system from now on block
// until Release.
func (f *FS) Stall() {
	f.mu.Lock()
	defer f.mu.Unlock()
	select {
	case <-f.gate:
		f.gate = make(chan struct{})
	default: // stalled already
	}
}

// Release lets the blocked calls and every later one through.
func (f *FS) Release() {
	f.mu.Lock()
	defer f.mu.Unlock()
	select {
	case <-f.gate:
	default:
		close(f.gate)
	}
}

// Blocked returns how many calls are blocked now.
func (f *FS) Blocked() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.blocked
}

// WaitBlocked waits until at least one call is blocked, or ctx ends.
func (f *FS) WaitBlocked(ctx context.Context) error {
	f.mu.Lock()
	if f.blocked > 0 {
		f.mu.Unlock()
		return nil
	}
	w := make(chan struct{})
	f.waiters = append(f.waiters, w)
	f.mu.Unlock()
	select {
	case <-w:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("stallfs: no call blocked on %s: %w", f.dir, ctx.Err())
	}
}

// pass blocks while the file system is stalled. It ignores the request's
// context on purpose: a hard NFS mount does not give up on a signal
// either.
func (f *FS) pass() {
	f.mu.Lock()
	gate := f.gate
	select {
	case <-gate:
		f.mu.Unlock()
		return
	default:
	}
	f.blocked++
	for _, w := range f.waiters {
		close(w)
	}
	f.waiters = nil
	f.mu.Unlock()
	<-gate
	f.mu.Lock()
	f.blocked--
	f.mu.Unlock()
}

// entry returns what name is: a file's content, or a folder (isDir).
func (f *FS) entry(name string) (data []byte, isDir, ok bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if data, ok := f.files[name]; ok {
		return data, false, true
	}
	for p := range f.files {
		if name == "." || strings.HasPrefix(p, name+"/") {
			return nil, true, true
		}
	}
	return nil, false, false
}

// children lists the entries directly in folder dir ("." for the root).
func (f *FS) children(dir string) []fuse.DirEntry {
	f.mu.Lock()
	defer f.mu.Unlock()
	seen := map[string]bool{}
	var out []fuse.DirEntry
	for p := range f.files {
		rest := p
		if dir != "." {
			var ok bool
			if rest, ok = strings.CutPrefix(p, dir+"/"); !ok {
				continue
			}
		}
		name, _, isDir := strings.Cut(rest, "/")
		if seen[name] {
			continue
		}
		seen[name] = true
		mode := uint32(syscall.S_IFREG)
		if isDir {
			mode = syscall.S_IFDIR
		}
		out = append(out, fuse.DirEntry{Name: name, Mode: mode, Ino: f.inodeLocked(path.Join(dir, name))})
	}
	slices.SortFunc(out, func(a, b fuse.DirEntry) int { return strings.Compare(a.Name, b.Name) })
	return out
}

func (f *FS) inode(name string) uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.inodeLocked(name)
}

func (f *FS) inodeLocked(name string) uint64 {
	ino, ok := f.inodes[name]
	if !ok {
		ino = uint64(len(f.inodes)) + 2 // 1 is the root's
		f.inodes[name] = ino
	}
	return ino
}

func (f *FS) unmount(t testing.TB) {
	f.Release()
	err := f.server.Unmount()
	if err == nil {
		return
	}
	// Something (a leaked descriptor, a call the kernel has not finished)
	// still holds the mount: detach it, and let the server end once the
	// last user lets go.
	if derr := syscall.Unmount(f.dir, syscall.MNT_DETACH); derr != nil {
		t.Errorf("stallfs: unmount %s: %v; lazy unmount: %v", f.dir, err, derr)
		return
	}
	done := make(chan struct{})
	go func() {
		f.server.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Errorf("stallfs: %s detached but still in use 10s later (a descriptor left open on it?)", f.dir)
	}
}

type dirNode struct {
	fs.Inode
	fs   *FS
	path string // "." for the root
}

var (
	_ fs.NodeLookuper  = (*dirNode)(nil)
	_ fs.NodeReaddirer = (*dirNode)(nil)
	_ fs.NodeGetattrer = (*dirNode)(nil)
	_ fs.NodeOpendirer = (*dirNode)(nil)
)

func (d *dirNode) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	d.fs.pass()
	p := path.Join(d.path, name)
	data, isDir, ok := d.fs.entry(p)
	if !ok {
		return nil, syscall.ENOENT
	}
	ino := d.fs.inode(p)
	if isDir {
		dirAttr(&out.Attr, ino)
		return d.NewInode(ctx, &dirNode{fs: d.fs, path: p}, fs.StableAttr{Mode: syscall.S_IFDIR, Ino: ino}), 0
	}
	fileAttr(&out.Attr, ino, len(data))
	return d.NewInode(ctx, &fileNode{fs: d.fs, path: p}, fs.StableAttr{Mode: syscall.S_IFREG, Ino: ino}), 0
}

func (d *dirNode) Opendir(context.Context) syscall.Errno {
	d.fs.pass()
	return 0
}

func (d *dirNode) Readdir(context.Context) (fs.DirStream, syscall.Errno) {
	d.fs.pass()
	return fs.NewListDirStream(d.fs.children(d.path)), 0
}

func (d *dirNode) Getattr(_ context.Context, _ fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	d.fs.pass()
	dirAttr(&out.Attr, d.StableAttr().Ino)
	return 0
}

type fileNode struct {
	fs.Inode
	fs   *FS
	path string
}

var (
	_ fs.NodeGetattrer = (*fileNode)(nil)
	_ fs.NodeOpener    = (*fileNode)(nil)
	_ fs.NodeReader    = (*fileNode)(nil)
)

func (n *fileNode) Getattr(_ context.Context, _ fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	n.fs.pass()
	data, _, ok := n.fs.entry(n.path)
	if !ok {
		return syscall.ENOENT
	}
	fileAttr(&out.Attr, n.StableAttr().Ino, len(data))
	return 0
}

func (n *fileNode) Open(context.Context, uint32) (fs.FileHandle, uint32, syscall.Errno) {
	n.fs.pass()
	// Direct I/O: every read reaches Read, none is served from the page
	// cache.
	return nil, fuse.FOPEN_DIRECT_IO, 0
}

func (n *fileNode) Read(_ context.Context, _ fs.FileHandle, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	n.fs.pass()
	data, _, ok := n.fs.entry(n.path)
	if !ok {
		return nil, syscall.ENOENT
	}
	if off >= int64(len(data)) {
		return fuse.ReadResultData(nil), 0
	}
	return fuse.ReadResultData(data[off:min(int64(len(data)), off+int64(len(dest)))]), 0
}

func dirAttr(a *fuse.Attr, ino uint64) {
	a.Ino, a.Mode, a.Nlink = ino, syscall.S_IFDIR|0o755, 2
}

func fileAttr(a *fuse.Attr, ino uint64, size int) {
	a.Ino, a.Mode, a.Nlink, a.Size = ino, syscall.S_IFREG|0o644, 1, uint64(size)
}
