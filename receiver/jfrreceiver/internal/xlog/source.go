package xlog

import (
	"bytes"
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
}

// Bounds on one poll of one file and on one line: a file holding more is
// read on at the next poll; a longer line (no newline within maxLine
// bytes) is dropped, never held whole.
const (
	maxReadPerPoll = 4 << 20
	maxLine        = 64 << 10
)

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
)

// Source tails -Xlog files. Use it from one goroutine.
//
// A discovered JVM's files are the JVM's to shape: they are found and
// opened inside its root (package procroot), so `..` and symlinks never
// lead out of its container, and, like the files of the patterns, opened
// without blocking and read only when they are regular files, a bounded
// amount per poll. A refused file is reported once and the other files go
// on being read.
type Source struct {
	cfg      Config
	clock    *window.Clock
	files    map[string]*tail
	roots    map[rootKey]*heldRoot
	refused  map[string]bool // paths refused at the last scan, reported already
	buf      []byte          // the tails' read buffer
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
	return &Source{cfg: cfg, clock: cfg.Clock, files: map[string]*tail{}, roots: map[rootKey]*heldRoot{},
		refused: map[string]bool{}, buf: make([]byte, 64<<10)}
}

// Rescan makes the next Poll look for new files whatever the discovery
// interval: a process event or an announcement says a JVM appeared.
func (s *Source) Rescan() { s.rescan = true }

// Poll matches the patterns when due, then reads what every file gained.
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
	if !s.started || s.rescan || time.Since(s.lastScan) >= s.cfg.DiscoveryInterval {
		errs = append(errs, s.scan())
		s.lastScan = time.Now()
		s.started, s.rescan = true, false
	}
	paths := make([]string, 0, len(s.files))
	for p := range s.files {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	for _, p := range paths {
		if ctx.Err() != nil {
			break
		}
		t := s.files[p]
		exited := t.alive != nil && !t.alive()
		b := jvmevent.Batch{}
		var err error
		if !t.gone { // a tail given up by the scan (the JVM records JFR now) is not read
			err = t.poll(s.clock, s.buf, &b)
		}
		b.JVM = jvmevent.JVM{PID: t.pid, Source: p}
		if t.jvm != nil {
			b.JVM = *t.jvm
		}
		if exited && t.drained {
			t.gone = true // read to the end; the JVM writes no more
		}
		if err != nil {
			if msg := err.Error(); msg != t.lastErr {
				t.lastErr = msg
				errs = append(errs, err)
			}
		}
		if t.longLines > 0 && !t.longReported {
			t.longReported = true
			errs = append(errs, fmt.Errorf("xlog: %s: a line longer than %d bytes dropped (later ones are counted, not reported)", p, maxLine))
		}
		if t.gone {
			b.Ended = true
			s.end(p, t)
			s.cfg.Logger.Debug("stopped tailing -Xlog file", zap.String("file", p))
		}
		if !b.Empty() || b.Ended {
			emit(b)
		}
	}
	return errors.Join(errs...)
}

// Close closes every open file and root.
func (s *Source) Close() error {
	for p, t := range s.files {
		s.end(p, t)
	}
	return nil
}

func (s *Source) end(p string, t *tail) {
	t.close()
	s.release(t.root)
	delete(s.files, p)
}

// rootKey names a root: a discovered JVM's (pid and start time), or the
// host's (the zero key) for the patterns' files.
type rootKey struct {
	pid   int
	start uint64
}

// heldRoot is a root shared by the tails of its files, closed when the
// last of them ends.
type heldRoot struct {
	*procroot.Root
	key   rootKey
	holds int
}

// hold returns the root of key, opened with open unless held already; the
// caller releases it.
func (s *Source) hold(key rootKey, open func() (*procroot.Root, error)) (*heldRoot, error) {
	r := s.roots[key]
	if r == nil {
		root, err := open()
		if err != nil {
			return nil, err
		}
		r = &heldRoot{Root: root, key: key}
		s.roots[key] = r
	}
	r.holds++
	return r, nil
}

func (s *Source) release(r *heldRoot) {
	r.holds--
	if r.holds == 0 {
		r.Close()
		delete(s.roots, r.key)
	}
}

// hostRoot opens the collector's own root, where the patterns (paths the
// operator gave) resolve as usual, symlinks included, but magic links do
// not and only regular files are read.
func hostRoot() (*procroot.Root, error) { return procroot.OpenDir("/") }

func (s *Source) scan() error {
	var errs []error
	refused := map[string]bool{}
	if len(s.cfg.Include) > 0 {
		errs = append(errs, s.scanPatterns(refused))
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
			if len(j.XLogFiles) > 0 {
				errs = append(errs, s.scanJVM(j, refused))
			}
		}
	}
	s.refused = refused
	return errors.Join(errs...)
}

// scanPatterns follows the files the include patterns match.
func (s *Source) scanPatterns(refused map[string]bool) error {
	host, err := s.hold(rootKey{}, hostRoot)
	if err != nil {
		return fmt.Errorf("xlog: %w", err)
	}
	defer s.release(host)
	var errs []error
	for _, pattern := range s.cfg.Include {
		abs, err := filepath.Abs(pattern)
		if err == nil {
			var matches []string
			if matches, err = host.Glob(abs); err == nil {
				for _, name := range matches {
					errs = append(errs, s.follow(host, name, nil, nil, refused))
				}
			}
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("xlog: pattern %q: %w", pattern, err))
		}
	}
	return errors.Join(errs...)
}

// scanJVM follows the -Xlog files of a discovered JVM, matched inside its
// root, unless it records JFR.
func (s *Source) scanJVM(j discovery.JVM, refused map[string]bool) error {
	root, err := s.hold(rootKey{j.PID, j.StartTicks}, j.OpenRoot)
	if err != nil {
		return nil // exited since it was listed
	}
	defer s.release(root)
	if j.StartsRecording || len(j.Repositories(root.Root)) > 0 {
		// JFR tells more, and the repository source reads it: stop
		// tailing a log begun before the recording (started by attach,
		// say), so no pause is reported twice.
		for _, t := range s.files {
			if t.jvm != nil && t.jvm.PID == j.PID && t.jvm.StartTicks == j.StartTicks {
				t.gone = true
			}
		}
		return nil
	}
	var errs []error
	scanner, pid, start := s.cfg.Scanner, j.PID, j.StartTicks
	for _, pattern := range j.XLogFiles {
		matches, _ := root.Glob(pattern)
		for _, name := range matches {
			id := &jvmevent.JVM{PID: pid, StartTicks: start, Source: root.Display(name)}
			errs = append(errs, s.follow(root, name, id, func() bool { return scanner.Alive(pid, start) }, refused))
		}
	}
	return errors.Join(errs...)
}

// follow starts tailing name inside root unless it is tailed already. A
// file that is not a regular one (a folder aside) is refused, reported
// once while the patterns keep matching it.
func (s *Source) follow(root *heldRoot, name string, jvm *jvmevent.JVM, alive func() bool, refused map[string]bool) error {
	p := root.Display(name)
	if s.files[p] != nil {
		return nil
	}
	fi, err := root.Stat(name)
	if err != nil || fi.IsDir() {
		return nil
	}
	// A path refused at the last scan is counted and reported once.
	t := &tail{root: root, name: name, path: p, jvm: jvm, alive: alive, refused: s.cfg.Refused, refusedNow: s.refused[p]}
	if !fi.Mode().IsRegular() {
		err = fmt.Errorf("xlog: %s: %w (%s)", p, procroot.ErrNotRegular, kind(fi.Mode()))
		if !s.refused[p] {
			s.cfg.Refused(RefusedNotRegular)
		}
	} else if pos, ok := s.cfg.Resume[p]; ok {
		delete(s.cfg.Resume, p) // the first follow only: later ones are new files
		err = t.resume(pos, s.cfg.Logger)
	} else {
		// A file that appears after the first scan is new: read it all.
		err = t.open(s.started || s.cfg.FromStart) // counts a refusal itself
	}
	if errors.Is(err, procroot.ErrNotRegular) {
		refused[p] = true
		if s.refused[p] {
			return nil
		}
		return err
	}
	if err != nil {
		return err
	}
	root.holds++
	s.cfg.Logger.Debug("tailing -Xlog file", zap.String("file", p))
	s.files[p] = t
	return nil
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
type tail struct {
	root *heldRoot // where name resolves; released by the source when the tail ends
	name string    // the file as the JVM (or, for a pattern's, the collector) names it
	path string    // root.Display(name): how it is reported
	file *os.File
	dev  uint64
	ino  uint64
	// chain are files rotated while the collector was down, after the
	// one being read: read whole, in order, before the file under name.
	chain   []*os.File
	head    uint64 // Position.Head of file, once headLen is headBytes
	headLen int
	offset  int64
	drained bool // the last poll read the file to its end
	partial []byte
	// skipping: inside a line longer than maxLine, dropped up to its
	// newline.
	skipping     bool
	longLines    int
	longReported bool
	refusedNow   bool // the file under the name is not a regular one
	refused      func(reason string)
	gone         bool
	lastErr      string
	pid          int
	jvm          *jvmevent.JVM // the discovered JVM writing the file, nil for a pattern's
	alive        func() bool   // whether that JVM still runs

	// Uptime calibration: bounds on the JVM's start in Unix ns, narrowed by
	// every line that has both an absolute time (ms) and an uptime.
	startLow, startHigh int64
	collector           string
	// zgc is generational ZGC's recent collections (Major, Minor) by GC id.
	zgc zgcKinds
}

// open opens the file (a regular one, without blocking), positioned at its
// end unless fromStart.
func (t *tail) open(fromStart bool) error {
	f, err := t.root.OpenFile(t.name)
	if err != nil {
		if errors.Is(err, procroot.ErrNotRegular) && !t.refusedNow {
			t.refusedNow = true
			t.refused(RefusedNotRegular)
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
	t.partial, t.skipping = t.partial[:0], false
	if !fromStart {
		t.offset = fi.Size()
		if _, err := f.Seek(t.offset, io.SeekStart); err != nil {
			f.Close()
			t.file = nil
			return fmt.Errorf("xlog: %s: %w", t.path, err)
		}
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

// poll reads new lines; on rotation it finishes the old file first.
func (t *tail) poll(clock *window.Clock, buf []byte, b *jvmevent.Batch) error {
	if t.file == nil {
		t.drained = true
		if err := t.open(true); err != nil {
			if errors.Is(err, os.ErrNotExist) {
				t.gone = true
				return nil
			}
			return err
		}
	}
	drained, err := t.read(clock, buf, b)
	for err == nil && drained && len(t.chain) > 0 {
		// A file rotated while the collector was down, read whole.
		if err = t.next(); err == nil {
			drained, err = t.read(clock, buf, b)
		}
	}
	t.drained = drained && len(t.chain) == 0
	if err != nil || !t.drained {
		// The rest is read at the next poll; rotation and truncation are
		// looked for once the file is read to its end.
		return err
	}
	fi, err := t.root.Stat(t.name)
	switch {
	case errors.Is(err, os.ErrNotExist):
		t.gone = true
		return nil
	case err != nil:
		return fmt.Errorf("xlog: %w", err)
	case !sameFile(fi, t.dev, t.ino):
		// Rotated: the old file was read to its end above. What replaced
		// it may be no regular file: then nothing is read until one is.
		t.close()
		if err := t.open(true); err != nil {
			return err
		}
		t.drained, err = t.read(clock, buf, b)
		return err
	case fi.Size() < t.offset:
		// Truncated in place (copytruncate): start over.
		t.offset, t.partial, t.skipping = 0, t.partial[:0], false
		if _, err := t.file.Seek(0, io.SeekStart); err != nil {
			return fmt.Errorf("xlog: %s: %w", t.path, err)
		}
	}
	return nil
}

// read reads what the file gained, at most maxReadPerPoll bytes, and
// reports whether it reached the end. A read error ends the file's
// reading (drained) until it is opened again.
func (t *tail) read(clock *window.Clock, buf []byte, b *jvmevent.Batch) (drained bool, err error) {
	for read := 0; read < maxReadPerPoll; {
		n, err := t.file.Read(buf[:min(len(buf), maxReadPerPoll-read)])
		if n > 0 {
			read += n
			t.offset += int64(n)
			t.lines(buf[:n], clock, b)
		}
		if err == io.EOF || (err == nil && n == 0) {
			return true, nil
		}
		if err != nil {
			return true, fmt.Errorf("xlog: %s: %w", t.path, err)
		}
	}
	return false, nil
}

func (t *tail) lines(data []byte, clock *window.Clock, b *jvmevent.Batch) {
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			if !t.skipping && len(t.partial)+len(data) > maxLine {
				t.dropLine()
			}
			if !t.skipping {
				t.partial = append(t.partial, data...)
			}
			return
		}
		line := data[:i]
		data = data[i+1:]
		if t.skipping {
			t.skipping = false // the end of the dropped line
			continue
		}
		if len(t.partial)+len(line) > maxLine {
			t.dropLine()
			t.skipping = false
			continue
		}
		if len(t.partial) > 0 {
			line = append(t.partial, line...)
			t.partial = t.partial[:0]
		}
		t.line(string(line), clock, b)
	}
}

// dropLine gives up the line being read: it is longer than maxLine.
func (t *tail) dropLine() {
	t.partial, t.skipping = t.partial[:0], true
	t.longLines++
	t.refused(RefusedLineTooLong)
}

// line turns one log line into what it says.
func (t *tail) line(s string, clock *window.Clock, b *jvmevent.Batch) {
	l, ok := ParseLine(s)
	if !ok {
		return
	}
	l.Resolve(clock.ToUnixNano)
	if l.PID != 0 {
		t.pid = l.PID
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
