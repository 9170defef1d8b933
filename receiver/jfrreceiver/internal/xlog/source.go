package xlog

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/otelcol-ai/otelcol-ai/internal/fsdeadline"
	"github.com/otelcol-ai/otelcol-ai/internal/procresource"
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
func (s *Source) paths() []string { return slices.Sorted(maps.Keys(s.files)) }

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
