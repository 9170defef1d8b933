package repository

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/otelcol-ai/otelcol-ai/pkg/jfr"
	"github.com/otelcol-ai/otelcol-ai/pkg/jfr/jfrtest"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/jvmevent"
)

// BenchmarkFollowRepository measures the repository source on a real
// GC-heavy `profile` recording (JDK 17, G1, 4 s, chunks rotated), laid out
// as a JVM's repository, one chunk per file: CPU per event, the share of
// one core it takes to follow a JVM writing 10k events/s, and the heap a
// followed JVM holds (its chunk buffer and join state).
//
//	go test -run '^$' -bench FollowRepository ./receiver/jfrreceiver/internal/repository
func BenchmarkFollowRepository(b *testing.B) {
	j := jfrtest.Find(b, 17)
	rec := jfrtest.Record(b, jfrtest.Spec{Name: "bench-profile", JDK: j, Settings: "profile", Millis: 4000, Flags: []string{"-XX:+UseG1GC"}, Rotate: true})
	base := b.TempDir()
	repo := filepath.Join(base, "2026_11_29_10_00_00_4242")
	events, maxChunk, largestFile := splitIntoRepository(b, rec, repo)

	var windows int
	b.ResetTimer()
	for range b.N {
		s := New(Config{Include: []string{filepath.Join(base, "2*_*")}, DiscoveryInterval: time.Hour})
		s.started = true // read from the first chunk, as for a JVM that starts while watched
		windows = 0
		for len(s.followers) > 0 || windows == 0 {
			if err := s.Poll(context.Background(), func(bt jvmevent.Batch) { windows += len(bt.Windows) }); err != nil {
				b.Fatal(err)
			}
		}
		s.Close()
	}
	b.StopTimer()
	nsPerEvent := float64(b.Elapsed().Nanoseconds()) / float64(b.N) / float64(events)
	b.ReportMetric(nsPerEvent, "ns/event")
	b.ReportMetric(nsPerEvent*10_000/1e9*100, "%core@10k-events/s")
	b.ReportMetric(float64(events), "events")
	b.ReportMetric(float64(windows), "windows")

	// Heap held while following a JVM: its largest chunk, in progress (as
	// the JVM is writing it), read up to its last flush.
	liveBase := b.TempDir()
	live := filepath.Join(liveBase, "2026_11_29_10_00_00_4243")
	if err := os.MkdirAll(live, 0o755); err != nil {
		b.Fatal(err)
	}
	chunk, err := os.ReadFile(filepath.Join(repo, largestFile))
	if err != nil {
		b.Fatal(err)
	}
	chunk[64] = 3   // in-progress generation
	chunk[67] &^= 2 // not the final chunk
	if err := os.WriteFile(filepath.Join(live, "a.jfr"), chunk, 0o644); err != nil {
		b.Fatal(err)
	}
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	s := New(Config{Include: []string{filepath.Join(liveBase, "2*_*")}, DiscoveryInterval: time.Hour})
	s.started = true
	if err := s.Poll(context.Background(), func(jvmevent.Batch) {}); err != nil {
		b.Fatal(err)
	}
	if len(s.Following()) != 1 {
		b.Fatal("the in-progress chunk is not followed")
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(after.HeapAlloc)-float64(before.HeapAlloc), "heap-B/JVM")
	b.ReportMetric(float64(maxChunk), "largest-chunk-B")
	runtime.KeepAlive(s)
	s.Close()
}

// splitIntoRepository writes each chunk of a recording to its own file in
// dir, as a JVM's repository holds them, and returns the number of event
// records, the largest chunk's size and its file name.
func splitIntoRepository(b *testing.B, path, dir string) (events, largest int, largestFile string) {
	b.Helper()
	r, err := jfr.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	f, err := os.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	for i, ci := range r.Chunks() {
		c, err := r.Chunk(i)
		if err != nil {
			b.Fatal(err)
		}
		sc := c.Scan(jfr.NewSelection())
		for sc.Next() {
		}
		events += sc.Count()
		name := fmt.Sprintf("chunk_%02d.jfr", i)
		if int(ci.Header.Size) > largest {
			largest, largestFile = int(ci.Header.Size), name
		}
		buf := make([]byte, ci.Header.Size)
		if _, err := f.ReadAt(buf, ci.Offset); err != nil && err != io.EOF {
			b.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), buf, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	return events, largest, largestFile
}
