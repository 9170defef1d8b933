package jfr

import (
	"errors"
	"io"
	"time"
)

// LiveChunk follows one chunk that a JVM may still be writing, such as the
// newest file in a JVM's disk repository. Each [LiveChunk.Poll] takes a
// consistent snapshot of the header and returns the records flushed since
// the previous poll. Memory grows with the chunk (HotSpot rotates chunks at
// about 12 MB by default).
type LiveChunk struct {
	r      io.ReaderAt
	offset int64
	index  int
	c      *Chunk
	pos    int // next undelivered record, chunk-relative
	done   bool

	// Retries and Backoff bound the wait for a header that the JVM is
	// rewriting (file state 0xFF, or two state reads that differ).
	Retries int
	Backoff time.Duration
}

// NewLiveChunk follows the chunk whose header is at offset in r.
func NewLiveChunk(r io.ReaderAt, offset int64) *LiveChunk {
	return &LiveChunk{r: r, offset: offset, pos: HeaderSize, Retries: 20, Backoff: time.Millisecond}
}

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
	if h.Size < HeaderSize || h.Size > maxChunkSize || h.MetadataOffset >= h.Size || h.CheckpointOffset >= h.Size {
		return Segment{}, &FormatError{Chunk: l.index, Offset: l.offset + 8, What: "chunk header", Err: detail(ErrCorrupt, "size %d, metadata at %d, checkpoint at %d", h.Size, h.MetadataOffset, h.CheckpointOffset)}
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
		// Check that the bytes exist before allocating for them: a header
		// can announce up to 2 GB.
		var last [1]byte
		if _, err := l.r.ReadAt(last[:], l.offset+h.Size-1); err != nil {
			if errors.Is(err, io.EOF) {
				return Segment{}, &FormatError{Chunk: l.index, Offset: l.offset + old, What: "chunk", Err: detail(ErrNotFlushed, "header announces %d bytes not yet in the file", h.Size)}
			}
			return Segment{}, err
		}
		grown := c.buf[:cap(c.buf)]
		if int64(len(grown)) < h.Size {
			grown = make([]byte, h.Size, max(h.Size, 2*old))
			copy(grown, c.buf)
		}
		grown = grown[:h.Size]
		if _, err := l.r.ReadAt(grown[old:], l.offset+old); err != nil {
			if errors.Is(err, io.EOF) {
				return Segment{}, &FormatError{Chunk: l.index, Offset: l.offset + old, What: "chunk", Err: detail(ErrNotFlushed, "header announces %d bytes not yet in the file", h.Size)}
			}
			return Segment{}, err
		}
		c.buf = grown
	}
	prev := c.Header
	c.Header = h
	copy(c.buf, hb[:]) // the header as of this snapshot
	if first || h.MetadataOffset != prev.MetadataOffset {
		if err := c.loadMetadata(h.MetadataOffset); err != nil {
			c.Header = prev
			c.buf = c.buf[:old]
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
