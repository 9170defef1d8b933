package jfr

import (
	"errors"
	"fmt"
	"io"
	"time"
)

// LiveChunk follows one chunk that a JVM may still be writing, such as the
// newest file in a JVM's disk repository. Each [LiveChunk.Poll] takes a
// consistent snapshot of the header and returns the records flushed since
// the previous poll. Memory grows with the chunk (HotSpot rotates chunks at
// about 12 MB by default), up to MaxSize.
type LiveChunk struct {
	r      io.ReaderAt
	offset int64
	index  int
	c      *Chunk
	buf    []byte // the chunk's bytes; its capacity is what Held reports
	pos    int    // next undelivered record, chunk-relative
	done   bool

	// Retries and Backoff bound the wait for a header that the JVM is
	// rewriting (file state 0xFF, or two state reads that differ).
	Retries int
	Backoff time.Duration

	// MaxSize bounds the bytes held for the chunk: a header that claims
	// more makes Poll fail with an error wrapping [ErrTooLarge], before
	// anything is allocated for the claim. NewLiveChunk sets
	// DefaultMaxChunkSize; 0 means that too, and values above 2 GiB - 1
	// are clamped. The header's claim is checked against the file (its
	// last byte must exist) but a sparse file passes that check, so this
	// bound is what limits memory.
	MaxSize int64

	// Reserve, when not nil, is called before Poll allocates a larger
	// buffer, with the number of bytes Held is about to grow by. Callers
	// that share one memory budget among many chunks return an error to
	// refuse the growth; Poll then fails with an error wrapping both
	// [ErrTooLarge] and that error, keeps the bytes it holds, and may be
	// called again later. After Reserve returns nil, Held grows by exactly
	// grow (while the bytes are copied, the old buffer is live too).
	// Reserve is not called when a poll fits in the current buffer.
	Reserve func(grow int64) error
}

// NewLiveChunk follows the chunk whose header is at offset in r.
func NewLiveChunk(r io.ReaderAt, offset int64) *LiveChunk {
	return &LiveChunk{r: r, offset: offset, pos: HeaderSize, Retries: 20, Backoff: time.Millisecond, MaxSize: DefaultMaxChunkSize}
}

// Held returns the bytes of chunk data the LiveChunk holds (the capacity
// of its buffer). It only grows, each time by an amount that Reserve
// accepted; a caller that accounts memory releases Held when it drops the
// LiveChunk. Metadata and decoded constants are not included: they are
// bounded by the chunk's size.
func (l *LiveChunk) Held() int64 { return int64(cap(l.buf)) }

// Segment is a range of records of a chunk delivered by one poll.
type Segment struct {
	Chunk    *Chunk
	From, To int // chunk-relative offsets of the first record and the end
}

// Events reads every event of the segment (see [Chunk.Events]; values are
// reused from one event to the next).
func (s Segment) Events() *EventReader { return s.Chunk.eventsBetween(s.From, s.To) }

// Scan reads the selected events of the segment (see [Chunk.Scan]).
func (s Segment) Scan(sel *Selection) *Scanner {
	sc := s.Chunk.Scan(sel)
	sc.pos, sc.end = s.From, s.To
	return sc
}

// Empty reports whether the segment holds no records.
func (s Segment) Empty() bool { return s.From >= s.To }

// Finished reports whether the chunk is complete and fully delivered; poll
// the next chunk file then.
func (l *LiveChunk) Finished() bool { return l.done }

// Chunk returns the chunk as loaded so far (nil before the first flush).
func (l *LiveChunk) Chunk() *Chunk { return l.c }

// snapshot reads the header until two reads of the file state agree and
// the JVM is not rewriting it.
func (l *LiveChunk) snapshot(hb *[HeaderSize]byte) (Header, error) {
	var st [1]byte
	for try := 0; ; try++ {
		if try > 0 {
			if try > l.Retries {
				return Header{}, &FormatError{Chunk: l.index, Offset: l.offset + 64, What: "chunk header", Err: detail(ErrNotFlushed, "header kept changing")}
			}
			time.Sleep(l.Backoff)
		}
		if _, err := l.r.ReadAt(hb[:], l.offset); err != nil {
			if errors.Is(err, io.EOF) {
				return Header{}, &FormatError{Chunk: l.index, Offset: l.offset, What: "chunk header", Err: detail(ErrNotFlushed, "header not written yet")}
			}
			return Header{}, err
		}
		if hb[64] == StateUpdating {
			continue
		}
		h, err := ParseHeader(hb[:])
		if err != nil {
			return Header{}, &FormatError{Chunk: l.index, Offset: l.offset, What: "chunk header", Err: err}
		}
		if _, err := l.r.ReadAt(st[:], l.offset+64); err != nil {
			return Header{}, err
		}
		if st[0] != hb[64] {
			continue
		}
		return h, nil
	}
}

// Poll snapshots the header and returns the records flushed since the last
// poll (an empty segment if nothing new). It returns an error wrapping
// ErrNotFlushed while the JVM has flushed no metadata yet; call again later.
// Metadata re-emitted mid-chunk and new checkpoints are picked up before
// the segment's records are returned.
func (l *LiveChunk) Poll() (Segment, error) {
	if l.done {
		return Segment{Chunk: l.c, From: l.pos, To: l.pos}, nil
	}
	var hb [HeaderSize]byte
	h, err := l.snapshot(&hb)
	if err != nil {
		return Segment{}, err
	}
	if h.MetadataOffset == 0 {
		return Segment{}, &FormatError{Chunk: l.index, Offset: l.offset + 24, What: "chunk header", Err: ErrNotFlushed}
	}
	if h.Size < HeaderSize || h.MetadataOffset >= h.Size || h.CheckpointOffset >= h.Size {
		return Segment{}, &FormatError{Chunk: l.index, Offset: l.offset + 8, What: "chunk header", Err: detail(ErrCorrupt, "size %d, metadata at %d, checkpoint at %d", h.Size, h.MetadataOffset, h.CheckpointOffset)}
	}
	if limit := chunkLimit(l.MaxSize); h.Size > limit {
		return Segment{}, tooLarge(l.index, l.offset, h.Size, limit)
	}
	c := l.c
	first := c == nil
	if first {
		c = &Chunk{Index: l.index, Offset: l.offset}
	}
	old := int64(len(c.buf))
	if h.Size < old {
		return Segment{}, &FormatError{Chunk: l.index, Offset: l.offset + 8, What: "chunk header", Err: detail(ErrCorrupt, "chunk shrank from %d to %d bytes", old, h.Size)}
	}
	if h.Size > old {
		if err := l.read(old, h.Size); err != nil {
			return Segment{}, err
		}
		c.buf = l.buf[:h.Size]
	}
	prev := c.Header
	c.Header = h
	copy(c.buf, hb[:]) // the header as of this snapshot
	if first || h.MetadataOffset != prev.MetadataOffset {
		if err := c.loadMetadata(h.MetadataOffset); err != nil {
			c.Header = prev
			c.buf = l.buf[:old]
			return Segment{}, err
		}
	}
	if err := c.indexCheckpoints(h.CheckpointOffset, nil); err != nil {
		return Segment{}, err
	}
	l.c = c
	seg := Segment{Chunk: c, From: l.pos, To: len(c.buf)}
	l.pos = len(c.buf)
	l.done = h.State == StateFinished
	return seg, nil
}

// read makes l.buf hold the chunk's bytes [0, size), reading [old, size)
// from the file. It checks that the bytes exist before allocating for them,
// and asks Reserve before the buffer grows.
func (l *LiveChunk) read(old, size int64) error {
	notYet := func() error {
		return &FormatError{Chunk: l.index, Offset: l.offset + old, What: "chunk", Err: detail(ErrNotFlushed, "header announces %d bytes not yet in the file", size)}
	}
	var last [1]byte
	if _, err := l.r.ReadAt(last[:], l.offset+size-1); err != nil {
		if errors.Is(err, io.EOF) {
			return notYet()
		}
		return err
	}
	if held := int64(cap(l.buf)); size > held {
		// Doubling keeps the copies linear in the chunk's size; the limit
		// bounds the slack.
		grown := min(max(size, 2*held), chunkLimit(l.MaxSize))
		if l.Reserve != nil {
			if err := l.Reserve(grown - held); err != nil {
				return &FormatError{Chunk: l.index, Offset: l.offset + old, What: "chunk", Err: fmt.Errorf("%w: growing the buffer from %d to %d bytes for a chunk of %d: %w", ErrTooLarge, held, grown, size, err)}
			}
		}
		buf := make([]byte, old, grown)
		copy(buf, l.buf[:old])
		l.buf = buf
	}
	l.buf = l.buf[:size]
	if _, err := l.r.ReadAt(l.buf[old:], l.offset+old); err != nil {
		l.buf = l.buf[:old]
		if errors.Is(err, io.EOF) {
			return notYet()
		}
		return err
	}
	return nil
}
