package jfr

import (
	"bytes"
	"path/filepath"
	"runtime"
	"testing"
)

// TestChunkBufferReusedOnlyWhenUnreachable: Reader.Chunk reuses the bytes of
// chunks the collector found unreachable, and nothing read from a chunk
// sees them change: a value that refers to the chunk (an event's string
// left in the chunk, a constant) keeps the chunk, and its bytes, alive, and
// the bytes Chunk.Bytes handed out are never reused.
func TestChunkBufferReusedOnlyWhenUnreachable(t *testing.T) {
	paths := []string{
		filepath.Join("testdata", "g1-default-jdk17.jfr"),
		filepath.Join("testdata", "zgc-default-nmt-jdk25.jfr"),
	}
	load := func(path string) *Chunk {
		t.Helper()
		r, err := Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		c, err := r.Chunk(0)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	// Kept from the first recording: every event's values, events kept
	// whole (AllEvents), and what they read as now.
	type kept struct {
		v    Value
		text string
	}
	var keep []kept
	er := load(paths[0]).AllEvents()
	for er.Next() {
		for _, v := range er.Event().Fields {
			keep = append(keep, kept{v, v.String()})
		}
	}
	handed := load(paths[0]).Bytes()
	want := bytes.Clone(handed)
	er = nil

	// Load the other recording, and the first again, many times over
	// collections, so that the buffers of the chunks dropped are reused.
	seen, reused := map[*chunkBuffer]bool{}, 0
	for i := 0; i < 50; i++ {
		c := load(paths[i%2])
		if seen[c.owned] {
			reused++
		}
		seen[c.owned] = true
		runtime.GC()
	}
	if reused == 0 {
		t.Error("no buffer was reused")
	}
	for i, k := range keep {
		if got := k.v.String(); got != k.text {
			t.Fatalf("value %d read %q when kept, %q after other chunks were loaded", i, k.text, got)
		}
	}
	if !bytes.Equal(handed, want) {
		t.Error("bytes handed out by Chunk.Bytes changed")
	}
}
