package jfr

import "fmt"

// Event is one decoded event. Fields holds a value for each field of Type,
// in the order of Type.Fields.
type Event struct {
	Type   *Type
	Fields []Value
	Offset int64 // absolute file offset of the event record
	Size   int   // bytes of the record
	chunk  *Chunk
}

// Clone returns a copy of the event whose values stay valid after the
// reader moves on (constant-pool values are shared with the chunk).
func (e Event) Clone() Event {
	f := make([]Value, len(e.Fields))
	for i, v := range e.Fields {
		f[i] = v.Clone()
	}
	e.Fields = f
	return e
}

// Chunk returns the chunk the event was read from.
func (e *Event) Chunk() *Chunk { return e.chunk }

// Value returns the field with the given name (dotted names walk nested
// structs, as [Value.Field]); a missing field is a null Value.
func (e *Event) Value(name string) Value {
	head := name
	for i := 0; i < len(name); i++ {
		if name[i] == '.' {
			head = name[:i]
			v := e.Value(head)
			return v.Field(name[i+1:])
		}
	}
	if i := e.Type.FieldIndex(head); i >= 0 && i < len(e.Fields) {
		return e.Fields[i]
	}
	return Value{}
}

// Time returns the named field as nanoseconds, converting it according to
// its annotation: a Timestamp becomes Unix epoch ns, a Timespan a duration
// in ns. ok is false when the field is missing or has neither annotation.
func (e *Event) Time(name string) (ns int64, ok bool) {
	i := e.Type.FieldIndex(name)
	if i < 0 || i >= len(e.Fields) {
		return 0, false
	}
	return fieldNanos(e.chunk.Clock(), &e.Type.Fields[i], e.Fields[i].Int())
}

// StartNanos returns the event's startTime as Unix epoch ns (0 if absent).
func (e *Event) StartNanos() int64 { ns, _ := e.Time("startTime"); return ns }

// DurationNanos returns the event's duration in ns (0 if absent).
func (e *Event) DurationNanos() int64 { ns, _ := e.Time("duration"); return ns }

func fieldNanos(c Clock, f *Field, v int64) (int64, bool) {
	switch f.Timestamp {
	case "TICKS":
		return c.EpochNanos(v), true
	case "NANOSECONDS_SINCE_EPOCH":
		return v, true
	case "MILLISECONDS_SINCE_EPOCH":
		return v * 1e6, true
	}
	switch f.Timespan {
	case "TICKS":
		return c.Nanos(v), true
	case "NANOSECONDS":
		return v, true
	case "MICROSECONDS":
		return v * 1e3, true
	case "MILLISECONDS":
		return v * 1e6, true
	case "SECONDS":
		return v * 1e9, true
	}
	return 0, false
}

// EventReader iterates over the events of a chunk in file order, decoding
// every field. Metadata and checkpoint records, and records of types the
// metadata does not declare, are skipped.
//
//	er := chunk.Events()
//	for er.Next() {
//		ev := er.Event()
//		…
//	}
//	if err := er.Err(); err != nil { … }
//
// Events delivered before an error stay valid (best effort).
type EventReader struct {
	c     *Chunk
	pos   int
	end   int
	ev    Event
	err   error
	keep  bool
	arena arena
	d     decoder // over the chunk's bytes up to end
}

func (c *Chunk) eventReader(from, to int, keep bool) *EventReader {
	r := &EventReader{c: c, pos: from, end: to, keep: keep}
	r.ev.chunk = c
	r.d = decoder{buf: c.buf[:to], compressed: c.Header.CompressedInts(), strs: &c.strs}
	return r
}

// Events returns a reader over all events of the chunk. The values of an
// event are reused by the next call to Next, so reading allocates nothing
// per event; keep an event with [Event.Clone], or use [Chunk.AllEvents].
func (c *Chunk) Events() *EventReader {
	return c.eventReader(HeaderSize, len(c.buf), false)
}

// AllEvents is like Events, but every event stays valid: its values are
// allocated (in large blocks) for as long as the chunk lives.
func (c *Chunk) AllEvents() *EventReader {
	return c.eventReader(HeaderSize, len(c.buf), true)
}

// eventsBetween reads the records in [from, to) of the chunk.
func (c *Chunk) eventsBetween(from, to int) *EventReader {
	return c.eventReader(from, to, false)
}

// Next decodes the next event; it returns false at the end or on error.
func (r *EventReader) Next() bool {
	c := r.c
	md := c.Metadata
	d := &r.d
	for r.err == nil && r.pos < r.end {
		start := r.pos
		d.pos, d.spent = start, 0
		var size, id uint64
		if d.compressed {
			// One-byte varints inlined by hand: most sizes and type IDs.
			if b := d.buf[start]; b < 0x80 {
				size, d.pos = uint64(b), start+1
			} else {
				size = d.varintLong()
			}
		} else {
			size = d.u32()
		}
		if d.failed() || size == 0 || size > uint64(r.end-start) {
			r.err = c.errorf(int64(start), "event", detail(ErrCorrupt, "record size %d with %d bytes left in chunk", size, r.end-start))
			return false
		}
		end := start + int(size)
		r.pos = end
		if p := d.pos; d.compressed && p < len(d.buf) && d.buf[p] < 0x80 {
			id, d.pos = uint64(d.buf[p]), p+1
		} else {
			id = d.u64()
		}
		if id <= 1 {
			continue // metadata and checkpoints
		}
		tid := int64(id)
		t := md.TypeByID(tid)
		if t == nil {
			continue
		}
		// Fields are decoded against the rest of the chunk, not just the
		// record, so that varints near the record end take the fast path;
		// running past the record is checked once afterwards.
		a := &c.perm
		if !r.keep {
			a = &r.arena
			a.reset()
		}
		fields := a.values(len(t.Fields))
		d.end = end
		var ops []fieldOp
		if id < uint64(len(c.opsDense)) {
			ops = c.opsDense[id] // c.ops's common case, inlined
		}
		if ops == nil {
			ops = c.ops(t)
		}
		if i := c.decodeFields(d, ops, fields, 0, a); i >= 0 {
			r.err = c.errorf(int64(d.pos), "event", fmt.Errorf("%w (field %s of %s, record at %d)", decodeErr(d, "field value"), t.Fields[i].Name, t.Name, c.Offset+int64(start)))
			return false
		}
		if d.pos > end {
			r.err = c.errorf(int64(start), "event", detail(ErrCorrupt, "fields of %s run %d bytes past the record's size %d", t.Name, d.pos-end, size))
			return false
		}
		ev := &r.ev
		ev.Type, ev.Fields, ev.Offset, ev.Size = t, fields, c.Offset+int64(start), int(size)
		return true
	}
	return false
}

// Event returns the event decoded by the last call to Next. The Event is
// overwritten by the next call; copy it (*ev) to keep it. Unless the reader
// came from AllEvents, its values are reused too: keep them with
// [Event.Clone].
func (r *EventReader) Event() *Event { return &r.ev }

// Err returns the error that stopped iteration, if any.
func (r *EventReader) Err() error { return r.err }

// Offset returns the chunk-relative offset of the next record.
func (r *EventReader) Offset() int { return r.pos }

// Seek moves the reader to the record at the given chunk-relative offset,
// so that Next decodes it (or the first event after it). Use the start of a
// record seen before, e.g. an event's Offset less its chunk's: a reader can
// then revisit events in another order without keeping their values. An
// offset outside the reader's records ends iteration; one inside a record
// makes Next report a damaged record or decode garbage.
func (r *EventReader) Seek(offset int) {
	if offset < HeaderSize || offset > r.end {
		offset = r.end
	}
	r.pos = offset
}

// TypeStats is the number and total size of the records of one type.
type TypeStats struct {
	Type  *Type // nil for records of an undeclared type
	ID    int64
	Count int64
	Bytes int64
}

// Stats counts the records of every type in the chunk (metadata and
// checkpoint records under IDs 0 and 1) without decoding them, the way
// `jfr summary` does. Types declared by the metadata are included with zero
// counts. On a damaged record it returns what it counted and the error.
func (c *Chunk) Stats() ([]TypeStats, error) {
	md := c.Metadata
	idx := map[int64]int{}
	var out []TypeStats
	add := func(id int64, t *Type) int {
		if i, ok := idx[id]; ok {
			return i
		}
		idx[id] = len(out)
		out = append(out, TypeStats{Type: t, ID: id})
		return len(out) - 1
	}
	add(0, nil)
	add(1, nil)
	for _, t := range md.EventTypes {
		add(t.ID, t)
	}
	d := c.decoder(HeaderSize)
	for d.pos < len(c.buf) {
		start := d.pos
		size := d.u32()
		if d.failed() || size == 0 || size > uint64(len(c.buf)-start) {
			return out, c.errorf(int64(start), "event", detail(ErrCorrupt, "record size %d with %d bytes left in chunk", size, len(c.buf)-start))
		}
		tid := int64(d.u64())
		i := add(tid, md.TypeByID(tid))
		out[i].Count++
		out[i].Bytes += int64(size)
		d.pos = start + int(size)
	}
	return out, nil
}
