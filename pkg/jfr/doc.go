// Package jfr reads Java Flight Recorder recordings (.jfr files) as written
// by HotSpot JDK 11 and later (file format 2.x; 1.x headers are accepted).
// It uses only the standard library.
//
//	r, err := jfr.Open("recording.jfr")
//	…
//	defer r.Close()
//	for i := range r.Chunks() {
//		c, err := r.Chunk(i)
//		…
//		er := c.Events()
//		for er.Next() {
//			ev := er.Event()
//			fmt.Println(ev.Type.Name, ev.StartNanos(), ev.Value("eventThread.javaName").Str())
//		}
//		if err := er.Err(); err != nil { … }
//	}
//
// A recording is a sequence of self-contained chunks. [NewReader] and [Open]
// list the chunk headers of a file; [Reader.Chunk] loads one chunk into
// memory, parses its metadata (the type system; chunks whose metadata is
// byte for byte the same, in any file, share one parsed [Metadata]) and
// checks its constant pools (a pool's entries are made when first looked
// up). Chunks are independent, so callers may load and decode several in
// parallel (see [Reader.ForEachChunk]); memory is bounded by the chunks held,
// not the file.
//
// Events are read in one of two ways:
//
//   - [Chunk.Events] decodes every field of every event into [Value]s: typed
//     primitives, strings, arrays, nested structs and constant-pool
//     references that resolve lazily to their pooled values (each constant
//     is decoded once per chunk). The reader reuses one event's storage for
//     the next, and leaves string fields encoded in the chunk until
//     [Value.Str] reads them, so it allocates nothing per event;
//     [Event.Clone] keeps one, and [Chunk.AllEvents] keeps them all.
//   - [Chunk.Scan] with a [Selection] decodes only the event types and fields
//     a caller names and skips every other record by its size without
//     allocating. Long-running consumers (the jfr receiver) use this one.
//
// [LiveChunk] follows a chunk that a running JVM is still writing (a file in
// its disk repository): it takes consistent header snapshots and delivers the
// events of each flushed segment once.
//
// Times: event timestamps are ticks of the recording JVM's clock. A
// [Clock] (from a chunk header's startNanos, startTicks and ticksPerSecond)
// converts them to Unix epoch nanoseconds and to durations with the JDK's
// own arithmetic, and [Chunk.Clock] picks the one the JDK would use: every
// chunk of a file is converted with its first chunk's clock. [Event.Time]
// and [Record.Nanos] go through it, so pkg/jfr's times equal, to the
// nanosecond, those JDK 25's jfr print writes.
//
// Nothing in this package panics on malformed input: errors are [*FormatError]
// values that name the chunk and byte offset, and wrap one of the sentinel
// errors ([ErrTruncated], [ErrMagic], [ErrVersion], [ErrCorrupt],
// [ErrNotFlushed], [ErrTooLarge]) for callers that branch with [errors.Is].
//
// Input is untrusted: any process can write the files a reader is pointed
// at. Sizes a file claims are checked before anything is allocated for
// them: a chunk may hold at most [DefaultMaxChunkSize] bytes unless the
// caller sets [Reader.MaxChunkSize] or [LiveChunk.MaxSize], and
// [LiveChunk.Reserve] lets a caller share one memory budget among many
// chunks. Every count (array elements, string lengths, constants, metadata
// strings and elements) is bounded by the bytes left to hold it. Metadata is
// refused when its event exceeds 4 MiB, it declares more than 65536
// classes, a class contains itself inline, structs nest inline more than 64
// deep, or one value of a class would visit more than 65536 values; and
// decoding or skipping one event or constant visits at most 2^20 array
// elements' values. Each refusal wraps ErrTooLarge (or ErrCorrupt for a
// cycle); events delivered before it stay valid, and the file's other
// chunks stay readable.
package jfr
