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
	"maps"
	"path/filepath"
	"runtime/debug"
	"slices"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/otelcol-ai/otelcol-ai/pkg/jfr"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/discovery"
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
func (s *Source) Following() []string { return slices.Sorted(maps.Keys(s.followers)) }

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
