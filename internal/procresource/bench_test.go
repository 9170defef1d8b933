package procresource

import (
	"runtime"
	"testing"
	"time"
)

// benchProcesses is the size of the fake proc tree the index benchmarks
// scan: a busy GPU node.
const benchProcesses = 1000

func newBenchIndex(b *testing.B) *Index {
	b.Helper()
	root := b.TempDir()
	writeManyProcesses(b, root, benchProcesses)
	x := NewIndex(NewReader(root, 0), time.Hour)
	if _, ok := x.ByHostPID(10_000); !ok {
		b.Fatal("index empty")
	}
	return x
}

// BenchmarkIndexLookup is the cost of matching one span's identity (a hit).
func BenchmarkIndexLookup(b *testing.B) {
	x := newBenchIndex(b)
	container := x.state.Load().byPID[10_005].id.ContainerID
	b.Run("ByContainer", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, ok := x.ByContainer(container, 6); !ok {
				b.Fatal("miss")
			}
		}
	})
	b.Run("ByHostPID", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, ok := x.ByHostPID(10_005); !ok {
				b.Fatal("miss")
			}
		}
	})
	b.Run("ByPod", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if ids := x.ByPod(manyProcessesPod(5), 6); len(ids) != 2 {
				b.Fatalf("%d processes", len(ids))
			}
		}
	})
}

// BenchmarkIndexRescan is the cost of one scan of the proc root, reported
// per process; "unchanged" is the usual rescan (start ticks match, status is
// not read again), "fresh" a first scan.
func BenchmarkIndexRescan(b *testing.B) {
	x := newBenchIndex(b)
	b.Run("unchanged", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			st, err := x.scan(x.state.Load(), 0)
			if err != nil || len(st.byPID) != benchProcesses {
				b.Fatal(err)
			}
			x.state.Store(st)
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/benchProcesses, "ns/process")
	})
	b.Run("fresh", func(b *testing.B) {
		b.ReportAllocs()
		empty := newIndexState(0)
		for b.Loop() {
			if _, err := x.scan(empty, 0); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/benchProcesses, "ns/process")
	})
}

// BenchmarkIndexMemory reports the heap an index keeps per tracked process.
func BenchmarkIndexMemory(b *testing.B) {
	root := b.TempDir()
	writeManyProcesses(b, root, benchProcesses)
	var perProcess float64
	for b.Loop() {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		x := NewIndex(NewReader(root, 0), time.Hour)
		x.ByHostPID(10_000)
		runtime.GC()
		runtime.ReadMemStats(&after)
		perProcess = float64(after.HeapAlloc-before.HeapAlloc) / benchProcesses
		runtime.KeepAlive(x)
	}
	b.ReportMetric(perProcess, "B/process")
}

// BenchmarkIndexRescanProc scans this machine's own /proc, whatever runs
// on it, and reports the cost per process.
func BenchmarkIndexRescanProc(b *testing.B) {
	x := NewIndex(NewReader("", 0), time.Hour)
	x.ByHostPID(1)
	b.ReportAllocs()
	var n int
	for b.Loop() {
		st, err := x.scan(x.state.Load(), 0)
		if err != nil {
			b.Fatal(err)
		}
		x.state.Store(st)
		n = len(st.byPID)
	}
	b.ReportMetric(float64(n), "processes")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/process")
}
