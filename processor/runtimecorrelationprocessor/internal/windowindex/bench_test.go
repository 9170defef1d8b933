package windowindex

import (
	"math/rand/v2"
	"runtime"
	"testing"
)

// windows returns n windows of 4 processes, 1 ms apart on average, 50 µs to
// 2 ms long, with one in ten arriving up to 5 ms late (as JFR's per-second
// flushes and an eBPF ring buffer interleave).
func windows(n int) ([]int, []Entry) {
	rng := rand.New(rand.NewPCG(7, 8))
	keys := make([]int, n)
	es := make([]Entry, n)
	t := int64(1_700_000_000_000_000_000)
	for i := range es {
		t += int64(rng.IntN(2_000_000))
		s := t
		if i%10 == 0 {
			s -= int64(rng.IntN(5_000_000))
		}
		keys[i] = i % 4
		es[i] = Entry{Start: s, End: s + 50_000 + int64(rng.IntN(1_950_000)), ThreadID: int64(i % 16), PID: int64(1000 + i%4), Kind: uint8(i % 5)}
	}
	return keys, es
}

// BenchmarkInsert measures window ingest into a full index (every insert
// also evicts one), the steady state of a busy node.
func BenchmarkInsert(b *testing.B) {
	const n = 1 << 20
	keys, es := windows(n)
	x := New[int](Config{Retention: 60e9, MaxEntries: 100_000})
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		j := i & (n - 1)
		e := es[j]
		// Shift each pass past the last so the stream keeps moving forward.
		off := int64(i/n) * 3_000_000_000_000
		e.Start += off
		e.End += off
		if _, err := x.Insert(keys[j], e); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "windows/s")
}

// BenchmarkQuery measures finding the windows that overlap a 20 ms span
// among 100k indexed windows.
func BenchmarkQuery(b *testing.B) {
	const n = 100_000
	keys, es := windows(n)
	x := New[int](Config{Retention: 1 << 62, MaxEntries: n})
	for i := range es {
		if _, err := x.Insert(keys[i], es[i]); err != nil {
			b.Fatal(err)
		}
	}
	first, last := es[0].Start, es[n-1].Start
	rng := rand.New(rand.NewPCG(9, 10))
	var dst []Entry
	found := 0
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		s := first + rng.Int64N(last-first)
		dst = x.AppendOverlapping(dst[:0], i%4, s, s+20_000_000)
		found += len(dst)
	}
	b.ReportMetric(float64(found)/float64(b.N), "windows/query")
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "queries/s")
}

// BenchmarkMemoryPerWindow reports the heap an index of 100k windows holds,
// per window.
func BenchmarkMemoryPerWindow(b *testing.B) {
	const n = 100_000
	keys, es := windows(n)
	for range b.N {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		x := New[int](Config{Retention: 1 << 62, MaxEntries: n})
		for i := range es {
			if _, err := x.Insert(keys[i], es[i]); err != nil {
				b.Fatal(err)
			}
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n, "bytes/window")
		runtime.KeepAlive(x)
	}
}
