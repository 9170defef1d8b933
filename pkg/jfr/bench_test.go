package jfr_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/otelcol-ai/otelcol-ai/pkg/jfr"
)

// Benchmarks read testdata's G1 recording, or the file named by
// JFR_BENCH_FILE (bench/jfr/jfr.sh makes a ≥ 50 MB one). They report
// events/op and allocations; bytes/s is file bytes.

func benchFile(b *testing.B) (*jfr.Reader, int64) {
	b.Helper()
	path := os.Getenv("JFR_BENCH_FILE")
	if path == "" {
		path = filepath.Join("testdata", "g1-default-jdk17.jfr")
	}
	r, err := jfr.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { r.Close() })
	st, _ := os.Stat(path)
	return r, st.Size()
}

func loadChunks(b *testing.B, r *jfr.Reader) []*jfr.Chunk {
	var cs []*jfr.Chunk
	for i := range r.Chunks() {
		c, err := r.Chunk(i)
		if err != nil {
			b.Fatal(err)
		}
		cs = append(cs, c)
	}
	return cs
}

// BenchmarkLoad: read chunk bytes, parse metadata, index constant pools.
func BenchmarkLoad(b *testing.B) {
	r, size := benchFile(b)
	b.SetBytes(size)
	b.ReportAllocs()
	for b.Loop() {
		loadChunks(b, r)
	}
}

// BenchmarkEvents: decode every field of every event (chunks preloaded).
func BenchmarkEvents(b *testing.B) {
	r, size := benchFile(b)
	b.SetBytes(size)
	b.ReportAllocs()
	var n int
	for b.Loop() {
		n = 0
		for _, c := range loadChunks(b, r) {
			er := c.Events()
			for er.Next() {
				ev := er.Event()
				for i := range ev.Fields {
					_ = ev.Fields[i].Kind()
				}
				n++
			}
			if er.Err() != nil {
				b.Fatal(er.Err())
			}
		}
	}
	b.ReportMetric(float64(n), "events/op")
}

// BenchmarkScan: the receiver's path, a few GC/safepoint fields, everything
// else skipped by size.
func BenchmarkScan(b *testing.B) {
	r, size := benchFile(b)
	cs := loadChunks(b, r)
	sel := jfr.NewSelection()
	sel.Add("jdk.GarbageCollection", "startTime", "duration", "gcId", "name", "cause")
	sel.Add("jdk.GCPhasePause", "startTime", "duration", "gcId", "name")
	sel.Add("jdk.SafepointBegin", "startTime", "duration", "safepointId")
	sel.Add("jdk.ExecuteVMOperation", "startTime", "duration", "operation", "safepoint")
	b.SetBytes(size)
	b.ReportAllocs()
	var n int
	for b.Loop() {
		n = 0
		for _, c := range cs {
			sc := c.Scan(sel)
			for sc.Next() {
				_ = sc.Record().Int(0)
				n++
			}
		}
	}
	b.ReportMetric(float64(n), "selected/op")
}

// BenchmarkSkipAll: scan with a selection that matches nothing; measures
// the per-record skip cost, which must not allocate.
func BenchmarkSkipAll(b *testing.B) {
	r, size := benchFile(b)
	cs := loadChunks(b, r)
	sel := jfr.NewSelection()
	sel.Add("jdk.NoSuchEvent", "startTime")
	b.SetBytes(size)
	b.ReportAllocs()
	for b.Loop() {
		for _, c := range cs {
			sc := c.Scan(sel)
			for sc.Next() {
			}
		}
	}
}

// BenchmarkOpenLoad: open the file and load every chunk with a new Reader
// each time, so that metadata is parsed (BenchmarkLoad's Reader keeps it).
func BenchmarkOpenLoad(b *testing.B) {
	_, size := benchFile(b)
	path := os.Getenv("JFR_BENCH_FILE")
	if path == "" {
		path = filepath.Join("testdata", "g1-default-jdk17.jfr")
	}
	b.SetBytes(size)
	b.ReportAllocs()
	for b.Loop() {
		r, err := jfr.Open(path)
		if err != nil {
			b.Fatal(err)
		}
		loadChunks(b, r)
		r.Close()
	}
}
