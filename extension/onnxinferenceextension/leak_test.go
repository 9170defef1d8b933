package onnxinferenceextension

import (
	"context"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"testing"

	"github.com/otelcol-ai/otelcol-ai/extension/onnxinferenceextension/internal/memstat"
	"github.com/otelcol-ai/otelcol-ai/internal/modelrepotest"
	"github.com/otelcol-ai/otelcol-ai/pkg/modelrunner"
)

// memory is a snapshot of what a leak would grow.
type memory struct{ rss, cHeap int64 }

func snapshot(t testing.TB) memory {
	t.Helper()
	debug.FreeOSMemory()
	memstat.TrimCHeap()
	rss, err := memstat.RSS()
	if err != nil {
		t.Fatal(err)
	}
	return memory{rss: rss, cHeap: memstat.CHeapInUse()}
}

// reloadCycles swaps in n new versions of model "m", one at a time: each
// cycle adds version v+1, removes version v, rescans (load the new, drain and
// destroy the old) and runs the new one once.
func reloadCycles(t testing.TB, e *onnxExtension, repo string, next *int64, n int) {
	t.Helper()
	in := []modelrunner.Tensor{named("input_vectors", rows(4, 10, func(r, c int) float32 { return float32(r + c) }))}
	for i := 0; i < n; i++ {
		v := *next
		place(t, repo, "m", v+1, modelDynamicAxes)
		if err := os.RemoveAll(filepath.Join(repo, "m", strconv.FormatInt(v, 10))); err != nil {
			t.Fatal(err)
		}
		e.scan()
		res, err := e.Run(context.Background(), "m", modelrunner.Request{Inputs: in})
		if err != nil {
			t.Fatal(err)
		}
		if res.Version != v+1 {
			t.Fatalf("cycle %d: ran version %d, want %d", i, res.Version, v+1)
		}
		*next = v + 1
	}
}

// Loading and unloading versions returns RSS and ONNX Runtime's C heap to
// their baseline. A shortened run; BenchmarkLoadUnloadCycles is the full one.
func TestLoadUnloadCyclesReturnToBaseline(t *testing.T) {
	repo := t.TempDir()
	place(t, repo, "m", 1, modelDynamicAxes)
	e := start(t, testConfig(repo))
	next := int64(1)
	reloadCycles(t, e, repo, &next, 20) // warm-up: arenas, caches, thread pools
	before := snapshot(t)
	const cycles = 100
	reloadCycles(t, e, repo, &next, cycles)
	after := snapshot(t)
	t.Logf("%d cycles: RSS %+d KiB, C heap %+d KiB", cycles, (after.rss-before.rss)>>10, (after.cHeap-before.cHeap)>>10)
	// A session of this model holds tens of KiB; a leak of one per cycle
	// would show as megabytes.
	if grew := after.cHeap - before.cHeap; before.cHeap >= 0 && grew > 512<<10 {
		t.Errorf("C heap grew %d KiB over %d load/unload cycles", grew>>10, cycles)
	}
	if grew := after.rss - before.rss; grew > 8<<20 {
		t.Errorf("RSS grew %d KiB over %d load/unload cycles", grew>>10, cycles)
	}
}

// Starting and stopping the extension (creating and destroying ONNX
// Runtime's environment each time) does not accumulate memory either.
func TestStartStopCyclesReturnToBaseline(t *testing.T) {
	modelrepotest.RequireLibrary(t)
	repo := t.TempDir()
	place(t, repo, "m", 1, modelDynamicAxes)
	cycle := func() {
		e, err := newExtension(extensiontestSettings(), testConfig(repo))
		if err != nil {
			t.Fatal(err)
		}
		if err := e.Start(context.Background(), nopHost()); err != nil {
			t.Fatal(err)
		}
		if err := e.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 5; i++ {
		cycle()
	}
	before := snapshot(t)
	const cycles = 20
	for i := 0; i < cycles; i++ {
		cycle()
	}
	after := snapshot(t)
	t.Logf("%d start/stop cycles: RSS %+d KiB, C heap %+d KiB", cycles, (after.rss-before.rss)>>10, (after.cHeap-before.cHeap)>>10)
	if grew := after.cHeap - before.cHeap; before.cHeap >= 0 && grew > 1<<20 {
		t.Errorf("C heap grew %d KiB over %d start/stop cycles", grew>>10, cycles)
	}
	if grew := after.rss - before.rss; grew > 16<<20 {
		t.Errorf("RSS grew %d KiB over %d start/stop cycles", grew>>10, cycles)
	}
}

// BenchmarkLoadUnloadCycles is the full leak check: run it as
//
//	go test -run '^$' -bench LoadUnloadCycles -benchtime 1000x ./extension/onnxinferenceextension/
//
// and read rss-KiB/1000 and cheap-KiB/1000 (growth per thousand cycles after
// a warm-up; near zero when nothing leaks).
func BenchmarkLoadUnloadCycles(b *testing.B) {
	repo := b.TempDir()
	place(b, repo, "m", 1, modelDynamicAxes)
	e := start(b, testConfig(repo))
	next := int64(1)
	reloadCycles(b, e, repo, &next, 20)
	before := snapshot(b)
	b.ResetTimer()
	reloadCycles(b, e, repo, &next, b.N)
	b.StopTimer()
	after := snapshot(b)
	per := func(d int64) float64 { return float64(d>>10) * 1000 / float64(b.N) }
	b.ReportMetric(per(after.rss-before.rss), "rss-KiB/1000")
	b.ReportMetric(per(after.cHeap-before.cHeap), "cheap-KiB/1000")
	// One leaked session per cycle would be tens of MiB by now.
	if grew := after.cHeap - before.cHeap; before.cHeap >= 0 && grew > 2<<20 {
		b.Errorf("C heap grew %d KiB over %d load/unload cycles", grew>>10, b.N)
	}
	if grew := after.rss - before.rss; grew > 16<<20 {
		b.Errorf("RSS grew %d KiB over %d load/unload cycles", grew>>10, b.N)
	}
}
