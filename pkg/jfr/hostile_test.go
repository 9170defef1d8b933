package jfr

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Tests written as the attacker would: any container can write the JFR
// files a node agent reads, so each test builds a hostile chunk and checks
// that it is refused with the right error, cheaply.

// chunkOf writes a finished chunk with compressed integers: a checkpoint
// when pools is not nil (pools writes the pool count and the pools), the
// metadata, then the records that events writes.
func chunkOf(md el, pools, events func(*synth)) []byte {
	return assemble(false, chunkPieces(false, md, pools, events))
}

// chunkParts are the three parts of a chunk that chunkPieces writes; none
// holds an absolute offset, so each may be changed alone.
type chunkParts struct{ checkpoint, metadata, events []byte }

func chunkPieces(fixed bool, md el, pools, events func(*synth)) chunkParts {
	var p chunkParts
	if pools != nil {
		s := &synth{fixed: fixed}
		s.record(1, func(s *synth) {
			s.long(0) // start
			s.long(0) // duration
			s.long(0) // delta: the only checkpoint
			s.b = append(s.b, 1)
			pools(s)
		})
		p.checkpoint = s.b
	}
	s := &synth{fixed: fixed}
	s.metadata(md)
	p.metadata = s.b
	if events != nil {
		s := &synth{fixed: fixed}
		events(s)
		p.events = s.b
	}
	return p
}

// assemble lays out header, checkpoint, metadata and events.
func assemble(fixed bool, p chunkParts) []byte {
	b := make([]byte, HeaderSize, HeaderSize+len(p.checkpoint)+len(p.metadata)+len(p.events))
	cp := int64(0)
	if len(p.checkpoint) > 0 {
		cp = HeaderSize
	}
	b = append(b, p.checkpoint...)
	meta := int64(len(b))
	b = append(append(b, p.metadata...), p.events...)
	flags := uint16(flagCompressedInts)
	if fixed {
		flags = 0
	}
	copy(b, headerBytes(Header{Major: 2, Minor: 1, Size: int64(len(b)), CheckpointOffset: cp, MetadataOffset: meta,
		StartNanos: 1_700_000_000_000_000_000, TicksPerSecond: 1_000_000_000, Flags: flags}))
	return b
}

// withClasses is the synthetic metadata plus the given classes.
func withClasses(cs ...el) el {
	root := synthMetadata()
	root.children[0].children = append(root.children[0].children, cs...)
	return root
}

const dagBase = 3000

// dagClasses declares dag.T0, an empty struct, and dag.T1 … dag.Tn, each
// with two inline fields of the one before: a value of Tn visits 2^(n+1)-1
// values yet takes no bytes. dag.Event (id dagEvent(n)) has a field x of
// Tn, or, when array, an array xs of Tn followed by an int field after.
func dagClasses(n int, array bool) []el {
	cs := []el{class(dagBase, "dag.T0", "")}
	for i := 1; i <= n; i++ {
		cs = append(cs, class(dagBase+i, "dag.T"+strconv.Itoa(i), "", field("a", dagBase+i-1), field("b", dagBase+i-1)))
	}
	if array {
		cs = append(cs, class(dagEvent(n), "dag.Event", "jdk.jfr.Event", field("xs", dagBase+n, "dimension", "1"), field("after", sInt)))
	} else {
		cs = append(cs, class(dagEvent(n), "dag.Event", "jdk.jfr.Event", field("x", dagBase+n)))
	}
	return cs
}

func dagEvent(n int) int { return dagBase + n + 1 }

// formatErr asserts that err is a *FormatError wrapping want, about what.
func formatErr(t *testing.T, err, want error, what string) *FormatError {
	t.Helper()
	var fe *FormatError
	if !errors.As(err, &fe) || !errors.Is(err, want) {
		t.Fatalf("err = %v, want a *FormatError wrapping %v", err, want)
	}
	if fe.What != what || fe.Chunk != 0 {
		t.Errorf("error is about %q in chunk %d, want %q in chunk 0 (%v)", fe.What, fe.Chunk, what, err)
	}
	return fe
}

// allocated runs fn and returns the bytes it allocated (live or not: a
// peak can only be lower).
func allocated(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// sparseChunk writes a valid chunk whose header claims claim bytes into a
// sparse file of min(claim, 2 GiB) bytes, so that the claimed bytes seem to
// exist, and returns the open file.
func sparseChunk(t *testing.T, claim int64, state uint8) *os.File {
	t.Helper()
	b := synthChunk(false)
	setSize := headerBytes(Header{Size: claim})
	copy(b[8:16], setSize[8:16])
	b[64] = state
	f, err := os.Create(filepath.Join(t.TempDir(), "sparse.jfr"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(min(claim, 2<<30)); err != nil {
		t.Fatal(err)
	}
	return f
}

// TestChunkSizeClaimRefused: a sparse file whose header claims up to 2 GiB
// (or more) passes every check against the file, yet neither the whole-file
// reader nor LiveChunk allocates for the claim.
func TestChunkSizeClaimRefused(t *testing.T) {
	const limit = 64 << 20 // what the test lets either path allocate
	for _, claim := range []int64{DefaultMaxChunkSize + 1, 1<<31 - 1, 1 << 31, 1 << 62} {
		paths := []struct {
			name  string
			state uint8
			load  func(f *os.File) error
		}{
			{"Open and Chunk", StateFinished, func(f *os.File) error {
				r, err := Open(f.Name())
				if err != nil {
					return err
				}
				defer r.Close()
				if n := len(r.Chunks()); n != 1 {
					t.Errorf("listed %d chunks, want 1", n)
				}
				_, err = r.Chunk(0)
				return err
			}},
			{"LiveChunk", 1, func(f *os.File) error {
				_, err := NewLiveChunk(f, 0).Poll()
				return err
			}},
		}
		for _, p := range paths {
			t.Run(p.name+" claiming "+strconv.FormatInt(claim, 10), func(t *testing.T) {
				f := sparseChunk(t, claim, p.state)
				var err error
				grew := allocated(func() { err = p.load(f) })
				fe := formatErr(t, err, ErrTooLarge, "chunk header")
				if fe.Offset != 8 {
					t.Errorf("error at offset %d, want 8 (the size field)", fe.Offset)
				}
				for _, s := range []string{strconv.FormatInt(claim, 10), strconv.Itoa(DefaultMaxChunkSize)} {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("error %q does not say %s", err, s)
					}
				}
				if grew > limit {
					t.Errorf("allocated %d bytes refusing a claim of %d", grew, claim)
				}
				t.Logf("allocated %d bytes", grew)
			})
		}
	}
}

// TestChunkSizeLimitIsConfigurable: a real chunk over a lowered limit is
// refused by both paths; 0 means the default.
func TestChunkSizeLimitIsConfigurable(t *testing.T) {
	b := synthChunk(false)
	size := int64(len(b))
	for _, tc := range []struct {
		name    string
		max     int64
		refused bool
	}{
		{"limit below the chunk", size - 1, true},
		{"limit equal to the chunk", size, false},
		{"zero means the default", 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := NewReader(bytes.NewReader(b), size)
			if err != nil {
				t.Fatal(err)
			}
			r.MaxChunkSize = tc.max
			_, rerr := r.Chunk(0)
			live := NewLiveChunk(bytes.NewReader(b), 0)
			live.MaxSize = tc.max
			_, lerr := live.Poll()
			for path, err := range map[string]error{"Reader": rerr, "LiveChunk": lerr} {
				if !tc.refused {
					if err != nil {
						t.Errorf("%s: %v", path, err)
					}
					continue
				}
				formatErr(t, err, ErrTooLarge, "chunk header")
				if !strings.Contains(err.Error(), "limit is "+strconv.FormatInt(tc.max, 10)) {
					t.Errorf("%s: error %q does not name the limit", path, err)
				}
			}
			if !tc.refused && live.Held() != size {
				t.Errorf("LiveChunk holds %d bytes, want %d", live.Held(), size)
			}
		})
	}
}

// replaceableFile serves bytes that the test replaces, as a JVM extends a
// chunk file.
type replaceableFile struct{ b []byte }

func (f *replaceableFile) ReadAt(p []byte, off int64) (int, error) {
	return bytes.NewReader(f.b).ReadAt(p, off)
}

// firstFlush returns the prefix of a finished synthetic chunk up to its
// last checkpoint, with the header a JVM would have written then: the
// chunk in progress, its checkpoint the one before.
func firstFlush(t *testing.T, full []byte) []byte {
	t.Helper()
	c, err := NewChunk(full, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	h := c.Header
	d := c.decoder(int(h.CheckpointOffset))
	d.u32() // size
	d.u64() // type
	d.u64() // start
	d.u64() // duration
	delta := int64(d.u64())
	b := bytes.Clone(full[:h.CheckpointOffset])
	h.Size, h.CheckpointOffset, h.State = h.CheckpointOffset, h.CheckpointOffset+delta, 1
	copy(b, headerBytes(h))
	return b
}

// TestReserveRefusesGrowth: a caller sharing a memory budget among chunks
// refuses growth through Reserve; Poll reports it as ErrTooLarge, holds
// nothing more, and resumes where it stopped once the budget allows.
func TestReserveRefusesGrowth(t *testing.T) {
	full := synthChunk(false)
	first := firstFlush(t, full)
	errBudget := errors.New("node budget exhausted")
	var budget, total int64
	var asked []int64
	file := &replaceableFile{b: first}
	live := NewLiveChunk(file, 0)
	live.Reserve = func(grow int64) error {
		asked = append(asked, grow)
		if total+grow > budget {
			return errBudget
		}
		total += grow
		return nil
	}
	refused := func(step string) {
		t.Helper()
		held := live.Held()
		_, err := live.Poll()
		formatErr(t, err, ErrTooLarge, "chunk")
		if !errors.Is(err, errBudget) {
			t.Errorf("%s: err %v does not wrap the hook's error", step, err)
		}
		if live.Held() != held {
			t.Errorf("%s: holds %d bytes after a refusal, %d before", step, live.Held(), held)
		}
	}
	poll := func(step string, from, to int) {
		t.Helper()
		seg, err := live.Poll()
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		if seg.From != from || seg.To != to {
			t.Errorf("%s: segment %d..%d, want %d..%d", step, seg.From, seg.To, from, to)
		}
		if live.Held() != total {
			t.Errorf("%s: holds %d bytes, Reserve accepted %d", step, live.Held(), total)
		}
	}

	budget = 100
	refused("first flush over budget")
	budget = 1 << 20
	poll("first flush", HeaderSize, len(first))
	n := 0
	for er := live.Chunk().eventsBetween(HeaderSize, len(first)); er.Next(); n++ {
	}
	if n != len(samples) {
		t.Errorf("first flush delivered %d events, want %d", n, len(samples))
	}
	file.b = full
	budget = total
	refused("growth over budget")
	budget = 1 << 20
	poll("growth", len(first), len(full))
	if !live.Finished() {
		t.Error("chunk not finished after its final flush")
	}
	// Doubling: the first growth asks for the chunk, the second for the
	// same again (the chunk is less than twice its first flush).
	f := int64(len(first))
	if want := []int64{f, f, f, f}; !slices.Equal(asked, want) {
		t.Errorf("Reserve asked for %v, want %v", asked, want)
	}
}

// TestHostileMetadataRefused: metadata whose types cannot be decoded in
// bounded time or depth is refused when the chunk is loaded, by every path.
func TestHostileMetadataRefused(t *testing.T) {
	deep := []el{}
	for i := 0; i <= 100; i++ {
		deep = append(deep, class(4000+i, "deep.T"+strconv.Itoa(i), "", field("next", 4000+i+1)))
	}
	deep[100] = class(4100, "deep.T100", "")
	many := []el{}
	for i := 0; i <= maxClasses; i++ {
		many = append(many, class(5000+i, "c", ""))
	}
	tests := []struct {
		name string
		md   el
		want error
		says string
	}{
		{"DAG of two-field structs 40 deep", withClasses(dagClasses(40, false)...), ErrTooLarge, "expands to more than 65536"},
		{"struct contains itself inline", withClasses(class(2001, "test.Loop", "", field("again", 2001))), ErrCorrupt, "test.Loop contains itself"},
		{"struct contains an array of itself", withClasses(class(2002, "test.Tree", "", field("kids", 2002, "dimension", "1"))), ErrCorrupt, "test.Tree contains itself"},
		{"structs nested 100 deep", withClasses(deep...), ErrTooLarge, "deeper than 64"},
		{"more classes than the limit", withClasses(many...), ErrTooLarge, "limit is 65536"},
		{"metadata over 4 MiB", withClasses(class(2003, strings.Repeat("x", maxMetadataSize), "")), ErrTooLarge, "limit is 4194304"},
	}
	for _, tt := range tests {
		b := chunkOf(tt.md, nil, nil)
		mdOff := int64(len(b)) // chunkOf writes no events: metadata ends the chunk
		if h, err := ParseHeader(b); err == nil {
			mdOff = h.MetadataOffset
		}
		paths := map[string]func() error{
			"NewChunk": func() error { _, err := NewChunk(b, 0, 0); return err },
			"Reader": func() error {
				r, err := NewReader(bytes.NewReader(b), int64(len(b)))
				if err != nil {
					return err
				}
				_, err = r.Chunk(0)
				return err
			},
			"LiveChunk": func() error { _, err := NewLiveChunk(bytes.NewReader(b), 0).Poll(); return err },
		}
		for path, load := range paths {
			t.Run(tt.name+" via "+path, func(t *testing.T) {
				start := time.Now()
				err := load()
				elapsed := time.Since(start)
				fe := formatErr(t, err, tt.want, "metadata")
				if fe.Offset != mdOff {
					t.Errorf("error at offset %d, want %d (the metadata event)", fe.Offset, mdOff)
				}
				if !strings.Contains(err.Error(), tt.says) {
					t.Errorf("error %q does not say %q", err, tt.says)
				}
				t.Logf("refused in %v", elapsed)
			})
		}
	}
}

// TestLargestAllowedTypeDecodes: a DAG 15 deep (65535 values, at the
// limit) is legal and decodes, so the limit refuses expansion, not depth
// of sharing.
func TestLargestAllowedTypeDecodes(t *testing.T) {
	b := chunkOf(withClasses(dagClasses(15, false)...), nil, func(s *synth) {
		s.record(int64(dagEvent(15)), func(*synth) {})
	})
	c, err := NewChunk(b, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	er := c.Events()
	if !er.Next() {
		t.Fatalf("no event: %v", er.Err())
	}
	v := er.Event().Value("x")
	depth := 0
	for ; v.Len() == 2; depth++ {
		v = v.Index(1)
	}
	if depth != 15 || v.Kind() != KindStructValue || v.Len() != 0 {
		t.Errorf("x nests %d levels down to a %v of %d fields, want 15 down to an empty struct", depth, v.Kind(), v.Len())
	}
}

// TestValueExpansionRefused: array elements of a type at the expansion
// limit take no bytes, so a count the record can hold would still ask for
// billions of values. Decoding, skipping and indexing constants all stop
// at maxValueNodes.
func TestValueExpansionRefused(t *testing.T) {
	const n = 15 // dag.T15 visits 65535 values
	holder := class(2100, "dag.Holder", "", field("xs", dagBase+n, "dimension", "1"))
	md := withClasses(append(dagClasses(n, true), holder)...)
	event := func(count int) func(*synth) {
		return func(s *synth) {
			s.record(int64(dagEvent(n)), func(s *synth) {
				s.i32(count)
				s.i32(7) // after
				s.b = append(s.b, make([]byte, count)...)
			})
		}
	}
	t.Run("within the budget", func(t *testing.T) {
		c, err := NewChunk(chunkOf(md, nil, event(8)), 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		er := c.Events()
		if !er.Next() {
			t.Fatal(er.Err())
		}
		if got := er.Event().Value("xs").Len(); got != 8 {
			t.Errorf("xs has %d elements, want 8", got)
		}
		sel := NewSelection()
		sel.Add("dag.Event", "after")
		sc := c.Scan(sel)
		if !sc.Next() || sc.Record().Int(0) != 7 {
			t.Errorf("scan: after = %d (err %v), want 7", sc.Record().Int(0), sc.Err())
		}
	})
	hostile := chunkOf(md, nil, event(1000))
	c, err := NewChunk(hostile, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]func() error{
		"Events": func() error {
			er := c.Events()
			for er.Next() {
				t.Error("delivered the hostile event")
			}
			return er.Err()
		},
		"Scan decoding the array": func() error {
			sel := NewSelection()
			sel.Add("dag.Event", "xs")
			sc := c.Scan(sel)
			for sc.Next() {
				t.Error("delivered the hostile event")
			}
			return sc.Err()
		},
		"Scan skipping the array": func() error {
			sel := NewSelection()
			sel.Add("dag.Event", "after")
			sc := c.Scan(sel)
			for sc.Next() {
				t.Error("delivered the hostile event")
			}
			return sc.Err()
		},
	}
	for name, run := range cases {
		t.Run(name, func(t *testing.T) {
			var err error
			grew := allocated(func() { err = run() })
			formatErr(t, err, ErrTooLarge, "event")
			if !strings.Contains(err.Error(), "more than 1048576 values") {
				t.Errorf("error %q does not name the limit", err)
			}
			if grew > 64<<20 {
				t.Errorf("allocated %d bytes refusing it", grew)
			}
		})
	}
	t.Run("constant pool", func(t *testing.T) {
		b := chunkOf(md, func(s *synth) {
			s.i32(1) // pools
			s.long(2100)
			s.i32(1) // constants
			s.long(1)
			s.i32(1000)
			s.b = append(s.b, make([]byte, 1000)...)
		}, nil)
		_, err := NewChunk(b, 0, 0)
		formatErr(t, err, ErrTooLarge, "checkpoint")
	})
}

// TestHostileCounts: counts that claim far more elements than the bytes
// left could hold are refused as corrupt before anything is allocated.
func TestHostileCounts(t *testing.T) {
	const huge = 1 << 40
	arrayCount := append([]sample{}, samples...)
	arrayCount[2].count = huge
	tests := []struct {
		name string
		b    []byte
		what string // where the error is found
	}{
		{"array count", synthChunkOf(false, arrayCount), "event"},
		{"pool count", chunkOf(synthMetadata(), func(s *synth) { s.long(huge) }, nil), "checkpoint"},
		{"constant count", chunkOf(synthMetadata(), func(s *synth) { s.i32(1); s.long(sThread); s.long(huge) }, nil), "checkpoint"},
		{"metadata string count", func() []byte {
			b := chunkOf(synthMetadata(), nil, nil)
			h, _ := ParseHeader(b)
			d := &decoder{buf: b, pos: int(h.MetadataOffset), compressed: true}
			d.u32() // size
			for range 4 {
				d.u64() // type, start, duration, id
			}
			at := d.pos
			d.u32() // the string count, replaced
			s := &synth{}
			s.varint(huge)
			return append(append(bytes.Clone(b[:at]), s.b...), b[d.pos:]...)
		}(), "metadata"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var err error
			grew := allocated(func() {
				c, lerr := NewChunk(tt.b, 0, 0)
				if err = lerr; err == nil {
					er := c.Events()
					for er.Next() {
					}
					err = er.Err()
				}
			})
			fe := formatErr(t, err, ErrCorrupt, tt.what)
			if fe.Offset < HeaderSize || fe.Offset >= int64(len(tt.b)) {
				t.Errorf("error at offset %d, outside the chunk of %d bytes", fe.Offset, len(tt.b))
			}
			if grew > 1<<20 {
				t.Errorf("allocated %d bytes for a count of 2^40", grew)
			}
		})
	}
}

// TestPoolBlocks: entries stay where add put them as blocks grow.
func TestPoolBlocks(t *testing.T) {
	p := &pool{}
	const n = 3000
	for i := 0; i < n; i++ {
		p.add(uint64(i)*3, int32(i))
	}
	if len(p.blocks) != 6+(n-entryBlock+entryBlock-1)/entryBlock {
		t.Errorf("%d blocks for %d entries", len(p.blocks), n)
	}
	if cap(p.blocks[0]) != minEntryBlock {
		t.Errorf("first block holds %d entries, want %d", cap(p.blocks[0]), minEntryBlock)
	}
	for i := 0; i < n; i++ {
		if e := p.entry(i); e.key != uint64(i)*3 || e.off != int32(i) {
			t.Fatalf("entry %d is key %d offset %d", i, e.key, e.off)
		}
	}
	p.index()
	if p.size != n || p.lookup(2997) == nil || p.lookup(2998) != nil {
		t.Errorf("indexed %d keys; lookup(2997) %v lookup(2998) %v", p.size, p.lookup(2997), p.lookup(2998))
	}
}
