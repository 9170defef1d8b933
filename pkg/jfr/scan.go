package jfr

import (
	"fmt"
	"strings"
	"sync"
)

// Selection names the event types, and the fields of each, that a
// [Scanner] decodes. Field names may be dotted paths through nested structs
// and constant-pool references, e.g. "eventThread.javaThreadId". A
// Selection is read-only once scanning starts and may be shared by
// scanners on different goroutines.
type Selection struct {
	types  []selectedType
	byName map[string]int

	// plans holds the selection compiled against the metadata of recent
	// chunks: chunks share their Metadata (see metadataCache), and the
	// receiver scans every segment of every chunk with one Selection.
	mu    sync.Mutex
	plans []compiledPlan // most recent last
}

type compiledPlan struct {
	md     *Metadata
	dense  []*typePlan
	sparse map[int64]*typePlan
}

// maxPlans bounds the compiled plans a Selection keeps (and the metadata
// they keep alive).
const maxPlans = 4

type selectedType struct {
	name   string
	fields [][]string // split paths
}

// NewSelection returns an empty selection.
func NewSelection() *Selection { return &Selection{byName: map[string]int{}} }

// Add selects an event type and the fields to decode, and returns the index
// that [Record.Selected] reports for its events. Field i of the call is
// slot i of the record. Adding a type twice replaces its fields.
func (s *Selection) Add(eventType string, fields ...string) int {
	st := selectedType{name: eventType}
	for _, f := range fields {
		st.fields = append(st.fields, strings.Split(f, "."))
	}
	s.mu.Lock()
	s.plans = nil
	s.mu.Unlock()
	if i, ok := s.byName[eventType]; ok {
		s.types[i] = st
		return i
	}
	s.byName[eventType] = len(s.types)
	s.types = append(s.types, st)
	return len(s.types) - 1
}

// typePlan says how to decode one selected event type in one chunk.
type typePlan struct {
	selected int
	typ      *Type
	steps    []step   // top-level fields up to the last one needed
	leaves   []*Field // the field each slot ends at (nil if absent)
	nslots   int
}

// step is one top-level field: skipped when targets is empty.
type step struct {
	field   *Field
	targets []target
}

type target struct {
	slot int
	rest []string // path below the top-level field
}

// plan returns the selection compiled against md, compiled once per
// Metadata. Plans are read-only once made.
func (s *Selection) plan(md *Metadata) (dense []*typePlan, sparse map[int64]*typePlan) {
	s.mu.Lock()
	for _, p := range s.plans {
		if p.md == md {
			s.mu.Unlock()
			return p.dense, p.sparse
		}
	}
	s.mu.Unlock()
	dense, sparse = s.compile(md)
	s.mu.Lock()
	if len(s.plans) >= maxPlans {
		s.plans = append(s.plans[:0], s.plans[1:]...)
	}
	s.plans = append(s.plans, compiledPlan{md: md, dense: dense, sparse: sparse})
	s.mu.Unlock()
	return dense, sparse
}

// compile compiles the selection against md.
func (s *Selection) compile(md *Metadata) (dense []*typePlan, sparse map[int64]*typePlan) {
	dense = make([]*typePlan, len(md.dense))
	for si, st := range s.types {
		t := md.TypeByName(st.name)
		if t == nil || t.Kind != KindStruct {
			continue
		}
		p := &typePlan{selected: si, typ: t, leaves: make([]*Field, len(st.fields)), nslots: len(st.fields)}
		last := -1
		tg := make([][]target, len(t.Fields))
		for slot, path := range st.fields {
			fi := t.FieldIndex(path[0])
			if fi < 0 {
				continue
			}
			p.leaves[slot] = leafField(&t.Fields[fi], path[1:])
			if p.leaves[slot] == nil {
				continue
			}
			tg[fi] = append(tg[fi], target{slot: slot, rest: path[1:]})
			last = max(last, fi)
		}
		for fi := 0; fi <= last; fi++ {
			p.steps = append(p.steps, step{field: &t.Fields[fi], targets: tg[fi]})
		}
		if uint64(t.ID) < uint64(len(dense)) {
			dense[t.ID] = p
		} else {
			if sparse == nil {
				sparse = map[int64]*typePlan{}
			}
			sparse[t.ID] = p
		}
	}
	return dense, sparse
}

func leafField(f *Field, rest []string) *Field {
	for _, name := range rest {
		if f.Array {
			return nil
		}
		i := f.Type.FieldIndex(name)
		if i < 0 {
			return nil
		}
		f = &f.Type.Fields[i]
	}
	return f
}

// Scanner reads the selected events of a chunk and skips every other
// record by its size, without allocating. Create one with [Chunk.Scan].
type Scanner struct {
	c       *Chunk
	pos     int
	end     int
	dense   []*typePlan
	sparse  map[int64]*typePlan
	rec     Record
	err     error
	arena   arena
	records int
}

// Count returns the number of event records, selected or not, that the
// scanner has passed so far (metadata and checkpoint records excluded).
func (s *Scanner) Count() int { return s.records }

// Scan returns a scanner over the chunk's events that decodes only what sel
// names.
func (c *Chunk) Scan(sel *Selection) *Scanner {
	s := &Scanner{c: c, pos: HeaderSize, end: len(c.buf)}
	s.dense, s.sparse = sel.plan(c.Metadata)
	return s
}

// Record is a selected event. Slot i holds the i-th field named in
// [Selection.Add]; a field the recording does not have reads as null.
// The Record and its Values are reused by the next call to
// [Scanner.Next]; numbers and strings read from it may be kept, Values
// through [Value.Clone].
type Record struct {
	Selected int   // the index returned by Selection.Add
	Type     *Type // the event type
	Offset   int64 // absolute file offset of the record
	slots    []Value
	plan     *typePlan
	chunk    *Chunk
}

// Next advances to the next selected event; it returns false at the end of
// the chunk or on error.
func (s *Scanner) Next() bool {
	c := s.c
	d := decoder{buf: c.buf[:s.end], compressed: c.Header.CompressedInts(), strs: &c.strs}
	for s.err == nil && s.pos < s.end {
		start := s.pos
		d.pos, d.spent = start, 0
		size := d.u32()
		if d.failed() || size == 0 || size > uint64(s.end-start) {
			s.err = c.errorf(int64(start), "event", detail(ErrCorrupt, "record size %d with %d bytes left in chunk", size, s.end-start))
			return false
		}
		end := start + int(size)
		s.pos = end
		tid := d.u64()
		if tid > 1 {
			s.records++
		}
		var p *typePlan
		if tid < uint64(len(s.dense)) {
			p = s.dense[tid]
		} else if s.sparse != nil {
			p = s.sparse[int64(tid)]
		}
		if p == nil {
			continue
		}
		d.end = end
		if err := s.decode(&d, p, start); err != nil {
			s.err = err
			return false
		}
		if d.pos > end {
			s.err = c.errorf(int64(start), "event", detail(ErrCorrupt, "fields of %s run %d bytes past the record's size %d", p.typ.Name, d.pos-end, size))
			return false
		}
		return true
	}
	return false
}

func (s *Scanner) decode(d *decoder, p *typePlan, start int) error {
	c := s.c
	r := &s.rec
	if cap(r.slots) < p.nslots {
		r.slots = make([]Value, p.nslots)
	}
	r.slots = r.slots[:p.nslots]
	clear(r.slots)
	r.Selected, r.Type, r.Offset, r.plan, r.chunk = p.selected, p.typ, c.Offset+int64(start), p, c
	ops := c.ops(p.typ)
	s.arena.reset()
	for i := range p.steps {
		st := &p.steps[i]
		f := st.field
		if len(st.targets) == 0 {
			skipField(d, f, 0)
		} else {
			v := c.decodeField(d, &ops[i], 0, &s.arena)
			for _, t := range st.targets {
				r.slots[t.slot] = follow(v, t.rest)
			}
		}
		if d.failed() {
			return c.errorf(int64(d.pos), "event", fmt.Errorf("%w (field %s of %s, record at %d)", decodeErr(d, "field value"), f.Name, p.typ.Name, c.Offset+int64(start)))
		}
	}
	return nil
}

func follow(v Value, rest []string) Value {
	for _, name := range rest {
		r := v.resolved()
		if r.kind != KindStructValue {
			return Value{}
		}
		c := (*composite)(r.p)
		i := c.typ.FieldIndex(name)
		if i < 0 || i >= len(c.elems) {
			return Value{}
		}
		v = c.elems[i]
	}
	return v
}

// Record returns the current record.
func (s *Scanner) Record() *Record { return &s.rec }

// Err returns the error that stopped the scan, if any. Records delivered
// before it are valid.
func (s *Scanner) Err() error { return s.err }

// Value returns slot i as a Value (references resolve on access).
func (r *Record) Value(i int) Value {
	if i < 0 || i >= len(r.slots) {
		return Value{}
	}
	return r.slots[i]
}

// Has reports whether slot i names a field this recording has.
func (r *Record) Has(i int) bool { return i >= 0 && i < len(r.plan.leaves) && r.plan.leaves[i] != nil }

// Int returns slot i as a signed integer (see [Value.Int]).
func (r *Record) Int(i int) int64 { return r.Value(i).Int() }

// Uint returns slot i as an unsigned integer (see [Value.Uint]).
func (r *Record) Uint(i int) uint64 { return r.Value(i).Uint() }

// Float returns slot i as a float64.
func (r *Record) Float(i int) float64 { return r.Value(i).Float() }

// Bool returns slot i as a boolean.
func (r *Record) Bool(i int) bool { return r.Value(i).Bool() }

// Str returns slot i as a string, flattening simple types such as
// jdk.types.GCName. Pooled strings are decoded once per chunk.
func (r *Record) Str(i int) string { return r.Value(i).Str() }

// Nanos returns slot i in nanoseconds according to its field's annotation:
// Unix epoch ns for a Timestamp, ns for a Timespan; ok is false otherwise.
func (r *Record) Nanos(i int) (ns int64, ok bool) {
	if !r.Has(i) {
		return 0, false
	}
	return fieldNanos(r.chunk.Clock(), r.plan.leaves[i], r.Value(i).Int())
}
