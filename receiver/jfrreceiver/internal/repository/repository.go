// Package repository follows the JFR disk repositories of running JVMs: the
// in-progress chunk file after every flush, then the next chunk file when
// the JVM rotates, until the JVM exits. Repositories come from configured
// glob patterns and from automatic discovery of local JVMs (package
// discovery).
//
// A repository holds one chunk per file, named by time; files are ordered
// by their header's start time, not by name. A repository that already
// exists when the source starts is read from its newest chunk (what the JVM
// is writing now, from that chunk's start); one that appears later is read
// from its first chunk. A chunk is held in memory while it is followed
// (HotSpot rotates at about 12 MB), never a whole recording.
//
// Each chunk file is opened as soon as the JVM creates it (watch.go), so
// that a chunk the JVM deletes at exit before the next poll is still read.
package repository // import "github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/repository"

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/otelcol-ai/otelcol-ai/pkg/jfr"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/discovery"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/jfrstream"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/jvmevent"
)

// Config says where to look.
type Config struct {
	// Include are glob patterns of repository folders (each match is one
	// JVM's repository, e.g. /var/jfr/*/2*_*).
	Include []string
	// Discover turns on automatic discovery of local JVMs through ProcRoot.
	Discover bool
	// ProcRoot is the proc filesystem to discover JVMs in.
	ProcRoot string
	// DiscoveryInterval is how often the source looks for new JVMs and
	// repositories; following known ones happens on every poll.
	DiscoveryInterval time.Duration
	// Attach starts recordings in discovered JVMs that run none.
	Attach AttachConfig
	// Logger receives debug messages about JVMs coming and going.
	Logger *zap.Logger
}

// staleAfter ends following a repository found by a pattern once it has
// not grown for this long.
var staleAfter = 5 * time.Minute

// maxSegmentsPerPoll bounds the work of one poll on one repository, so that
// a JVM with a backlog of chunk files cannot starve the others.
const maxSegmentsPerPoll = 8

// Source follows repositories. Use it from one goroutine.
type Source struct {
	cfg       Config
	finder    *discovery.Finder
	starter   *starter
	followers map[string]*follower // by repository folder
	ended     map[string]bool      // repositories read to the end, while they exist
	watcher   *watcher             // nil before the first scan, or without inotify
	noWatcher bool                 // inotify could not be used: poll only
	started   bool
	lastScan  time.Time
	now       func() time.Time
}

// New returns a source; it reads nothing before the first Poll.
func New(cfg Config) *Source {
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	s := &Source{cfg: cfg, followers: map[string]*follower{}, ended: map[string]bool{}, now: time.Now}
	if cfg.Discover {
		s.finder = discovery.NewFinder(cfg.ProcRoot)
		if cfg.Attach.Enabled {
			s.starter = newStarter(cfg.Attach, cfg.ProcRoot, cfg.Logger)
		}
	}
	return s
}

// Following returns the repository folders followed now, sorted.
func (s *Source) Following() []string {
	out := make([]string, 0, len(s.followers))
	for dir := range s.followers {
		out = append(out, dir)
	}
	slices.Sort(out)
	return out
}

// Followed is one repository the source reads, as another source needs to
// know it (the receiver prefers its JFR over the same JVM's -Xlog file).
type Followed struct {
	// Dir is the repository folder.
	Dir string
	// JVM is what batches from it carry: a discovered JVM's pid (the
	// collector's) and start time, or a pattern's folder pid only.
	JVM jvmevent.JVM
	// Discovered says the JVM was found in the proc root (JVM.PID and
	// JVM.StartTicks name a process there).
	Discovered bool
	// OwnPID is the pid the JVM sees itself as (its own pid namespace):
	// jdk.JVMInformation's, else the folder name's; 0 when neither says.
	OwnPID int
	// From is the start (Unix ns) of the first chunk read: the source
	// reports the JVM's events from then on. 0 before a chunk is opened.
	From int64
}

// Followed returns the repositories read now, sorted by folder.
func (s *Source) Followed() []Followed {
	out := make([]Followed, 0, len(s.followers))
	for _, dir := range s.Following() {
		f := s.followers[dir]
		own := int(f.stream.PID())
		if own == 0 {
			own = discovery.RepositoryPID(dir)
		}
		out = append(out, Followed{Dir: dir, JVM: f.jvm, Discovered: f.discovered, OwnPID: own, From: f.from})
	}
	return out
}

// Poll looks for new repositories when the discovery interval has passed,
// then reads what every followed repository has flushed since the last
// poll and emits one batch per JVM.
func (s *Source) Poll(ctx context.Context, emit func(jvmevent.Batch)) error {
	var errs []error
	if !s.started || s.now().Sub(s.lastScan) >= s.cfg.DiscoveryInterval {
		if err := s.scan(); err != nil {
			errs = append(errs, err)
		}
		s.lastScan = s.now()
		s.started = true
	}
	for _, dir := range s.Following() {
		if ctx.Err() != nil {
			break
		}
		f := s.followers[dir]
		b := jvmevent.Batch{JVM: f.jvm}
		if err := f.poll(&b); err != nil {
			errs = append(errs, err)
		}
		b.RuntimeVersion = f.stream.RuntimeVersion()
		b.Ended = f.done
		if !b.Empty() || b.Ended {
			emit(b)
		}
		if f.done {
			s.cfg.Logger.Debug("JFR repository read to the end", zap.String("repository", dir), zap.Int("pid", f.jvm.PID))
			f.closeAll()
			delete(s.followers, dir)
			s.ended[dir] = true
		}
	}
	return errors.Join(errs...)
}

// Close closes every open chunk file and stops the recordings the source
// started.
func (s *Source) Close() error {
	if s.starter != nil {
		s.starter.stopAll(s.finder)
	}
	for dir, f := range s.followers {
		f.closeAll()
		delete(s.followers, dir)
	}
	if s.watcher != nil {
		s.watcher.close()
		s.watcher = nil
	}
	return nil
}

// watch returns the source's watcher, started on first use; nil where
// inotify cannot be used.
func (s *Source) watch() *watcher {
	if s.watcher == nil && !s.noWatcher {
		w, err := newWatcher()
		if err != nil {
			s.cfg.Logger.Debug("no inotify; chunk files are found by polling only", zap.Error(err))
			s.noWatcher = true
			return nil
		}
		s.watcher = w
	}
	return s.watcher
}

// scan finds repositories not yet followed.
func (s *Source) scan() error {
	var errs []error
	found := map[string]bool{}
	var infos []os.FileInfo // folders found so far, to spot one reached by two paths
	add := func(dir string, info os.FileInfo, jvm jvmevent.JVM, discovered bool, alive func() bool) {
		found[dir] = true
		infos = append(infos, info)
		if s.followers[dir] != nil || s.ended[dir] {
			return
		}
		s.cfg.Logger.Debug("following JFR repository", zap.String("repository", dir), zap.Int("pid", jvm.PID))
		f := &follower{dir: dir, jvm: jvm, discovered: discovered, alive: alive, newest: !s.started, stream: jfrstream.New()}
		if w := s.watch(); w != nil {
			e, err := w.watch(dir)
			if err != nil {
				s.cfg.Logger.Debug("cannot watch JFR repository; chunk files are found by polling only", zap.String("repository", dir), zap.Error(err))
			}
			f.early = e
		}
		s.followers[dir] = f
	}
	if s.finder != nil {
		jvms, err := s.finder.JVMs()
		if err != nil {
			errs = append(errs, err)
		}
		alive := map[jvmKey]bool{}
		for _, j := range jvms {
			finder, pid, start := s.finder, j.PID, j.StartTicks
			var repos []string
			if root, err := j.OpenRoot(); err == nil {
				for _, r := range j.Repositories(root) {
					repos = append(repos, root.Display(r))
				}
				root.Close()
			}
			for _, dir := range repos {
				info, err := os.Stat(dir)
				if err != nil {
					continue
				}
				add(dir, info, jvmevent.JVM{PID: pid, StartTicks: start, Source: dir}, true, func() bool { return finder.Alive(pid, start) })
			}
			alive[jvmKey{pid, start}] = true
			if s.starter != nil {
				if err := s.starter.consider(j, len(repos) > 0); err != nil {
					errs = append(errs, err)
				}
			}
		}
		if s.starter != nil {
			s.starter.forget(alive)
		}
	}
	for _, pattern := range s.cfg.Include {
		matches, err := filepath.Glob(pattern)
		if err != nil {
			errs = append(errs, fmt.Errorf("repository: pattern %q: %w", pattern, err))
			continue
		}
		for _, dir := range matches {
			fi, err := os.Stat(dir)
			if err != nil || !fi.IsDir() || found[dir] {
				continue
			}
			// A pattern may reach a discovered JVM's repository by another
			// path (/tmp/… rather than /proc/<pid>/root/tmp/…): follow it
			// once, as the discovered JVM, whose resource is richer.
			if slices.ContainsFunc(infos, func(o os.FileInfo) bool { return os.SameFile(o, fi) }) {
				continue
			}
			d := dir
			// The pid in the name is the JVM's own; it is the collector's
			// only when both share a pid namespace, so it is reported
			// but not used to tell whether the JVM runs: the folder is.
			add(dir, fi, jvmevent.JVM{PID: discovery.RepositoryPID(dir), Source: dir}, false, func() bool {
				_, err := os.Stat(d)
				return err == nil
			})
			if f := s.followers[dir]; f != nil && f.staleAfter == 0 {
				f.staleAfter = staleAfter
			}
		}
	}
	// Forget ended repositories once they are gone, so the map stays small.
	for dir := range s.ended {
		if !found[dir] {
			delete(s.ended, dir)
		}
	}
	return errors.Join(errs...)
}

// follower reads one repository.
type follower struct {
	dir        string
	jvm        jvmevent.JVM
	discovered bool
	alive      func() bool
	newest     bool  // start at the newest chunk rather than the first
	from       int64 // start of the first chunk opened (Unix ns), 0 before
	stream     *jfrstream.Stream

	file      *os.File
	path      string
	live      *jfr.LiveChunk
	lastStart int64 // start of the chunk read last; the next one starts later
	done      bool
	lastErr   string

	// held are chunk files opened before the follower got to them (by
	// name): by the watcher as the JVM created them, or by openNext
	// before the JVM wrote the header (the JVM creates the next chunk's
	// file before it finishes the current one). An open file stays
	// readable when the JVM deletes its repository at exit, which can
	// come before the next poll: a chunk begun just before exit may live
	// a few milliseconds.
	held  map[string]*os.File
	early *early // the watcher's, nil without one

	// staleAfter, when set, ends a follower whose repository has not grown
	// for that long: a folder found by a pattern has no process to watch,
	// and a JVM killed with a preserved repository leaves a chunk that is
	// never finished. (JVMs write periodic events every second or so.)
	staleAfter time.Duration
	grew       time.Time
}

// close closes the chunk file being read.
func (f *follower) close() {
	if f.file != nil {
		f.file.Close()
		f.file, f.live, f.path = nil, nil, ""
	}
}

// closeAll closes every file the follower holds; it is done.
func (f *follower) closeAll() {
	f.close()
	f.dropHeld()
}

func (f *follower) dropHeld() {
	if f.early != nil {
		f.early.unwatch()
		f.early = nil
	}
	for name, file := range f.held {
		file.Close()
		delete(f.held, name)
	}
}

// takeEarly moves the files the watcher opened into held.
func (f *follower) takeEarly() {
	if f.early == nil {
		return
	}
	for name, file := range f.early.take() {
		f.hold(name, file)
	}
}

// hold keeps file open as name until the follower gets to it; it closes
// file instead when name is held already or too many are.
func (f *follower) hold(name string, file *os.File) {
	if f.held[name] != nil || len(f.held) >= maxEarly {
		file.Close()
		return
	}
	if f.held == nil {
		f.held = map[string]*os.File{}
	}
	f.held[name] = file
}

// poll reads what was flushed. When the JVM is gone (or the chunk it
// marked final is read), everything it left is read and the follower is
// done.
func (f *follower) poll(b *jvmevent.Batch) error {
	exited := !f.alive()
	if f.grew.IsZero() {
		f.grew = time.Now()
	}
	if f.staleAfter > 0 && time.Since(f.grew) > f.staleAfter {
		exited = true
	}
	var err error
	// A JVM that is gone gets no budget: its files are read to the end
	// now (each pass closes a file or stops).
	for i := 0; exited || i < maxSegmentsPerPoll; i++ {
		if f.live == nil {
			ok, oerr := f.openNext()
			if oerr != nil {
				err = oerr
			}
			if !ok {
				break
			}
		}
		seg, perr := f.live.Poll()
		if perr != nil {
			switch {
			case !errors.Is(perr, jfr.ErrNotFlushed):
				err = fmt.Errorf("repository %s: chunk file %s: %w (file skipped)", f.dir, filepath.Base(f.path), perr)
			case exited:
				// The JVM is gone: what it did not flush will not come.
			case f.newerExists():
				// The JVM moved on to a later chunk: this one will never
				// be completed (truncated, or cut short by a crash).
				err = fmt.Errorf("repository %s: chunk file %s abandoned unfinished: %w (file skipped)", f.dir, filepath.Base(f.path), perr)
			default:
				return f.finish(b, exited, err) // wait for the next flush
			}
			f.close()
			continue
		}
		if !seg.Empty() {
			f.grew = time.Now()
		}
		if serr := f.stream.Segment(seg, b); serr != nil {
			// Events before the damage are kept; the rest of the chunk is
			// not readable.
			err = fmt.Errorf("repository %s: chunk file %s: %w (rest of chunk skipped)", f.dir, filepath.Base(f.path), serr)
			f.close()
			continue
		}
		if !f.live.Finished() {
			break
		}
		final := f.live.Chunk().Header.Final()
		f.close()
		if final {
			exited = true
			break
		}
	}
	return f.finish(b, exited, err)
}

// finish ends a poll: it lets out windows that waited long enough, marks
// the follower done when the JVM is gone, and returns err unless it was
// already reported.
func (f *follower) finish(b *jvmevent.Batch, exited bool, err error) error {
	f.stream.Flush(b, exited)
	if exited {
		// Everything the JVM flushed has been read, including a last
		// chunk it never finished (killed).
		f.done = true
	}
	if err != nil {
		if msg := err.Error(); msg != f.lastErr {
			f.lastErr = msg
			return err
		}
	}
	return nil
}

// nextChunk finds the chunk file that follows the last one read, among
// the folder's files and the held ones: the earliest that starts later
// (the newest for a repository found at start); name is "" when there is
// none yet. unwritten is the newest-named listed file without a header
// yet; gone says the folder no longer exists.
func (f *follower) nextChunk() (name string, start int64, unwritten string, gone bool, err error) {
	f.takeEarly()
	entries, err := os.ReadDir(f.dir)
	gone = errors.Is(err, fs.ErrNotExist)
	if err != nil && !gone {
		return "", 0, "", false, fmt.Errorf("repository %s: %w", f.dir, err)
	}
	better := func(s int64) bool {
		return s > f.lastStart && (name == "" || (f.newest && s > start) || (!f.newest && s < start))
	}
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".jfr") || f.held[e.Name()] != nil {
			continue
		}
		h, ok := readHeader(filepath.Join(f.dir, e.Name()))
		if !ok {
			unwritten = max(unwritten, e.Name())
			continue
		}
		if better(h.StartNanos) {
			name, start = e.Name(), h.StartNanos
		}
	}
	for n, file := range f.held {
		if h, ok := headerAt(file); ok && better(h.StartNanos) {
			name, start = n, h.StartNanos
		}
	}
	return name, start, unwritten, gone, nil
}

// openNext opens the chunk file that follows the last one read
// (nextChunk). It returns false when there is none yet. A file whose
// header is not written yet is held open until it is (see follower.held);
// once the repository is gone, only a held file can still be read.
func (f *follower) openNext() (bool, error) {
	name, best, unwritten, gone, err := f.nextChunk()
	if err != nil {
		return false, err
	}
	if name == "" {
		if unwritten != "" {
			if file, err := os.Open(filepath.Join(f.dir, unwritten)); err == nil {
				f.hold(unwritten, file)
			}
		}
		if gone {
			f.done = true
		}
		return false, nil
	}
	path := filepath.Join(f.dir, name)
	file := f.held[name]
	if file != nil {
		delete(f.held, name)
	} else if file, err = os.Open(path); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return false, nil // rotated away between listing and opening
		}
		return false, fmt.Errorf("repository %s: %w", f.dir, err)
	}
	f.file, f.path, f.live, f.lastStart, f.newest = file, path, jfr.NewLiveChunk(file, 0), best, false
	if f.from == 0 {
		f.from = best
	}
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
	name, _, _, _, err := f.nextChunk()
	return err == nil && name != ""
}

// readHeader reads a chunk file's header; false when it is not (yet) one.
func readHeader(path string) (jfr.Header, bool) {
	file, err := os.Open(path)
	if err != nil {
		return jfr.Header{}, false
	}
	defer file.Close()
	return headerAt(file)
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
