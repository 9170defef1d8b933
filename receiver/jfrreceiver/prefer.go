package jfrreceiver

import (
	"errors"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"go.uber.org/zap"

	"github.com/otelcol-ai/otelcol-ai/internal/window"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/jvmevent"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/repository"
)

// How long the preference remembers things (wall clock).
const (
	// recentFor: -Xlog windows sent while no JFR repository covered their
	// JVM are kept this long, in case the repository is found later and
	// JFR reports them again (JFR flushes about once a second; repository
	// patterns are matched every discovery_interval).
	recentFor = 30 * time.Second
	// pendingFor: JFR's copies of such windows are looked for this long
	// after the repository is found.
	pendingFor = 30 * time.Second
	// retainFor: a repository let go still covers the -Xlog lines of the
	// time it was read for this long (lines read late are not reported
	// twice).
	retainFor = 2 * time.Minute
	// heldRecheck: how long a "the JVM does not hold the file open"
	// answer is trusted (the JVM may rotate the file meanwhile).
	heldRecheck = 10 * time.Second
	// pairWithin: an -Xlog window and JFR's copy of it start or end this
	// close (the log's end falls within JFR's SafepointEnd event, give or
	// take 1 ms, unless the line was written late; the starts agree).
	pairWithin = 2 * time.Millisecond
)

// preference makes the receiver report each pause of a JVM once when it
// reads both the JVM's JFR repository and an -Xlog file the JVM writes:
// JFR's windows and safepoints are kept (they tell more), and the log's
// are dropped from the start of the first chunk JFR reads of that JVM
// until the repository is let go. The log's windows before that start are
// kept: JFR does not report them.
//
// Which JVM writes a log is known from the log's pid decorator (the pid the
// JVM sees, like the pid a repository folder is named with and the one
// jdk.JVMInformation records), or for a log found through xlog::discover
// from the discovered process. For a repository of a discovered JVM and a
// log matched by a pattern, the receiver looks whether that process holds
// the log open (<proc_root>/<pid>/fd), so that two containers' JVMs that
// both see themselves as pid 1 are told apart; where the fd folder cannot
// be read, the pids decide.
//
// A log read before the receiver found the JVM's repository (a JVM that
// starts after the receiver: its log may be matched before its repository
// is) may have been sent for the time JFR then reports from its first
// chunk: those JFR copies are dropped instead (paired by kind, end within
// pairWithin, and GC id, VM operation where both name one).
//
// Use it from the receiver's loop goroutine.
type preference struct {
	procRoot string
	followed func() []repository.Followed // the repositories read now
	logger   *zap.Logger
	now      func() time.Time

	covers map[string]*coverage // by repository folder
	logs   map[string]*logFile  // by -Xlog file path
	held   map[heldKey]heldAnswer
}

// coverage is one repository as the preference knows it.
type coverage struct {
	repository.Followed
	until int64 // Unix ns when the repository was let go; 0 while read

	// JFR's copies of windows and safepoints the log sent before the
	// repository was found are dropped until pendingUntil.
	pendingWindows    []window.Window
	pendingSafepoints []jvmevent.Safepoint
	pendingUntil      time.Time
}

// logFile is one -Xlog file as the preference knows it.
type logFile struct {
	writer jvmevent.JVM // the last batch's JVM
	cover  string       // the repository whose JVM writes the file, "" none
	// What was sent while no repository covered it, for recentFor.
	windows    []window.Window
	safepoints []jvmevent.Safepoint
}

type heldKey struct {
	pid   int
	start uint64
	path  string
}

type heldAnswer struct {
	held bool
	at   time.Time
}

func newPreference(procRoot string, followed func() []repository.Followed, logger *zap.Logger) *preference {
	return &preference{
		procRoot: procRoot, followed: followed, logger: logger, now: time.Now,
		covers: map[string]*coverage{}, logs: map[string]*logFile{}, held: map[heldKey]heldAnswer{},
	}
}

// sync brings the coverage up to date with the repositories followed now.
func (p *preference) sync() {
	now := p.now()
	live := map[string]bool{}
	for _, f := range p.followed() {
		if f.From == 0 {
			continue // no chunk read yet: JFR reports nothing of the JVM
		}
		live[f.Dir] = true
		c := p.covers[f.Dir]
		if c != nil {
			c.Followed = f // the OwnPID may have come with jdk.JVMInformation
			continue
		}
		c = &coverage{Followed: f, pendingUntil: now.Add(pendingFor)}
		p.covers[f.Dir] = c
		// What the JVM's logs sent for the time JFR now reports.
		for _, path := range slices.Sorted(maps.Keys(p.logs)) {
			lf := p.logs[path]
			if !p.matches(f, lf.writer) {
				continue
			}
			for _, w := range lf.windows {
				if w.End() >= f.From {
					c.pendingWindows = append(c.pendingWindows, w)
				}
			}
			for _, s := range lf.safepoints {
				if s.End >= f.From {
					c.pendingSafepoints = append(c.pendingSafepoints, s)
				}
			}
			lf.windows, lf.safepoints = nil, nil
		}
	}
	for dir, c := range p.covers {
		if live[dir] {
			continue
		}
		if c.until == 0 {
			c.until = now.UnixNano()
		} else if now.Sub(time.Unix(0, c.until)) > retainFor {
			delete(p.covers, dir)
			for k := range p.held {
				if k.pid == c.JVM.PID && k.start == c.JVM.StartTicks {
					delete(p.held, k)
				}
			}
		}
	}
}

// fromJFR drops from a repository's batch the windows and safepoints the
// JVM's log sent before the repository was found.
func (p *preference) fromJFR(b *jvmevent.Batch) {
	c := p.covers[b.JVM.Source]
	if c == nil {
		p.sync()
		if c = p.covers[b.JVM.Source]; c == nil {
			return
		}
	}
	if len(c.pendingWindows) == 0 && len(c.pendingSafepoints) == 0 {
		return
	}
	if p.now().After(c.pendingUntil) {
		c.pendingWindows, c.pendingSafepoints = nil, nil
		return
	}
	b.Windows = dropPaired(b.Windows, &c.pendingWindows, pairWindow)
	b.Safepoints = dropPaired(b.Safepoints, &c.pendingSafepoints, pairSafepoint)
}

// dropPaired removes from items those pair finds in pending, and each
// pending item it was paired with (each pairs once).
func dropPaired[T any](items []T, pending *[]T, pair func([]T, T) int) []T {
	return slices.DeleteFunc(items, func(x T) bool {
		i := pair(*pending, x)
		if i < 0 {
			return false
		}
		*pending = slices.Delete(*pending, i, i+1)
		return true
	})
}

// fromXlog drops from an -Xlog file's batch what a repository reports. It
// reports whether the file has just become covered: the safepoint metrics
// counted from it so far would stand beside JFR's for the same JVM, so the
// receiver forgets them.
func (p *preference) fromXlog(b *jvmevent.Batch) (newlyCovered bool) {
	path := b.JVM.Source
	lf := p.logs[path]
	if lf == nil {
		lf = &logFile{}
		p.logs[path] = lf
	}
	lf.writer = b.JVM
	p.sync()
	var active *coverage
	var spans []*coverage // every repository of the writer, read now or lately
	for _, dir := range slices.Sorted(maps.Keys(p.covers)) {
		c := p.covers[dir]
		if !p.matches(c.Followed, b.JVM) {
			continue
		}
		spans = append(spans, c)
		if c.until == 0 && active == nil {
			active = c
		}
	}
	switch {
	case active != nil && lf.cover != active.Dir:
		newlyCovered = true
		lf.cover = active.Dir
		lf.windows, lf.safepoints = nil, nil
		p.logger.Info("-Xlog file skipped while its JVM's JFR repository is read: JFR reports the same pauses (xlog::prefer_jfr: false keeps both)",
			zap.String("file", path), zap.String("repository", active.Dir), zap.Int("pid", b.JVM.PID),
			zap.Time("from", time.Unix(0, active.From)))
	case active == nil && lf.cover != "":
		p.logger.Info("-Xlog file read again: its JVM's JFR repository is no longer read",
			zap.String("file", path), zap.String("repository", lf.cover), zap.Int("pid", b.JVM.PID))
		lf.cover = ""
	}
	covered := func(end int64) bool {
		for _, c := range spans {
			if end >= c.From && (c.until == 0 || end <= c.until) {
				return true
			}
		}
		return false
	}
	b.Windows = slices.DeleteFunc(b.Windows, func(w window.Window) bool { return covered(w.End()) })
	b.Safepoints = slices.DeleteFunc(b.Safepoints, func(s jvmevent.Safepoint) bool { return covered(s.End) })
	if b.Ended {
		delete(p.logs, path)
		return newlyCovered
	}
	if active == nil {
		// Kept in case the JVM's repository is found later.
		horizon := p.now().Add(-recentFor).UnixNano()
		lf.windows = append(slices.DeleteFunc(lf.windows, func(w window.Window) bool { return w.End() < horizon }), b.Windows...)
		lf.safepoints = append(slices.DeleteFunc(lf.safepoints, func(s jvmevent.Safepoint) bool { return s.End < horizon }), b.Safepoints...)
	}
	return newlyCovered
}

// matches reports whether the repository f records the JVM that writes an
// -Xlog file, w being what that file's batches carry: a discovered JVM
// (pid in the proc root and start time) or, for a pattern's file, the pid
// decorator's pid (0 until a line carries it).
func (p *preference) matches(f repository.Followed, w jvmevent.JVM) bool {
	if f.Discovered && w.StartTicks != 0 {
		return f.JVM.PID == w.PID && f.JVM.StartTicks == w.StartTicks
	}
	if f.Discovered && w.Source != "" {
		if held, err := p.holds(f.JVM.PID, f.JVM.StartTicks, w.Source); err == nil {
			return held
		}
	}
	return w.PID != 0 && w.PID == f.OwnPID
}

// holds reports whether process pid (started at start) has the file path
// open, through <proc_root>/<pid>/fd; an error when that cannot be told.
func (p *preference) holds(pid int, start uint64, path string) (bool, error) {
	key := heldKey{pid, start, path}
	if a, ok := p.held[key]; ok && (a.held || p.now().Sub(a.at) < heldRecheck) {
		return a.held, nil
	}
	fi, err := os.Stat(path)
	if err != nil {
		return false, err
	}
	held, err := holdsOpen(p.procRoot, pid, fi)
	if err != nil {
		return false, err
	}
	p.held[key] = heldAnswer{held: held, at: p.now()}
	return held, nil
}

// holdsOpen reports whether process pid has the file fi open.
func holdsOpen(procRoot string, pid int, fi os.FileInfo) (bool, error) {
	dir := filepath.Join(procRoot, strconv.Itoa(pid), "fd")
	entries, err := os.ReadDir(dir)
	if err != nil {
		return false, err
	}
	if len(entries) == 0 {
		return false, errors.New("no file descriptors listed")
	}
	for _, e := range entries {
		if o, err := os.Stat(filepath.Join(dir, e.Name())); err == nil && os.SameFile(o, fi) {
			return true, nil
		}
	}
	return false, nil
}

// pairWindow returns the index in pending of the window w is a copy of,
// -1 when none.
func pairWindow(pending []window.Window, w window.Window) int {
	best, bestOff := -1, int64(math.MaxInt64)
	for i, x := range pending {
		if x.Kind != w.Kind || !sameAttr(x, w, window.AttrJVMGCID) || !sameAttr(x, w, window.AttrJVMVMOperation) {
			continue
		}
		if off := pairOffset(x.Start, x.End(), w.Start, w.End()); off < bestOff && copies(off, x.Start, x.End(), w.Start, w.End()) {
			best, bestOff = i, off
		}
	}
	return best
}

// pairSafepoint returns the index in pending of the safepoint s is a copy
// of, -1 when none.
func pairSafepoint(pending []jvmevent.Safepoint, s jvmevent.Safepoint) int {
	best, bestOff := -1, int64(math.MaxInt64)
	for i, x := range pending {
		if x.Operation != "" && s.Operation != "" && x.Operation != s.Operation {
			continue
		}
		if off := pairOffset(x.End-int64(x.Duration), x.End, s.End-int64(s.Duration), s.End); off < bestOff && copies(off, x.End-int64(x.Duration), x.End, s.End-int64(s.Duration), s.End) {
			best, bestOff = i, off
		}
	}
	return best
}

// pairOffset is how far apart two copies of one pause are: the nearer of
// their starts and their ends. The log's line is stamped when it is
// written, which on a busy host can come milliseconds after the safepoint
// ended (seen: 10.8 ms late, the starts 5 µs apart); JFR's events are
// stamped when the pause begins and ends.
func pairOffset(start1, end1, start2, end2 int64) int64 {
	return min(absInt64(start1-start2), absInt64(end1-end2))
}

// copies reports whether two pauses of one JVM, off apart (pairOffset),
// are copies of one pause: within pairWithin, or overlapping in time. A
// JVM's pauses never overlap one another (each is a safepoint, and they
// come one at a time), so any overlap is one pause seen twice, whatever
// the skew between the log's clock and JFR's (seen on a loaded host: a
// 95 ms safepoint whose two copies started and ended 2.6 ms apart).
func copies(off, start1, end1, start2, end2 int64) bool {
	return off <= int64(pairWithin) || (start1 < end2 && start2 < end1)
}

// sameAttr is false only when both windows carry key with different values.
func sameAttr(a, b window.Window, key string) bool {
	x, okA := a.Attributes[key]
	y, okB := b.Attributes[key]
	return !okA || !okB || x == y
}

func absInt64(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}
