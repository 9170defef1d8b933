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
