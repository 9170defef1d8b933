package jfr

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestMetadataSharedOnlyWhenIdentical: chunks share parsed metadata across
// files only when their metadata events' bodies are byte for byte equal; a
// body that differs in one byte (a hostile file imitating a real one) is
// parsed on its own.
func TestMetadataSharedOnlyWhenIdentical(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "g1-default-jdk17.jfr"))
	if err != nil {
		t.Fatal(err)
	}
	h, err := ParseHeader(b)
	if err != nil {
		t.Fatal(err)
	}
	first := b[:h.Size]
	load := func(buf []byte) *Chunk {
		t.Helper()
		c, err := NewChunk(buf, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	a := load(bytes.Clone(first))
	if same := load(bytes.Clone(first)); same.Metadata != a.Metadata {
		t.Error("a copy of the same chunk parsed its metadata again")
	}

	// One letter of a type name, inside the metadata event's string table.
	changed := bytes.Clone(first)
	at := bytes.Index(changed[h.MetadataOffset:], []byte("jdk.GarbageCollection"))
	if at < 0 {
		t.Fatal("no jdk.GarbageCollection in the metadata")
	}
	changed[h.MetadataOffset+int64(at)+4] = 'X' // jdk.XarbageCollection
	c := load(changed)
	if c.Metadata == a.Metadata {
		t.Fatal("metadata that differs in one byte was taken from the cache")
	}
	if c.Metadata.TypeByName("jdk.XarbageCollection") == nil || c.Metadata.TypeByName("jdk.GarbageCollection") != nil {
		t.Error("the changed chunk's metadata does not have the changed name")
	}
	if a.Metadata.TypeByName("jdk.GarbageCollection") == nil {
		t.Error("the cached metadata changed")
	}
	if again := load(bytes.Clone(first)); again.Metadata != a.Metadata {
		t.Error("the original metadata was not shared after a different one was parsed")
	}
}

// TestSelectionCompiledOncePerMetadata: scanning chunks that share their
// metadata compiles the selection once; adding a type compiles it again,
// and what it selects is read.
func TestSelectionCompiledOncePerMetadata(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "g1-default-jdk17.jfr"))
	if err != nil {
		t.Fatal(err)
	}
	h, err := ParseHeader(b)
	if err != nil {
		t.Fatal(err)
	}
	load := func() *Chunk {
		t.Helper()
		c, err := NewChunk(bytes.Clone(b[:h.Size]), 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	count := func(sc *Scanner) int {
		n := 0
		for sc.Next() {
			n++
		}
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
		return n
	}
	sel := NewSelection()
	sel.Add("jdk.GarbageCollection", "gcId")
	a, c := load(), load()
	first, second := a.Scan(sel), c.Scan(sel)
	if &first.dense[0] != &second.dense[0] {
		t.Error("the selection was compiled again for a chunk with the same metadata")
	}
	gcs := count(second)
	if gcs == 0 {
		t.Fatal("no jdk.GarbageCollection")
	}
	sel.Add("jdk.GCPhasePause", "gcId")
	third := a.Scan(sel)
	if &third.dense[0] == &first.dense[0] {
		t.Error("the selection was not compiled again after Add")
	}
	if n := count(third); n <= gcs {
		t.Errorf("%d records with jdk.GCPhasePause added, %d without", n, gcs)
	}
}
