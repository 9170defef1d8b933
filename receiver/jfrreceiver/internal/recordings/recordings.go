// Package recordings reads finished .jfr files dropped into a folder (by
// `jcmd <pid> JFR.dump`, or a JVM's filename= at exit): each file once, a
// few chunks per poll, one chunk in memory at a time. Progress (the file's
// size and modification time, and the chunks read) is kept in a storage
// client when one is given, so that a restarted collector neither reads a
// file again nor skips one; at most the chunk being read when it stopped is
// read twice.
package recordings // import "github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/recordings"

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"go.opentelemetry.io/collector/extension/xextension/storage"
	"go.uber.org/zap"

	"github.com/otelcol-ai/otelcol-ai/pkg/jfr"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/jfrstream"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/jvmevent"
)

// Config says which files to read and where progress is kept.
type Config struct {
	// Include are glob patterns of recording files.
	Include []string
	// DiscoveryInterval is how often the patterns are matched again.
	DiscoveryInterval time.Duration
	// Storage keeps progress across restarts; nil keeps it in memory.
	Storage storage.Client
	// Logger receives debug messages.
	Logger *zap.Logger
}

// maxChunksPerPoll bounds one poll's work, so that a large file does not
// hold back the receiver's other sources.
const maxChunksPerPoll = 4

// keyPrefix prefixes the storage keys (one per file path).
const keyPrefix = "jfr.recording:"

// Progress is what is stored per file.
type Progress struct {
	Size    int64 `json:"size"`
	ModTime int64 `json:"mtime"`
	Chunks  int   `json:"chunks"` // chunks read
	Done    bool  `json:"done"`
}

func (p Progress) sameFile(size, mtime int64) bool { return p.Size == size && p.ModTime == mtime }

// file is a recording being read.
type file struct {
	progress Progress
	stream   *jfrstream.Stream
	lastErr  string
}

// Source reads recording files. Use it from one goroutine.
type Source struct {
	cfg      Config
	files    map[string]*file
	stable   map[string][2]int64 // size and mtime seen at the previous scan
	lastScan time.Time
	started  bool
}

// New returns a source; it reads nothing before the first Poll.
func New(cfg Config) *Source {
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	return &Source{cfg: cfg, files: map[string]*file{}, stable: map[string][2]int64{}}
}

// Poll matches the patterns when due and reads a few chunks of the files
// that are complete.
func (s *Source) Poll(ctx context.Context, emit func(jvmevent.Batch)) error {
	var errs []error
	if !s.started || time.Since(s.lastScan) >= s.cfg.DiscoveryInterval {
		errs = append(errs, s.scan(ctx))
		s.lastScan, s.started = time.Now(), true
	}
	paths := make([]string, 0, len(s.files))
	for p, f := range s.files {
		if !f.progress.Done {
			paths = append(paths, p)
		}
	}
	slices.Sort(paths)
	budget := maxChunksPerPoll
	for _, p := range paths {
		if budget <= 0 || ctx.Err() != nil {
			break
		}
		f := s.files[p]
		n, err := s.read(ctx, p, f, budget, emit)
		budget -= n
		if err != nil {
			if msg := err.Error(); msg != f.lastErr {
				f.lastErr = msg
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// Close releases nothing: files are open only while read.
func (s *Source) Close() error { return nil }

// scan finds files whose size and modification time did not change since
// the previous scan (a file still being written is left for later).
func (s *Source) scan(ctx context.Context) error {
	var errs []error
	found := map[string]bool{}
	for _, pattern := range s.cfg.Include {
		matches, err := filepath.Glob(pattern)
		if err != nil {
			errs = append(errs, fmt.Errorf("recordings: pattern %q: %w", pattern, err))
			continue
		}
		for _, p := range matches {
			fi, err := os.Stat(p)
			if err != nil || !fi.Mode().IsRegular() {
				continue
			}
			found[p] = true
			size, mtime := fi.Size(), fi.ModTime().UnixNano()
			if f := s.files[p]; f != nil && f.progress.sameFile(size, mtime) {
				continue
			}
			if prev, ok := s.stable[p]; !ok || prev != [2]int64{size, mtime} {
				s.stable[p] = [2]int64{size, mtime}
				continue
			}
			delete(s.stable, p)
			prog, err := s.load(ctx, p)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if !prog.sameFile(size, mtime) {
				prog = Progress{Size: size, ModTime: mtime}
			}
			s.files[p] = &file{progress: prog, stream: jfrstream.New()}
			s.cfg.Logger.Debug("recording file found", zap.String("file", p), zap.Bool("done", prog.Done), zap.Int("chunks_read", prog.Chunks))
		}
	}
	for p := range s.files {
		if !found[p] {
			delete(s.files, p)
		}
	}
	for p := range s.stable {
		if !found[p] {
			delete(s.stable, p)
		}
	}
	return errors.Join(errs...)
}

func (s *Source) load(ctx context.Context, path string) (Progress, error) {
	var p Progress
	if s.cfg.Storage == nil {
		return p, nil
	}
	data, err := s.cfg.Storage.Get(ctx, keyPrefix+path)
	if err != nil {
		return p, fmt.Errorf("recordings: progress of %s: %w", path, err)
	}
	if data == nil {
		return p, nil
	}
	if err := json.Unmarshal(data, &p); err != nil {
		// A damaged entry: read the file again rather than skip it.
		return Progress{}, nil
	}
	return p, nil
}

func (s *Source) save(ctx context.Context, path string, p Progress) error {
	if s.cfg.Storage == nil {
		return nil
	}
	data, err := json.Marshal(p)
	if err != nil {
		return err
	}
	if err := s.cfg.Storage.Set(ctx, keyPrefix+path, data); err != nil {
		return fmt.Errorf("recordings: saving progress of %s: %w", path, err)
	}
	return nil
}

// read reads up to budget chunks of one file and returns how many it read.
func (s *Source) read(ctx context.Context, path string, f *file, budget int, emit func(jvmevent.Batch)) (int, error) {
	r, err := jfr.Open(path)
	if err != nil {
		// Unreadable as a recording: report it and leave it be until it
		// changes.
		f.progress.Done = true
		return 1, errors.Join(fmt.Errorf("recordings: %s: %w (file skipped)", path, err), s.save(ctx, path, f.progress))
	}
	defer r.Close()
	chunks := r.Chunks()
	read := 0
	var errs []error
	for f.progress.Chunks < len(chunks) && read < budget {
		i := f.progress.Chunks
		b := jvmevent.Batch{}
		c, err := r.Chunk(i)
		if err == nil {
			err = f.stream.Chunk(c, &b)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("recordings: %s chunk %d: %w (chunk skipped)", path, i, err))
		}
		f.progress.Chunks++
		read++
		last := f.progress.Chunks == len(chunks)
		if last {
			f.stream.Flush(&b, true)
			f.progress.Done = true
		} else {
			f.stream.Flush(&b, false)
		}
		b.JVM = jvmevent.JVM{PID: int(f.stream.PID()), Source: path}
		b.RuntimeVersion = f.stream.RuntimeVersion()
		b.Ended = last
		if !b.Empty() || b.Ended {
			emit(b)
		}
		if err := s.save(ctx, path, f.progress); err != nil {
			errs = append(errs, err)
		}
	}
	if len(chunks) == 0 {
		f.progress.Done = true
	}
	return max(read, 1), errors.Join(errs...)
}
