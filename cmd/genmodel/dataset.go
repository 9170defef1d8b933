package main

import (
	"bufio"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// overlapAttributes are the runtimecorrelation attributes behind input
// columns 1-4, in nanoseconds.
var overlapAttributes = []string{
	"runtime.overlap.jvm.safepoint.duration",
	"runtime.overlap.jvm.gc.pause.duration",
	"runtime.overlap.python.gil.wait.duration",
	"runtime.overlap.python.gc.pause.duration",
}

// row is one span's input row, in milliseconds, in the order of Features.
type row [5]float32

// extractSpans reads the file exporter's traces (OTLP JSON, one request per
// line) and returns a row per span, computed as the inference processor's
// default configuration does: duration and overlaps in ms, a missing overlap
// as 0. Spans that end before they start, or with a negative or unusable
// overlap, are left out: they would train the forest on garbage.
func extractSpans(r io.Reader) ([]row, error) {
	var rows []row
	var u ptrace.JSONUnmarshaler
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 1<<20), 256<<20)
	line := 0
	for sc.Scan() {
		line++
		if len(sc.Bytes()) == 0 {
			continue
		}
		td, err := u.UnmarshalTraces(sc.Bytes())
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
		for _, rs := range td.ResourceSpans().All() {
			for _, ss := range rs.ScopeSpans().All() {
				for _, span := range ss.Spans().All() {
					if r, ok := spanRow(span); ok {
						rows = append(rows, r)
					}
				}
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("line %d: %w", line+1, err)
	}
	return rows, nil
}

func spanRow(span ptrace.Span) (row, bool) {
	var r row
	r[0] = float32(float64(int64(span.EndTimestamp())-int64(span.StartTimestamp())) / 1e6)
	for i, key := range overlapAttributes {
		v, ok := span.Attributes().Get(key)
		if !ok {
			continue
		}
		var ns float64
		switch v.Type() {
		case pcommon.ValueTypeInt:
			ns = float64(v.Int())
		case pcommon.ValueTypeDouble:
			ns = v.Double()
		case pcommon.ValueTypeStr:
			ns, _ = strconv.ParseFloat(v.Str(), 64)
		}
		if !math.IsNaN(ns) && !math.IsInf(ns, 0) {
			r[i+1] = float32(ns / 1e6)
		}
	}
	return r, r.valid()
}

// valid reports whether every value is a finite, non-negative number: what
// the forest may be trained on.
func (r row) valid() bool {
	for _, v := range r {
		if !usable(float64(v)) {
			return false
		}
	}
	return true
}

func usable(v float64) bool { return v >= 0 && !math.IsInf(v, 0) }

// writeRows writes rows as CSV with a header of Features.
func writeRows(w io.Writer, rows []row) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(Features); err != nil {
		return err
	}
	rec := make([]string, len(Features))
	for _, r := range rows {
		for i, v := range r {
			rec[i] = strconv.FormatFloat(float64(v), 'g', -1, 32)
		}
		if err := cw.Write(rec); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// readRows reads what writeRows wrote.
func readRows(path string) ([]row, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return parseRows(f, path)
}

// parseRows parses CSV rows; name says where they come from in errors.
func parseRows(r io.Reader, name string) ([]row, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = len(Features)
	header, err := cr.Read()
	if err != nil {
		return nil, fmt.Errorf("%s: header: %w", name, err)
	}
	for i, col := range Features {
		if header[i] != col {
			return nil, fmt.Errorf("%s: column %d is %q, want %q (columns: %v)", name, i+1, header[i], col, Features)
		}
	}
	var rows []row
	for {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		var r row
		for i, s := range rec {
			v, err := strconv.ParseFloat(s, 32)
			if err != nil || !usable(v) {
				line, _ := cr.FieldPos(i)
				return nil, fmt.Errorf("%s:%d: column %s: %q is not a non-negative number", name, line, Features[i], s)
			}
			r[i] = float32(v)
		}
		rows = append(rows, r)
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("%s: no rows", name)
	}
	return rows, nil
}
