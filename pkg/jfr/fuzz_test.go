package jfr

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// Fuzz targets: none may panic, hang, or allocate in proportion to a size
// field rather than to the input; every error must be a FormatError (or an
// I/O error from the reader). Seeds come from a real recording.

var (
	seedOnce  sync.Once
	seedChunk *Chunk
	seedErr   error
)

func loadSeed(f *testing.F) *Chunk {
	f.Helper()
	seedOnce.Do(func() {
		var b []byte
		b, seedErr = os.ReadFile(filepath.Join("testdata", "g1-default-jdk17.jfr"))
		if seedErr == nil {
			seedChunk, seedErr = NewChunk(b, 0, 0)
		}
	})
	if seedErr != nil {
		f.Fatal(seedErr)
	}
	return seedChunk
}

func checkErr(t *testing.T, err error) {
	var fe *FormatError
	if err != nil && !errors.As(err, &fe) {
		t.Fatalf("error is not a FormatError: %v", err)
	}
}

func FuzzChunkHeader(f *testing.F) {
	c := loadSeed(f)
	f.Add(c.buf[:HeaderSize])
	f.Add(c.buf[:HeaderSize+200])
	f.Add(synthChunk(false))
	f.Add(synthChunk(true))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := ParseHeader(b)
		if err == nil {
			_ = h.EpochNanos(int64(len(b)))
			_ = h.Nanos(-int64(len(b)) << 40)
		}
		r, err := NewReader(bytes.NewReader(b), int64(len(b)))
		checkErr(t, err)
		if err == nil {
			for i := range r.Chunks() {
				_, err := r.Chunk(i)
				checkErr(t, err)
			}
		}
	})
}

// FuzzMetadata decodes a metadata event.
func FuzzMetadata(f *testing.F) {
	c := loadSeed(f)
	off := int(c.Header.MetadataOffset)
	d := c.decoder(off)
	size := int(d.u32())
	f.Add(c.buf[off : off+size])
	for _, fixed := range []bool{false, true} {
		s := &synth{fixed: fixed}
		s.metadata(synthMetadata())
		f.Add(s.b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		md, err := parseMetadata(&decoder{buf: b, compressed: true})
		if err == nil && md == nil {
			t.Fatal("nil metadata without error")
		}
	})
}

// FuzzCheckpoint indexes one checkpoint event against the seed chunk's
// metadata and decodes every constant it defines.
func FuzzCheckpoint(f *testing.F) {
	c := loadSeed(f)
	for off := range c.checkpoints {
		d := c.decoder(int(off))
		size := int(d.u32())
		if size < 4096 {
			f.Add(c.buf[off : off+int64(size)])
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		buf := append(append([]byte{}, c.buf[:HeaderSize]...), b...)
		fc := &Chunk{Header: c.Header, Metadata: c.Metadata, buf: buf}
		fc.pools.reset(c.Metadata)
		// Unlink the chain so only this checkpoint is read.
		_, err := fc.indexCheckpoint(HeaderSize)
		checkErr(t, err)
		for _, p := range fc.pools.dense {
			if p == nil {
				continue
			}
			for i := 0; i < p.n; i++ {
				_ = p.entry(i).value().String()
			}
		}
	})
}

// FuzzEvents decodes event records with the seed chunk's metadata and
// pools, with both readers.
func FuzzEvents(f *testing.F) {
	c := loadSeed(f)
	er := c.Events()
	for n := 0; er.Next() && n < 400; n++ {
		if n%40 == 0 {
			ev := er.Event()
			start := int(ev.Offset)
			f.Add(c.buf[start : start+ev.Size])
		}
	}
	sel := NewSelection()
	sel.Add("jdk.GarbageCollection", "startTime", "duration", "name", "cause", "gcId")
	sel.Add("jdk.GCHeapSummary", "heapSpace.committedSize", "when")
	sel.Add("jdk.ExecuteVMOperation", "eventThread.osName", "operation", "caller")
	f.Fuzz(func(t *testing.T, b []byte) {
		// The records go where the seed's first event was, so the pools'
		// offsets (which point past them) stay meaningful.
		buf := append(append([]byte{}, c.buf[:HeaderSize]...), b...)
		fc := &Chunk{Header: c.Header, Metadata: c.Metadata, buf: buf, pools: c.pools}
		er := fc.Events()
		for er.Next() {
			ev := er.Event()
			for _, v := range ev.Fields {
				_ = v.String()
			}
		}
		checkErr(t, er.Err())
		sc := fc.Scan(sel)
		for sc.Next() {
			r := sc.Record()
			for i := 0; i < 5; i++ {
				_ = r.Value(i).String()
				_, _ = r.Nanos(i)
			}
		}
		checkErr(t, sc.Err())
	})
}
