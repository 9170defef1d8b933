package repository

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"go.uber.org/zap"

	"github.com/otelcol-ai/otelcol-ai/internal/procroot"
	"github.com/otelcol-ai/otelcol-ai/pkg/jfr"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/jfrstream"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/jvmevent"
)

// follower reads one repository. Its state comes in parts, each with one
// job: what it follows (followed), the chunk it reads (reading), the folder
// it watches and the files it holds (folderWatch), what it refused and
// reported (reports), and its checkpoint (resumeState, resume.go).
type follower struct {
	src *Source
	// inflight is the poll running in its own goroutine (startPoll), nil
	// when none; while it runs, only that goroutine touches the
	// follower's reading state.
	inflight *isolated[pollResult]
	// ownPID is the pid the JVM reported for itself, as of the last poll
	// that ended (read by Followed while a poll may be running).
	ownPID int

	followed
	reading
	folderWatch
	reports
	resumeState

	// staleAfter, when set, ends a follower whose repository has not grown
	// for that long: a folder found by a pattern has no process to watch,
	// and a JVM killed with a preserved repository leaves a chunk that is
	// never finished. (JVMs write periodic events every second or so.)
	staleAfter time.Duration
	grew       time.Time
}

// followed is what a follower follows.
type followed struct {
	root       *procroot.Root // the JVM's root, or the pattern's folder; every file is opened inside it
	inside     string         // the folder, as a path inside root
	dir        string         // the folder as the collector names it: key and messages, never opened
	jvm        jvmevent.JVM
	discovered bool
	tenant     tenant // whom its chunk memory counts against
	alive      func() bool
}

// reading is the chunk a follower reads and where the next one starts.
type reading struct {
	stream    *jfrstream.Stream
	newest    bool  // start at the newest chunk rather than the first
	from      int64 // start of the first chunk opened (Unix ns), 0 before
	file      *os.File
	path      string
	live      *jfr.LiveChunk
	lastStart int64 // start of the chunk read last; the next one starts later
	done      bool
	gone      bool // done because the folder no longer exists
	lastErr   string
}

// folderWatch is the folder a follower watches and the chunk files it
// holds open before reading them.
type folderWatch struct {
	folder    os.FileInfo // the folder followed (watched) now, to tell another one made under its name
	goneSince time.Time   // when the folder was found gone while the JVM runs (mayReturn), zero otherwise
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
}

// reports are the file names a follower refused, so that each is counted
// once and not opened again; reported are the reasons already reported, so
// that each is reported once per repository; notes are the reports not yet
// returned by a poll.
type reports struct {
	refused  map[string]bool
	reported map[string]bool
	notes    []error
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
