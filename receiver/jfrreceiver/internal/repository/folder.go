package repository

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/otelcol-ai/otelcol-ai/internal/procroot"
	"github.com/otelcol-ai/otelcol-ai/pkg/jfr"
)

// listing is one read of the repository folder.
type listing struct {
	entries []fs.DirEntry
	gone    bool        // the folder no longer exists
	info    os.FileInfo // the folder listed; nil when gone
}

// list reads the folder through the root, at most maxListed entries.
func (f *follower) list() (listing, error) {
	d, err := f.root.OpenDirectory(f.inside)
	if errors.Is(err, fs.ErrNotExist) {
		return listing{gone: true}, nil
	}
	if err != nil {
		return listing{}, fmt.Errorf("repository %s: %w", f.dir, err)
	}
	defer d.Close()
	info, err := d.Stat()
	if err != nil {
		return listing{}, fmt.Errorf("repository %s: %w", f.dir, err)
	}
	entries, err := d.ReadDir(maxListed + 1)
	if errors.Is(err, fs.ErrNotExist) {
		return listing{gone: true}, nil // removed while held open
	}
	if err != nil && !errors.Is(err, io.EOF) {
		return listing{}, fmt.Errorf("repository %s: %w", f.dir, err)
	}
	if len(entries) > maxListed {
		entries = entries[:maxListed]
		f.refuse(RefusedTooMany, "", fmt.Errorf("repository %s: more than %d files; only %d are looked at", f.dir, maxListed, maxListed))
	}
	return listing{entries: entries, info: info}, nil
}

// openChunk opens a chunk file of the folder, inside the root and only
// when it is a regular file (the open never blocks). A file refused is
// counted and reported once and not tried again; ok is false then, and
// when the file is gone.
func (f *follower) openChunk(name string, typ fs.FileMode) (*os.File, bool) {
	if f.refused[name] {
		return nil, false
	}
	// The listing's type is enough to refuse a FIFO, device or socket
	// without opening it; symlinks are resolved inside the root.
	if typ&(fs.ModeNamedPipe|fs.ModeDevice|fs.ModeCharDevice|fs.ModeSocket) != 0 {
		f.refuse(RefusedNotRegular, name, fmt.Errorf("repository %s: chunk file %s refused: %w (%v)", f.dir, name, procroot.ErrNotRegular, typ.Type()))
		return nil, false
	}
	file, err := f.root.OpenFile(filepath.Join(f.inside, name))
	switch {
	case err == nil:
		return file, true
	case errors.Is(err, procroot.ErrNotRegular):
		f.refuse(RefusedNotRegular, name, fmt.Errorf("repository %s: chunk file %s refused: %w", f.dir, name, err))
	case errors.Is(err, syscall.ELOOP), typ&fs.ModeSymlink != 0 && errors.Is(err, fs.ErrNotExist):
		// A JVM never writes symlinks; one that leads nowhere inside the
		// root points out of it (or through a magic link).
		f.refuse(RefusedOutsideRoot, name, fmt.Errorf("repository %s: chunk file %s refused: a symlink that does not resolve inside the JVM's root: %w", f.dir, name, err))
	case errors.Is(err, fs.ErrNotExist):
		// Rotated away between listing and opening.
	default:
		f.refuse(RefusedOpenFailed, name, fmt.Errorf("repository %s: chunk file %s: %w", f.dir, name, err))
	}
	return nil, false
}

// nextFound is what nextChunk found: the chunk file that follows the last one
// read (name "" when there is none yet) and its start; unwritten, the
// newest-named listed file without a header yet, and its type; gone, that
// the folder no longer exists.
type nextFound struct {
	name      string
	start     int64
	unwritten fs.DirEntry
	gone      bool
}

// nextChunk finds the chunk file that follows the last one read, among
// the folder's files and the held ones: the earliest that starts later
// (the newest for a repository found at start).
func (f *follower) nextChunk() (nextFound, error) {
	f.takeEarly()
	l, err := f.list()
	if err != nil {
		return nextFound{}, err
	}
	var n nextFound
	gone := l.gone
	switch {
	case gone && f.mayReturn():
		// Not gone yet: looked for again at the next poll (what is held
		// is read meanwhile).
		gone = false
	case !gone && f.replaced(l.info):
		// Another folder under its name (HotSpot's real repository after
		// its probe, made between two polls or seen gone by one): watched
		// afresh so that its chunk files are held from their creation (a
		// JVM that lives a second deletes them at its exit, before any
		// later poll), and listed again for those made before the watch.
		f.goneSince = time.Time{}
		f.folder = l.info
		f.rewatch()
		if l, err = f.list(); err != nil {
			return nextFound{}, err
		}
		if gone = l.gone; gone && f.mayReturn() {
			gone = false
		}
	}
	n.gone = gone
	better := func(s int64) bool {
		return s > f.lastStart && (n.name == "" || (f.newest && s > n.start) || (!f.newest && s < n.start))
	}
	for _, e := range l.entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".jfr") || f.held[e.Name()] != nil || f.refused[e.Name()] {
			continue
		}
		h, ok, opened := f.readHeader(e)
		if !ok {
			if opened && (n.unwritten == nil || e.Name() > n.unwritten.Name()) {
				n.unwritten = e
			}
			continue
		}
		if better(h.StartNanos) {
			n.name, n.start = e.Name(), h.StartNanos
		}
	}
	for name, file := range f.held {
		if h, ok := headerAt(file); ok && better(h.StartNanos) {
			n.name, n.start = name, h.StartNanos
		}
	}
	return n, nil
}

// goneGrace is how long a discovered JVM's follower that finds its folder
// gone, the JVM running, goes on looking for a folder of the same name:
// HotSpot makes a repository folder to probe that it can, deletes it, and
// makes the real one within milliseconds, often within the same second
// and so under the same name.
const goneGrace = 2 * time.Second

// mayReturn reports whether a folder found gone may still come back under
// its name: the follower is then not done, and follows the new folder
// (watched afresh) when a later poll finds it. A pattern's folder is its
// own root: a new folder under its name is another root, found by the
// next scan. Polls never wait for it.
func (f *follower) mayReturn() bool {
	if f.inside == "/" || !f.alive() {
		return false
	}
	if f.goneSince.IsZero() {
		f.goneSince = time.Now()
		f.src.rescanSoon.Store(true)
	}
	return time.Since(f.goneSince) < goneGrace
}

// replaced reports whether the folder listed (info) is not the one the
// follower watches: the one it watched was found gone, or the kernel
// dropped its watch, or the folder under its name is another inode. A
// pattern's folder is its root, never replaced.
func (f *follower) replaced(info os.FileInfo) bool {
	if f.inside == "/" {
		return false
	}
	return !f.goneSince.IsZero() || (f.early != nil && f.early.lost.Load()) ||
		(f.folder != nil && info != nil && !os.SameFile(f.folder, info))
}

// rewatch watches the folder now under the follower's name.
func (f *follower) rewatch() {
	if f.watcher == nil {
		return
	}
	if f.early != nil {
		f.takeEarly()
		f.early.unwatch()
		f.early = nil
	}
	if e, err := f.watcher.watch(f.root, f.inside, f.dir); err == nil {
		f.early = e
		f.folder = e.info
	}
}

// openNext opens the chunk file that follows the last one read
// (nextChunk). It returns false when there is none yet. A file whose
// header is not written yet is held open until it is (see follower.held);
// once the repository is gone, only a held file can still be read.
func (f *follower) openNext() (bool, error) {
	n, err := f.nextChunk()
	if err != nil {
		return false, err
	}
	name, best := n.name, n.start
	if name == "" {
		if u := n.unwritten; u != nil {
			if file, ok := f.openChunk(u.Name(), u.Type()); ok {
				f.hold(u.Name(), file)
			}
		}
		if n.gone {
			f.done, f.gone = true, true
		}
		return false, nil
	}
	file := f.held[name]
	if file != nil {
		delete(f.held, name)
	} else if file, _ = f.openChunk(name, 0); file == nil {
		return false, nil // rotated away between listing and opening, or refused
	}
	live := jfr.NewLiveChunk(file, 0)
	live.MaxSize = f.src.cfg.MaxChunkSize
	live.Reserve = func(grow int64) error { return f.src.memory.reserve(f.tenant, grow) }
	f.file, f.path, f.live, f.lastStart, f.newest = file, filepath.Join(f.dir, name), live, best, false
	if f.from == 0 {
		f.from = best
	}
	f.noteOpened(best)
	// Held files that start no later than this one will not be read;
	// those without a header yet stay.
	for n, hf := range f.held {
		if h, ok := headerAt(hf); ok && h.StartNanos <= best {
			hf.Close()
			delete(f.held, n)
		}
	}
	return true, nil
}

// newerExists reports whether a chunk file starts later than the one
// being read.
func (f *follower) newerExists() bool {
	n, err := f.nextChunk()
	return err == nil && n.name != ""
}

// readHeader reads the header of a listed chunk file; ok is false when it
// is not (yet) one, opened false when the file could not be opened.
func (f *follower) readHeader(e fs.DirEntry) (h jfr.Header, ok, opened bool) {
	file, opened := f.openChunk(e.Name(), e.Type())
	if !opened {
		return jfr.Header{}, false, false
	}
	defer file.Close()
	h, ok = headerAt(file)
	return h, ok, true
}

// headerAt reads the header of an open chunk file.
func headerAt(r io.ReaderAt) (jfr.Header, bool) {
	var buf [jfr.HeaderSize]byte
	if _, err := r.ReadAt(buf[:], 0); err != nil {
		return jfr.Header{}, false
	}
	h, err := jfr.ParseHeader(buf[:])
	return h, err == nil && h.StartNanos > 0
}
