package jfr

import (
	"errors"
	"fmt"
)

// Sentinel errors wrapped by [*FormatError]; test for them with [errors.Is].
var (
	// ErrMagic means the bytes at a chunk start are not "FLR\0".
	ErrMagic = errors.New("not a JFR chunk (bad magic)")
	// ErrVersion means the chunk has a major version other than 1 or 2.
	ErrVersion = errors.New("unsupported JFR version")
	// ErrTruncated means a structure runs past the end of the chunk or file.
	ErrTruncated = errors.New("truncated data")
	// ErrCorrupt means a structure is malformed: an impossible size, count,
	// type reference or encoding.
	ErrCorrupt = errors.New("corrupt data")
	// ErrNotFlushed means a chunk that a JVM is still writing has no
	// metadata yet, or its header is being rewritten; try again later.
	ErrNotFlushed = errors.New("chunk not flushed yet")
	// ErrTooLarge means the input asks for more than a limit allows: a
	// chunk larger than the reader's maximum, growth that a Reserve hook
	// refused, or a type or value whose decoding would visit too many
	// fields. The input may be valid; it is refused to bound memory and
	// time.
	ErrTooLarge = errors.New("exceeds a limit")
)

// FormatError describes malformed or truncated input. Chunk is the index of
// the chunk in its file (-1 when unknown) and Offset the absolute byte offset
// in the file where the problem was found.
type FormatError struct {
	Chunk  int
	Offset int64
	What   string // the structure being read, e.g. "metadata", "event"
	Err    error  // one of the sentinel errors, possibly wrapped with detail
}

func (e *FormatError) Error() string {
	return fmt.Sprintf("jfr: chunk %d at offset %d: %s: %v", e.Chunk, e.Offset, e.What, e.Err)
}

func (e *FormatError) Unwrap() error { return e.Err }

// detail wraps a sentinel with a formatted explanation, keeping errors.Is.
func detail(sentinel error, format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{sentinel}, args...)...)
}
