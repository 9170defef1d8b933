package jfr

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
)

// ChunkInfo locates one chunk in a file.
type ChunkInfo struct {
	Index  int   // position of the chunk in the file, from 0
	Offset int64 // absolute offset of the chunk header
	Header Header
}

// Reader lists and loads the chunks of a recording held in an io.ReaderAt.
type Reader struct {
	// MaxChunkSize bounds the bytes [Reader.Chunk] allocates for one chunk:
	// a chunk whose header claims more is refused with an error wrapping
	// [ErrTooLarge], before anything is allocated for it, and the file's
	// other chunks stay readable. NewReader and Open set it to
	// DefaultMaxChunkSize; 0 means that too, and values above 2 GiB - 1
	// (the most this package can address) are clamped.
	MaxChunkSize int64

	r      io.ReaderAt
	size   int64
	chunks []ChunkInfo
	closer io.Closer
}

// DefaultMaxChunkSize is the default bound on the bytes held for one chunk
// ([Reader.MaxChunkSize], [LiveChunk.MaxSize]). HotSpot rotates chunks at
// about 12 MB, so real chunks are far below it; a header may claim up to
// 2 GiB, and a sparse file makes such a claim look backed by data.
const DefaultMaxChunkSize = 256 << 20

// maxChunkSize bounds the bytes loaded for one chunk; offsets inside a chunk
// are kept as int32.
const maxChunkSize = 1<<31 - 1

// chunkLimit returns the effective per-chunk bound for a configured value.
func chunkLimit(configured int64) int64 {
	if configured <= 0 {
		return DefaultMaxChunkSize
	}
	return min(configured, maxChunkSize)
}

// tooLarge is the error for a chunk whose header claims more than limit.
func tooLarge(chunk int, offset, claimed, limit int64) error {
	return &FormatError{Chunk: chunk, Offset: offset + 8, What: "chunk header", Err: detail(ErrTooLarge, "chunk claims %d bytes, limit is %d", claimed, limit)}
}

// NewReader lists the chunks of the recording of the given size in r. It
// reads only the chunk headers. A file that ends inside a chunk is not an
// error here: the partial chunk is listed, and loading it reports
// ErrTruncated (or, while a JVM still writes it, use [LiveChunk]).
func NewReader(r io.ReaderAt, size int64) (*Reader, error) {
	rd := &Reader{r: r, size: size, MaxChunkSize: DefaultMaxChunkSize}
	var hb [HeaderSize]byte
	for off := int64(0); off < size; {
		idx := len(rd.chunks)
		if size-off < HeaderSize {
			return nil, &FormatError{Chunk: idx, Offset: off, What: "chunk header", Err: detail(ErrTruncated, "%d bytes left, header needs %d", size-off, HeaderSize)}
		}
		if _, err := r.ReadAt(hb[:], off); err != nil {
			return nil, &FormatError{Chunk: idx, Offset: off, What: "chunk header", Err: err}
		}
		h, err := ParseHeader(hb[:])
		if err != nil {
			return nil, &FormatError{Chunk: idx, Offset: off, What: "chunk header", Err: err}
		}
		rd.chunks = append(rd.chunks, ChunkInfo{Index: idx, Offset: off, Header: h})
		if h.State != StateFinished {
			break // a chunk still being written: its size is not final, nothing after it is meaningful yet
		}
		if h.Size < HeaderSize {
			return nil, &FormatError{Chunk: idx, Offset: off + 8, What: "chunk header", Err: detail(ErrCorrupt, "chunk size %d", h.Size)}
		}
		if h.Size > size-off {
			break // runs past the file (and would overflow off); loading it says so
		}
		off += h.Size
	}
	if len(rd.chunks) == 0 {
		return nil, &FormatError{Chunk: 0, Offset: 0, What: "file", Err: detail(ErrTruncated, "empty file")}
	}
	return rd, nil
}

// Open opens the recording at path. Close the Reader when done.
func Open(path string) (*Reader, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	rd, err := NewReader(f, st.Size())
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	rd.closer = f
	return rd, nil
}

// Close closes the file opened by [Open]; it does nothing for readers made
// by [NewReader].
func (r *Reader) Close() error {
	if r.closer == nil {
		return nil
	}
	err := r.closer.Close()
	r.closer = nil
	return err
}

// Chunks returns the chunks of the file in order.
func (r *Reader) Chunks() []ChunkInfo { return r.chunks }

// Chunk loads chunk i: it reads its bytes (into a buffer of a chunk found
// unreachable, when there is one), parses its metadata (or takes it from
// an identical chunk's) and checks its constant pools. A chunk larger than
// MaxChunkSize is refused with an error wrapping [ErrTooLarge].
func (r *Reader) Chunk(i int) (*Chunk, error) {
	if i < 0 || i >= len(r.chunks) {
		return nil, fmt.Errorf("jfr: chunk %d out of range (file has %d)", i, len(r.chunks))
	}
	ci := r.chunks[i]
	h := ci.Header
	if h.Size < HeaderSize {
		return nil, &FormatError{Chunk: i, Offset: ci.Offset + 8, What: "chunk header", Err: detail(ErrCorrupt, "chunk size %d", h.Size)}
	}
	if limit := chunkLimit(r.MaxChunkSize); h.Size > limit {
		return nil, tooLarge(i, ci.Offset, h.Size, limit)
	}
	avail := r.size - ci.Offset
	if h.Size > avail {
		return nil, &FormatError{Chunk: i, Offset: r.size, What: "chunk", Err: detail(ErrTruncated, "chunk of %d bytes but only %d in file", h.Size, avail)}
	}
	cb := chunkBufferOf(h.Size)
	n, err := r.r.ReadAt(cb.b, ci.Offset)
	if err != nil && !(errors.Is(err, io.EOF)) {
		return nil, &FormatError{Chunk: i, Offset: ci.Offset, What: "chunk", Err: err}
	}
	clear(cb.b[n:]) // a reused buffer holds another chunk's bytes
	c, err := NewChunk(cb.b, i, ci.Offset)
	if err != nil {
		return nil, err
	}
	base := r.chunks[0].Header.Clock()
	c.base = &base
	c.owned = cb
	runtime.AddCleanup(c, recycleChunkBuffer, cb)
	return c, nil
}

// chunkBuffers holds the buffers of chunks that Reader.Chunk loaded and
// the garbage collector found unreachable, for the next chunks to load:
// reading a small recording allocates little besides its bytes, so
// without reuse they paced the collector (about 40% of the CPU time of
// reading every event of a 1 MB recording went to collection and its
// write barriers). A chunk's buffer is only reachable through the chunk
// (values refer to the chunk, strings are copies), except after
// Chunk.Bytes, which marks it never to be reused. sync.Pool lets unused
// buffers go at the next collections.
var chunkBuffers sync.Pool // of *chunkBuffer

type chunkBuffer struct {
	b       []byte
	escaped atomic.Bool // Chunk.Bytes handed the bytes out
}

// chunkBufferOf returns a buffer of size bytes, reused when one of about
// that size is free.
func chunkBufferOf(size int64) *chunkBuffer {
	if cb, _ := chunkBuffers.Get().(*chunkBuffer); cb != nil {
		if c := int64(cap(cb.b)); c >= size && c <= 2*size {
			cb.b = cb.b[:size]
			return cb
		}
		chunkBuffers.Put(cb)
	}
	return &chunkBuffer{b: make([]byte, size)}
}

func recycleChunkBuffer(cb *chunkBuffer) {
	if !cb.escaped.Load() {
		chunkBuffers.Put(cb)
	}
}

// ForEachChunk loads the chunks on up to workers goroutines (0 means
// GOMAXPROCS) and calls fn for each, concurrently. A chunk is only used by
// the goroutine that loaded it, so fn may decode it freely; at most workers
// chunks are in memory at once. The first error (from loading or from fn)
// stops the remaining work and is returned.
func (r *Reader) ForEachChunk(workers int, fn func(*Chunk) error) error {
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	var (
		mu       sync.Mutex
		firstErr error
		next     int
		wg       sync.WaitGroup
	)
	take := func() (int, bool) {
		mu.Lock()
		defer mu.Unlock()
		if firstErr != nil || next >= len(r.chunks) {
			return 0, false
		}
		next++
		return next - 1, true
	}
	fail := func(err error) {
		mu.Lock()
		if firstErr == nil {
			firstErr = err
		}
		mu.Unlock()
	}
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i, ok := take()
				if !ok {
					return
				}
				c, err := r.Chunk(i)
				if err == nil {
					err = fn(c)
				}
				if err != nil {
					fail(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	return firstErr
}
