package jfr

import (
	"bytes"
	"sync"
)

// Chunk is one loaded chunk: its bytes, header, metadata and constant-pool
// index. A Chunk and the values decoded from it are not safe for concurrent
// use; decode different chunks on different goroutines instead.
type Chunk struct {
	Header   Header
	Metadata *Metadata
	Index    int   // position in the file
	Offset   int64 // absolute offset of the chunk in the file

	buf       []byte
	base      *Clock // the file's first chunk's clock, when loaded by a Reader
	pools     poolSet
	perm      arena    // pool values and kept events
	strs      interner // short strings shared by events
	mdCache   *metadataCache
	opsDense  [][]fieldOp
	opsSparse map[int64][]fieldOp

	checkpoints map[int64]bool // offsets of the checkpoints indexed
}

// NewChunk parses a chunk held entirely in buf (header included). index and
// offset only label errors and events with their place in the file.
func NewChunk(buf []byte, index int, offset int64) (*Chunk, error) {
	return newChunk(buf, index, offset, nil)
}

func newChunk(buf []byte, index int, offset int64, mc *metadataCache) (*Chunk, error) {
	c := &Chunk{Index: index, Offset: offset, mdCache: mc}
	h, err := ParseHeader(buf)
	if err != nil {
		return nil, c.errorf(0, "chunk header", err)
	}
	if h.MetadataOffset == 0 {
		return nil, c.errorf(24, "chunk header", ErrNotFlushed)
	}
	if h.Size < HeaderSize || h.Size > int64(len(buf)) {
		return nil, c.errorf(8, "chunk header", detail(ErrTruncated, "chunk size %d but %d bytes available", h.Size, len(buf)))
	}
	c.Header = h
	c.buf = buf[:h.Size]
	if err := c.loadMetadata(h.MetadataOffset); err != nil {
		return nil, err
	}
	if err := c.indexCheckpoints(h.CheckpointOffset, nil); err != nil {
		return nil, err
	}
	return c, nil
}

// Clock returns the clock that converts this chunk's ticks. For a chunk
// loaded by a [Reader] it is the clock of the file's first chunk: the JDK's
// reader keeps the first chunk's time base for every later chunk of a file,
// so its times for those chunks differ from their own headers' by the drift
// between the JVM's tick counter and the wall clock (20-315 ns seen). A chunk
// parsed alone ([NewChunk], [LiveChunk]) uses its own header.
func (c *Chunk) Clock() Clock {
	if c.base != nil {
		return *c.base
	}
	return c.Header.Clock()
}

// Bytes returns the chunk's bytes (header included); callers must not
// modify them.
func (c *Chunk) Bytes() []byte { return c.buf }

func (c *Chunk) errorf(rel int64, what string, err error) error {
	return &FormatError{Chunk: c.Index, Offset: c.Offset + rel, What: what, Err: err}
}

func (c *Chunk) decoder(pos int) *decoder {
	return &decoder{buf: c.buf, pos: pos, compressed: c.Header.CompressedInts()}
}

func (c *Chunk) loadMetadata(off int64) error {
	if off < HeaderSize || off >= int64(len(c.buf)) {
		return c.errorf(24, "chunk header", detail(ErrCorrupt, "metadata offset %d outside chunk of %d bytes", off, len(c.buf)))
	}
	md, err := c.mdCache.parse(c.decoder(int(off)))
	if err != nil {
		return c.errorf(off, "metadata", err)
	}
	c.Metadata = md
	c.pools.reset(md)
	c.checkpoints = nil
	c.resetOps()
	return nil
}

// indexCheckpoints walks the checkpoint chain back from off, indexing every
// pool entry, and stops at offset 0 or at a checkpoint already indexed.
// seen, when not nil, collects the offsets walked.
func (c *Chunk) indexCheckpoints(off int64, seen map[int64]bool) error {
	if c.checkpoints == nil {
		c.checkpoints = map[int64]bool{}
	}
	defer func() {
		c.pools.index()
		c.resetOps() // ops cache pool pointers; new pools may exist now
	}()
	limit := int64(len(c.buf))
	for off != 0 {
		if c.checkpoints[off] {
			return nil
		}
		if off < HeaderSize || off >= limit {
			return c.errorf(off, "checkpoint", detail(ErrCorrupt, "checkpoint offset %d outside chunk of %d bytes", off, len(c.buf)))
		}
		delta, err := c.indexCheckpoint(off)
		if err != nil {
			return err
		}
		c.checkpoints[off] = true
		if delta == 0 {
			return nil
		}
		if delta > 0 || off+delta < HeaderSize {
			// The chain must walk backwards; anything else could loop.
			return c.errorf(off, "checkpoint", detail(ErrCorrupt, "checkpoint delta %d", delta))
		}
		limit = off
		off += delta
	}
	return nil
}

func (c *Chunk) indexCheckpoint(off int64) (delta int64, err error) {
	d := c.decoder(int(off))
	size := d.u32()
	if d.failed() || size == 0 || size > uint64(len(c.buf))-uint64(off) {
		return 0, c.errorf(off, "checkpoint", detail(ErrTruncated, "checkpoint of size %d runs past the chunk end", size))
	}
	end := int(off) + int(size)
	d.buf = c.buf[:end]
	if typ := d.u64(); typ != 1 {
		return 0, c.errorf(off, "checkpoint", detail(ErrCorrupt, "event type %d where a checkpoint (1) was expected", typ))
	}
	d.u64() // start time
	d.u64() // duration
	delta = int64(d.u64())
	d.u8() // type flags
	npools := d.count(end - d.pos)
	if npools < 0 {
		return 0, c.errorf(int64(d.pos), "checkpoint", decodeErr(d, "pool count"))
	}
	for i := 0; i < npools; i++ {
		at := d.pos
		tid := int64(d.u64())
		n := d.count(end - d.pos)
		if d.failed() {
			return 0, c.errorf(int64(at), "checkpoint", decodeErr(d, "pool header"))
		}
		t := c.Metadata.TypeByID(tid)
		if t == nil {
			return 0, c.errorf(int64(at), "checkpoint", detail(ErrCorrupt, "constant pool for undeclared class id %d", tid))
		}
		p := c.pools.get(t, c)
		for j := 0; j < n; j++ {
			key := d.u64()
			vo := d.pos
			d.spent = 0
			skipType(d, t, 0)
			if d.failed() {
				return 0, c.errorf(int64(vo), "checkpoint", decodeErr(d, "constant "+t.Name))
			}
			p.add(key, int32(vo))
		}
	}
	return delta, nil
}

// metadataCache shares parsed metadata between the chunks of a file: a JVM
// writes the same metadata event into every chunk until a new event type
// is registered. Metadata is read-only once built, so chunks on different
// goroutines may share it.
type metadataCache struct {
	mu      sync.Mutex
	entries []cachedMetadata
}

type cachedMetadata struct {
	raw []byte
	md  *Metadata
}

func (mc *metadataCache) parse(d *decoder) (*Metadata, error) {
	if mc == nil {
		return parseMetadata(d)
	}
	start := d.pos
	probe := *d
	size := probe.u32()
	if probe.failed() || size == 0 || size > uint64(len(d.buf)-start) {
		return parseMetadata(d)
	}
	// Compare what follows the event's own start time, duration and id.
	probe.u64()
	probe.u64()
	probe.u64()
	probe.u64()
	if probe.failed() || probe.pos > start+int(size) {
		return parseMetadata(d)
	}
	raw := d.buf[probe.pos : start+int(size)]
	mc.mu.Lock()
	for _, e := range mc.entries {
		if bytes.Equal(e.raw, raw) {
			mc.mu.Unlock()
			return e.md, nil
		}
	}
	mc.mu.Unlock()
	md, err := parseMetadata(d)
	if err != nil {
		return nil, err
	}
	mc.mu.Lock()
	if len(mc.entries) >= 4 {
		mc.entries = mc.entries[1:]
	}
	mc.entries = append(mc.entries, cachedMetadata{raw: bytes.Clone(raw), md: md})
	mc.mu.Unlock()
	return md, nil
}
