package xlog

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/otelcol-ai/otelcol-ai/internal/fsdeadline"
	"github.com/otelcol-ai/otelcol-ai/internal/procroot"
	"github.com/otelcol-ai/otelcol-ai/internal/window"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/jvmevent"
)

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
	fi, err := t.adopt(f)
	if err != nil {
		return err
	}
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

// adopt makes f, an open file, the one the tail reads, from its start; it
// closes f when it cannot be stat'ed.
func (t *tail) adopt(f *os.File) (os.FileInfo, error) {
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("xlog: %s: %w", t.path, err)
	}
	t.file, t.offset = f, 0
	t.dev, t.ino = identity(fi)
	t.headLen = 0
	t.skipping = false
	return fi, nil
}
