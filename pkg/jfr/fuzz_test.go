package jfr

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strconv"
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
			c := h.Clock()
			_ = c.EpochNanos(int64(len(b)))
			_ = c.Nanos(-int64(len(b)) << 40)
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
		decodeConstants(fc)
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

// maxFuzzAlloc bounds what one execution may allocate: the package's
// per-chunk target, which no input may exceed.
const maxFuzzAlloc = 256 << 20

// decodeAll reads every event of a segment with both readers, and every
// constant of the chunk, as a consumer would; it fails the test on an
// error that is not a FormatError.
func decodeAll(t *testing.T, c *Chunk, from, to int) {
	er := c.eventsBetween(from, to)
	for er.Next() {
		for _, v := range er.Event().Fields {
			_ = v.String()
		}
	}
	checkErr(t, er.Err())
	sel := NewSelection()
	for i, et := range c.Metadata.EventTypes {
		if i == 8 {
			break
		}
		names := make([]string, 0, len(et.Fields))
		for _, f := range et.Fields {
			names = append(names, f.Name)
		}
		sel.Add(et.Name, names...)
	}
	sc := Segment{Chunk: c, From: from, To: to}.Scan(sel)
	for sc.Next() {
		r := sc.Record()
		for i := range r.slots {
			_ = r.Value(i).String()
			_, _ = r.Nanos(i)
		}
	}
	checkErr(t, sc.Err())
	decodeConstants(c)
}

// decodeConstants makes every constant pool of c into entries and
// formats each constant.
func decodeConstants(c *Chunk) {
	for _, p := range c.pools.dense {
		if p == nil {
			continue
		}
		if p.pending != nil {
			p.materialize() // pools are made into entries on first lookup
		}
		for i := 0; i < p.n; i++ {
			_ = p.entry(i).value().String()
		}
	}
}

// smallRealChunk is the seed recording cut down to fuzz quickly: its
// header, its first events and its metadata, without constant pools.
func smallRealChunk(f *testing.F) []byte {
	c := loadSeed(f)
	b := bytes.Clone(c.buf[:HeaderSize])
	er := c.Events()
	for n := 0; er.Next() && n < 40; n++ {
		ev := er.Event()
		b = append(b, c.buf[ev.Offset:ev.Offset+int64(ev.Size)]...)
	}
	d := c.decoder(int(c.Header.MetadataOffset))
	size := int64(d.u32())
	h := c.Header
	h.MetadataOffset, h.CheckpointOffset = int64(len(b)), 0
	b = append(b, c.buf[c.Header.MetadataOffset:c.Header.MetadataOffset+size]...)
	h.Size = int64(len(b))
	copy(b, headerBytes(h))
	return b
}

// hostileSeeds are synthetic chunks in parts, valid and hostile, so that
// the fuzzer mutates metadata and pools as well as events.
func hostileSeeds() map[string]struct {
	fixed bool
	parts chunkParts
} {
	pools := func(s *synth) {
		s.i32(2)
		s.long(sThread)
		s.i32(2)
		s.long(int64(sThreadKey))
		s.utf8("main")
		s.long(1)
		s.long(2)
		s.latin1("GC Thread#0")
		s.long(0)
		s.long(sString)
		s.i32(1)
		s.long(7)
		s.utf8("pooled")
	}
	events := func(s *synth) {
		for _, x := range samples {
			s.sample(x)
		}
	}
	dagArray := func(count int) func(*synth) {
		return func(s *synth) {
			s.record(int64(dagEvent(10)), func(s *synth) {
				s.i32(count)
				s.i32(7)
				s.b = append(s.b, make([]byte, count)...)
			})
		}
	}
	seeds := map[string]struct {
		fixed bool
		parts chunkParts
	}{}
	for _, fixed := range []bool{false, true} {
		seeds["synthetic fixed="+strconv.FormatBool(fixed)] = struct {
			fixed bool
			parts chunkParts
		}{fixed, chunkPieces(fixed, synthMetadata(), pools, events)}
	}
	add := func(name string, md el, pools, events func(*synth)) {
		seeds[name] = struct {
			fixed bool
			parts chunkParts
		}{false, chunkPieces(false, md, pools, events)}
	}
	add("DAG 10 deep, array within budget", withClasses(dagClasses(10, true)...), nil, dagArray(40))
	add("DAG 10 deep, array over budget", withClasses(dagClasses(10, true)...), nil, dagArray(600))
	add("DAG 40 deep", withClasses(dagClasses(40, false)...), nil, func(s *synth) { s.record(int64(dagEvent(40)), func(*synth) {}) })
	add("self-inline struct", withClasses(class(2001, "test.Loop", "", field("again", 2001))), nil, nil)
	return seeds
}

// FuzzLiveChunk follows a chunk that grows in two steps: first a prefix
// whose header claims just that prefix (in progress, without a checkpoint
// past it), then the whole input, polling and decoding after each. Growth
// goes through Reserve, whose total must be what LiveChunk holds.
func FuzzLiveChunk(f *testing.F) {
	for _, b := range [][]byte{synthChunk(false), synthChunk(true)} {
		f.Add(b, uint32(len(b)/2))
		f.Add(b, uint32(len(b)))
	}
	real := smallRealChunk(f)
	f.Add(real, uint32(HeaderSize+200))
	for _, s := range hostileSeeds() {
		b := assemble(s.fixed, s.parts)
		f.Add(b, uint32(len(b)-len(s.parts.events)))
	}
	f.Fuzz(func(t *testing.T, b []byte, split uint32) {
		cut := int(split % uint32(len(b)+1))
		first := bytes.Clone(b[:cut])
		if h, err := ParseHeader(first); err == nil {
			h.Size, h.State = int64(cut), 1
			if h.CheckpointOffset >= h.Size {
				h.CheckpointOffset = 0
			}
			copy(first, headerBytes(h))
		}
		file := &replaceableFile{}
		live := NewLiveChunk(file, 0)
		live.Retries, live.Backoff = 1, 0
		live.MaxSize = 1 << 20 // claims beyond it must be refused, cheaply
		var reserved int64
		live.Reserve = func(grow int64) error {
			if grow <= 0 {
				t.Fatalf("Reserve asked for %d bytes", grow)
			}
			reserved += grow
			return nil
		}
		grew := allocated(func() {
			for _, step := range [][]byte{first, b} {
				file.b = step
				seg, err := live.Poll()
				checkErr(t, err)
				if live.Held() != reserved || live.Held() > live.MaxSize {
					t.Fatalf("holds %d bytes; Reserve accepted %d, limit %d", live.Held(), reserved, live.MaxSize)
				}
				if err == nil {
					decodeAll(t, seg.Chunk, seg.From, seg.To)
				}
			}
		})
		if grew > maxFuzzAlloc {
			t.Fatalf("allocated %d bytes for %d bytes of input", grew, len(b))
		}
	})
}

// FuzzChunkMetadata loads chunks assembled from a checkpoint, a metadata
// event and event records that are fuzzed separately, and decodes every
// event and constant: the fuzzer mutates the type system itself, not only
// the records of the seed recording's.
func FuzzChunkMetadata(f *testing.F) {
	for _, s := range hostileSeeds() {
		f.Add(s.parts.checkpoint, s.parts.metadata, s.parts.events, s.fixed)
	}
	real := smallRealChunk(f)
	h, _ := ParseHeader(real)
	f.Add([]byte(nil), real[h.MetadataOffset:], real[HeaderSize:h.MetadataOffset], false)
	f.Fuzz(func(t *testing.T, checkpoint, metadata, events []byte, fixed bool) {
		b := assemble(fixed, chunkParts{checkpoint, metadata, events})
		grew := allocated(func() {
			c, err := NewChunk(b, 0, 0)
			checkErr(t, err)
			if err == nil {
				decodeAll(t, c, HeaderSize, len(c.buf))
			}
		})
		if grew > maxFuzzAlloc {
			t.Fatalf("allocated %d bytes for %d bytes of input", grew, len(b))
		}
	})
}
