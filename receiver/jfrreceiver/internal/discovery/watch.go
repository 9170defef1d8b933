package discovery

import (
	"context"
	"errors"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/otelcol-ai/otelcol-ai/internal/fsdeadline"
	"github.com/otelcol-ai/otelcol-ai/internal/procroot"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/inotify"
)

// MaxWatched bounds the JVMs a Watch follows at once; past it, a JVM is
// found by the periodic scan only.
const MaxWatched = 1024

// Watch tells, within milliseconds, when a JVM found at its exec announces
// itself: its hsperfdata file (/tmp/hsperfdata_<user>/<pid>, made early in
// its start) or its JFR repository folder (yyyy_MM_dd_HH_mm_ss_<pid> in
// its repository base) appears. Folders are watched with inotify through
// descriptors opened inside the JVM's root (package procroot), never by a
// path the collector would resolve in its own namespace; JVMs sharing a
// root share the watches. Use Add and Remove from one goroutine; Ready and
// Take from any.
type Watch struct {
	in *inotify.Instance

	mu      sync.Mutex
	byWatch map[int32]map[int]*watched // inotify watch -> interested JVMs by pid
	// unclaimed counts, per inotify watch, what Add's calls made of it and
	// have not handed over yet (registered, or discarded once given up):
	// a watch is removed only when no JVM and no such call has it.
	unclaimed map[int32]int
	jvms      map[int]*watched
	pending   map[int]JVM
	ready     chan struct{}
	disabled  bool
}

// watched is one JVM a Watch follows.
type watched struct {
	jvm     JVM
	nspid   string
	watches []int32
}

// NewWatch starts an inotify instance and its reader. It fails where
// inotify cannot be used; the scans still find every JVM then.
func NewWatch() (*Watch, error) {
	w := &Watch{byWatch: map[int32]map[int]*watched{}, unclaimed: map[int32]int{}, jvms: map[int]*watched{}, pending: map[int]JVM{}, ready: make(chan struct{}, 1)}
	in, err := inotify.Start(func(e inotify.Event) { w.announced(e.Watch, e.Name) })
	if err != nil {
		return nil, err
	}
	w.in = in
	return w, nil
}

// Add starts watching for j's announcements: /tmp (where hsperfdata_<user>
// folders are made), each /tmp/hsperfdata_* folder, and j's repository
// base, inside j's root. Those folders are on the JVM's container's
// filesystems, so they are looked up and watched in a goroutine of their
// own, waited for until ctx ends: a folder on a mount that stopped
// answering holds that goroutine only. Add reports whether any folder is
// watched, and whether the call was given up at ctx's deadline (stalled;
// what it watches once it returns is removed then). It watches nothing
// when ctx has ended already.
func (w *Watch) Add(ctx context.Context, j JVM) (watching, stalled bool) {
	w.mu.Lock()
	old := w.jvms[j.PID]
	full := len(w.jvms) >= MaxWatched
	w.mu.Unlock()
	switch {
	case old != nil && old.jvm.StartTicks == j.StartTicks:
		return true, false
	case old != nil:
		// The pid was reused; the exit of the old JVM was missed.
		w.Remove(j.PID)
	case full, ctx.Err() != nil:
		return false, false
	}
	// The call's own descriptor of the inotify instance: a call that
	// returns after Close still names that instance, never a descriptor
	// reused since.
	fd, err := unix.FcntlInt(uintptr(w.in.FD()), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return false, false
	}
	call := fsdeadline.Start(func() added { return w.watchFolders(fd, j) })
	a, ok := call.Wait(ctx)
	if !ok {
		call.Abandon(w.discard)
		return false, errors.Is(ctx.Err(), context.DeadlineExceeded)
	}
	defer unix.Close(a.fd)
	e := &watched{jvm: j, nspid: strconv.Itoa(j.NSPID), watches: a.watches}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.claimLocked(a.watches)
	if len(e.watches) == 0 {
		return false, false
	}
	w.jvms[j.PID] = e
	for _, wd := range e.watches {
		if w.byWatch[wd] == nil {
			w.byWatch[wd] = map[int]*watched{}
		}
		w.byWatch[wd][j.PID] = e
	}
	return true, false
}

// added is what one of Add's calls made: the watches, through its own
// descriptor of the inotify instance.
type added struct {
	fd      int
	watches []int32
}

// watchFolders opens j's root and watches its folders through fd; every
// call on the JVM's filesystems is made here.
func (w *Watch) watchFolders(fd int, j JVM) added {
	a := added{fd: fd}
	root, err := j.OpenRoot()
	if err != nil {
		return a
	}
	defer root.Close()
	dirs := []string{"/tmp", filepath.Join("/", j.RepositoryBase)}
	if perf, err := root.Glob("/tmp/hsperfdata_*"); err == nil {
		dirs = append(dirs, perf...)
	}
	for _, d := range dirs {
		if wd, ok := w.addDir(fd, root, d); ok {
			a.watches = append(a.watches, wd)
		}
	}
	return a
}

// addDir watches the folder inside root for entries created in it, through
// fd, and counts the watch unclaimed until Add or discard takes it.
func (w *Watch) addDir(fd int, root *procroot.Root, inside string) (int32, bool) {
	d, err := root.OpenDirectory(inside)
	if err != nil {
		return 0, false
	}
	defer d.Close()
	wd, err := unix.InotifyAddWatch(fd, procroot.FDPath(int(d.Fd())), unix.IN_CREATE|unix.IN_MOVED_TO|unix.IN_ONLYDIR)
	if err != nil {
		return 0, false
	}
	w.mu.Lock()
	w.unclaimed[int32(wd)]++
	w.mu.Unlock()
	return int32(wd), true
}

// claimLocked takes the watches of a call off the unclaimed counts.
func (w *Watch) claimLocked(watches []int32) {
	for _, wd := range watches {
		if w.unclaimed[wd]--; w.unclaimed[wd] <= 0 {
			delete(w.unclaimed, wd)
		}
	}
}

// discard removes what a call given up watched, where no JVM and no other
// call has the same watch (JVMs sharing a folder share it), and closes
// its descriptor. It runs when the call returns.
func (w *Watch) discard(a added) {
	w.mu.Lock()
	for _, wd := range a.watches {
		w.claimLocked([]int32{wd})
		if w.unclaimed[wd] == 0 && len(w.byWatch[wd]) == 0 {
			// Removing a watch touches no filesystem.
			_, _ = unix.InotifyRmWatch(a.fd, uint32(wd))
		}
	}
	w.mu.Unlock()
	_ = unix.Close(a.fd)
}

// Remove stops watching for the JVM pid (it exited, or it was followed).
func (w *Watch) Remove(pid int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	e := w.jvms[pid]
	if e == nil {
		return
	}
	delete(w.jvms, pid)
	delete(w.pending, pid)
	for _, wd := range e.watches {
		if set := w.byWatch[wd]; set != nil {
			delete(set, pid)
			if len(set) == 0 {
				delete(w.byWatch, wd)
				if w.unclaimed[wd] > 0 {
					continue // an Add's call has it too
				}
				// The folder may be gone already (the kernel then
				// dropped the watch itself).
				_, _ = unix.InotifyRmWatch(w.in.FD(), uint32(wd))
			}
		}
	}
}

// Watching reports how many JVMs are watched.
func (w *Watch) Watching() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.jvms)
}

// Ready fires when a JVM announced itself.
func (w *Watch) Ready() <-chan struct{} { return w.ready }

// Take returns the JVMs that announced themselves since the last Take.
func (w *Watch) Take() []JVM {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]JVM, 0, len(w.pending))
	for pid, j := range w.pending {
		out = append(out, j)
		delete(w.pending, pid)
	}
	return out
}

// Close stops the reader and closes the inotify instance (an Add's call
// given up and still hanging holds it until it returns).
func (w *Watch) Close() { w.in.Close() }

// announced handles one entry created in a watched folder: a JVM's own
// hsperfdata file or repository folder announces it, and so does a new
// hsperfdata_<user> folder in /tmp (the first JVM of that user makes it,
// its pid file inside follows at once).
func (w *Watch) announced(wd int32, name string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	hit := false
	for pid, e := range w.byWatch[wd] {
		own := name == e.nspid || (strings.HasSuffix(name, "_"+e.nspid) && IsRepositoryName(name))
		if own {
			w.pending[pid] = e.jvm
			hit = true
		}
		if strings.HasPrefix(name, "hsperfdata_") {
			w.pending[pid] = e.jvm
			hit = true
		}
	}
	if hit {
		select {
		case w.ready <- struct{}{}:
		default:
		}
	}
}

func (w *Watch) watched(pid int) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.jvms[pid] != nil
}
