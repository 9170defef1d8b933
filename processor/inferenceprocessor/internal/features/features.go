// Package features turns spans and log records into rows of a float32
// tensor, one column per configured feature, with defaults and scaling.
package features // import "github.com/otelcol-ai/otelcol-ai/processor/inferenceprocessor/internal/features"

import (
	"fmt"
	"math"
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
	// Scale (0 means 1) and Offset transform a present value.
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

// Extractor fills rows from items.
type Extractor struct {
	columns []Column
}

// New returns an extractor for columns. For logs, span fields are an error
// (and for spans, log fields); the extractor is returned all the same, and
// reads such a column as missing.
func New(columns []Column, forLogs bool) (*Extractor, error) {
	e := &Extractor{columns: columns}
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

// Span writes the span's row into row (len Width) and reports whether every
// column had a value or a default; when not, it returns the first column
// missing.
func (e *Extractor) Span(resource pcommon.Resource, span ptrace.Span, row []float32) (missing int, ok bool) {
	for i, c := range e.columns {
		var v float64
		var present bool
		switch c.Source {
		case SourceAttribute:
			v, present = number(span.Attributes(), c.Key)
		case SourceResourceAttribute:
			v, present = number(resource.Attributes(), c.Key)
		case SourceDuration:
			v, present = float64(int64(span.EndTimestamp())-int64(span.StartTimestamp())), true
		case SourceStatus:
			v, present = float64(span.Status().Code()), true
		case SourceKind:
			v, present = float64(span.Kind()), true
		}
		if !e.set(row, i, c, v, present) {
			return i, false
		}
	}
	return 0, true
}

// Log is Span for a log record.
func (e *Extractor) Log(resource pcommon.Resource, record plog.LogRecord, row []float32) (missing int, ok bool) {
	for i, c := range e.columns {
		var v float64
		var present bool
		switch c.Source {
		case SourceAttribute:
			v, present = number(record.Attributes(), c.Key)
		case SourceResourceAttribute:
			v, present = number(resource.Attributes(), c.Key)
		case SourceSeverityNumber:
			v, present = float64(record.SeverityNumber()), true
		}
		if !e.set(row, i, c, v, present) {
			return i, false
		}
	}
	return 0, true
}

// Column returns column i.
func (e *Extractor) Column(i int) Column { return e.columns[i] }

func (e *Extractor) set(row []float32, i int, c Column, v float64, present bool) bool {
	if !present {
		if !c.HasDefault {
			return false
		}
		row[i] = c.Default
		return true
	}
	if c.Scale != 0 {
		v *= c.Scale
	}
	row[i] = float32(v + c.Offset)
	return true
}

// number reads an attribute as a number: ints and doubles as they are,
// booleans as 0 or 1, strings when they parse as a number.
func number(attrs pcommon.Map, key string) (float64, bool) {
	v, ok := attrs.Get(key)
	if !ok {
		return 0, false
	}
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
