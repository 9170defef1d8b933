package recordings

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/collector/extension/xextension/storage"

	"github.com/otelcol-ai/otelcol-ai/internal/window"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/jvmevent"
)

// memStorage is a storage.Client over a map, shared by "restarts".
type memStorage struct {
	mu sync.Mutex
	m  map[string][]byte
}

func (s *memStorage) Get(_ context.Context, k string) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m[k], nil
}

func (s *memStorage) Set(_ context.Context, k string, v []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m[k] = append([]byte(nil), v...)
	return nil
}

func (s *memStorage) Delete(_ context.Context, k string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, k)
	return nil
}

func (s *memStorage) Batch(context.Context, ...*storage.Operation) error { return nil }
func (s *memStorage) Close(context.Context) error                        { return nil }

var fixture = filepath.Join("..", "..", "..", "..", "pkg", "jfr", "testdata", "g1-default-jdk17.jfr")

// twoChunks returns a recording of two chunks: the fixture's, and the same
// one second later.
func twoChunks(t *testing.T) []byte {
	t.Helper()
	a, err := os.ReadFile(fixture)
	if err != nil {
		t.Fatal(err)
	}
	b := append([]byte(nil), a...)
	be := binary.BigEndian
	be.PutUint64(b[32:], be.Uint64(b[32:])+uint64(time.Second))
	return append(append([]byte(nil), a...), b...)
}

type result struct {
	pauses, ended int
	pids          map[int]bool
	err           error
}

// drain polls until a poll brings nothing new.
func drain(s *Source) result {
	r := result{pids: map[int]bool{}}
	for range 20 {
		before := r.pauses + r.ended
		err := s.Poll(context.Background(), func(b jvmevent.Batch) {
			for _, w := range b.Windows {
				if w.Kind == window.KindJVMGCPause {
					r.pauses++
				}
			}
			if b.Ended {
				r.ended++
			}
			r.pids[b.JVM.PID] = true
		})
		r.err = errors.Join(r.err, err)
		if r.pauses+r.ended == before && before > 0 {
			break
		}
	}
	return r
}

// TestEachFileOnceAcrossRestarts: files are read when they stop changing,
// every chunk once; a restarted source with the same storage reads nothing
// again, resumes a file it had half read at the next chunk, and reads a
// file again when it changed.
func TestEachFileOnceAcrossRestarts(t *testing.T) {
	dir := t.TempDir()
	data := twoChunks(t)
	for _, name := range []string{"a.jfr", "b.jfr"} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	st := &memStorage{m: map[string][]byte{}}
	cfg := Config{Include: []string{filepath.Join(dir, "*.jfr")}, Storage: st}

	first := drain(New(cfg))
	if first.err != nil || first.ended != 2 || first.pauses == 0 || first.pauses%4 != 0 {
		t.Fatalf("first run: %+v", first)
	}
	perChunk := first.pauses / 4
	if first.pids[0] || len(first.pids) != 1 {
		t.Errorf("pids %v: want the recording JVM's", first.pids)
	}

	if again := drain(New(cfg)); again.pauses != 0 || again.ended != 0 {
		t.Fatalf("restart read files again: %+v", again)
	}

	// A restart after a crash in the middle of b.jfr: one chunk read.
	key := keyPrefix + filepath.Join(dir, "b.jfr")
	var p Progress
	if err := json.Unmarshal(st.m[key], &p); err != nil {
		t.Fatal(err)
	}
	p.Chunks, p.Done = 1, false
	half, _ := json.Marshal(p)
	st.m[key] = half
	if resumed := drain(New(cfg)); resumed.pauses != perChunk || resumed.ended != 1 {
		t.Fatalf("resumed: %+v, want %d pauses of the second chunk", resumed, perChunk)
	}

	// a.jfr replaced by a one-chunk file: read again, whole.
	one, _ := os.ReadFile(fixture)
	if err := os.WriteFile(filepath.Join(dir, "a.jfr"), one, 0o644); err != nil {
		t.Fatal(err)
	}
	if changed := drain(New(cfg)); changed.pauses != perChunk || changed.ended != 1 {
		t.Fatalf("changed file: %+v, want %d pauses", changed, perChunk)
	}
}

// TestNotARecordingIsReportedOnce: a file that is not JFR is reported with
// its path, once, and the others are read.
func TestNotARecordingIsReportedOnce(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "bad.jfr"), []byte("not a recording at all"), 0o644); err != nil {
		t.Fatal(err)
	}
	one, _ := os.ReadFile(fixture)
	if err := os.WriteFile(filepath.Join(dir, "good.jfr"), one, 0o644); err != nil {
		t.Fatal(err)
	}
	s := New(Config{Include: []string{filepath.Join(dir, "*.jfr")}})
	r := drain(s)
	if r.err == nil || !strings.Contains(r.err.Error(), "bad.jfr") || r.pauses == 0 {
		t.Fatalf("%+v", r)
	}
	if err := s.Poll(context.Background(), func(jvmevent.Batch) {}); err != nil {
		t.Fatalf("reported again: %v", err)
	}
}
