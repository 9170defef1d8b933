package jfrreceiver

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/otelcol-ai/otelcol-ai/pkg/jfr"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/jfrstream"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/jvmevent"
)

// chunkCostTypes are the event types the receiver reads (jfrstream's
// selection). BenchmarkChunkCost fails when a chunk with all of them
// disabled still gives the receiver something, so a type added there
// without being added here is noticed.
var chunkCostTypes = []string{
	"jdk.GarbageCollection", "jdk.GCPhasePause", "jdk.SafepointBegin", "jdk.SafepointEnd",
	"jdk.ExecuteVMOperation", "jdk.GCHeapSummary", "jdk.MetaspaceSummary", "jdk.GCHeapMemoryUsage",
	"jdk.DirectBufferStatistics", "jdk.NativeMemoryUsage", "jdk.NativeMemoryUsageTotal",
	"jdk.JVMInformation", "jdk.JavaThreadStatistics", "jdk.ClassLoadingStatistics", "jdk.CPULoad",
	"jdk.CPUInformation", "jdk.ContainerConfiguration", "jdk.G1HeapSummary", "jdk.PSHeapSummary",
	"jdk.GCConfiguration", "jdk.CodeCacheStatistics",
}

// BenchmarkChunkCost measures what the receiver's decode path (pkg/jfr's
// Scanner and jfrstream, as for every chunk of a JVM's repository) costs
// per chunk and per event type, on real recordings: the two JDK
// recordings in pkg/jfr/testdata (G1 on JDK 17, ZGC with NMT on JDK 25,
// both JFR's default settings) and JFR_BENCH_FILE when set (make bench's
// G1 profile recording). Sub-benchmarks, per recording:
//
//   - all: every chunk loaded (jfr.NewChunk) and read into one
//     jfrstream.Stream, which is then flushed, as the receiver does with a
//     JVM's chunks: the whole cost, constants decoded afresh; ns/chunk.
//   - load: jfr.NewChunk alone (header, metadata, checkpoints); ns/chunk.
//   - skip: the loaded chunks read with every type the receiver reads
//     disabled (their records' type ids rewritten, in as many bytes, to
//     one the receiver does not select): the cost of passing every record
//     by; ns/chunk.
//   - one per event type present: the loaded chunks with only that type's
//     records left, read in alternation with skip's in the same loop;
//     ns/event, allocs/event and B/event are the difference over the
//     type's events, once the constants they refer to were decoded (the
//     first read of a chunk decodes each once). Times are the benchmark
//     thread's CPU time, so that other work on the machine does not count;
//     a type with one event per chunk is near the resolution.
//
// A chunk costs about load + skip + the sum over its events of their
// type's ns/event, plus decoding its constants once.
//
//	go test -run '^$' -bench ChunkCost ./receiver/jfrreceiver
func BenchmarkChunkCost(b *testing.B) {
	files := []string{
		filepath.Join("..", "..", "pkg", "jfr", "testdata", "g1-default-jdk17.jfr"),
		filepath.Join("..", "..", "pkg", "jfr", "testdata", "zgc-default-nmt-jdk25.jfr"),
	}
	if f := os.Getenv("JFR_BENCH_FILE"); f != "" {
		files = append(files, f)
	}
	for _, path := range files {
		b.Run(filepath.Base(path), func(b *testing.B) { benchChunkCost(b, path) })
	}
}

func benchChunkCost(b *testing.B, path string) {
	chunks, size := chunkBytes(b, path)
	counts := map[string]int{}
	for _, c := range chunks {
		countTypes(b, c, counts)
	}
	none := loadAll(b, disableTypes(b, chunks, chunkCostTypes))
	if batch := readLoaded(b, none); !emptyBatch(batch) {
		b.Fatalf("%s: with every listed type disabled the receiver still read %+v: add the type it reads to chunkCostTypes", path, batch)
	}
	perChunk := func(b *testing.B) {
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(chunks)), "ns/chunk")
	}

	b.Run("all", func(b *testing.B) {
		b.SetBytes(size)
		b.ReportAllocs()
		for b.Loop() {
			readLoaded(b, loadAll(b, chunks))
		}
		perChunk(b)
	})
	b.Run("load", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			loadAll(b, chunks)
		}
		perChunk(b)
	})
	b.Run("skip", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			readLoaded(b, none)
		}
		perChunk(b)
	})
	for _, typ := range chunkCostTypes {
		n := counts[typ]
		if n == 0 {
			continue
		}
		var others []string
		for _, t := range chunkCostTypes {
			if t != typ {
				others = append(others, t)
			}
		}
		only := loadAll(b, disableTypes(b, chunks, others))
		readLoaded(b, only) // decodes the constants its events refer to
		b.Run(typ, func(b *testing.B) {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			var spentOnly, spentNone time.Duration
			for b.Loop() {
				t0 := threadCPU(b)
				readLoaded(b, none)
				t1 := threadCPU(b)
				readLoaded(b, only)
				spentNone += t1 - t0
				spentOnly += threadCPU(b) - t1
			}
			passes := b.N
			allocsOnly, bytesOnly := allocsPerPass(b, only)
			allocsNone, bytesNone := allocsPerPass(b, none)
			b.ReportMetric(float64((spentOnly-spentNone).Nanoseconds())/float64(passes*n), "ns/event")
			b.ReportMetric((allocsOnly-allocsNone)/float64(n), "allocs/event")
			b.ReportMetric((bytesOnly-bytesNone)/float64(n), "B/event")
			b.ReportMetric(float64(n)/float64(len(chunks)), "events/chunk")
		})
	}
}

// threadCPU is the CPU time of the calling thread (the benchmark locks its
// goroutine to it).
func threadCPU(b *testing.B) time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ts.Nano())
}

// chunkBytes returns a copy of every chunk of the recording and its size.
func chunkBytes(b *testing.B, path string) ([][]byte, int64) {
	r, err := jfr.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	var out [][]byte
	var size int64
	for i := range r.Chunks() {
		c, err := r.Chunk(i)
		if err != nil {
			b.Fatal(err)
		}
		out = append(out, bytes.Clone(c.Bytes()))
		size += int64(len(c.Bytes()))
	}
	return out, size
}

func loadChunk(b *testing.B, buf []byte, i int) *jfr.Chunk {
	c, err := jfr.NewChunk(buf, i, 0)
	if err != nil {
		b.Fatal(err)
	}
	return c
}

func loadAll(b *testing.B, chunks [][]byte) []*jfr.Chunk {
	out := make([]*jfr.Chunk, len(chunks))
	for i, buf := range chunks {
		out[i] = loadChunk(b, buf, i)
	}
	return out
}

// readLoaded reads loaded chunks into one stream, then flushes it as at
// the end of a recording.
func readLoaded(b *testing.B, chunks []*jfr.Chunk) *jvmevent.Batch {
	s := jfrstream.New()
	var batch jvmevent.Batch
	for _, c := range chunks {
		if err := s.Chunk(c, &batch); err != nil {
			b.Fatal(err)
		}
	}
	s.Flush(&batch, true)
	return &batch
}

func emptyBatch(x *jvmevent.Batch) bool {
	return len(x.Windows)+len(x.GCs)+len(x.UnrecordedGCs)+len(x.Safepoints)+len(x.Memory)+
		len(x.Buffers)+len(x.NativeMemory)+len(x.Threads)+len(x.Classes)+len(x.CPU) == 0
}

// allocsPerPass returns the allocations and bytes allocated by one pass,
// averaged over a few.
func allocsPerPass(b *testing.B, chunks []*jfr.Chunk) (allocs, bytes float64) {
	const passes = 5
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	for range passes {
		readLoaded(b, chunks)
	}
	runtime.ReadMemStats(&m1)
	return float64(m1.Mallocs-m0.Mallocs) / passes, float64(m1.TotalAlloc-m0.TotalAlloc) / passes
}

// records calls fn with the offset, type id and the id's encoded length of
// every record of a chunk (compressed integers, as HotSpot writes).
func records(b *testing.B, c *jfr.Chunk, fn func(off int, id uint64, idLen int)) {
	buf := c.Bytes()
	for pos := jfr.HeaderSize; pos < len(buf); {
		size, n := uvarint(buf[pos:])
		if n == 0 || size == 0 || size > uint64(len(buf)-pos) {
			b.Fatalf("chunk %d: bad record size at %d", c.Index, pos)
		}
		id, m := uvarint(buf[pos+n : pos+int(size)])
		if m == 0 {
			b.Fatalf("chunk %d: bad record type at %d", c.Index, pos)
		}
		fn(pos+n, id, m)
		pos += int(size)
	}
}

// uvarint decodes a JFR compressed integer and returns it with its length
// (0 when cut short).
func uvarint(p []byte) (uint64, int) {
	var v uint64
	for i := 0; i < 9 && i < len(p); i++ {
		if i == 8 {
			return v | uint64(p[i])<<56, 9
		}
		v |= uint64(p[i]&0x7f) << (7 * i)
		if p[i] < 0x80 {
			return v, i + 1
		}
	}
	return 0, 0
}

func countTypes(b *testing.B, buf []byte, counts map[string]int) {
	c := loadChunk(b, buf, 0)
	if !c.Header.CompressedInts() {
		b.Skip("chunk without compressed integers")
	}
	records(b, c, func(_ int, id uint64, _ int) {
		if t := c.Metadata.TypeByID(int64(id)); t != nil && id > 1 {
			counts[t.Name]++
		}
	})
}

// disableTypes returns copies of the chunks in which the records of the
// named types carry the id of a type the receiver does not read (or none
// declared), written in as many bytes as the original (a padded compressed
// integer), so that every offset stays valid and the receiver passes those
// records by as it passes any it does not read.
func disableTypes(b *testing.B, chunks [][]byte, names []string) [][]byte {
	read := map[string]bool{}
	for _, t := range chunkCostTypes {
		read[t] = true
	}
	var out [][]byte
	for i, orig := range chunks {
		buf := bytes.Clone(orig)
		c := loadChunk(b, buf, i)
		off := map[uint64]bool{}
		for _, name := range names {
			if t := c.Metadata.TypeByName(name); t != nil {
				off[uint64(t.ID)] = true
			}
		}
		other := uint64(2) // 0 and 1 are metadata and checkpoints
		for t := c.Metadata.TypeByID(int64(other)); t != nil && read[t.Name]; t = c.Metadata.TypeByID(int64(other)) {
			other++
		}
		records(b, c, func(at int, id uint64, idLen int) {
			if !off[id] {
				return
			}
			if idLen < 9 && other >= 1<<(7*idLen) {
				b.Fatalf("no type id to disable %d with fits in %d bytes", id, idLen)
			}
			v := other
			for k := 0; k < idLen-1; k++ {
				buf[at+k] = byte(v&0x7f) | 0x80
				v >>= 7
			}
			buf[at+idLen-1] = byte(v)
		})
		out = append(out, buf)
	}
	if len(out) == 0 {
		b.Fatal("no chunks")
	}
	return out
}
