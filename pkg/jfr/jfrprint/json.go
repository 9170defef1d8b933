// Package jfrprint prints JFR recordings the way the JDK's `jfr` tool does:
// [JSON] writes what `jfr print --json` writes and [Summary] what
// `jfr summary` writes, so that output can be compared with the JDK's.
package jfrprint

import (
	"cmp"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"

	"github.com/otelcol-ai/otelcol-ai/pkg/jfr"
)

// JSON prints events in the shape of `jfr print --json`:
// {"recording":{"events":[{"type":…,"values":{…}}]}}, events of each chunk
// ordered by end time, timestamps as ISO-8601 date-times at the recording's
// UTC offset, durations as ISO-8601 durations, stack traces cut after
// StackDepth frames.
type JSON struct {
	// StackDepth is the number of frames printed per stack trace; the JDK's
	// default is 5.
	StackDepth int
	// Accept selects event types; nil accepts all.
	Accept func(*jfr.Type) bool
}

// Print writes the events of every chunk of r to w. It holds one chunk at
// a time and, per accepted event, its end time and offset (16 bytes), so
// its memory depends on the largest chunk, not on the recording.
func (p *JSON) Print(w io.Writer, r *jfr.Reader) error {
	jw := &jsonWriter{w: w, stackDepth: p.StackDepth}
	jw.objectBegin()
	jw.name("recording")
	jw.objectBegin()
	jw.name("events")
	jw.b = append(jw.b, '[')
	first := true
	var order []endAt
	for i := range r.Chunks() {
		c, err := r.Chunk(i)
		if err != nil {
			jw.flush()
			return err
		}
		order, err = endOrder(c, p.Accept, order[:0])
		if err != nil {
			jw.flush()
			return err
		}
		jw.setChunk(c)
		er := c.Events()
		for _, e := range order {
			er.Seek(e.offset)
			if !er.Next() {
				jw.flush()
				if err := er.Err(); err != nil {
					return err
				}
				return fmt.Errorf("jfrprint: chunk %d: no event at offset %d, where the first pass read one", c.Index, e.offset)
			}
			if !first {
				jw.b = append(jw.b, ", "...)
			}
			first = false
			jw.event(er.Event())
			if len(jw.b) > 64<<10 {
				if err := jw.flush(); err != nil {
					return err
				}
			}
		}
	}
	jw.b = append(jw.b, ']')
	jw.objectEnd()
	jw.objectEnd()
	return jw.flush()
}

// endAt places an accepted event: its end time in ticks and its
// chunk-relative offset.
type endAt struct {
	end    int64
	offset int
}

// endOrder lists the accepted events of a chunk in the order the JDK tool
// prints them: stably by end time in ticks (startTime + duration; a missing
// field counts as 0). Sorting by end time and then offset is that stable
// order, since offsets grow in file order.
func endOrder(c *jfr.Chunk, accept func(*jfr.Type) bool, out []endAt) ([]endAt, error) {
	type timeFields struct{ start, duration int }
	byType := map[*jfr.Type]timeFields{}
	er := c.Events()
	for er.Next() {
		ev := er.Event()
		tf, ok := byType[ev.Type]
		if !ok {
			if accept != nil && !accept(ev.Type) {
				tf = timeFields{-2, -2}
			} else {
				tf = timeFields{ev.Type.FieldIndex("startTime"), ev.Type.FieldIndex("duration")}
			}
			byType[ev.Type] = tf
		}
		if tf.start == -2 {
			continue
		}
		var end int64
		if tf.start >= 0 && tf.start < len(ev.Fields) {
			end = ev.Fields[tf.start].Int()
		}
		if tf.duration >= 0 && tf.duration < len(ev.Fields) {
			end += ev.Fields[tf.duration].Int()
		}
		out = append(out, endAt{end: end, offset: int(ev.Offset - c.Offset)})
	}
	if err := er.Err(); err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b endAt) int {
		if c := cmp.Compare(a.end, b.end); c != 0 {
			return c
		}
		return cmp.Compare(a.offset, b.offset)
	})
	return out, nil
}

// maxDepth bounds object nesting; real recordings nest about 8 deep
// (frame → method → class → package → module → class loader).
const maxDepth = 32

// maxRenderedBytes bounds the text of constants kept for reuse. 2 MB holds
// what a 13 MB profile chunk reuses; when full, the kept text starts over.
const maxRenderedBytes = 4 << 20

type jsonWriter struct {
	w          io.Writer
	b          []byte
	indent     int
	stackDepth int
	clock      jfr.Clock
	zoneSec    int64
	depth      int  // nesting of objects; bounded because pools can form cycles
	limited    bool // an object was cut at maxDepth since the flag was cleared
	err        error

	// Constants (stack traces, threads, methods, classes) repeat across a
	// chunk's events and print the same each time at the same indent and
	// depth: their text is kept, in one buffer, the first time it is made.
	rendered     map[renderKey]span
	renderedText []byte
}

// renderKey identifies the text of a constant printed as an object.
type renderKey struct {
	typ    *jfr.Type
	key    uint64
	indent int32
	depth  int32
}

// span is a part of jsonWriter.renderedText.
type span struct{ off, n int32 }

func (j *jsonWriter) setChunk(c *jfr.Chunk) {
	// Keys name constants of one chunk only.
	clear(j.rendered)
	j.renderedText = j.renderedText[:0]
	j.clock = c.Clock()
	// JDK 25's zone is int(gmtOffset) + int(dst) milliseconds, in Java's
	// 32-bit int arithmetic (JDK 17 leaves dst out). The JDK takes it from
	// the first chunk; every chunk of a recording carries the JVM's zone.
	j.zoneSec = int64(int32(c.Metadata.GMTOffset)+int32(c.Metadata.DST)) / 1000
	if j.zoneSec < -18*3600 || j.zoneSec > 18*3600 {
		j.zoneSec = 0 // ZoneOffset rejects it; the JDK falls back to UTC
	}
}

func (j *jsonWriter) flush() error {
	if j.err == nil && len(j.b) > 0 {
		_, j.err = j.w.Write(j.b)
	}
	j.b = j.b[:0]
	return j.err
}

func (j *jsonWriter) newline() { j.b = append(j.b, '\n') }

const spaces = "                                                                "

func (j *jsonWriter) writeIndent() {
	n := j.indent
	for n > len(spaces) {
		j.b = append(j.b, spaces...)
		n -= len(spaces)
	}
	j.b = append(j.b, spaces[:n]...)
}

func (j *jsonWriter) objectBegin() {
	j.b = append(j.b, '{')
	j.newline()
	j.indent += 2
}

func (j *jsonWriter) objectEnd() {
	j.indent -= 2
	j.newline()
	j.writeIndent()
	j.b = append(j.b, '}')
}

func (j *jsonWriter) name(n string) {
	j.writeIndent()
	j.b = appendJSONString(j.b, n)
	j.b = append(j.b, ": "...)
}

// sep starts a new member: ", " and a line break unless first; the name
// unless an array element.
func (j *jsonWriter) sep(first, element bool, name string) {
	if !first {
		j.b = append(j.b, ", "...)
		if !element {
			j.newline()
		}
	}
	if !element {
		j.name(name)
	}
}

func (j *jsonWriter) event(ev *jfr.Event) {
	j.objectBegin()
	j.name("type")
	j.b = appendJSONString(j.b, ev.Type.Name)
	j.sep(false, false, "values")
	j.fields(ev.Type, ev.Fields)
	j.objectEnd()
}

func (j *jsonWriter) fields(t *jfr.Type, vals []jfr.Value) {
	j.objectBegin()
	for i := range t.Fields {
		var v jfr.Value
		if i < len(vals) {
			v = vals[i]
		}
		j.field(i == 0, false, &t.Fields[i], v)
	}
	j.objectEnd()
}

// object prints the fields of struct value r, one level deeper.
func (j *jsonWriter) object(t *jfr.Type, r jfr.Value) {
	j.depth++
	j.objectBegin()
	n := r.Len()
	for i := range t.Fields {
		var v jfr.Value
		if i < n {
			v = r.Index(i)
		}
		j.field(i == 0, false, &t.Fields[i], v)
	}
	j.objectEnd()
	j.depth--
}

// isObject reports whether a field's type prints as a JSON object: a
// struct that is not a simple type (the JDK reduces those to their field).
func isObject(t *jfr.Type) bool {
	return t.Kind == jfr.KindStruct && (!t.SimpleType || len(t.Fields) != 1)
}

func (j *jsonWriter) field(first, element bool, f *jfr.Field, v jfr.Value) {
	if f.Array && !element {
		j.sep(first, element, f.Name)
		if v.Kind() != jfr.KindArrayValue {
			j.b = append(j.b, "null"...)
			return
		}
		j.b = append(j.b, '[')
		frames := f.Type.Name == "jdk.types.StackFrame"
		n := v.Len()
		for i := 0; i < n; i++ {
			if frames && i >= j.stackDepth {
				break
			}
			j.field(i == 0, true, f, v.Index(i))
		}
		j.b = append(j.b, ']')
		return
	}
	if isObject(f.Type) {
		j.sep(first, element, f.Name)
		r := v.Resolve()
		if r.Kind() != jfr.KindStructValue {
			j.b = append(j.b, "null"...)
			return
		}
		if j.depth >= maxDepth {
			j.limited = true
			j.b = append(j.b, "null"...)
			return
		}
		key, pooled := v.PoolKey()
		if !pooled {
			j.object(f.Type, r)
			return
		}
		k := renderKey{typ: f.Type, key: key, indent: int32(j.indent), depth: int32(j.depth)}
		if s, ok := j.rendered[k]; ok {
			j.b = append(j.b, j.renderedText[s.off:s.off+s.n]...)
			return
		}
		start := len(j.b)
		outer := j.limited
		j.limited = false
		j.object(f.Type, r)
		// Text cut at maxDepth depends on where the constant was met.
		if n := len(j.b) - start; !j.limited && n <= maxRenderedBytes/16 {
			if len(j.renderedText)+n > maxRenderedBytes {
				// Full: start over, so that what is kept follows the
				// constants of the events printed now.
				clear(j.rendered)
				j.renderedText = j.renderedText[:0]
			}
			if j.rendered == nil {
				j.rendered = map[renderKey]span{}
				j.renderedText = make([]byte, 0, maxRenderedBytes)
			}
			j.rendered[k] = span{off: int32(len(j.renderedText)), n: int32(n)}
			j.renderedText = append(j.renderedText, j.b[start:]...)
		}
		j.limited = j.limited || outer
		return
	}
	j.sep(first, element, f.Name)
	j.scalar(f, v)
}

func (j *jsonWriter) scalar(f *jfr.Field, v jfr.Value) {
	// A simple type's single field stands for it; the outer field's
	// annotations still decide the format.
	t := f.Type
	for i := 0; i < 8 && t.Kind == jfr.KindStruct && len(t.Fields) == 1; i++ {
		t = t.Fields[0].Type
	}
	if v.IsNull() {
		j.b = append(j.b, "null"...)
		return
	}
	switch {
	case f.Timespan != "":
		j.b = append(j.b, '"')
		j.b = append(j.appendDuration(j.b, f.Timespan, v.Int()), '"')
		return
	case f.Timestamp != "":
		j.b = append(j.b, '"')
		j.b = append(j.appendTimestamp(j.b, f.Timestamp, v.Int()), '"')
		return
	case f.Unsigned && (t.Kind == jfr.KindByte || t.Kind == jfr.KindShort || t.Kind == jfr.KindInt || t.Kind == jfr.KindLong):
		j.b = strconv.AppendUint(j.b, v.Uint(), 10)
		return
	}
	switch v.Kind() {
	case jfr.KindBoolValue:
		j.b = strconv.AppendBool(j.b, v.Bool())
	case jfr.KindIntValue:
		j.b = strconv.AppendInt(j.b, v.Int(), 10)
	case jfr.KindCharValue:
		j.b = appendJSONString(j.b, string(rune(v.Int())))
	case jfr.KindFloatValue:
		x := v.Float()
		if math.IsNaN(x) || math.IsInf(x, 0) {
			j.b = append(j.b, "null"...)
			return
		}
		bits := 64
		if t.Kind == jfr.KindFloat {
			bits = 32
		}
		j.b = append(j.b, javaDouble(x, bits)...)
	case jfr.KindStringValue:
		j.b = appendJSONString(j.b, v.Str())
	default:
		j.b = appendJSONString(j.b, simpleText(v))
	}
}

// simpleText is the text of a simple type's value (a struct of one field,
// such as jdk.types.GCName): what [jfr.Value.String] makes of it, without
// building it when the innermost field is a string.
func simpleText(v jfr.Value) string {
	r := v
	for i := 0; i < 5 && r.Kind() == jfr.KindStructValue; i++ {
		if t := r.Type(); t == nil || !t.SimpleType || r.Len() != 1 {
			break
		}
		r = r.Index(0)
	}
	if r.Kind() == jfr.KindStringValue {
		return r.Str()
	}
	return v.String()
}

// appendDuration appends a Timespan field's value as java.time.Duration
// prints it.
func (j *jsonWriter) appendDuration(b []byte, unit string, v int64) []byte {
	switch v {
	case 0:
		return append(b, "PT0S"...)
	case math.MinInt64:
		return appendJavaDuration(b, math.MinInt64, 0)
	case math.MaxInt64:
		return appendJavaDuration(b, math.MaxInt64, 999_999_999)
	}
	var s int64
	var n int32
	switch unit {
	case "MICROSECONDS":
		s, n = durationOfNanos(1000 * v)
	case "SECONDS":
		s = v
	case "MILLISECONDS":
		s, n = floorDivMod(v, 1000)
		n *= 1_000_000
	case "NANOSECONDS":
		s, n = durationOfNanos(v)
	default: // TICKS
		s, n = durationOfNanos(j.clock.Nanos(v))
	}
	return appendJavaDuration(b, s, n)
}

func floorDivMod(a, b int64) (int64, int32) {
	q := a / b
	r := a % b
	if r < 0 {
		r += b
		q--
	}
	return q, int32(r)
}

// appendTimestamp appends a Timestamp field's value as
// java.time.OffsetDateTime prints it, at the recording's offset.
func (j *jsonWriter) appendTimestamp(b []byte, unit string, v int64) []byte {
	if v == math.MinInt64 {
		return append(b, "-999999999-01-01T00:00+18:00"...) // OffsetDateTime.MIN, as the JDK prints Instant.MIN
	}
	var s int64
	var n int32
	switch unit {
	case "MILLISECONDS_SINCE_EPOCH":
		s, n = floorDivMod(v, 1000)
		n *= 1_000_000
	case "NANOSECONDS_SINCE_EPOCH":
		s, n = durationOfNanos(v)
	default: // TICKS
		s, n = durationOfNanos(j.clock.EpochNanos(v))
	}
	return appendJavaOffsetDateTime(b, s, n, j.zoneSec)
}
