package xlog

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"go.uber.org/zap"

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
	// Finder, when set, adds the files that discovered JVMs without a JFR
	// repository write their -Xlog output to.
	Finder *discovery.Finder
	// Logger receives debug messages about files coming and going.
	Logger *zap.Logger
}

// Bounds on one poll of one file and on one line.
const (
	maxReadPerPoll = 4 << 20
	maxLine        = 64 << 10
)

// AttrWindowSource is set to "xlog" on windows read from a log.
const AttrWindowSource = jvmevent.AttrWindowSource

// Source tails -Xlog files. Use it from one goroutine.
type Source struct {
	cfg      Config
	clock    *window.Clock
	files    map[string]*tail
	started  bool
	lastScan time.Time
	lastSync time.Time
}

// NewSource returns a source; it reads nothing before the first Poll.
func NewSource(cfg Config) *Source {
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	s := &Source{cfg: cfg, clock: cfg.Clock, files: map[string]*tail{}}
	return s
}

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
	if !s.started || time.Since(s.lastScan) >= s.cfg.DiscoveryInterval {
		errs = append(errs, s.scan())
		s.lastScan = time.Now()
		s.started = true
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
			err = t.poll(s.clock, &b)
		}
		b.JVM = jvmevent.JVM{PID: t.pid, Source: p}
		if t.jvm != nil {
			b.JVM = *t.jvm
		}
		if exited {
			t.gone = true // read to the end above; the JVM writes no more
		}
		if err != nil {
			if msg := err.Error(); msg != t.lastErr {
				t.lastErr = msg
				errs = append(errs, err)
			}
		}
		if t.gone {
			b.Ended = true
			t.close()
			delete(s.files, p)
			s.cfg.Logger.Debug("stopped tailing -Xlog file", zap.String("file", p))
		}
		if !b.Empty() || b.Ended {
			emit(b)
		}
	}
	return errors.Join(errs...)
}

// Close closes every open file.
func (s *Source) Close() error {
	for p, t := range s.files {
		t.close()
		delete(s.files, p)
	}
	return nil
}

func (s *Source) scan() error {
	var errs []error
	for _, pattern := range s.cfg.Include {
		matches, err := filepath.Glob(pattern)
		if err != nil {
			errs = append(errs, fmt.Errorf("xlog: pattern %q: %w", pattern, err))
			continue
		}
		for _, p := range matches {
			if err := s.follow(p, nil, nil); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if s.cfg.Finder != nil {
		jvms, err := s.cfg.Finder.JVMs()
		if err != nil {
			errs = append(errs, fmt.Errorf("xlog: %w", err))
		}
		for _, j := range jvms {
			if len(j.XLogFiles) == 0 {
				continue
			}
			if j.StartsRecording || hasRepository(j) {
				// JFR tells more, and the repository source reads it: stop
				// tailing a log begun before the recording (started by
				// attach, say), so no pause is reported twice.
				for _, t := range s.files {
					if t.jvm != nil && t.jvm.PID == j.PID && t.jvm.StartTicks == j.StartTicks {
						t.gone = true
					}
				}
				continue
			}
			finder, pid, start := s.cfg.Finder, j.PID, j.StartTicks
			for _, pattern := range j.XLogFiles {
				matches, _ := filepath.Glob(filepath.Join(j.ProcRoot, strconv.Itoa(j.PID), "root", pattern))
				for _, p := range matches {
					id := &jvmevent.JVM{PID: pid, StartTicks: start, Source: p}
					if err := s.follow(p, id, func() bool { return finder.Alive(pid, start) }); err != nil {
						errs = append(errs, err)
					}
				}
			}
		}
	}
	return errors.Join(errs...)
}

func hasRepository(j discovery.JVM) bool {
	root, err := j.OpenRoot()
	if err != nil {
		return false
	}
	defer root.Close()
	return len(j.Repositories(root)) > 0
}

// follow starts tailing p unless it is tailed already.
func (s *Source) follow(p string, jvm *jvmevent.JVM, alive func() bool) error {
	if s.files[p] != nil {
		return nil
	}
	fi, err := os.Stat(p)
	if err != nil || !fi.Mode().IsRegular() {
		return nil
	}
	t := &tail{path: p, jvm: jvm, alive: alive}
	// A file that appears after the first scan is new: read it all.
	if err := t.open(s.started || s.cfg.FromStart); err != nil {
		return err
	}
	s.cfg.Logger.Debug("tailing -Xlog file", zap.String("file", p))
	s.files[p] = t
	return nil
}

// tail follows one file by name: when the JVM rotates it (renames it and
// starts a new file under the name), the old file is read to its end and
// the new one from its start.
type tail struct {
	path    string
	file    *os.File
	ino     uint64
	offset  int64
	partial []byte
	gone    bool
	lastErr string
	pid     int
	jvm     *jvmevent.JVM // the discovered JVM writing the file, nil for a pattern's
	alive   func() bool   // whether that JVM still runs

	// Uptime calibration: bounds on the JVM's start in Unix ns, narrowed by
	// every line that has both an absolute time (ms) and an uptime.
	startLow, startHigh int64
	collector           string
}

func inode(fi os.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Ino
	}
	return 0
}

// open opens the file, positioned at its end unless fromStart.
func (t *tail) open(fromStart bool) error {
	f, err := os.Open(t.path)
	if err != nil {
		return fmt.Errorf("xlog: %w", err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return fmt.Errorf("xlog: %w", err)
	}
	t.file, t.ino, t.offset, t.partial = f, inode(fi), 0, t.partial[:0]
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
	if t.file != nil {
		t.file.Close()
		t.file = nil
	}
}

// poll reads new lines; on rotation it finishes the old file first.
func (t *tail) poll(clock *window.Clock, b *jvmevent.Batch) error {
	if t.file == nil {
		if err := t.open(true); err != nil {
			if errors.Is(err, os.ErrNotExist) {
				t.gone = true
				return nil
			}
			return err
		}
	}
	if err := t.read(clock, b); err != nil {
		return err
	}
	fi, err := os.Stat(t.path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		t.gone = true
		return nil
	case err != nil:
		return fmt.Errorf("xlog: %w", err)
	case inode(fi) != t.ino:
		// Rotated: the old file was read to its end above.
		t.close()
		t.partial = t.partial[:0]
		if err := t.open(true); err != nil {
			return err
		}
		return t.read(clock, b)
	case fi.Size() < t.offset:
		// Truncated in place (copytruncate): start over.
		t.offset, t.partial = 0, t.partial[:0]
		if _, err := t.file.Seek(0, io.SeekStart); err != nil {
			return fmt.Errorf("xlog: %s: %w", t.path, err)
		}
	}
	return nil
}

func (t *tail) read(clock *window.Clock, b *jvmevent.Batch) error {
	buf := make([]byte, 64<<10)
	read := 0
	for read < maxReadPerPoll {
		n, err := t.file.Read(buf)
		if n > 0 {
			read += n
			t.offset += int64(n)
			t.lines(buf[:n], clock, b)
		}
		if err == io.EOF || n == 0 {
			return nil
		}
		if err != nil {
			return fmt.Errorf("xlog: %s: %w", t.path, err)
		}
	}
	return nil
}

func (t *tail) lines(data []byte, clock *window.Clock, b *jvmevent.Batch) {
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			if len(t.partial)+len(data) <= maxLine {
				t.partial = append(t.partial, data...)
			} else {
				t.partial = t.partial[:0] // an endless line: dropped
			}
			return
		}
		line := data[:i]
		data = data[i+1:]
		if len(t.partial) > 0 {
			line = append(t.partial, line...)
			t.partial = t.partial[:0]
		}
		t.line(string(line), clock, b)
	}
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
	if p, ok := ParsePause(l.Message); ok {
		attrs := map[string]any{AttrWindowSource: "xlog", window.AttrJVMGCID: p.GCID, jvmevent.AttrGCPhase: p.Name}
		if p.Cause != "" {
			attrs[window.AttrJVMGCCause] = p.Cause
		}
		if t.collector != "" {
			attrs[window.AttrJVMGCName] = t.collector
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
