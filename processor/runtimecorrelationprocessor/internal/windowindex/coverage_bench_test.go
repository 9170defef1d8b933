package windowindex

import (
	"runtime"
	"testing"
)

// BenchmarkCoverageAdd adds 100k disjoint intervals of one scope to an
// empty Coverage in each arrival order; ns/add is the cost of one. "at
// cap" keeps at most 10k, so that from then on every add evicts one.
func BenchmarkCoverageAdd(b *testing.B) {
	const n = 100_000
	for _, bc := range []struct {
		order      string
		maxEntries int
	}{
		{"in-order", n},
		{"reverse", n},
		{"random", n},
		{"in-order at cap", n / 10},
	} {
		b.Run(bc.order, func(b *testing.B) {
			order := bc.order
			if order == "in-order at cap" {
				order = "in-order"
			}
			es := ordered(n, order)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				c := NewCoverage[int](Config{Retention: 1 << 62, MaxEntries: bc.maxEntries})
				for _, e := range es {
					c.Add(0, e.Start, e.End)
				}
				if got := c.Intervals(0); got != bc.maxEntries {
					b.Fatalf("%d intervals, want %d", got, bc.maxEntries)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/add")
			b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/100k")
		})
	}
}

// BenchmarkCoverageMemoryPerInterval reports the heap a Coverage of 100k
// disjoint intervals of one scope holds, per interval, in each arrival
// order.
func BenchmarkCoverageMemoryPerInterval(b *testing.B) {
	const n = 100_000
	for _, order := range []string{"in-order", "reverse", "random"} {
		b.Run(order, func(b *testing.B) {
			es := ordered(n, order)
			for range b.N {
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				c := NewCoverage[int](Config{Retention: 1 << 62, MaxEntries: n})
				for _, e := range es {
					c.Add(0, e.Start, e.End)
				}
				runtime.GC()
				runtime.ReadMemStats(&after)
				b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/n, "bytes/interval")
				runtime.KeepAlive(c)
			}
		})
	}
}
