// Package features turns spans and log records into rows of a float32
// tensor, one column per configured feature, with defaults and scaling.
package features // import "github.com/otelcol-ai/otelcol-ai/processor/inferenceprocessor/internal/features"

import (
	"fmt"
	"math"
	"slices"
	"strconv"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// Source says where a column's value comes from.
type Source int

// The sources of a column.
const (
	SourceAttribute Source = iota
	SourceResourceAttribute
	SourceDuration       // span end - start, ns
	SourceStatus         // span status code: 0 unset, 1 ok, 2 error
	SourceKind           // span kind, OTLP's numbering
	SourceSeverityNumber // log severity number
)

// Column is one feature.
type Column struct {
	Source Source
	// Key is the attribute's name for the attribute sources.
	Key string
	// HasDefault and Default give the value used when it is missing.
	HasDefault bool
	Default    float32
	// Scale (0 means 1) and Offset, both finite, transform a present value.
	Scale, Offset float64
}

// Name describes the column for messages, e.g. attribute "http.status".
func (c Column) Name() string {
	switch c.Source {
	case SourceAttribute:
		return fmt.Sprintf("attribute %q", c.Key)
	case SourceResourceAttribute:
		return fmt.Sprintf("resource attribute %q", c.Key)
	case SourceDuration:
		return "field duration"
	case SourceStatus:
		return "field status"
	case SourceKind:
		return "field kind"
	default:
		return "field severity_number"
	}
}

// Extractor fills rows from items. It is safe for concurrent use.
type Extractor struct {
	columns []Column
	// attrs and resource index the keys of the attribute and the
	// resource-attribute columns.
	attrs, resource keyIndex
	// missing is a row of missing values, never written.
	missing []float32
}

// New returns an extractor for columns. For logs, span fields are an error
// (and for spans, log fields); the extractor is returned all the same, and
// reads such a column as missing.
func New(columns []Column, forLogs bool) (*Extractor, error) {
	e := &Extractor{
		columns:  columns,
		attrs:    newKeyIndex(columns, SourceAttribute),
		resource: newKeyIndex(columns, SourceResourceAttribute),
		missing:  make([]float32, len(columns)),
	}
	for i := range e.missing {
		e.missing[i] = missingValue
	}
	for i, c := range columns {
		spanField := c.Source == SourceDuration || c.Source == SourceStatus || c.Source == SourceKind
		if forLogs && spanField {
			return e, fmt.Errorf("features[%d]: %s exists on spans only, not on log records", i, c.Name())
		}
		if !forLogs && c.Source == SourceSeverityNumber {
			return e, fmt.Errorf("features[%d]: %s exists on log records only, not on spans", i, c.Name())
		}
	}
	return e, nil
}

// Width is the number of columns.
func (e *Extractor) Width() int { return len(e.columns) }

// Column returns column i.
func (e *Extractor) Column(i int) Column { return e.columns[i] }

// Resource holds the resource-attribute columns of one resource, read once
// by ReadResource for all of its items. The zero value is ready for use; it
// keeps its memory from one read to the next.
type Resource struct {
	values []float32 // by column; NaN where missing
}

// ReadResource reads the resource-attribute columns of res into r.
func (e *Extractor) ReadResource(res pcommon.Resource, r *Resource) {
	if len(e.resource.keys) == 0 {
		return
	}
	r.values = slices.Grow(r.values[:0], len(e.columns))[:len(e.columns)]
	for i := range r.values {
		r.values[i] = missingValue
	}
	e.resource.read(res.Attributes(), e.columns, r.values)
}

// Span writes into row (len Width) the row of a span of the resource r was
// read from, and reports whether every column had a value or a default;
// when not, it returns the first column missing.
func (e *Extractor) Span(r *Resource, span ptrace.Span, row []float32) (missing int, ok bool) {
	base := e.base(r)
	for i := range e.columns {
		switch c := &e.columns[i]; c.Source {
		case SourceDuration:
			row[i] = c.apply(float64(int64(span.EndTimestamp()) - int64(span.StartTimestamp())))
		case SourceStatus:
			row[i] = c.apply(float64(span.Status().Code()))
		case SourceKind:
			row[i] = c.apply(float64(span.Kind()))
		default:
			row[i] = base[i]
		}
	}
	return e.end(span.Attributes(), row)
}

// Log is Span for a log record.
func (e *Extractor) Log(r *Resource, record plog.LogRecord, row []float32) (missing int, ok bool) {
	base := e.base(r)
	for i := range e.columns {
		if c := &e.columns[i]; c.Source == SourceSeverityNumber {
			row[i] = c.apply(float64(record.SeverityNumber()))
		} else {
			row[i] = base[i]
		}
	}
	return e.end(record.Attributes(), row)
}

// base is where a row of an item of the resource r was read from starts:
// its resource-attribute columns from r, every other column missing.
func (e *Extractor) base(r *Resource) []float32 {
	if len(e.resource.keys) == 0 {
		return e.missing
	}
	return r.values // missing but in the resource's columns
}

// end completes a row begun with the item's fields: its attribute columns
// from attrs, then the defaults (complete).
func (e *Extractor) end(attrs pcommon.Map, row []float32) (int, bool) {
	e.attrs.read(attrs, e.columns, row)
	return e.complete(row)
}

// missingValue marks a column without a value while a row is filled: a
// value read is never NaN (number refuses NaN, and scaling a finite number
// by finite factors gives at worst an infinity).
var missingValue = float32(math.NaN())

// complete puts defaults in the columns left missing, and reports the first
// one without a default.
func (e *Extractor) complete(row []float32) (int, bool) {
	for i, v := range row {
		if !math.IsNaN(float64(v)) {
			continue
		}
		c := &e.columns[i]
		if !c.HasDefault {
			return i, false
		}
		row[i] = c.Default
	}
	return 0, true
}

// apply scales and offsets a present value.
func (c *Column) apply(v float64) float32 {
	if c.Scale != 0 {
		v *= c.Scale
	}
	return float32(v + c.Offset)
}

// keyIndex finds the attributes that columns of one source read, in one
// pass over an item's attributes.
type keyIndex struct {
	// keys are the distinct keys, and columns[j] the columns reading
	// keys[j].
	keys    []string
	columns [][]int
	// byLength lists the keys of each length (index into keys), so that an
	// attribute is compared with the few keys as long as its own; lengths
	// has bit n set when some key is n bytes long (n < 256), which rules
	// most attributes out at once.
	byLength [][]int
	lengths  [4]uint64
}

func newKeyIndex(columns []Column, source Source) keyIndex {
	var x keyIndex
	for i, c := range columns {
		if c.Source != source {
			continue
		}
		j := slices.Index(x.keys, c.Key)
		if j < 0 {
			j = len(x.keys)
			x.keys = append(x.keys, c.Key)
			x.columns = append(x.columns, nil)
			for len(x.byLength) <= len(c.Key) {
				x.byLength = append(x.byLength, nil)
			}
			x.byLength[len(c.Key)] = append(x.byLength[len(c.Key)], j)
			if n := len(c.Key); n < 64*len(x.lengths) {
				x.lengths[n/64] |= 1 << (n % 64)
			}
		}
		x.columns[j] = append(x.columns[j], i)
	}
	return x
}

// read writes, for each key found in attrs, its value into the key's
// columns of row; it leaves the columns of keys absent, or whose value is not
// a usable number, as they are. As with Map.Get, the first of duplicate keys
// counts.
func (x *keyIndex) read(attrs pcommon.Map, columns []Column, row []float32) {
	if len(x.keys) == 0 {
		return
	}
	var buf [2]uint64
	seen := buf[:]
	if len(x.keys) > 64*len(buf) {
		seen = make([]uint64, (len(x.keys)+63)/64)
	}
	left := len(x.keys)
	attrs.Range(func(k string, v pcommon.Value) bool {
		if n := len(k); n < 64*len(x.lengths) {
			if x.lengths[n/64]&(1<<(n%64)) == 0 {
				return true
			}
		} else if n >= len(x.byLength) {
			return true
		}
		for _, j := range x.byLength[len(k)] {
			if x.keys[j] != k {
				continue
			}
			word, bit := j/64, uint64(1)<<(j%64)
			if seen[word]&bit != 0 {
				return true // a duplicate: the first one counted
			}
			seen[word] |= bit
			if f, ok := number(v); ok {
				for _, i := range x.columns[j] {
					row[i] = columns[i].apply(f)
				}
			}
			left--
			return left > 0
		}
		return true
	})
}

// number reads an attribute as a number: ints and doubles as they are,
// booleans as 0 or 1, strings when they parse as a number.
func number(v pcommon.Value) (float64, bool) {
	f, ok := toNumber(v)
	if !ok || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, false // not a usable number: as if missing
	}
	return f, true
}

func toNumber(v pcommon.Value) (float64, bool) {
	switch v.Type() {
	case pcommon.ValueTypeInt:
		return float64(v.Int()), true
	case pcommon.ValueTypeDouble:
		return v.Double(), true
	case pcommon.ValueTypeBool:
		if v.Bool() {
			return 1, true
		}
		return 0, true
	case pcommon.ValueTypeStr:
		f, err := strconv.ParseFloat(v.Str(), 64)
		return f, err == nil
	}
	return 0, false
}
