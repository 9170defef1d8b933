package repository

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/otelcol-ai/otelcol-ai/internal/window"
	"github.com/otelcol-ai/otelcol-ai/pkg/jfr"
	"github.com/otelcol-ai/otelcol-ai/pkg/jfr/jfrtest"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/jfrstream"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/jvmevent"
)

// splitChunks cuts a recording file into its chunks.
func splitChunks(t *testing.T, path string) [][]byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for len(data) > 0 {
		h, err := jfr.ParseHeader(data)
		if err != nil || h.Size < jfr.HeaderSize || h.Size > int64(len(data)) {
			t.Fatalf("chunk %d: header %+v: %v", len(out), h, err)
		}
		out = append(out, data[:h.Size:h.Size])
		data = data[h.Size:]
	}
	return out
}

// asFinal returns a copy of chunk with the JVM's final-chunk flag set or
// cleared.
func asFinal(chunk []byte, final bool) []byte {
	c := append([]byte(nil), chunk...)
	flags := binary.BigEndian.Uint16(c[66:]) &^ 2
	if final {
		flags |= 2
	}
	binary.BigEndian.PutUint16(c[66:], flags)
	return c
}

// unflushed returns chunk's header as a JVM leaves it in a chunk file just
// begun: its start, nothing flushed yet.
func unflushed(chunk []byte) []byte {
	c := append([]byte(nil), chunk[:jfr.HeaderSize]...)
	be := binary.BigEndian
	be.PutUint64(c[8:], jfr.HeaderSize) // size
	be.PutUint64(c[16:], 0)             // constant pools
	be.PutUint64(c[24:], 0)             // metadata
	c[64] = 1                           // in progress
	return c
}

// keyOf names a window for the comparison: windowKey, readable.
func keyOf(w window.Window) string {
	return fmt.Sprintf("%s %d gc=%v sp=%v %v", w.Kind, w.Start, w.Attributes[window.AttrJVMGCID], w.Attributes[window.AttrJVMSafepointID], w.Attributes[jfrstream.AttrGCPhase])
}

// TestRestartAtARotationLosesNoWindow: a real JDK 17 recording of several
// chunks (the JVM rotates at a safepoint: that safepoint's jdk.SafepointBegin
// is in the chunk that ends, its VM operation in the next one). A collector
// reads the first chunk and opens the next one before the JVM flushed it,
// and is restarted there, the safepoint still waiting for its end. The next
// run, from the checkpoint, sends every window the first did not, once:
// the checkpoint names the chunk that holds the safepoint's begin, not the
// one opened last.
func TestRestartAtARotationLosesNoWindow(t *testing.T) {
	j := jfrtest.Find(t, 17)
	rec := jfrtest.Record(t, jfrtest.Spec{Name: "restart-rotation-jdk17", JDK: j, Settings: "profile", Millis: 3000, Rotate: true})
	chunks := splitChunks(t, rec)
	if len(chunks) < 3 {
		t.Fatalf("the recording has %d chunks, want the rotations' 3 or more", len(chunks))
	}

	// What one uninterrupted read builds.
	want := map[string]int{}
	ref := jfrstream.New()
	var all jvmevent.Batch
	for i, data := range chunks {
		c, err := jfr.NewChunk(data, 0, 0)
		if err != nil {
			t.Fatalf("chunk %d: %v", i, err)
		}
		if err := ref.Chunk(c, &all); err != nil {
			t.Fatalf("chunk %d: %v", i, err)
		}
	}
	ref.Flush(&all, true)
	for _, w := range all.Windows {
		want[keyOf(w)]++
	}

	base := t.TempDir()
	dir := filepath.Join(base, "2026_12_06_11_00_00_4321")
	name := func(i int) string { return filepath.Join(dir, fmt.Sprintf("%c.jfr", 'a'+i)) }
	write(t, name(0), asFinal(chunks[0], false))
	write(t, name(1), unflushed(chunks[1]))
	start0, err := jfr.ParseHeader(chunks[0])
	if err != nil {
		t.Fatal(err)
	}
	cfg := func(resume Position) Config {
		return Config{Include: []string{filepath.Join(base, "2*_*")}, DiscoveryInterval: time.Hour,
			Resume: map[string]Position{dir: resume}}
	}
	got := map[string]int{}
	collect := func(b jvmevent.Batch) {
		for _, w := range b.Windows {
			got[keyOf(w)]++
		}
	}

	// The first run, resumed at the first chunk (a collector restarted
	// before): one poll reads it and opens the next, not flushed yet.
	first := New(cfg(Position{ChunkStart: start0.StartNanos}))
	first.noWatcher = true
	if err := first.Poll(t.Context(), collect); err != nil {
		t.Fatal(err)
	}
	f := first.followers[dir]
	if f == nil || f.lastStart == start0.StartNanos {
		t.Fatalf("the first run did not open the second chunk: %+v", f)
	}
	if _, held := f.stream.OldestPending(); !held {
		t.Fatal("no window waits across the rotation: the restart is not exercised")
	}
	pos := first.Positions()[dir]
	first.Close()
	sentFirst := len(got)
	t.Logf("first run: %d windows sent, checkpoint at chunk start %d (first chunk %d), %d remembered", sentFirst, pos.ChunkStart, start0.StartNanos, len(pos.Sent))

	// The JVM goes on: the rest of its chunks, the last one final.
	for i := 1; i < len(chunks); i++ {
		write(t, name(i), asFinal(chunks[i], i == len(chunks)-1))
	}
	second := New(cfg(pos))
	second.noWatcher = true
	defer second.Close()
	for range 50 {
		var ended bool
		if err := second.Poll(t.Context(), func(b jvmevent.Batch) { collect(b); ended = ended || b.Ended }); err != nil {
			t.Fatal(err)
		}
		if ended {
			break
		}
	}

	var gaps, dups, extra []string
	for k, n := range want {
		switch {
		case got[k] == 0:
			gaps = append(gaps, k)
		case got[k] > n:
			dups = append(dups, k)
		}
	}
	for k := range got {
		if want[k] == 0 {
			extra = append(extra, k)
		}
	}
	t.Logf("%d windows in the recording, %d received over both runs", len(want), len(got))
	if len(gaps)+len(dups)+len(extra) > 0 {
		t.Errorf("across the restart: gaps %v, duplicates %v, not in the recording %v", gaps, dups, extra)
	}
}
