package xlog

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/otelcol-ai/otelcol-ai/internal/fsdeadline"
	"github.com/otelcol-ai/otelcol-ai/internal/procresource"
	"github.com/otelcol-ai/otelcol-ai/internal/procroot"
	"github.com/otelcol-ai/otelcol-ai/internal/window"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/discovery"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/jvmevent"
)

// Config says which files to tail.
type Config struct {
	// Include are glob patterns of -Xlog output files.
	Include []string
	// FromStart reads files found at the first poll from their beginning
	// (else from their end). Files found later are read from the beginning.
	FromStart bool
	// DiscoveryInterval is how often the patterns are matched again.
	DiscoveryInterval time.Duration
	// Clock converts timenanos (CLOCK_MONOTONIC) to Unix time; nil measures
	// one.
	Clock *window.Clock
	// Scanner, when set, adds the files that discovered JVMs without a JFR
	// repository write their -Xlog output to.
	Scanner *discovery.Scanner
	// Logger receives debug messages about files coming and going.
	Logger *zap.Logger
	// Refused, when set, is called with the reason (Refused* constants)
	// for every file refused and every line dropped, once each.
	Refused func(reason string)
	// Resume are positions an earlier run saved (Source.Positions), by
	// path: a file followed with one is read on from it, whatever
	// FromStart says.
	Resume map[string]Position
	// Added, when set, returns the log outputs the receiver added to
	// running JVMs (their safepoint logs), asked at each scan: each is
	// followed from its start, inside its JVM's root, whether or not the
	// JVM records JFR, and its batches say Added.
	Added func() []Added
}

// Added is a log output the receiver added to a running JVM.
type Added struct {
	// JVM is the process (PID, StartTicks and ProcRoot are used).
	JVM discovery.JVM
	// Name is the file as the JVM names it.
	Name string
}

// Bounds on one poll of one file and on one line: a file holding more is
// read on at the next poll; a longer line (no newline within maxLine
// bytes) is dropped, never held whole.
const (
	maxReadPerPoll = 4 << 20
	maxLine        = 64 << 10
)

// Bounds on what a tenant's command line and files make the source follow.
// A JVM's -Xlog options and the folders they name are the tenant's to
// shape: a pattern matching thousands of files must not cost the agent
// thousands of descriptors, nor the others their logs.
const (
	// maxMatches bounds the files one pattern (an xlog::include pattern,
	// or a discovered JVM's -Xlog output) makes the source look at per
	// scan; the last names are kept (HotSpot's %t names sort by time).
	// One operator pattern may name a node's JVMs: a few hundred.
	maxMatches = 256
	// maxListed bounds the entries read from one folder while matching.
	maxListed = 4096
	// maxTailsPerJVM bounds the files followed for one discovered JVM (a
	// JVM writes one or two logs) and the -Xlog outputs looked at.
	maxTailsPerJVM = 8
	// maxTailsPerPod bounds the files followed for the JVMs of one pod
	// together, when the pod is known.
	maxTailsPerPod = 16
)

// pollTimeout bounds how long a poll waits for the reads and scans it
// starts, all at once, each in its own goroutine: one that has not
// returned by then (a file on a stalled FUSE or NFS mount in a JVM's
// container) is left running, reported stalled, not waited for again, and
// its result is taken at the poll after it returns.
var pollTimeout = fsdeadline.Timeout

// AttrWindowSource is set to "xlog" on windows read from a log.
const AttrWindowSource = jvmevent.AttrWindowSource

// Reasons a file or a line is refused (Config.Refused).
const (
	// RefusedNotRegular: a file matched or named where a log should be is
	// a FIFO, a device or a socket (opening a FIFO to read would block),
	// counted once each time one takes a log's place.
	RefusedNotRegular = "not_regular"
	// RefusedLineTooLong: a line ran past maxLine bytes without a newline;
	// it is dropped up to its newline.
	RefusedLineTooLong = "line_too_long"
	// RefusedTooMany: a pattern matched more than maxMatches files (or a
	// folder listed more than maxListed entries), a JVM has more than
	// maxTailsPerJVM logs, or a pod more than maxTailsPerPod; the rest are
	// not followed. Counted once per pattern, JVM or pod while it stays
	// over.
	RefusedTooMany = "too_many"
	// RefusedStalled: a read or a scan of a file's folder has not
	// returned within pollTimeout (a call hanging on its filesystem); the
	// file, or the JVM's scan, is skipped until it returns, the others are
	// read. Counted once per stall.
	RefusedStalled = "stalled"
)

// Source tails -Xlog files. Use it from one goroutine.
//
// A discovered JVM's files are the JVM's to shape: they are found and
// opened inside its root (package procroot), so `..` and symlinks never
// lead out of its container, and, like the files of the patterns, opened
// without blocking and read only when they are regular files, a bounded
// amount per poll. A refused file is reported once and the other files go
// on being read. What one JVM, pod or pattern makes the source follow is
// bounded (maxMatches, maxTailsPerJVM, maxTailsPerPod), and every call on
// a file or folder runs in a goroutine of its own (package fsdeadline): a
// call that hangs holds only its file or its JVM's scan.
type Source struct {
	cfg   Config
	clock *window.Clock
	files map[string]*tail
	roots map[rootKey]*heldRoot
	// refused are, by scan, the paths it refused last, reported already.
	refused map[scanKey]map[string]bool
	// over are the scans whose last result went over a bound, reported
	// already.
	over map[scanKey]bool
	// scans are the scans of a pattern or a JVM still running after the
	// poll that started them.
	scans map[scanKey]*scanCall
	// pods are the discovered JVMs' pods ("" unknown), read once each.
	pods     map[rootKey]string
	ids      *procresource.Reader // reads pods, made on first use
	resume   resumeSet
	started  bool
	rescan   bool // Rescan was called since the last scan
	lastScan time.Time
	lastSync time.Time
}

// NewSource returns a source; it reads nothing before the first Poll.
func NewSource(cfg Config) *Source {
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	if cfg.Refused == nil {
		cfg.Refused = func(string) {}
	}
	s := &Source{cfg: cfg, clock: cfg.Clock, files: map[string]*tail{}, roots: map[rootKey]*heldRoot{},
		refused: map[scanKey]map[string]bool{}, over: map[scanKey]bool{}, scans: map[scanKey]*scanCall{}, pods: map[rootKey]string{}}
	s.resume.positions = cfg.Resume
	s.cfg.Resume = nil
	return s
}

// Rescan makes the next Poll look for new files whatever the discovery
// interval: a process event or an announcement says a JVM appeared.
func (s *Source) Rescan() { s.rescan = true }

// Poll matches the patterns when due, then reads what every file gained.
// Reads and scans run at once, each in its own goroutine; Poll waits for
// them at most pollTimeout.
func (s *Source) Poll(ctx context.Context, emit func(jvmevent.Batch)) error {
	var errs []error
	if s.clock == nil {
		c, err := window.NewClock()
		if err != nil {
			return fmt.Errorf("xlog: %w", err)
		}
		s.clock, s.lastSync = c, time.Now()
	} else if s.cfg.Clock == nil && time.Since(s.lastSync) > 10*time.Second {
		// NTP slews the realtime clock: keep the mapping fresh.
		if err := s.clock.Remeasure(); err == nil {
			s.lastSync = time.Now()
		}
	}
	deadline, cancel := context.WithTimeout(ctx, pollTimeout)
	defer cancel()
	for _, p := range s.paths() {
		s.startRead(s.files[p])
	}
	if !s.started || s.rescan || time.Since(s.lastScan) >= s.cfg.DiscoveryInterval {
		errs = append(errs, s.scan(ctx, deadline))
		s.lastScan = time.Now()
		s.started, s.rescan = true, false
	}
	for _, p := range s.paths() {
		if ctx.Err() != nil {
			break
		}
		if err := s.deliver(deadline, p, s.files[p], emit); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// paths returns the followed files' paths, sorted.
func (s *Source) paths() []string {
	paths := make([]string, 0, len(s.files))
	for p := range s.files {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	return paths
}

// readResult is what one read of a tail found.
type readResult struct {
	batch    jvmevent.Batch
	err      error
	drained  bool // read to the end
	missing  bool // the file under the name is gone
	refusals []string
	pos      Position
	hasPos   bool // a file is open: pos says where it stands
	// longLines counts the lines dropped for their length, ever.
	longLines int
}

// startRead reads t in a goroutine of its own unless a read of it is still
// running or it is given up; while it runs, only that goroutine touches
// t's reading state.
func (s *Source) startRead(t *tail) {
	if t.reading != nil || t.gone {
		return
	}
	t.exited = t.alive != nil && !t.alive()
	clock := s.clock
	t.reading = fsdeadline.Start(func() readResult { return t.pollOnce(clock) })
}

// deliver takes t's read, waiting for it until deadline (not at all once
// it was reported stalled), and hands on what it found.
func (s *Source) deliver(deadline context.Context, p string, t *tail, emit func(jvmevent.Batch)) error {
	var errs []error
	b := jvmevent.Batch{}
	if t.reading != nil {
		wait := deadline
		if t.stalled {
			wait = expired
		}
		res, ok := t.reading.Wait(wait)
		if !ok {
			if t.stalled || !errors.Is(deadline.Err(), context.DeadlineExceeded) {
				return nil // reported already, or the poll is ending (shutdown)
			}
			t.stalled = true
			s.cfg.Refused(RefusedStalled)
			return fmt.Errorf("xlog: %s: a read has not returned after %v; the file is skipped until it does, the others are read", p, pollTimeout)
		}
		t.reading, t.stalled = nil, false
		for _, r := range res.refusals {
			s.cfg.Refused(r)
		}
		b = res.batch
		t.pos, t.hasPos, t.pid = res.pos, res.hasPos, res.batch.JVM.PID
		if res.missing || t.exited && res.drained {
			t.gone = true // read to the end; the JVM writes no more
		}
		if res.err != nil {
			if msg := res.err.Error(); msg != t.lastErr {
				t.lastErr = msg
				errs = append(errs, res.err)
			}
		}
		if res.longLines > 0 && !t.longReported {
			t.longReported = true
			errs = append(errs, fmt.Errorf("xlog: %s: a line longer than %d bytes dropped (later ones are counted, not reported)", p, maxLine))
		}
	}
	b.JVM = jvmevent.JVM{PID: t.pid, Source: p}
	if t.jvm != nil {
		b.JVM = *t.jvm
	}
	b.Added = t.added
	if t.gone {
		b.Ended = true
		s.end(p, t)
		s.cfg.Logger.Debug("stopped tailing -Xlog file", zap.String("file", p))
	}
	if !b.Empty() || b.Ended {
		emit(b)
	}
	return errors.Join(errs...)
}

func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

// expired is a context that has ended: waiting on it takes only what is
// there.
var expired = func() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}()

// Close closes every open file and root. It waits at most pollTimeout for
// the reads and scans still running; one that still hangs then closes what
// it holds itself when it returns.
func (s *Source) Close() error {
	deadline, cancel := context.WithTimeout(context.Background(), pollTimeout)
	defer cancel()
	for p, t := range s.files {
		delete(s.files, p)
		if t.reading != nil {
			if _, ok := t.reading.Wait(deadline); !ok {
				root := t.held
				t.reading.Abandon(func(readResult) {
					t.close()
					root.release()
				})
				s.cfg.Logger.Warn("-Xlog file still being read at shutdown; closed when the read returns", zap.String("file", p))
				continue
			}
		}
		t.close()
		t.held.release()
	}
	for k, c := range s.scans {
		delete(s.scans, k)
		if res, ok := c.call.Wait(deadline); ok {
			res.discard()
			c.root.releaseIfHeld()
			continue
		}
		root := c.root
		c.call.Abandon(func(res scanResult) {
			res.discard()
			root.releaseIfHeld()
		})
	}
	clear(s.roots)
	return nil
}

func (s *Source) end(p string, t *tail) {
	t.close()
	s.release(t.held)
	delete(s.files, p)
}

// rootKey names a root: a discovered JVM's (pid and start time), or the
// host's (the zero key) for the patterns' files.
type rootKey struct {
	pid   int
	start uint64
}

// heldRoot is a root shared by the tails of its files and the scans
// running in it, closed when the last of them lets it go. holds is atomic:
// a read or scan abandoned at Close lets go from its own goroutine.
type heldRoot struct {
	*procroot.Root
	key   rootKey
	holds atomic.Int32
}

// release lets the root go, closing it with the last hold.
func (r *heldRoot) release() {
	if r.holds.Add(-1) == 0 {
		r.Close()
	}
}

// releaseIfHeld releases r unless it is nil.
func (r *heldRoot) releaseIfHeld() {
	if r != nil {
		r.release()
	}
}

// hold returns the root of key held once more, or nil when none is open.
func (s *Source) hold(key rootKey) *heldRoot {
	r := s.roots[key]
	if r != nil {
		r.holds.Add(1)
	}
	return r
}

// adopt makes root, opened by a scan, the root of key, held once; a root
// opened meanwhile for key is kept instead.
func (s *Source) adopt(key rootKey, root *procroot.Root) *heldRoot {
	if r := s.hold(key); r != nil {
		root.Close()
		return r
	}
	r := &heldRoot{Root: root, key: key}
	r.holds.Store(1)
	s.roots[key] = r
	return r
}

func (s *Source) release(r *heldRoot) {
	if r.holds.Add(-1) == 0 {
		r.Close()
		if s.roots[r.key] == r {
			delete(s.roots, r.key)
		}
	}
}

// hostRoot opens the collector's own root, where the patterns (paths the
// operator gave) resolve as usual, symlinks included, but magic links do
// not and only regular files are read.
func hostRoot() (*procroot.Root, error) { return procroot.OpenDir("/") }

// resumeSet holds the positions an earlier run saved, each taken by the
// first follow of its path (from a scan's goroutine).
type resumeSet struct {
	mu        sync.Mutex
	positions map[string]Position
}

// take returns the saved position of path, once.
func (r *resumeSet) take(path string) (Position, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	pos, ok := r.positions[path]
	if ok {
		delete(r.positions, path)
	}
	return pos, ok
}

// scanKey names a scan: a pattern's (by index in Config.Include) or a
// discovered JVM's.
type scanKey struct {
	pattern int // 1 + the pattern's index; 0 for a JVM
	jvm     rootKey
	added   bool // the JVM's added outputs (Config.Added), not its own
}

// scanCall is a scan running in its own goroutine, in root (held for it;
// nil when the scan opens the JVM's root itself).
type scanCall struct {
	call    *fsdeadline.Call[scanResult]
	root    *heldRoot
	jvm     *discovery.JVM
	pod     string
	stalled bool
}

// scanResult is what a scan found: tails opened, ready to follow.
type scanResult struct {
	root     *procroot.Root // the JVM's root, when the scan opened it
	gone     bool           // the JVM exited before its root was opened
	jfr      bool           // the JVM records JFR: its logs are not read
	tails    []*tail
	refused  []string // paths refused (not regular files), to report once
	errs     []error
	refusals []string
	over     bool // a bound left files out
}

// discard closes what the scan opened.
func (r *scanResult) discard() {
	for _, t := range r.tails {
		t.close()
	}
	if r.root != nil {
		r.root.Close()
	}
}

// owner is whose bounds a tail counts against.
type owner struct {
	pattern int // 1 + the pattern's index; 0 for a JVM's file
	jvm     rootKey
	pod     string // "" outside a pod, or unknown
}

func (o owner) String() string {
	if o.pattern > 0 {
		return fmt.Sprintf("pattern %d", o.pattern-1)
	}
	return fmt.Sprintf("jvm %d/%d", o.jvm.pid, o.jvm.start)
}

// room returns how many more files o may follow, and the owner whose
// bound limits it (o, or its pod).
func (s *Source) room(o owner) (int, string) {
	mine, pod := 0, 0
	for _, t := range s.files {
		if t.owner.pattern == o.pattern && t.owner.jvm == o.jvm {
			mine++
		}
		if o.pod != "" && t.owner.pod == o.pod {
			pod++
		}
	}
	bound := maxTailsPerJVM
	if o.pattern > 0 {
		bound = maxMatches
	}
	room, who := bound-mine, o.String()
	if o.pod != "" && maxTailsPerPod-pod < room {
		room, who = maxTailsPerPod-pod, "pod "+o.pod
	}
	return max(room, 0), who
}

// scan starts a scan of every pattern and every discovered JVM not being
// scanned already, each in its own goroutine, and follows the files of
// those that return before deadline (or have returned since an earlier
// poll left them running).
func (s *Source) scan(ctx, deadline context.Context) error {
	var errs []error
	seen := map[scanKey]bool{}
	fromStart := s.started || s.cfg.FromStart // a file that appears after the first scan is new: read it all
	if len(s.cfg.Include) > 0 && s.roots[rootKey{}] == nil {
		root, err := hostRoot()
		if err != nil {
			return fmt.Errorf("xlog: %w", err)
		}
		s.adopt(rootKey{}, root)
		defer s.release(s.roots[rootKey{}])
	}
	for i, pattern := range s.cfg.Include {
		key := scanKey{pattern: i + 1}
		seen[key] = true
		if s.scans[key] != nil {
			continue
		}
		abs, err := filepath.Abs(pattern)
		if err != nil {
			errs = append(errs, fmt.Errorf("xlog: pattern %q: %w", pattern, err))
			continue
		}
		o := owner{pattern: i + 1}
		s.startScan(key, s.hold(rootKey{}), nil, o, func(root *procroot.Root, room int, followed func(string) bool, prev map[string]bool) scanResult {
			var r scanResult
			matches, over, err := glob(root, abs)
			if err != nil {
				r.errs = append(r.errs, fmt.Errorf("xlog: pattern %q: %w", pattern, err))
			}
			r.over = over
			s.openMatches(&r, root, matches, nil, room, followed, prev, fromStart)
			return r
		})
	}
	if s.cfg.Scanner != nil {
		jvms, refusals, err := s.cfg.Scanner.Scan()
		if err != nil {
			errs = append(errs, fmt.Errorf("xlog: %w", err))
		}
		for _, r := range refusals {
			errs = append(errs, fmt.Errorf("xlog: %w", r.Err))
		}
		for _, j := range jvms {
			key := scanKey{jvm: rootKey{j.PID, j.StartTicks}}
			if len(j.XLogFiles) == 0 {
				continue
			}
			seen[key] = true
			if s.scans[key] != nil {
				continue
			}
			s.startJVMScan(key, j, fromStart)
		}
	}
	if s.cfg.Added != nil {
		for _, a := range s.cfg.Added() {
			key := scanKey{jvm: rootKey{a.JVM.PID, a.JVM.StartTicks}, added: true}
			seen[key] = true
			if s.scans[key] == nil {
				s.startAddedScan(key, a)
			}
		}
	}
	keys := make([]scanKey, 0, len(s.scans))
	for k := range s.scans {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b scanKey) int { // patterns in order, then JVMs by pid
		rank := func(k scanKey) int { return cmp.Or(k.pattern, len(s.cfg.Include)+1) }
		return cmp.Or(cmp.Compare(rank(a), rank(b)), cmp.Compare(a.jvm.pid, b.jvm.pid), cmpBool(a.added, b.added))
	})
	for _, k := range keys {
		if ctx.Err() != nil {
			break
		}
		c := s.scans[k]
		wait := deadline
		if c.stalled {
			wait = expired
		}
		res, ok := c.call.Wait(wait)
		if !ok {
			if !c.stalled && errors.Is(deadline.Err(), context.DeadlineExceeded) && ctx.Err() == nil {
				c.stalled = true
				s.cfg.Refused(RefusedStalled)
				errs = append(errs, fmt.Errorf("xlog: the scan of %s has not returned after %v; it is skipped until it does, the other files are read", s.scanName(k), pollTimeout))
			}
			continue
		}
		delete(s.scans, k)
		errs = append(errs, s.follow(k, c, res, seen[k])...)
	}
	for k := range s.refused {
		if !seen[k] && s.scans[k] == nil {
			delete(s.refused, k)
			delete(s.over, k)
		}
	}
	for k := range s.pods {
		own, added := scanKey{jvm: k}, scanKey{jvm: k, added: true}
		if !seen[own] && s.scans[own] == nil && !seen[added] && s.scans[added] == nil {
			delete(s.pods, k)
		}
	}
	return errors.Join(errs...)
}

// scanName names a scan in messages.
func (s *Source) scanName(k scanKey) string {
	if k.pattern > 0 {
		return fmt.Sprintf("pattern %q", s.cfg.Include[k.pattern-1])
	}
	if k.added {
		return fmt.Sprintf("the safepoint log of pid %d", k.jvm.pid)
	}
	return fmt.Sprintf("the -Xlog files of pid %d", k.jvm.pid)
}

// scanWork is a scan's filesystem work, run in its own goroutine: root is
// where it matches (held for it), room how many files it may open,
// followed says which are followed already, prev which were refused at the
// last scan (read-only).
type scanWork func(root *procroot.Root, room int, followed func(string) bool, prev map[string]bool) scanResult

// startScan starts work for key in root (nil: a JVM's, opened by the work).
func (s *Source) startScan(key scanKey, root *heldRoot, jvm *discovery.JVM, o owner, work scanWork) {
	room, _ := s.room(o)
	followed := map[string]bool{}
	for p, t := range s.files {
		if t.owner.pattern == o.pattern && t.owner.jvm == o.jvm {
			followed[p] = true
		}
	}
	prev := s.refused[key]
	c := &scanCall{root: root, jvm: jvm, pod: o.pod}
	var r *procroot.Root
	if root != nil {
		r = root.Root
	}
	c.call = fsdeadline.Start(func() scanResult {
		return work(r, room, func(p string) bool { return followed[p] }, prev)
	})
	s.scans[key] = c
}

// startJVMScan starts the scan of a discovered JVM's -Xlog files.
func (s *Source) startJVMScan(key scanKey, j discovery.JVM, fromStart bool) {
	o := owner{jvm: key.jvm, pod: s.podOf(key.jvm, j)}
	jvm := j
	s.startScan(key, s.hold(key.jvm), &jvm, o, func(root *procroot.Root, room int, followed func(string) bool, prev map[string]bool) scanResult {
		var r scanResult
		if root == nil {
			opened, err := j.OpenRoot()
			if err != nil {
				r.gone = true // exited since it was listed
				return r
			}
			root, r.root = opened, opened
		}
		if j.StartsRecording || len(j.Repositories(root)) > 0 {
			r.jfr = true
			return r
		}
		patterns := j.XLogFiles
		if len(patterns) > maxTailsPerJVM {
			patterns, r.over = patterns[:maxTailsPerJVM], true
		}
		id := func(name string) *jvmevent.JVM {
			return &jvmevent.JVM{PID: j.PID, StartTicks: j.StartTicks, Source: root.Display(name)}
		}
		for _, pattern := range patterns {
			matches, over, _ := glob(root, pattern)
			r.over = r.over || over
			s.openMatches(&r, root, matches, id, room, followed, prev, fromStart)
		}
		return r
	})
}

// podOf returns the pod of a discovered JVM ("" outside one, or unknown),
// read once.
func (s *Source) podOf(k rootKey, j discovery.JVM) string {
	pod, ok := s.pods[k]
	if !ok {
		if s.ids == nil {
			s.ids = procresource.NewReader(j.ProcRoot, 0)
		}
		if id, err := s.ids.Identity(j.PID); err == nil && id.StartTicks == j.StartTicks {
			pod = id.PodUID
		}
		s.pods[k] = pod
	}
	return pod
}

// startAddedScan starts the scan of an output added to a JVM: the one file,
// from its start (the JVM created it when the output was added; a later
// collector resumes from its saved position), counted against the JVM's
// bounds like its own logs.
func (s *Source) startAddedScan(key scanKey, a Added) {
	j := a.JVM
	o := owner{jvm: key.jvm, pod: s.podOf(key.jvm, j)}
	s.startScan(key, s.hold(key.jvm), &j, o, func(root *procroot.Root, room int, followed func(string) bool, prev map[string]bool) scanResult {
		var r scanResult
		if root == nil {
			opened, err := j.OpenRoot()
			if err != nil {
				r.gone = true
				return r
			}
			root, r.root = opened, opened
		}
		id := func(name string) *jvmevent.JVM {
			return &jvmevent.JVM{PID: j.PID, StartTicks: j.StartTicks, Source: root.Display(name)}
		}
		s.openMatches(&r, root, []string{a.Name}, id, room, followed, prev, true)
		for _, t := range r.tails {
			t.added = true
		}
		return r
	})
}

// openMatches opens the matched files not followed yet, the last names
// first, at most room of them (r.over when more were left).
func (s *Source) openMatches(r *scanResult, root *procroot.Root, matches []string, id func(string) *jvmevent.JVM, room int, followed func(string) bool, prev map[string]bool, fromStart bool) {
	for _, name := range slices.Backward(matches) {
		p := root.Display(name)
		if followed(p) {
			continue
		}
		if len(r.tails) >= room {
			r.over = true
			return
		}
		t := &tail{name: name, path: p, refusedNow: prev[p]}
		if id != nil {
			t.jvm = id(name)
		}
		err := t.follow(root, s.resume.take, fromStart, s.cfg.Logger)
		r.refusals, t.refusals = append(r.refusals, t.refusals...), nil
		if errors.Is(err, procroot.ErrNotRegular) {
			r.refused = append(r.refused, p)
			if !prev[p] {
				r.errs = append(r.errs, err)
			}
			continue
		}
		if err != nil {
			r.errs = append(r.errs, err)
			continue
		}
		if t.file != nil {
			r.tails = append(r.tails, t)
		}
	}
}

// follow takes a scan's result: its files are followed, within the bounds
// of their owner (checked again: other scans may have added files). current
// says the scan's pattern or JVM is still there.
func (s *Source) follow(k scanKey, c *scanCall, res scanResult, current bool) []error {
	errs := res.errs
	for _, r := range res.refusals {
		s.cfg.Refused(r)
	}
	refused := make(map[string]bool, len(res.refused))
	for _, p := range res.refused {
		refused[p] = true
	}
	s.refused[k] = refused
	if res.gone || !current {
		res.discard()
		if c.root != nil {
			s.release(c.root)
		}
		return errs
	}
	root := c.root
	if res.root != nil {
		root = s.adopt(k.jvm, res.root)
	}
	defer s.release(root)
	if res.jfr {
		// JFR tells more, and the repository source reads it: stop
		// tailing a log begun before the recording (started by attach,
		// say), so no pause is reported twice.
		for _, t := range s.files {
			if t.owner.pattern == 0 && t.owner.jvm == k.jvm && !t.added {
				t.gone = true
			}
		}
		return errs
	}
	o := owner{pattern: k.pattern, jvm: k.jvm, pod: c.pod}
	over, who := res.over, o.String()
	for _, t := range res.tails {
		room, limit := s.room(o)
		if s.files[t.path] != nil || room == 0 {
			if room == 0 {
				over, who = true, limit
			}
			t.close()
			continue
		}
		t.held, t.owner = root, o
		if t.jvm != nil {
			t.alive = s.aliveFunc(c.jvm, k.jvm)
		}
		root.holds.Add(1)
		s.files[t.path] = t
		s.cfg.Logger.Debug("tailing -Xlog file", zap.String("file", t.path))
		s.startRead(t)
	}
	if over && !s.over[k] {
		if room, limit := s.room(o); room == 0 {
			who = limit
		}
		s.cfg.Refused(RefusedTooMany)
		errs = append(errs, fmt.Errorf("xlog: %s: more -Xlog files than the bounds allow (%d per pattern, %d per JVM, %d per pod; %s is at its bound); the rest are not followed", s.scanName(k), maxMatches, maxTailsPerJVM, maxTailsPerPod, who))
	}
	s.over[k] = over
	return errs
}

// aliveFunc returns whether the discovered JVM k still runs, for its tails.
func (s *Source) aliveFunc(j *discovery.JVM, k rootKey) func() bool {
	if s.cfg.Scanner != nil {
		scanner := s.cfg.Scanner
		return func() bool { return scanner.Alive(k.pid, k.start) }
	}
	if s.ids == nil && j != nil {
		s.ids = procresource.NewReader(j.ProcRoot, 0)
	}
	ids := s.ids
	return func() bool { return ids == nil || discovery.Alive(ids, k.pid, k.start) }
}

// glob returns the names inside root that match pattern, as procroot's
// Glob does, bounded: at most maxListed entries of any folder are read and
// the last maxMatches names of each step are kept; over says some were
// left out.
func glob(root *procroot.Root, pattern string) (matches []string, over bool, err error) {
	if _, err := filepath.Match(pattern, ""); err != nil {
		return nil, false, err
	}
	matches = []string{"/"}
	for _, part := range strings.Split(strings.TrimPrefix(filepath.Clean("/"+pattern), "/"), "/") {
		if part == "" {
			continue
		}
		var next []string
		for _, dir := range matches {
			if !strings.ContainsAny(part, `*?[\`) {
				p := filepath.Join(dir, part)
				if _, err := root.Stat(p); err == nil {
					next = append(next, p)
				}
				continue
			}
			names, more := list(root, dir)
			over = over || more
			for _, n := range names {
				if ok, _ := filepath.Match(part, n); ok {
					next = append(next, filepath.Join(dir, n))
				}
			}
		}
		slices.Sort(next)
		if len(next) > maxMatches {
			next, over = next[len(next)-maxMatches:], true
		}
		matches = next
	}
	return matches, over, nil
}

// list returns at most maxListed names in the folder dir inside root, and
// whether there were more.
func list(root *procroot.Root, dir string) ([]string, bool) {
	d, err := root.OpenDirectory(dir)
	if err != nil {
		return nil, false
	}
	defer d.Close()
	names, _ := d.Readdirnames(maxListed + 1)
	if len(names) > maxListed {
		return names[:maxListed], true
	}
	return names, false
}

// follow opens the file a tail follows: from a saved position, else from
// its start or end. A file that is not a regular one is refused
// (procroot.ErrNotRegular); one that does not exist (a folder, a name
// gone) is no tail.
func (t *tail) follow(root *procroot.Root, resume func(string) (Position, bool), fromStart bool, logger *zap.Logger) error {
	t.root = root
	fi, err := root.Stat(t.name)
	if err != nil || fi.IsDir() {
		return nil
	}
	if !fi.Mode().IsRegular() {
		if !t.refusedNow {
			t.refusals = append(t.refusals, RefusedNotRegular)
		}
		return fmt.Errorf("xlog: %s: %w (%s)", t.path, procroot.ErrNotRegular, kind(fi.Mode()))
	}
	if pos, ok := resume(t.path); ok {
		// The first follow only: later ones are new files.
		return t.resume(pos, logger)
	}
	return t.open(fromStart) // counts a refusal itself
}

// kind names what a refused file is, as procroot's errors do.
func kind(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "FIFO"
	case m&fs.ModeCharDevice != 0:
		return "character device"
	case m&fs.ModeDevice != 0:
		return "block device"
	case m&fs.ModeSocket != 0:
		return "socket"
	}
	return m.Type().String()
}

// tail follows one file by name: when the JVM rotates it (renames it and
// starts a new file under the name), the old file is read to its end and
// the new one from its start.
//
// Its reading state is touched by one goroutine at a time: the scan's
// that opens it, then each read's (Source.startRead); the rest by the
// source's goroutine.
type tail struct {
	held    *heldRoot                    // root, held by the source while the tail is followed
	owner   owner                        // whose bounds it counts against
	jvm     *jvmevent.JVM                // the discovered JVM writing the file, nil for a pattern's
	alive   func() bool                  // whether that JVM still runs
	reading *fsdeadline.Call[readResult] // the read running, if any
	stalled bool                         // reading was reported stalled
	exited  bool                         // the JVM had exited when reading began
	gone    bool                         // given up: read to its end, or the JVM records JFR now
	added   bool                         // an output added to the JVM (Config.Added)
	pid     int                          // the pid decorator, from the last read
	lastErr string
	// longReported: a dropped long line was reported.
	longReported bool
	// pos is where the last read left the file (hasPos: one is open).
	pos    Position
	hasPos bool

	// The reading state.
	root *procroot.Root // where name resolves
	name string         // the file as the JVM (or, for a pattern's, the collector) names it
	path string         // root.Display(name): how it is reported
	file *os.File
	dev  uint64
	ino  uint64
	// chain are files rotated while the collector was down, after the
	// one being read: read whole, in order, before the file under name.
	chain []*os.File
	// lastRead are the files read to their end last (a rotation's old
	// file), never taken for ones rotated after them.
	lastRead [4]fileKey
	head     uint64 // Position.Head of file, once headLen is headBytes
	headLen  int
	// offset is where the next line starts: bytes after it, a line
	// without its newline yet, are read again at the next poll rather than
	// held.
	offset  int64
	drained bool // the last poll read the file to its end
	missing bool // the file under the name is gone
	// skipping: inside a line longer than maxLine, dropped up to its
	// newline.
	skipping   bool
	longLines  int
	refusedNow bool     // the file under the name is not a regular one
	refusals   []string // counted by the source when the read returns
	linePID    int

	// Uptime calibration: bounds on the JVM's start in Unix ns, narrowed by
	// every line that has both an absolute time (ms) and an uptime.
	startLow, startHigh int64
	collector           string
	// zgc is generational ZGC's recent collections (Major, Minor) by GC id.
	zgc zgcKinds
}

// readBuffers are the reads' buffers, one per read running, so that an
// idle file holds none: a line and its newline fit.
var readBuffers = sync.Pool{New: func() any { b := make([]byte, maxLine+1); return &b }}

// pollOnce reads what the file gained, in a read's goroutine.
func (t *tail) pollOnce(clock *window.Clock) readResult {
	var r readResult
	buf := readBuffers.Get().(*[]byte)
	defer readBuffers.Put(buf)
	r.err = t.poll(clock, *buf, &r.batch)
	r.drained, r.missing, r.longLines = t.drained, t.missing, t.longLines
	r.batch.JVM.PID = t.linePID
	r.refusals, t.refusals = t.refusals, nil
	if t.file != nil {
		if t.headLen < headBytes {
			t.head, t.headLen = headOf(t.file, headBytes)
		}
		r.pos, r.hasPos = t.position(), true
	}
	return r
}

// open opens the file (a regular one, without blocking), positioned at its
// end unless fromStart.
func (t *tail) open(fromStart bool) error {
	f, err := t.root.OpenFile(t.name)
	if err != nil {
		if errors.Is(err, procroot.ErrNotRegular) && !t.refusedNow {
			t.refusedNow = true
			t.refusals = append(t.refusals, RefusedNotRegular)
		}
		return fmt.Errorf("xlog: %w", err)
	}
	t.refusedNow = false
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return fmt.Errorf("xlog: %s: %w", t.path, err)
	}
	t.file, t.offset = f, 0
	t.dev, t.ino = identity(fi)
	t.headLen = 0
	t.skipping = false
	if !fromStart {
		t.offset = fi.Size()
	}
	return nil
}

func (t *tail) close() {
	t.closeChain()
	if t.file != nil {
		t.file.Close()
		t.file = nil
	}
}

// poll reads new lines; on rotation it finishes the old file first, then
// the files rotated after it, if any, then the new file under the name.
func (t *tail) poll(clock *window.Clock, buf []byte, b *jvmevent.Batch) error {
	if t.file == nil {
		t.drained = true
		if err := t.open(true); err != nil {
			if errors.Is(err, os.ErrNotExist) {
				t.missing = true
				return nil
			}
			return err
		}
	}
	t.drained = false
	// Each turn reads a file to its end and goes on to the next one: the
	// rest of the chain of files rotated while the collector was down,
	// the files rotated since the last poll, the new file.
	for range maxChain + 2 {
		drained, err := t.read(clock, buf, b)
		if err != nil || !drained {
			// A read error ends the file's reading until it is opened
			// again; the rest of a long file is read at the next poll.
			t.drained = drained && len(t.chain) == 0
			return err
		}
		if len(t.chain) > 0 {
			if err := t.next(); err != nil {
				return err
			}
			continue
		}
		fi, err := t.root.Stat(t.name)
		switch {
		case errors.Is(err, os.ErrNotExist):
			t.missing, t.drained = true, true
			return nil
		case err != nil:
			return fmt.Errorf("xlog: %w", err)
		case !sameFile(fi, t.dev, t.ino):
			// Rotated. The writer may have added lines to the old file
			// between the read above and the rename: it is read to its end
			// once more. Files renamed after it (more than one rotation
			// since the last poll) are read next, oldest first; then the
			// new file from its start (it may be no regular file: then
			// nothing is read until one is).
			if drained, err := t.read(clock, buf, b); err != nil || !drained {
				return err
			}
			if t.chain = t.rotatedAfter(fi); len(t.chain) > 0 {
				if err := t.next(); err != nil {
					return err
				}
				continue
			}
			t.readDone()
			t.close()
			if err := t.open(true); err != nil {
				return err
			}
			continue
		case fi.Size() < t.offset:
			// Truncated in place (copytruncate): start over.
			t.offset, t.skipping = 0, false
		}
		t.drained = true
		return nil
	}
	return nil // more files than a poll reads: the next one goes on
}

// read reads what the file gained since offset, at most maxReadPerPoll
// bytes, and reports whether it reached the end. A read error ends the
// file's reading (drained) until it is opened again. buf holds a line and
// its newline: the start of a line is read again at the next poll rather
// than kept.
func (t *tail) read(clock *window.Clock, buf []byte, b *jvmevent.Batch) (drained bool, err error) {
	held := 0 // buf[:held]: the start of a line, from offset on
	for read := 0; read < maxReadPerPoll; {
		n, err := t.file.ReadAt(buf[held:held+min(len(buf)-held, maxReadPerPoll-read)], t.offset+int64(held))
		read += n
		held = t.lines(buf[:held+n], held, clock, b)
		if err == io.EOF || (err == nil && n == 0) {
			return true, nil
		}
		if err != nil {
			return true, fmt.Errorf("xlog: %s: %w", t.path, err)
		}
	}
	return false, nil
}

// lines takes the whole lines at data's start (data[:from] holds no
// newline), moving offset past them, and moves what follows, the start of
// a line, to data's start: it returns how long that is. A line longer than
// maxLine is dropped up to its newline.
func (t *tail) lines(data []byte, from int, clock *window.Clock, b *jvmevent.Batch) int {
	start := 0
	for {
		i := bytes.IndexByte(data[max(start, from):], '\n')
		if i < 0 {
			break
		}
		end := max(start, from) + i
		line := data[start:end]
		start = end + 1
		t.offset += int64(len(line)) + 1
		switch {
		case t.skipping:
			t.skipping = false // the end of the dropped line
		case len(line) > maxLine:
			t.dropLine()
			t.skipping = false
		default:
			t.line(string(line), clock, b)
		}
	}
	rest := data[start:]
	if !t.skipping && len(rest) > maxLine {
		t.dropLine()
	}
	if t.skipping {
		t.offset += int64(len(rest))
		return 0
	}
	return copy(data, rest)
}

// dropLine gives up the line being read: it is longer than maxLine.
func (t *tail) dropLine() {
	t.skipping = true
	t.longLines++
	t.refusals = append(t.refusals, RefusedLineTooLong)
}

// line turns one log line into what it says.
func (t *tail) line(s string, clock *window.Clock, b *jvmevent.Batch) {
	l, ok := ParseLine(s)
	if !ok {
		return
	}
	l.Resolve(clock.ToUnixNano)
	if l.PID != 0 {
		t.linePID = l.PID
	}
	if l.Epoch != 0 && l.UptimeSet {
		// The absolute decorators have ms resolution: the start lies in
		// [epoch − uptime, epoch + 1 ms − uptime).
		lo, hi := l.Epoch-l.Uptime, l.Epoch+int64(time.Millisecond)-l.Uptime
		if t.startHigh == 0 {
			t.startLow, t.startHigh = lo, hi
		} else {
			t.startLow, t.startHigh = max(t.startLow, lo), min(t.startHigh, hi)
			if t.startLow > t.startHigh { // inconsistent (a clock step): start over
				t.startLow, t.startHigh = lo, hi
			}
		}
	}
	if c, ok := strings.CutPrefix(l.Message, "Using "); ok && l.Tags == "gc" {
		t.collector = c // "G1", "Parallel", "The Z Garbage Collector", …
	}
	end := t.when(l, clock)
	if end == 0 {
		return
	}
	if sp, ok := ParseSafepoint(l.Message); ok {
		attrs := map[string]any{AttrWindowSource: "xlog"}
		if sp.Operation != "" {
			attrs[window.AttrJVMVMOperation] = sp.Operation
		}
		b.Windows = append(b.Windows, window.Window{Kind: window.KindJVMSafepoint, Start: end - int64(sp.Total), Duration: sp.Total, Attributes: attrs})
		b.Safepoints = append(b.Safepoints, jvmevent.Safepoint{End: end, Duration: sp.Total, TimeToSafepoint: sp.Reaching, Operation: sp.Operation})
		return
	}
	if l.Tags != "gc" && l.Tags != "gc,phases" {
		return
	}
	t.zgc.note(l.Message)
	if p, ok := ParsePause(l.Message); ok {
		attrs := map[string]any{AttrWindowSource: "xlog", window.AttrJVMGCID: p.GCID, jvmevent.AttrGCPhase: p.Name}
		if p.Cause != "" {
			attrs[window.AttrJVMGCCause] = p.Cause
		}
		if t.collector != "" {
			attrs[window.AttrJVMGCName] = PauseBean(t.collector, p, t.zgc.major(p.GCID))
		}
		b.Windows = append(b.Windows, window.Window{Kind: window.KindJVMGCPause, Start: end - int64(p.Duration), Duration: p.Duration, Attributes: attrs})
	}
}

// when returns a line's time in Unix ns, the most precise way it can; 0
// when the line has no usable time.
func (t *tail) when(l Line, clock *window.Clock) int64 {
	switch {
	case l.Monotonic != 0:
		return clock.ToUnixNano(l.Monotonic)
	case l.UptimeSet && t.startHigh != 0 && l.Epoch != 0:
		// Uptime in ns against the calibrated start beats the ms epoch.
		return (t.startLow+t.startHigh)/2 + l.Uptime
	case l.Epoch != 0:
		return l.Epoch
	case l.UptimeSet && t.startHigh != 0:
		return (t.startLow+t.startHigh)/2 + l.Uptime
	}
	return 0
}
