package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// FuzzParseRows: any input either fails with an error or gives rows of
// finite, non-negative numbers that survive a write and a read unchanged.
func FuzzParseRows(f *testing.F) {
	for _, name := range []string{"healthy-train.csv", "stressed.csv"} {
		data, err := os.ReadFile(filepath.Join("data", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data[:min(len(data), 2000)])
	}
	f.Add([]byte("duration_ms,jvm_safepoint_ms,jvm_gc_pause_ms,python_gil_wait_ms,python_gc_pause_ms\n1,2,3,4,5\n"))
	f.Add([]byte("duration_ms,jvm_safepoint_ms,jvm_gc_pause_ms,python_gil_wait_ms,python_gc_pause_ms\n1e39,0,0,0,0\n"))
	f.Add([]byte("a,b\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		rows, err := parseRows(bytes.NewReader(data), "fuzz")
		if err != nil {
			return
		}
		for _, r := range rows {
			if !r.valid() {
				t.Fatalf("row %v has a value that is not a finite non-negative number", r)
			}
		}
		var buf bytes.Buffer
		if err := writeRows(&buf, rows); err != nil {
			t.Fatal(err)
		}
		again, err := parseRows(&buf, "rewritten")
		if err != nil {
			t.Fatalf("rewritten rows do not parse: %v", err)
		}
		if len(again) != len(rows) {
			t.Fatalf("%d rows, %d after a rewrite", len(rows), len(again))
		}
		for i := range rows {
			if again[i] != rows[i] {
				t.Fatalf("row %d: %v, %v after a rewrite", i, rows[i], again[i])
			}
		}
	})
}

// FuzzExtractSpans: any file exporter output either fails with an error or
// gives rows that writeRows and parseRows accept: finite, non-negative.
func FuzzExtractSpans(f *testing.F) {
	f.Add([]byte(`{"resourceSpans":[{"scopeSpans":[{"spans":[{"startTimeUnixNano":"1000000","endTimeUnixNano":"3000000","attributes":[{"key":"runtime.overlap.jvm.safepoint.duration","value":{"intValue":"500000"}}]}]}]}]}` + "\n"))
	f.Add([]byte(`{"resourceSpans":[{"scopeSpans":[{"spans":[{"startTimeUnixNano":"9","endTimeUnixNano":"1","attributes":[{"key":"runtime.overlap.python.gc.pause.duration","value":{"stringValue":"NaN"}}]}]}]}]}` + "\n\n"))
	f.Add([]byte("{}\n{\"resourceSpans\":[]}\n"))
	f.Add([]byte("not json\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		rows, err := extractSpans(bytes.NewReader(data))
		if err != nil {
			return
		}
		for _, r := range rows {
			if !r.valid() {
				t.Fatalf("row %v has a value that is not a finite non-negative number", r)
			}
		}
	})
}
