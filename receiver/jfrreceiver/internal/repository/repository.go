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
//
// A repository is written by the JVM's container and read as hostile
// input: every file is opened inside the JVM's root (package procroot), so
// symlinks and `..` stay in the container; only regular files are read,
// and opens never block; chunk memory is bounded per chunk and across all
// repositories (limits.go); a panic while decoding one repository disables
// that repository only. What is refused is counted (Config.Refused) and
// reported once per repository.
package repository // import "github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/repository"

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/otelcol-ai/otelcol-ai/internal/procroot"
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
	// MaxChunkSize bounds the bytes held for one chunk: a chunk whose
	// header claims more is skipped. 0 means jfr.DefaultMaxChunkSize.
	MaxChunkSize int64
	// MaxMemory bounds the chunk bytes held by all followed repositories
	// together, and one JVM's to a share of it (jvmShare): a chunk that
	// would take either past its bound is skipped. 0 means no bound.
	MaxMemory int64
	// Refused, when set, is called once for every file or repository the
	// source refuses, with the reason (Refused* constants).
	Refused func(reason string)
	// Logger receives debug messages about JVMs coming and going.
	Logger *zap.Logger
	// Resume are positions an earlier run saved (Source.Positions), by
	// folder: a repository found with one (of the same JVM) is read on
	// from it rather than from its newest chunk.
	Resume map[string]Position
}

// staleAfter ends following a repository found by a pattern once it has
// not grown for this long.
var staleAfter = 5 * time.Minute

// maxSegmentsPerPoll bounds the work of one poll on one repository, so that
// a JVM with a backlog of chunk files cannot starve the others.
const maxSegmentsPerPoll = 8

// Source follows repositories. Use it from one goroutine (HeldBytes
// excepted).
type Source struct {
	cfg       Config
	scanner   *discovery.Scanner
	starter   *starter
	followers map[string]*follower // by repository folder
	ended     map[string]bool      // repositories read to the end (or disabled), while they exist
	watcher   *watcher             // nil before the first scan, or without inotify
	noWatcher bool                 // inotify could not be used: poll only
	started   bool
	rescan    bool // Rescan was called since the last scan
	// rescanSoon: a follower found its folder gone while its JVM runs (set
	// from its poll's goroutine): the next poll scans, for the folder
	// HotSpot makes after its probe.
	rescanSoon atomic.Bool
	lastScan   time.Time
	now        func() time.Time
	memory     budget
	// tooMany are the discovered JVMs whose surplus repository folders
	// were reported, so each is counted once; pruned at each discovery.
	tooMany map[jvmKey]bool
	// looks are the looks at discovered JVMs' roots still running after
	// their scan's deadline (scanDiscovered).
	looks map[jvmKey]*isolated[look]

	// beforeSegment, when set (tests), runs before each segment is
	// decoded, with the repository folder.
	beforeSegment func(dir string)

	// endedTicks are the ended repositories' JVM start times (Positions).
	endedTicks map[string]uint64
}

// New returns a source; it reads nothing before the first Poll.
func New(cfg Config) *Source {
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	if cfg.MaxChunkSize <= 0 {
		cfg.MaxChunkSize = jfr.DefaultMaxChunkSize
	}
	s := &Source{cfg: cfg, followers: map[string]*follower{}, ended: map[string]bool{}, endedTicks: map[string]uint64{}, tooMany: map[jvmKey]bool{}, looks: map[jvmKey]*isolated[look]{}, now: time.Now}
	s.memory.max, s.memory.share = cfg.MaxMemory, jvmShare(cfg.MaxMemory, cfg.MaxChunkSize)
	if cfg.Discover {
		s.scanner = discovery.NewScanner(cfg.ProcRoot)
		// Off, it only keeps each JVM's status.
		s.starter = newStarter(cfg.Attach, cfg.ProcRoot, cfg.Logger, func() { s.count(RefusedStalled) })
	}
	return s
}

// HeldBytes returns the chunk bytes the followed repositories hold now
// (what MaxMemory bounds). Safe from any goroutine.
func (s *Source) HeldBytes() int64 { return s.memory.held.Load() }

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
	// Dir is the repository folder, as the collector names it (under
	// /proc/<pid>/root for a discovered JVM); for messages and matching,
	// never opened.
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
		own := f.ownPID
		if own == 0 {
			own = discovery.RepositoryPID(dir)
		}
		out = append(out, Followed{Dir: dir, JVM: f.jvm, Discovered: f.discovered, OwnPID: own, From: f.from})
	}
	return out
}

// Rescan makes the next Poll look for new repositories whatever the
// discovery interval: a process event or an announcement says a JVM or its
// repository appeared.
func (s *Source) Rescan() { s.rescan = true }

// Poll looks for new repositories when the discovery interval has passed,
// then reads what every followed repository has flushed since the last
// poll and emits one batch per JVM.
func (s *Source) Poll(ctx context.Context, emit func(jvmevent.Batch)) error {
	var errs []error
	soon := s.rescanSoon.Swap(false)
	if !s.started || s.rescan || soon || s.now().Sub(s.lastScan) >= s.cfg.DiscoveryInterval {
		if err := s.scan(); err != nil {
			errs = append(errs, err)
		}
		s.lastScan = s.now()
		s.started, s.rescan = true, false
	}
	// Every repository is read at once, each in its own goroutine, and
	// waited for until one deadline: a poll lasts at most pollTimeout
	// however many JVMs there are, so that discovery (at the next poll)
	// is not held back by busy repositories, and a JVM that lives a few
	// seconds is found while its repository exists.
	dirs := s.Following()
	for _, dir := range dirs {
		s.startPoll(s.followers[dir])
	}
	deadline := time.NewTimer(pollTimeout)
	defer deadline.Stop()
	expired := false
	for _, dir := range dirs {
		if ctx.Err() != nil {
			break
		}
		f := s.followers[dir]
		res, ok, fired := s.awaitPoll(f, deadline.C, expired)
		expired = fired
		if res.err != nil {
			errs = append(errs, res.err)
		}
		if !ok {
			continue // still reading: its batch comes at a later poll
		}
		s.deliver(dir, f, res, emit)
	}
	return errors.Join(errs...)
}

// deliver hands on the batch of one follower's poll that ended, and lets
// the follower go once it is done.
func (s *Source) deliver(dir string, f *follower, res pollResult, emit func(jvmevent.Batch)) {
	b := res.batch
	f.sentOnly(&b)
	b.RuntimeVersion = f.stream.RuntimeVersion()
	b.Ended = f.done
	f.ownPID = int(f.stream.PID())
	if !b.Empty() || b.Ended {
		emit(b)
	}
	if f.done {
		if !res.panicked {
			s.cfg.Logger.Debug("JFR repository read to the end", zap.String("repository", dir), zap.Int("pid", f.jvm.PID))
		}
		f.closeAll()
		delete(s.followers, dir)
		// A folder read to its end is not read again while it
		// exists; one that is gone is not remembered: HotSpot makes
		// a repository folder to probe that it can, deletes it, and
		// makes the real one, often within the same second and so
		// under the same name, which is then a new repository.
		if !f.gone {
			s.ended[dir] = true
			s.endedTicks[dir] = f.jvm.StartTicks
		}
	}
}

// Finish waits, at most pollTimeout, for the reads still running (left by
// a poll whose deadline passed) and hands on their batches as a poll
// does; it starts none. At shutdown, before the last checkpoint: what
// those reads found is sent, and the checkpoint says so.
func (s *Source) Finish(emit func(jvmevent.Batch)) {
	deadline := time.NewTimer(pollTimeout)
	defer deadline.Stop()
	for _, dir := range s.Following() {
		f := s.followers[dir]
		if f.inflight == nil {
			continue
		}
		select {
		case res := <-f.inflight.done:
			f.inflight = nil
			s.deliver(dir, f, res, emit)
		case <-deadline.C:
			return
		}
	}
}

// pollTimeout bounds how long the repositories' reads, which run at once,
// may hold a poll: a read that has not returned by then (a chunk file on a
// stalled FUSE or NFS mount in the JVM's container, or a busy host) goes on
// in its own goroutine, the others' batches are taken, and its batch is
// taken at a later poll.
var pollTimeout = 2 * time.Second

// pollResult is what one repository's poll produced.
type pollResult struct {
	batch    jvmevent.Batch
	err      error
	panicked bool
}

// startPoll polls f in a goroutine of its own unless a poll of it is
// still running; while it runs, only that goroutine touches f's reading
// state.
func (s *Source) startPoll(f *follower) {
	if f.inflight != nil {
		return
	}
	f.inflight = isolate(func() pollResult {
		b := jvmevent.Batch{JVM: f.jvm}
		err, panicked := s.pollIsolated(f, &b)
		return pollResult{batch: b, err: err, panicked: panicked}
	}, nil)
}

// awaitPoll takes f's poll result, waiting for it until deadline fires
// (not at all once expired says it has, or once f's read was reported
// stalled). It returns false (and, once per stall, an error saying so)
// while the poll is still running; f is then left alone until it ends.
// The third result says the deadline has fired.
func (s *Source) awaitPoll(f *follower, deadline <-chan time.Time, expired bool) (pollResult, bool, bool) {
	res, ok, first, fired := f.inflight.await(deadline, expired)
	switch {
	case ok:
		f.inflight = nil
		return res, true, fired
	case first:
		s.count(RefusedStalled)
		return pollResult{err: fmt.Errorf("repository %s: a read has not returned after %v; the repository is skipped until it does, the others are read", f.dir, pollTimeout)}, false, fired
	}
	return pollResult{}, false, fired
}

// pollIsolated polls one repository, turning a panic in its decoding into
// an error that disables it: one hostile chunk must not take down the
// source's other JVMs, nor the collector.
func (s *Source) pollIsolated(f *follower, b *jvmevent.Batch) (err error, panicked bool) {
	defer func() {
		v := recover()
		if v == nil {
			return
		}
		s.cfg.Logger.Error("panic while reading a JFR repository; it is no longer read",
			zap.String("repository", f.dir), zap.String("file", filepath.Base(f.path)), zap.Any("panic", v), zap.ByteString("stack", debug.Stack()))
		s.count(RefusedPanic)
		f.done = true
		err = fmt.Errorf("repository %s: chunk file %s: panic while decoding: %v (repository no longer read until its JVM restarts)", f.dir, filepath.Base(f.path), v)
		panicked = true
	}()
	return f.poll(b), false
}

// count reports one refusal.
func (s *Source) count(reason string) {
	if s.cfg.Refused != nil {
		s.cfg.Refused(reason)
	}
}

// Close closes every open chunk file and stops the recordings the source
// started. The recordings are stopped while the reads still running are
// waited for, each under its own deadline (the attach timeout and a grace;
// pollTimeout), so that calls hanging on stalled mounts hold it no longer
// than the longer of the two.
func (s *Source) Close() error {
	stopped := make(chan struct{})
	if s.starter != nil {
		go func() {
			defer close(stopped)
			s.starter.stopAll(s.scanner)
		}()
	} else {
		close(stopped)
	}
	defer func() { <-stopped }()
	for k, c := range s.looks {
		c.abandon() // what it opened is closed when it returns
		delete(s.looks, k)
	}
	// One deadline for all: reads that hang on as many stalled mounts
	// hold the shutdown no longer than one.
	deadline := time.NewTimer(pollTimeout)
	defer deadline.Stop()
	expired := false
	for dir, f := range s.followers {
		delete(s.followers, dir)
		if f.inflight != nil {
			var ok bool
			if _, ok, _, expired = f.inflight.await(deadline.C, expired); !ok {
				// Its read still hangs: the goroutine keeps the files it
				// reads; they are closed with the process.
				s.cfg.Logger.Warn("JFR repository still being read at shutdown; left open", zap.String("repository", dir))
				continue
			}
		}
		f.closeAll()
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
			s.cfg.Logger.Warn("no inotify instance (raise the node's fs.inotify.max_user_instances): JFR chunk files are found by polling only, so the last chunks of a JVM that exits between two polls may be deleted before they are read", zap.Error(err))
			s.noWatcher = true
			return nil
		}
		s.watcher = w
	}
	return s.watcher
}

// candidate is a repository folder found by a scan: the folder inside its
// root (opened by add, for a follower), and the name the collector gives it
// (the followers' key, and messages).
type candidate struct {
	inside     string
	dir        string
	info       os.FileInfo
	jvm        jvmevent.JVM
	discovered bool
	tenant     tenant // whom its chunk memory counts against
	alive      func() bool
}

// scanState is what one scan has found so far.
type scanState struct {
	found map[string]bool
	infos []os.FileInfo // folders found so far, to spot one reached by two paths
}

// scan finds repositories not yet followed.
func (s *Source) scan() error {
	st := &scanState{found: map[string]bool{}}
	var errs []error
	if s.scanner != nil {
		if err := s.scanDiscovered(st); err != nil {
			errs = append(errs, err)
		}
	}
	for _, pattern := range s.cfg.Include {
		if err := s.scanPattern(st, pattern); err != nil {
			errs = append(errs, err)
		}
	}
	// Forget ended repositories once they are gone, so the map stays small.
	for dir := range s.ended {
		if !st.found[dir] {
			delete(s.ended, dir)
			delete(s.endedTicks, dir)
		}
	}
	return errors.Join(errs...)
}

// scanDiscovered finds the repositories of the JVMs running in the proc
// root, each inside the JVM's own root. Every JVM's root is looked at in a
// goroutine of its own (lookAt), all at once, and waited for until one
// deadline, pollTimeout: a JVM whose /tmp hangs (a stalled FUSE or NFS
// mount in its container) is counted stalled and skipped, the others are
// followed, and its look is taken at the scan after it returns. A JVM
// whose look has not returned is not considered for attaching either.
func (s *Source) scanDiscovered(st *scanState) error {
	var errs []error
	jvms, refused, err := s.scanner.Scan()
	if err != nil {
		errs = append(errs, err)
	}
	for _, r := range refused {
		errs = append(errs, r.Err)
	}
	known := make(map[string]bool, len(s.followers)+len(s.ended))
	for dir := range s.followers {
		known[dir] = true
	}
	for dir := range s.ended {
		known[dir] = true
	}
	w := s.watch()
	alive := map[jvmKey]bool{}
	for _, j := range jvms {
		k := jvmKey{j.PID, j.StartTicks}
		alive[k] = true
		if s.looks[k] == nil {
			s.looks[k] = isolate(func() look { return s.lookAt(j, known, w) }, look.release)
		}
	}
	deadline := time.NewTimer(pollTimeout)
	defer deadline.Stop()
	expired := false
	for _, j := range jvms {
		k := jvmKey{j.PID, j.StartTicks}
		l, ok, first, fired := s.looks[k].await(deadline.C, expired)
		expired = fired
		if first {
			s.count(RefusedStalled)
			errs = append(errs, fmt.Errorf("repository: pid %d: looking for its repository folders in its root has not returned after %v; the JVM is skipped until it does, the others are read", j.PID, pollTimeout))
		}
		if !ok {
			continue
		}
		delete(s.looks, k)
		if err := s.addLooked(st, j, k, l); err != nil {
			errs = append(errs, err)
		}
		if s.starter != nil {
			if err := s.starter.consider(j, l.count > 0); err != nil {
				errs = append(errs, err)
			}
		}
	}
	for k, c := range s.looks {
		if !alive[k] {
			c.abandon()
			delete(s.looks, k)
		}
	}
	for k := range s.tooMany {
		if !alive[k] {
			delete(s.tooMany, k)
		}
	}
	if s.starter != nil {
		s.starter.forget(alive)
	}
	return errors.Join(errs...)
}

// look is what a look at one discovered JVM's root found: its repository
// folders, those not followed yet each opened for a follower (a root of
// its own) and watched.
type look struct {
	count int // folders found, before maxRepositoriesPerJVM
	repos []lookedRepository
}

// lookedRepository is one repository folder a look found.
type lookedRepository struct {
	inside string
	dir    string
	info   os.FileInfo
	root   *procroot.Root // nil when the folder was followed already
	early  *early         // nil without a watch
}

// release closes what a look opened; the source takes what it follows
// first (add).
func (l look) release() {
	for _, r := range l.repos {
		if r.early != nil {
			r.early.unwatch()
		}
		if r.root != nil {
			r.root.Close()
		}
	}
}

// lookAt finds the repository folders of j inside its root; every call on
// the JVM's files is made here, in the look's own goroutine. Folders in
// known (followed or ended when the scan began) are only named.
func (s *Source) lookAt(j discovery.JVM, known map[string]bool, w *watcher) look {
	root, err := j.OpenRoot()
	if err != nil {
		return look{} // exited, or not ours to read: nothing to follow
	}
	defer root.Close()
	repos := j.Repositories(root)
	l := look{count: len(repos)}
	if len(repos) > maxRepositoriesPerJVM {
		repos = repos[len(repos)-maxRepositoriesPerJVM:]
	}
	for _, inside := range repos {
		info, err := root.Stat(inside)
		if err != nil || !info.IsDir() {
			continue
		}
		r := lookedRepository{inside: inside, dir: root.Display(inside), info: info}
		if !known[r.dir] {
			if r.root, err = j.OpenRoot(); err != nil {
				continue
			}
			if w != nil {
				if r.early, err = w.watch(r.root, inside, r.dir); err != nil {
					s.cfg.Logger.Debug("cannot watch JFR repository; chunk files are found by polling only", zap.String("repository", r.dir), zap.Error(err))
				}
			}
		}
		l.repos = append(l.repos, r)
	}
	return l
}

// addLooked follows the repository folders a look at j found.
func (s *Source) addLooked(st *scanState, j discovery.JVM, k jvmKey, l look) error {
	var err error
	if l.count > maxRepositoriesPerJVM && !s.tooMany[k] {
		s.tooMany[k] = true
		s.count(RefusedTooMany)
		err = fmt.Errorf("repository: pid %d has %d repository folders; following the newest %d", j.PID, l.count, maxRepositoriesPerJVM)
	}
	scanner, pid, start := s.scanner, j.PID, j.StartTicks
	for _, r := range l.repos {
		c := candidate{inside: r.inside, dir: r.dir, info: r.info, discovered: true,
			jvm:   jvmevent.JVM{PID: pid, StartTicks: start, Source: r.dir},
			alive: func() bool { return scanner.Alive(pid, start) }}
		s.add(st, c, opened{root: r.root, early: r.early})
	}
	return err
}

// scanPattern finds the repository folders a configured pattern matches;
// each is its own root, so nothing inside it leads out of it.
func (s *Source) scanPattern(st *scanState, pattern string) error {
	matches, err := filepath.Glob(pattern)
	if err != nil {
		return fmt.Errorf("repository: pattern %q: %w", pattern, err)
	}
	for _, dir := range matches {
		fi, err := os.Stat(dir)
		if err != nil || !fi.IsDir() {
			continue
		}
		d := dir
		// The pid in the name is the JVM's own; it is the collector's
		// only when both share a pid namespace, so it is reported but not
		// used to tell whether the JVM runs: the folder is.
		c := candidate{inside: "/", dir: dir, info: fi,
			jvm: jvmevent.JVM{PID: discovery.RepositoryPID(dir), Source: dir},
			alive: func() bool {
				_, err := os.Stat(d)
				return err == nil
			}}
		if f := s.add(st, c, opened{open: func() (*procroot.Root, error) { return procroot.OpenDir(d) }}); f != nil && f.staleAfter == 0 {
			f.staleAfter = staleAfter
		}
	}
	return nil
}

// opened is how add gets a follower's root: opened and watched already
// (root, early; add owns them and closes what it does not follow), or by
// open, on the source's goroutine (a pattern's folder, the operator's).
// root nil and open nil: the folder was followed when it was looked at,
// and is not followed anew until a later look.
type opened struct {
	root  *procroot.Root
	early *early
	open  func() (*procroot.Root, error)
}

// release closes what add did not take.
func (o opened) release() {
	look{repos: []lookedRepository{{root: o.root, early: o.early}}}.release()
}

// add follows c unless it is followed (or ended) already or is a folder
// found before by another path; o gives the follower its own root. It
// returns the follower, nil when there is none.
func (s *Source) add(st *scanState, c candidate, o opened) *follower {
	if st.found[c.dir] {
		o.release()
		return nil
	}
	// A pattern may reach a discovered JVM's repository by another path
	// (/tmp/… rather than /proc/<pid>/root/tmp/…): follow it once, as the
	// discovered JVM, whose resource is richer.
	if slices.ContainsFunc(st.infos, func(o os.FileInfo) bool { return os.SameFile(o, c.info) }) {
		o.release()
		return nil
	}
	st.found[c.dir] = true
	st.infos = append(st.infos, c.info)
	if f := s.followers[c.dir]; f != nil || s.ended[c.dir] || s.endedBefore(c) {
		o.release()
		return f
	}
	root, e := o.root, o.early
	if root == nil {
		if o.open == nil {
			return nil
		}
		var err error
		if root, err = o.open(); err != nil {
			s.cfg.Logger.Debug("cannot open the root of a JFR repository", zap.String("repository", c.dir), zap.Error(err))
			return nil
		}
		if w := s.watch(); w != nil {
			if e, err = w.watch(root, c.inside, c.dir); err != nil {
				s.cfg.Logger.Debug("cannot watch JFR repository; chunk files are found by polling only", zap.String("repository", c.dir), zap.Error(err))
			}
		}
	}
	s.cfg.Logger.Debug("following JFR repository", zap.String("repository", c.dir), zap.Int("pid", c.jvm.PID))
	f := &follower{src: s, root: root, inside: c.inside, dir: c.dir, jvm: c.jvm, discovered: c.discovered, alive: c.alive, newest: !s.started, stream: jfrstream.New()}
	f.tenant = tenant{dir: c.dir}
	if c.discovered {
		f.tenant = tenant{pid: c.jvm.PID, start: c.jvm.StartTicks}
	}
	if pos, ok := s.cfg.Resume[c.dir]; ok {
		delete(s.cfg.Resume, c.dir) // once: a folder found again later is new
		if pos.StartTicks == c.jvm.StartTicks {
			f.resume(pos)
		}
	}
	f.watcher = s.watcher
	f.early = e
	f.folder = c.info
	if f.early != nil {
		f.folder = f.early.info
	}
	s.followers[c.dir] = f
	return f
}

// follower reads one repository.
type follower struct {
	src *Source
	// inflight is the poll running in its own goroutine (startPoll), nil
	// when none; while it runs, only that goroutine touches the
	// follower's reading state.
	inflight *isolated[pollResult]
	// ownPID is the pid the JVM reported for itself, as of the last poll
	// that ended (read by Followed while a poll may be running).
	ownPID int

	root       *procroot.Root // the JVM's root, or the pattern's folder; every file is opened inside it
	inside     string         // the folder, as a path inside root
	dir        string         // the folder as the collector names it: key and messages, never opened
	jvm        jvmevent.JVM
	discovered bool
	tenant     tenant // whom its chunk memory counts against
	alive      func() bool
	newest     bool  // start at the newest chunk rather than the first
	from       int64 // start of the first chunk opened (Unix ns), 0 before
	stream     *jfrstream.Stream

	file      *os.File
	path      string
	live      *jfr.LiveChunk
	lastStart int64 // start of the chunk read last; the next one starts later
	done      bool
	gone      bool        // done because the folder no longer exists
	folder    os.FileInfo // the folder followed (watched) now, to tell another one made under its name
	goneSince time.Time   // when the folder was found gone while the JVM runs (mayReturn), zero otherwise
	lastErr   string

	// held are chunk files opened before the follower got to them (by
	// name): by the watcher as the JVM created them, or by openNext
	// before the JVM wrote the header (the JVM creates the next chunk's
	// file before it finishes the current one). An open file stays
	// readable when the JVM deletes its repository at exit, which can
	// come before the next poll: a chunk begun just before exit may live
	// a few milliseconds.
	held    map[string]*os.File
	early   *early   // the watcher's, nil without one
	watcher *watcher // the source's, for watching the folder afresh; nil without one

	// refused are the file names refused, so that each is counted once
	// and not opened again; reported are the reasons already reported,
	// so that each is reported once per repository; notes are the
	// reports not yet returned by a poll.
	refused  map[string]bool
	reported map[string]bool
	notes    []error

	// staleAfter, when set, ends a follower whose repository has not grown
	// for that long: a folder found by a pattern has no process to watch,
	// and a JVM killed with a preserved repository leaves a chunk that is
	// never finished. (JVMs write periodic events every second or so.)
	staleAfter time.Duration
	grew       time.Time

	// Checkpoints (resume.go): the chunk whose sent windows sent holds,
	// the windows to drop (sent before a restart), the position resumed
	// from until a chunk is opened, and how many were dropped.
	ckChunk int64
	sent    map[uint64]bool
	skip    map[uint64]bool
	resumed *Position
	dropped int
}

// close closes the chunk file being read and gives its memory back.
func (f *follower) close() {
	if f.live != nil {
		f.src.memory.release(f.tenant, f.live.Held())
	}
	if f.file != nil {
		f.file.Close()
	}
	f.file, f.live, f.path = nil, nil, ""
}

// closeAll closes every file the follower holds, and its root; it is done.
func (f *follower) closeAll() {
	f.close()
	f.dropHeld()
	if f.root != nil {
		f.root.Close()
		f.root = nil
	}
}

func (f *follower) dropHeld() {
	if f.early != nil {
		// Before the root closes: the watcher opens files through it.
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

// refuse counts a refused file (name "" for the folder itself) once,
// remembers it so that it is not opened again, and notes err to be
// reported when the repository has not reported reason yet.
func (f *follower) refuse(reason, name string, err error) {
	if name != "" {
		if f.refused[name] {
			return
		}
		if f.refused == nil {
			f.refused = map[string]bool{}
		}
		if len(f.refused) < maxRefusedNames {
			f.refused[name] = true
		}
	}
	f.src.count(reason)
	if f.reported[reason] {
		f.src.cfg.Logger.Debug("JFR repository file refused", zap.String("repository", f.dir), zap.String("reason", reason), zap.Error(err))
		return
	}
	if f.reported == nil {
		f.reported = map[string]bool{}
	}
	f.reported[reason] = true
	f.notes = append(f.notes, err)
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
			case errors.Is(perr, jfr.ErrTooLarge):
				f.refuseChunk(perr)
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
		if f.src.beforeSegment != nil {
			f.src.beforeSegment(f.dir)
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

// refuseChunk counts and notes a chunk refused for its size: its header
// claims more than the per-chunk cap, or holding it would pass the
// repositories' shared budget or its JVM's share of it. The follower moves
// on to the next chunk.
func (f *follower) refuseChunk(perr error) {
	reason, limit := RefusedTooLarge, fmt.Sprintf("repositories::max_chunk_size_mib is %d bytes", f.src.cfg.MaxChunkSize)
	if errors.Is(perr, errOverBudget) {
		reason, limit = RefusedOverBudget, fmt.Sprintf("repositories::max_memory_mib is %d bytes, one JVM's share %d", f.src.cfg.MaxMemory, f.src.memory.share)
	}
	f.refuse(reason, "", fmt.Errorf("repository %s: chunk file %s refused: %w (%s; file skipped)", f.dir, filepath.Base(f.path), perr, limit))
}

// finish ends a poll: it lets out windows that waited long enough, marks
// the follower done when the JVM is gone, and returns err and the
// refusals noted, unless they were already reported.
func (f *follower) finish(b *jvmevent.Batch, exited bool, err error) error {
	f.stream.Flush(b, exited)
	if exited {
		// Everything the JVM flushed has been read, including a last
		// chunk it never finished (killed).
		f.done = true
	}
	notes := errors.Join(f.notes...)
	f.notes = nil
	if err != nil {
		if msg := err.Error(); msg != f.lastErr {
			f.lastErr = msg
			return errors.Join(err, notes)
		}
	}
	return notes
}

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

// nextChunk finds the chunk file that follows the last one read, among
// the folder's files and the held ones: the earliest that starts later
// (the newest for a repository found at start); name is "" when there is
// none yet. unwritten is the newest-named listed file without a header
// yet, and its type; gone says the folder no longer exists.
func (f *follower) nextChunk() (name string, start int64, unwritten fs.DirEntry, gone bool, err error) {
	f.takeEarly()
	l, err := f.list()
	if err != nil {
		return "", 0, nil, false, err
	}
	gone = l.gone
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
			return "", 0, nil, false, err
		}
		if gone = l.gone; gone && f.mayReturn() {
			gone = false
		}
	}
	better := func(s int64) bool {
		return s > f.lastStart && (name == "" || (f.newest && s > start) || (!f.newest && s < start))
	}
	for _, e := range l.entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".jfr") || f.held[e.Name()] != nil || f.refused[e.Name()] {
			continue
		}
		h, ok, opened := f.readHeader(e)
		if !ok {
			if opened && (unwritten == nil || e.Name() > unwritten.Name()) {
				unwritten = e
			}
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
	name, best, unwritten, gone, err := f.nextChunk()
	if err != nil {
		return false, err
	}
	if name == "" {
		if unwritten != nil {
			if file, ok := f.openChunk(unwritten.Name(), unwritten.Type()); ok {
				f.hold(unwritten.Name(), file)
			}
		}
		if gone {
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
