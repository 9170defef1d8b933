//go:build linux && amd64

package gil

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/otelcol-ai/otelcol-ai/receiver/pythongilreceiver/internal/workloadtest"
)

// libPythonDir puts lib (a copy, or stripped when strip is set) into a
// directory of its own under its own name and returns the directory, for
// LD_LIBRARY_PATH: the interpreters' RUNPATH yields to it.
func libPythonDir(t *testing.T, lib string, strip bool) string {
	t.Helper()
	src := lib
	if strip {
		src = stripCopy(t, lib)
	}
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, filepath.Base(lib)), data, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// startOn starts gilwork.py with args on python, loading libpython from
// dir, and checks that it maps the copy there.
func startOn(t *testing.T, python, dir string, args ...string) *workloadtest.Process {
	t.Helper()
	cmd := exec.Command(python, append([]string{workloadtest.Script()}, args...)...)
	cmd.Env = append(os.Environ(), "LD_LIBRARY_PATH="+dir)
	w := workloadtest.StartCommand(t, cmd)
	lib, err := workloadtest.LibPython(w.PID)
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Dir(lib) != dir {
		t.Fatalf("workload %d maps %s, not the copy in %s", w.PID, lib, dir)
	}
	return w
}

// gilFigures are what one interpreter's runs of the two workloads
// measured.
type gilFigures struct {
	// wait is the contending workload's GIL wait time, all threads,
	// windows and in-kernel sums; wall the time from its first sleep to
	// its last wake-up, inSpan the part of wait within it, and asleep the
	// time the sleeper asked to sleep.
	wait, wall, inSpan, asleep time.Duration
	// gcs and gcTime are the generation-2 GC pauses of the GC workload's
	// thread; collects and collectTime its gc.collect(2) calls, as it
	// timed them.
	gcs, collects       int
	gcTime, collectTime time.Duration
}

// waitShare is the wait time per second of the contending workload.
func (g gilFigures) waitShare() float64 { return g.wait.Seconds() / g.wall.Seconds() }

// waitOfWanted is the contending workload's wait time within its span as
// a share of what its threads wanted beyond the one holding the GIL: the
// two spinners want it all the time and the sleeper while it is not
// asleep, so one thread waits while the sleeper sleeps and two while it is
// awake (2·wall − asleep). The wait per second grows with how long the
// sleeper waited after each sleep, which is the scheduler's doing; this
// does not. It stays a little under 1: a spinner forced off waits for the
// other to take the GIL inside drop_gil, not take_gil, and a sleeper woken
// may stand runnable before it asks.
func (g gilFigures) waitOfWanted() float64 {
	return g.inSpan.Seconds() / (2*g.wall.Seconds() - g.asleep.Seconds())
}

// contendSleeps is how many 25 ms sleeps the side-by-side contending
// workload makes. Two unstripped copies side by side (on 2 CPUs at load
// 10-12, 15 and 10 runs) measured waitOfWanted 0.95-1.05 apart with 40
// and 0.96-1.05 with 120 (wait per second: 0.90-1.21 and 0.92-1.04); a
// stripped copy 0.93-1.10 and 0.97-1.05 from an unstripped one, and 1.12
// once at load 16, where the workload ran 4 times slower: a spinner forced
// off counts as waiting until the other is scheduled to take the GIL, and
// a sleeper woken stands runnable before it asks, both longer under load.
const contendSleeps = 120

// gcShare is the share of gc.collect(2)'s time reported as GC pauses.
func (g gilFigures) gcShare() float64 { return g.gcTime.Seconds() / g.collectTime.Seconds() }

// measureSideBySide runs the sleeper + contending workload (contendSleeps
// sleeps of 25 ms beside two spinning threads), then the GC workload (8
// gc.collect(2) of 200k objects in cycles), on python once with each
// libpython directory in dirs, the processes of each workload side by
// side so that they share the machine's load, all probed by p.
func measureSideBySide(t *testing.T, p *Probe, python string, dirs ...string) []gilFigures {
	t.Helper()
	out := make([]gilFigures, len(dirs))
	var ws []*workloadtest.Process
	for _, dir := range dirs {
		w := startOn(t, python, dir, "contend", strconv.Itoa(contendSleeps), "25", "2")
		attach(t, p, w.PID)
		ws = append(ws, w)
	}
	for _, w := range ws {
		w.Go()
	}
	spans := make([][2]int64, len(ws))
	for i, w := range ws {
		var res struct {
			Calls [][2]int64 `json:"calls"`
		}
		w.Result(&res)
		spans[i] = [2]int64{res.Calls[0][0], res.Calls[len(res.Calls)-1][1]}
		out[i].wall = time.Duration(spans[i][1] - spans[i][0])
		out[i].asleep = time.Duration(len(res.Calls)) * 25 * time.Millisecond
	}
	// One drain for all: drain drops the events of other pids.
	events := drainPIDs(t, p)
	for i, w := range ws {
		for _, e := range events[uint32(w.PID)] {
			if e.Kind == KindWait {
				out[i].wait += e.Duration
				if lo, hi := max(e.Start, spans[i][0]), min(e.Start+int64(e.Duration), spans[i][1]); hi > lo {
					out[i].inSpan += time.Duration(hi - lo)
				}
			}
		}
		// Waits shorter than min_duration, summed in the kernel: whole.
		for k, a := range aggregatesOf(t, p, w.PID) {
			if k.Kind == KindWait {
				out[i].wait += a.Sum
				out[i].inSpan += a.Sum
			}
		}
	}
	var gs []*workloadtest.Process
	for _, dir := range dirs {
		g := startOn(t, python, dir, "gc", "8")
		attach(t, p, g.PID)
		gs = append(gs, g)
	}
	for _, g := range gs {
		g.Go()
	}
	tids := make([]uint32, len(gs))
	for i, g := range gs {
		var res struct {
			TID   uint32     `json:"tid"`
			Calls [][2]int64 `json:"calls"`
		}
		g.Result(&res)
		tids[i] = res.TID
		out[i].collects = len(res.Calls)
		for _, c := range res.Calls {
			out[i].collectTime += time.Duration(c[1] - c[0])
		}
	}
	events = drainPIDs(t, p)
	for i, g := range gs {
		res := struct{ TID uint32 }{tids[i]}
		for _, e := range events[uint32(g.PID)] {
			if e.Kind == KindGC && e.TID == res.TID && e.Generation == 2 {
				out[i].gcs++
				out[i].gcTime += e.Duration
			}
		}
	}
	return out
}

// within10 reports whether got is within 10% of want.
func within10(got, want float64) bool { return got >= want*0.9 && got <= want*1.1 }

// TestDecodedProbesMeasureAsSymbolProbes: in one process running on a
// --strip-all copy of each installed CPython's libpython, the probes at
// the functions decoding found and probes at the unstripped symbol
// table's offsets, both attached at once, measure the same GIL wait time
// and the same GC pauses, within 10%, on the contending and GC workloads.
func TestDecodedProbesMeasureAsSymbolProbes(t *testing.T) {
	for version, lib := range pyenvLibPythons(t) {
		t.Run(version, func(t *testing.T) {
			python := filepath.Join(filepath.Dir(filepath.Dir(lib)), "bin", "python3")
			want := symtabOffsets(t, lib)
			dir := libPythonDir(t, lib, true)
			stripped := filepath.Join(dir, filepath.Base(lib))
			decoded := load(t, defaults)
			bySymbols := load(t, defaults)
			var figures [2]gilFigures
			for _, args := range [][]string{{"contend", "40", "25", "2"}, {"gc", "8"}} {
				w := startOn(t, python, dir, args...)
				img, err := ReadFile(openELF(t, stripped))
				if err != nil {
					t.Fatal(err)
				}
				if len(img.Decoded) != 3 {
					t.Fatalf("decoded %v (%v), want take_gil, drop_gil and gc_collect_main", img.Decoded, img.DecodeErr)
				}
				if _, err := decoded.attachImage(openELF(t, stripped), img); err != nil {
					t.Fatal(err)
				}
				// The same file, probed where its symbol table said before
				// it was stripped.
				img.Decoded = nil
				for name, off := range want {
					img.Symbols[name] = off
				}
				if _, err := bySymbols.attachImage(openELF(t, stripped), img); err != nil {
					t.Fatal(err)
				}
				var res struct {
					TID   uint32     `json:"tid"`
					Calls [][2]int64 `json:"calls"`
				}
				w.Run(&res)
				for i, p := range []*Probe{decoded, bySymbols} {
					for _, e := range drain(t, p, w.PID) {
						switch {
						case e.Kind == KindWait:
							figures[i].wait += e.Duration
						case e.Kind == KindGC && e.TID == res.TID && e.Generation == 2:
							figures[i].gcs++
							figures[i].gcTime += e.Duration
						}
					}
					for k, a := range aggregatesOf(t, p, w.PID) {
						if k.Kind == KindWait {
							figures[i].wait += a.Sum
						}
					}
				}
				if args[0] == "gc" {
					figures[0].collects, figures[1].collects = len(res.Calls), len(res.Calls)
				}
			}
			got, sym := figures[0], figures[1]
			t.Logf("%s: GIL wait %s decoded, %s by symbols (ratio %.4f); GC pauses %d and %d of %d collects, %s and %s (ratio %.4f)",
				version, got.wait, sym.wait, got.wait.Seconds()/sym.wait.Seconds(), got.gcs, sym.gcs, got.collects,
				got.gcTime, sym.gcTime, got.gcTime.Seconds()/sym.gcTime.Seconds())
			if sym.wait == 0 || !within10(got.wait.Seconds(), sym.wait.Seconds()) {
				t.Errorf("GIL wait %s decoded, %s by symbols: not within 10%%", got.wait, sym.wait)
			}
			if got.gcs != got.collects || sym.gcs != sym.collects {
				t.Errorf("GC pauses %d decoded, %d by symbols, want %d each", got.gcs, sym.gcs, got.collects)
			}
			if sym.gcTime == 0 || !within10(got.gcTime.Seconds(), sym.gcTime.Seconds()) {
				t.Errorf("GC pause time %s decoded, %s by symbols: not within 10%%", got.gcTime, sym.gcTime)
			}
		})
	}
}

// TestStrippedLibPythonMeasuresAsUnstripped: a --strip-all copy of each
// installed CPython's libpython and an unstripped copy, run side by side
// on the same workloads, each probed where its own file says: the
// stripped one reports every GC pause (none before decoding), and its GIL
// wait time, as a share of what the workload's threads wanted
// (waitOfWanted; the wait per second itself depends on how the scheduler
// ran each process), and its GC pause time, as a share of gc.collect's own
// timing, are the unstripped one's within a fifth: side by side, what is
// left is the scheduler's (see contendSleeps). The precise comparison, to
// 10%, is TestDecodedProbesMeasureAsSymbolProbes, in one process.
func TestStrippedLibPythonMeasuresAsUnstripped(t *testing.T) {
	for version, lib := range pyenvLibPythons(t) {
		t.Run(version, func(t *testing.T) {
			python := filepath.Join(filepath.Dir(filepath.Dir(lib)), "bin", "python3")
			p := load(t, defaults)
			m := measureSideBySide(t, p, python, libPythonDir(t, lib, false), libPythonDir(t, lib, true))
			full, stripped := m[0], m[1]
			t.Logf("%s: GIL wait %.3f of what was wanted unstripped, %.3f stripped, ratio %.3f (%.3f s/s, %s over %s, and %.3f s/s, %s over %s, ratio %.3f); "+
				"GC pauses %d and %d of %d collects, %.3f and %.3f of gc.collect's time (%s, %s), ratio %.3f",
				version, full.waitOfWanted(), stripped.waitOfWanted(), stripped.waitOfWanted()/full.waitOfWanted(),
				full.waitShare(), full.wait, full.wall, stripped.waitShare(), stripped.wait, stripped.wall,
				stripped.waitShare()/full.waitShare(), full.gcs, stripped.gcs, full.collects,
				full.gcShare(), stripped.gcShare(), full.gcTime, stripped.gcTime, stripped.gcShare()/full.gcShare())
			if full.gcs != full.collects || stripped.gcs != stripped.collects {
				t.Errorf("GC pauses %d unstripped, %d stripped, want %d each", full.gcs, stripped.gcs, full.collects)
			}
			if r := stripped.waitOfWanted() / full.waitOfWanted(); full.inSpan == 0 || r < 0.8 || r > 1.25 {
				t.Errorf("GIL wait %.3f of what was wanted stripped, %.3f unstripped: not within a fifth", stripped.waitOfWanted(), full.waitOfWanted())
			}
			if r := stripped.gcShare() / full.gcShare(); full.gcTime == 0 || r < 0.8 || r > 1.25 {
				t.Errorf("GC pauses %.3f of gc.collect's time stripped, %.3f unstripped: not within a fifth", stripped.gcShare(), full.gcShare())
			}
		})
	}
}
