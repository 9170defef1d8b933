package windowindex

import (
	"math/rand/v2"
	"runtime"
	"slices"
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

// ordered returns n windows of one scope, 1 ms apart and 100 µs long, in
// the arrival order named.
func ordered(n int, order string) []Entry {
	es := make([]Entry, n)
	for i := range es {
		s := int64(1_700_000_000_000_000_000) + int64(i)*1_000_000
		es[i] = Entry{Start: s, End: s + 100_000, ThreadID: int64(i % 16)}
	}
	switch order {
	case "reverse":
		slices.Reverse(es)
	case "random":
		rng := rand.New(rand.NewPCG(11, 12))
		rng.Shuffle(n, func(i, j int) { es[i], es[j] = es[j], es[i] })
	}
	return es
}

// BenchmarkInsertOrder indexes 100k windows of one scope into an empty
// index in each arrival order; ns/insert is the cost of one window.
func BenchmarkInsertOrder(b *testing.B) {
	const n = 100_000
	for _, order := range []string{"in-order", "reverse", "random"} {
		b.Run(order, func(b *testing.B) {
			es := ordered(n, order)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				x := New[int](Config{Retention: 1 << 62, MaxEntries: n})
				for _, e := range es {
					if _, err := x.Insert(0, e); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/insert")
			b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/100k")
		})
	}
}

// BenchmarkQueryWithLongWindow measures a 20 ms query among 100k windows of
// one scope, with and without one window as long as the retention.
func BenchmarkQueryWithLongWindow(b *testing.B) {
	const n = 100_000
	const retention = int64(n) * 1_000_000
	for _, long := range []bool{false, true} {
		name := "without"
		if long {
			name = "with"
		}
		b.Run(name, func(b *testing.B) {
			es := ordered(n, "in-order")
			x := New[int](Config{Retention: retention, MaxEntries: n + 1})
			if long {
				if _, err := x.Insert(0, Entry{Start: es[0].Start, End: es[0].Start + retention, Kind: 1}); err != nil {
					b.Fatal(err)
				}
			}
			for _, e := range es {
				if _, err := x.Insert(0, e); err != nil {
					b.Fatal(err)
				}
			}
			first := es[0].Start
			rng := rand.New(rand.NewPCG(13, 14))
			var dst []Entry
			found := 0
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				s := first + rng.Int64N(retention-20_000_000)
				dst = x.AppendOverlapping(dst[:0], 0, s, s+20_000_000)
				found += len(dst)
			}
			b.ReportMetric(float64(found)/float64(b.N), "windows/query")
		})
	}
}
