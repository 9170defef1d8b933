package jfr

import (
	"bytes"
	"hash/maphash"
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
	base      *Clock       // the file's first chunk's clock, when loaded by a Reader
	owned     *chunkBuffer // buf's storage, reused once the chunk is unreachable (Reader.Chunk)
	pools     poolSet
	perm      arena    // pool values and kept events
	strs      interner // short strings shared by events
	opsDense  [][]fieldOp
	opsSparse map[int64][]fieldOp

	checkpoints map[int64]bool // offsets of the checkpoints indexed
	constants   []int32        // offset of every constant's key, as the checkpoints were walked
	denseSpent  int            // bytes of pools' tables by key beyond denseSlack (see denseBudget)
}

// NewChunk parses a chunk held entirely in buf (header included). index and
// offset only label errors and events with their place in the file.
func NewChunk(buf []byte, index int, offset int64) (*Chunk, error) {
	c := &Chunk{Index: index, Offset: offset}
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
func (c *Chunk) Bytes() []byte {
	if c.owned != nil {
		c.owned.escaped.Store(true) // kept from reuse: the caller may hold them
	}
	return c.buf
}

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
	md, err := sharedMetadata.parse(c.decoder(int(off)))
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
	defer c.resetOps() // ops cache pool pointers; new pools may exist now
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
		first := len(c.constants)
		for j := 0; j < n; j++ {
			c.constants = append(c.constants, int32(d.pos))
			d.u64() // key
			vo := d.pos
			d.spent = 0
			skipType(d, t, 0)
			if d.failed() {
				return 0, c.errorf(int64(vo), "checkpoint", decodeErr(d, "constant "+t.Name))
			}
		}
		if n > 0 {
			p.pending = append(p.pending, poolSegment{from: int32(first), n: int32(n)})
			p.fast = nil
		}
	}
	return delta, nil
}

// metadataCache shares parsed metadata between chunks, of one file or of
// several: a JVM writes the same metadata event into every chunk until a
// new event type is registered, and JVMs of one build write the same one,
// so the receiver's chunks and a tool's repeated reads mostly parse it
// once. Parsing is a function of the event's body and the chunk's integer
// encoding, so a match is taken only when both are equal, the body byte
// for byte (the hash only picks the candidate). Metadata is read-only once
// built, so chunks on different goroutines may share it.
type metadataCache struct {
	mu      sync.Mutex
	seed    maphash.Seed
	entries []cachedMetadata // least recently used first
}

type cachedMetadata struct {
	hash       uint64
	compressed bool
	body       []byte // a copy: the chunk's buffer is not kept
	md         *Metadata
}

// Bounds on what the process keeps: a few JDK builds' metadata (100-300 KB
// each); larger bodies, which only a hostile or unusual file has, are
// parsed each time rather than held.
const (
	maxCachedMetadata     = 8
	maxCachedMetadataBody = 1 << 20
)

// sharedMetadata is the cache every chunk uses.
var sharedMetadata = &metadataCache{seed: maphash.MakeSeed()}

func (mc *metadataCache) parse(d *decoder) (*Metadata, error) {
	body, err := metadataBody(d)
	if err != nil {
		return nil, err
	}
	if mc == nil || len(body) > maxCachedMetadataBody {
		return parseMetadataBody(body, d.compressed)
	}
	h := maphash.Bytes(mc.seed, body)
	mc.mu.Lock()
	for i := len(mc.entries) - 1; i >= 0; i-- {
		e := mc.entries[i]
		if e.hash == h && e.compressed == d.compressed && bytes.Equal(e.body, body) {
			copy(mc.entries[i:], mc.entries[i+1:])
			mc.entries[len(mc.entries)-1] = e
			mc.mu.Unlock()
			return e.md, nil
		}
	}
	mc.mu.Unlock()
	md, err := parseMetadataBody(body, d.compressed)
	if err != nil {
		return nil, err
	}
	e := cachedMetadata{hash: h, compressed: d.compressed, body: bytes.Clone(body), md: md}
	mc.mu.Lock()
	if len(mc.entries) >= maxCachedMetadata {
		copy(mc.entries, mc.entries[1:])
		mc.entries = mc.entries[:len(mc.entries)-1]
	}
	mc.entries = append(mc.entries, e)
	mc.mu.Unlock()
	return md, nil
}
