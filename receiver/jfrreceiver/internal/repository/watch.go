package repository

import (
	"errors"
	"os"
	"strings"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/otelcol-ai/otelcol-ai/internal/procroot"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/inotify"
)

// maxEarly bounds the chunk files held open for one repository before the
// follower gets to them.
const maxEarly = 16

// A JVM that exits deletes its repository (JDK 17; later JDKs unless
// preserve-repository is set). A chunk begun shortly before, when the last
// one reached its size limit or a recording started or stopped, can be
// created, finished and deleted between two polls. The watcher opens each
// chunk file the moment the JVM creates it (inotify), so that its data
// stays readable through the open file after it is deleted; the follower
// reads it from there. Files are opened inside the repository's root and
// only when regular (never blocking the watcher's goroutine on a FIFO).
type watcher struct {
	in *inotify.Instance

	mu      sync.Mutex
	byWatch map[int32]*early
	closed  bool // close has begun: watches are no longer removed one by one
}

// errWatchedAlready: the folder is watched for another follower already
// (one folder reached by two paths). The kernel gives both the same watch,
// so only the first holds it; the second follower finds files by polling.
var errWatchedAlready = errors.New("folder watched already")

// early holds the chunk files of one repository opened by the watcher and
// not yet taken by its follower.
type early struct {
	w *watcher
	// folder is the watched folder, opened as a root of its own (files
	// are opened inside it). It is closed by close, or, when an open
	// through it is under way then, by that open once it returns: closing
	// a root that is in use would let its descriptor's number name
	// another file.
	folder *procroot.Root
	wd     int32
	info   os.FileInfo // the folder watched, as it was when the watch began
	// lost is set once the kernel has dropped the watch: the folder was
	// deleted (HotSpot deletes the folder it probes with and makes the
	// real one, often under the same name). A folder under the name now
	// is another one, to be watched afresh.
	lost atomic.Bool

	// names are the files created, for opening: by a goroutine of the
	// folder's own, so that an open that hangs (a stalled FUSE or NFS
	// mount in the JVM's container) holds only this folder's.
	names chan string

	mu      sync.Mutex
	files   map[string]*os.File // by file name
	closed  bool
	opening bool // an open through folder is under way
}

// newWatcher starts an inotify instance and the goroutine that reads it.
func newWatcher() (*watcher, error) {
	w := &watcher{byWatch: map[int32]*early{}}
	in, err := inotify.Start(w.event)
	if err != nil {
		return nil, err
	}
	w.in = in
	return w, nil
}

// watch starts holding the chunk files created in the folder inside root
// from now on; dir names it in errors. The folder is watched through a
// descriptor opened inside the root, never by a path under
// /proc/<pid>/root that the collector would resolve in its own namespace.
func (w *watcher) watch(root *procroot.Root, inside, dir string) (*early, error) {
	d, err := root.OpenDirectory(inside)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	info, err := d.Stat()
	if err != nil {
		return nil, err
	}
	wd, err := unix.InotifyAddWatch(w.in.FD(), procroot.FDPath(int(d.Fd())), unix.IN_CREATE|unix.IN_MOVED_TO|unix.IN_DELETE_SELF|unix.IN_ONLYDIR)
	if err != nil {
		return nil, &os.PathError{Op: "inotify_add_watch", Path: dir, Err: err}
	}
	folder, err := procroot.OpenDir(procroot.FDPath(int(d.Fd())))
	if err != nil {
		return nil, err
	}
	e := &early{w: w, folder: folder, wd: int32(wd), info: info, files: map[string]*os.File{}, names: make(chan string, maxEarly)}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.byWatch[e.wd] != nil {
		folder.Close()
		return nil, &os.PathError{Op: "inotify_add_watch", Path: dir, Err: errWatchedAlready}
	}
	w.byWatch[e.wd] = e
	go e.opener()
	return e, nil
}

// unwatch stops watching e's folder and closes what it still holds.
func (e *early) unwatch() {
	w := e.w
	w.mu.Lock()
	if !w.closed && w.byWatch[e.wd] == e {
		delete(w.byWatch, e.wd)
		// The folder may be gone already (the kernel then dropped the
		// watch itself).
		_, _ = unix.InotifyRmWatch(w.in.FD(), uint32(e.wd))
	}
	w.mu.Unlock()
	e.close()
}

// close stops the goroutine and closes the inotify instance.
func (w *watcher) close() {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
	w.in.Close()
	w.mu.Lock()
	defer w.mu.Unlock()
	for wd, e := range w.byWatch {
		delete(w.byWatch, wd)
		e.close()
	}
}

// event handles one event of the inotify instance. Should the instance
// stop being readable, the follower's polls still find the files.
func (w *watcher) event(ev inotify.Event) {
	if ev.Mask&(unix.IN_DELETE_SELF|unix.IN_IGNORED) != 0 {
		w.mu.Lock()
		if e := w.byWatch[ev.Watch]; e != nil {
			e.lost.Store(true)
			if ev.Mask&unix.IN_IGNORED != 0 {
				// The kernel has dropped the watch; its number may be
				// handed out again.
				delete(w.byWatch, ev.Watch)
			}
		}
		w.mu.Unlock()
		return
	}
	if ev.Mask&(unix.IN_CREATE|unix.IN_MOVED_TO) == 0 || ev.Mask&unix.IN_ISDIR != 0 || !strings.HasSuffix(ev.Name, ".jfr") {
		return
	}
	w.mu.Lock()
	e := w.byWatch[ev.Watch]
	w.mu.Unlock()
	if e != nil {
		e.created(ev.Name)
	}
}

// created hands a file just created in e's folder to its opener; one that
// finds the queue full is left to the follower's listing.
func (e *early) created(name string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return
	}
	select {
	case e.names <- name:
	default:
	}
}

// opener opens the files created in e's folder until e is closed.
func (e *early) opener() {
	for name := range e.names {
		e.open(name)
	}
}

// open opens a file just created in e's folder and holds it. The open is
// made without the lock, so that a hanging one holds no one else.
func (e *early) open(name string) {
	e.mu.Lock()
	if e.closed || e.files[name] != nil || len(e.files) >= maxEarly {
		e.mu.Unlock()
		return
	}
	e.opening = true
	e.mu.Unlock()
	f, err := e.folder.OpenFile(name)
	e.mu.Lock()
	defer e.mu.Unlock()
	e.opening = false
	switch {
	case e.closed:
		e.folder.Close() // close left it to this open
		if err == nil {
			f.Close()
		}
	case err != nil:
		// Gone already, or not a regular file (the follower's listing
		// reports it).
	case e.files[name] != nil:
		f.Close()
	default:
		e.files[name] = f
	}
}

// take hands every held file to the caller, who closes them.
func (e *early) take() map[string]*os.File {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.files) == 0 {
		return nil
	}
	out := e.files
	e.files = map[string]*os.File{}
	return out
}

func (e *early) close() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.closed {
		close(e.names)
		if !e.opening {
			e.folder.Close()
		}
	}
	e.closed = true
	for name, f := range e.files {
		f.Close()
		delete(e.files, name)
	}
}
