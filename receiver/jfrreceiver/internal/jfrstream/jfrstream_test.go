package jfrstream

import (
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/otelcol-ai/otelcol-ai/internal/window"
	"github.com/otelcol-ai/otelcol-ai/pkg/jfr"
	"github.com/otelcol-ai/otelcol-ai/pkg/jfr/jfrtest"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/jfroracletest"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/jvmevent"
)

func TestMain(m *testing.M) { jfrtest.Main(m) }

// readAll streams every chunk of a recording file through one Stream.
func readAll(t *testing.T, path string) (jvmevent.Batch, *Stream) {
	t.Helper()
	r, err := jfr.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	s := New()
	var b jvmevent.Batch
	for i := range r.Chunks() {
		c, err := r.Chunk(i)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Chunk(c, &b); err != nil {
			t.Fatal(err)
		}
		s.Flush(&b, false)
	}
	s.Flush(&b, true)
	return b, s
}

// checkG1Pools checks G1's pools against jfr print: one sample of each per
// jdk.G1HeapSummary, eden's and the survivors' use as recorded, the old
// generation's the heap's use (jdk.GCHeapSummary of the same collection and
// moment) less both, its limit the heap's reserved size, use after GC only
// from After GC summaries; no sample of the heap as a whole.
func checkG1Pools(t *testing.T, heap, g1 []jfroracletest.Event, byPool map[string][]jvmevent.Memory) {
	t.Helper()
	if n := len(byPool[""]); n > 0 {
		t.Errorf("%d samples of the whole heap beside G1's pools", n)
	}
	eden, surv, old := byPool[PoolG1Eden], byPool[PoolG1Survivor], byPool[PoolG1Old]
	if len(eden) != len(g1) || len(surv) != len(g1) || len(old) != len(g1) {
		t.Fatalf("%d/%d/%d eden/survivor/old samples, jfr print has %d G1HeapSummary", len(eden), len(surv), len(old), len(g1))
	}
	type at struct {
		gcID int64
		when string
	}
	summaries := map[at]jfroracletest.Event{}
	for _, e := range heap {
		summaries[at{e.Int("gcId"), e.Str("when")}] = e
	}
	// jfr print sorts by time, the stream keeps the JVM's order: match on
	// the time.
	index := func(ms []jvmevent.Memory) map[int64]jvmevent.Memory {
		out := map[int64]jvmevent.Memory{}
		for _, m := range ms {
			out[m.Time] = m
		}
		return out
	}
	edenAt, survAt, oldAt := index(eden), index(surv), index(old)
	for i, e := range g1 {
		h, ok := summaries[at{e.Int("gcId"), e.Str("when")}]
		if !ok {
			t.Fatalf("G1HeapSummary %v has no GCHeapSummary", e.Values)
		}
		ts, _ := e.Time("startTime")
		ed, sv, ol := edenAt[ts], survAt[ts], oldAt[ts]
		hs := h.Values["heapSpace"].(map[string]any)
		wantOld := h.Int("heapUsed") - e.Int("edenUsedSize") - e.Int("survivorUsedSize")
		after := int64(-1)
		if e.Str("when") == "After GC" {
			after = wantOld
		}
		if ed.Used != e.Int("edenUsedSize") || sv.Used != e.Int("survivorUsedSize") ||
			ol.Used != wantOld || ol.UsedAfterGC != after || ol.Limit != int64(hs["reservedSize"].(float64)) ||
			ed.Committed+sv.Committed+ol.Committed != int64(hs["committedSize"].(float64)) {
			t.Errorf("G1 pools %d: %+v %+v %+v; jfr print %v, %v", i, ed, sv, ol, e.Values, h.Values)
		}
	}
}

func near(a, b int64) bool { d := a - b; return d > -2 && d < 2 }

// TestStreamMatchesJFRPrint reads the project's fixture recordings and checks
// every window and measurement against `jfr print --json` of the same file.
func TestStreamMatchesJFRPrint(t *testing.T) {
	tests := []struct {
		file    string
		major   int
		version string
		nmt     bool
	}{
		{"g1-default-jdk17.jfr", 17, "17.0.15+6-Debian-1deb12u1", false},
		{"zgc-default-nmt-jdk25.jfr", 25, "25.0.3+9-LTS", true},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			j := jfrtest.Find(t, tt.major)
			path := filepath.Join("..", "..", "..", "..", "pkg", "jfr", "testdata", tt.file)
			b, s := readAll(t, path)
			if got := s.RuntimeVersion(); got != tt.version {
				t.Errorf("version %q, want %q", got, tt.version)
			}
			if s.PID() == 0 {
				t.Error("no pid from jdk.JVMInformation")
			}

			gcs := jfroracletest.Events(t, j, path, "jdk.GarbageCollection")
			pauses := jfroracletest.Events(t, j, path, "jdk.GCPhasePause")
			names := map[int64]jfroracletest.Event{}
			for _, e := range gcs {
				names[e.Int("gcId")] = e
			}
			want := wantGCs(t, gcs, pauses, names)
			if len(b.GCs) != len(want) || len(gcs) == 0 {
				t.Fatalf("%d GCs, jfr print gives %d (%d collections, %d pauses)", len(b.GCs), len(want), len(gcs), len(pauses))
			}
			used := make([]bool, len(want))
			for i, g := range b.GCs {
				// GCs arrive in the order the JVM wrote them; jfr print
				// sorts by time: match on the end time and name.
				found := false
				for k, w := range want {
					if !used[k] && near(w.End, g.End) && w.Name == g.Name && w.Action == g.Action &&
						w.Cause == g.Cause && near(int64(w.Duration), int64(g.Duration)) {
						used[k], found = true, true
						break
					}
				}
				if !found {
					t.Errorf("GC %d: %+v not in jfr print", i, g)
				}
			}

			byStart := map[int64]window.Window{}
			for _, w := range b.Windows {
				if w.Kind == window.KindJVMGCPause {
					byStart[w.Start/1000] = w
				}
			}
			if len(byStart) != len(pauses) || len(pauses) == 0 {
				t.Fatalf("%d pause windows, jfr print has %d GCPhasePause", len(byStart), len(pauses))
			}
			for _, e := range pauses {
				start, _ := e.Time("startTime")
				dur, _ := e.Duration("duration")
				w, ok := byStart[start/1000]
				if !ok {
					t.Errorf("no window for pause at %d", start)
					continue
				}
				gc := names[e.Int("gcId")]
				c := CollectorOf(gc.Str("name"))
				wantName := c.Name
				if c.Pauses != "" {
					wantName = c.Pauses
				}
				if !near(w.Start, start) || !near(int64(w.Duration), int64(dur)) ||
					w.Attributes[window.AttrJVMGCName] != wantName || w.Attributes[jvmevent.AttrGCJFRName] != gc.Str("name") || w.Attributes[window.AttrJVMGCCause] != gc.Str("cause") ||
					w.Attributes[AttrGCPhase] != e.Str("name") || w.Attributes[window.AttrJVMGCID] != e.Int("gcId") {
					t.Errorf("pause window %+v, jfr print: %v (gc %v)", w, e.Values, gc.Values)
				}
			}

			begins := jfroracletest.Events(t, j, path, "jdk.SafepointBegin")
			ends := map[int64]int64{}
			for _, e := range jfroracletest.Events(t, j, path, "jdk.SafepointEnd") {
				st, _ := e.Time("startTime")
				d, _ := e.Duration("duration")
				ends[e.Int("safepointId")] = st + int64(d)
			}
			sps := map[int64]window.Window{}
			for _, w := range b.Windows {
				if w.Kind == window.KindJVMSafepoint {
					sps[w.Attributes[window.AttrJVMSafepointID].(int64)] = w
				}
			}
			if len(sps) != len(begins) || len(b.Safepoints) != len(begins) {
				t.Fatalf("%d safepoint windows, %d measurements; jfr print has %d SafepointBegin", len(sps), len(b.Safepoints), len(begins))
			}
			for _, e := range begins {
				id := e.Int("safepointId")
				start, _ := e.Time("startTime")
				w := sps[id]
				end, ok := ends[id]
				if !ok || !near(w.Start, start) || !near(w.End(), end) || w.Attributes[AttrSafepointEndSource] != "jdk.SafepointEnd" {
					t.Errorf("safepoint %d window %+v, begin %d end %d (found %v)", id, w, start, end, ok)
				}
			}

			bufs := jfroracletest.Events(t, j, path, "jdk.DirectBufferStatistics")
			if len(b.Buffers) != len(bufs) || len(bufs) == 0 {
				t.Fatalf("%d buffer samples, jfr print has %d", len(b.Buffers), len(bufs))
			}
			for i, e := range bufs {
				got := b.Buffers[i]
				if got.Count != e.Int("count") || got.Used != e.Int("memoryUsed") || got.Capacity != e.Int("totalCapacity") {
					t.Errorf("buffers %d: %+v, jfr print %v", i, got, e.Values)
				}
			}

			heap := jfroracletest.Events(t, j, path, "jdk.GCHeapSummary")
			byPool := map[string][]jvmevent.Memory{}
			for _, m := range b.Memory {
				if m.Type == jvmevent.MemoryHeap {
					byPool[m.Pool] = append(byPool[m.Pool], m)
				}
			}
			if g1 := jfroracletest.Events(t, j, path, "jdk.G1HeapSummary"); len(g1) > 0 {
				checkG1Pools(t, heap, g1, byPool)
			} else {
				heapSamples := byPool[""]
				if len(heap) == 0 || len(heapSamples) < len(heap) {
					t.Fatalf("%d heap samples, jfr print has %d GCHeapSummary", len(heapSamples), len(heap))
				}
				first := heap[0]
				hs := first.Values["heapSpace"].(map[string]any)
				if m := heapSamples[0]; m.Used != first.Int("heapUsed") || m.Committed != int64(hs["committedSize"].(float64)) {
					t.Errorf("first heap sample %+v, jfr print %v", m, first.Values)
				}
			}

			nmt := jfroracletest.Events(t, j, path, "jdk.NativeMemoryUsage", "jdk.NativeMemoryUsageTotal")
			if tt.nmt != (len(nmt) > 0) || len(b.NativeMemory) != len(nmt) {
				t.Fatalf("%d NMT samples, jfr print has %d", len(b.NativeMemory), len(nmt))
			}

			threads := jfroracletest.Events(t, j, path, "jdk.JavaThreadStatistics")
			if len(b.Threads) != len(threads) || len(threads) == 0 {
				t.Fatalf("%d thread samples, jfr print has %d", len(b.Threads), len(threads))
			}
			for i, e := range threads {
				if got := b.Threads[i]; got.Active != e.Int("activeCount") || got.Daemon != e.Int("daemonCount") {
					t.Errorf("thread sample %d %+v, jfr print %v", i, got, e.Values)
				}
			}
			classes := jfroracletest.Events(t, j, path, "jdk.ClassLoadingStatistics")
			if len(b.Classes) != len(classes) || len(classes) == 0 {
				t.Fatalf("%d class samples, jfr print has %d", len(b.Classes), len(classes))
			}
			for i, e := range classes {
				if got := b.Classes[i]; got.Loaded != e.Int("loadedClassCount") || got.Unloaded != e.Int("unloadedClassCount") {
					t.Errorf("class sample %d %+v, jfr print %v", i, got, e.Values)
				}
			}
			// The code heaps: each jdk.CodeCacheStatistics is the pool of
			// its code blob type, used = reserved range - unallocated.
			code := jfroracletest.Events(t, j, path, "jdk.CodeCacheStatistics")
			var heaps []jvmevent.Memory
			for _, m := range b.Memory {
				if strings.HasPrefix(m.Pool, "CodeHeap '") {
					heaps = append(heaps, m)
				}
			}
			if len(heaps) != len(code) || len(code) < 3 {
				t.Fatalf("%d code heap samples, jfr print has %d", len(heaps), len(code))
			}
			pools := map[string]bool{}
			for _, e := range code {
				ts, _ := e.Time("startTime")
				reserved := e.Int("reservedTopAddress") - e.Int("startAddress")
				want := jvmevent.Memory{Time: ts, Type: jvmevent.MemoryNonHeap, Pool: e.Str("codeBlobType"), Used: reserved - e.Int("unallocatedCapacity"), Committed: -1, Limit: reserved, UsedAfterGC: -1}
				pools[want.Pool] = true
				found := false
				for _, m := range heaps {
					if m.Time == want.Time && m.Pool == want.Pool {
						found = true
						if m != want {
							t.Errorf("code heap %+v, want %+v (jfr print %v)", m, want, e.Values)
						}
					}
				}
				if !found {
					t.Errorf("no code heap sample for %v", e.Values)
				}
			}
			if len(pools) != 3 {
				t.Errorf("code heaps %v, want the three of a segmented code cache", pools)
			}

			// Collections before the recording: the lowest gcId of those
			// that began in it counts under the young collector's bean.
			r, err := jfr.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			began := r.Chunks()[0].Header.StartNanos
			r.Close()
			lowest := int64(-1)
			for _, e := range gcs {
				start, err := e.Time("startTime")
				if err != nil {
					t.Fatal(err)
				}
				if id := e.Int("gcId"); start >= began && (lowest < 0 || id < lowest) {
					lowest = id
				}
			}
			var unrecorded int64
			for _, u := range b.UnrecordedGCs {
				unrecorded += u.Count
			}
			if unrecorded != lowest {
				t.Errorf("%d collections before the recording counted (%+v), its lowest gcId is %d", unrecorded, b.UnrecordedGCs, lowest)
			}

			loads := jfroracletest.Events(t, j, path, "jdk.CPULoad")
			cpuInfo := jfroracletest.Events(t, j, path, "jdk.CPUInformation")
			var utils, counts []jvmevent.CPU
			for _, c := range b.CPU {
				if c.Utilization >= 0 {
					utils = append(utils, c)
				}
				if c.Count > 0 {
					counts = append(counts, c)
				}
			}
			if len(utils) != len(loads) || len(loads) == 0 || len(counts) == 0 || len(cpuInfo) == 0 {
				t.Fatalf("%d CPU load samples (jfr print %d), %d CPU counts (jfr print %d CPUInformation)", len(utils), len(loads), len(counts), len(cpuInfo))
			}
			if got, want := counts[0].Count, cpuInfo[0].Int("hwThreads"); got != want {
				t.Errorf("CPU count %d, jfr print hwThreads %d", got, want)
			}
		})
	}
}

// TestPauseWaitsForItsCollection checks the join across segments: a pause
// whose jdk.GarbageCollection has not arrived waits through one JVM flush
// (polls that read nothing do not count), is let out unnamed after it
// rather than held forever, and is still counted under its collector's
// pause bean when the collection arrives later (HotSpot writes a
// collection's pauses just before it, and a flush may fall between them:
// under load a G1 cycle's Remark and Cleanup went uncounted).
func TestPauseWaitsForItsCollection(t *testing.T) {
	s := New()
	s.readFrom = 1
	remark := window.Window{Kind: window.KindJVMGCPause, Start: 1e18, Duration: time.Millisecond, Attributes: map[string]any{window.AttrJVMGCID: int64(7), AttrGCPhase: "Pause Remark"}}
	s.pauses = append(s.pauses, pendingPause{w: remark, gcID: 7})
	s.flushed = true // the segment that held it
	var b jvmevent.Batch
	s.Flush(&b, false)
	for range 5 { // polls that find no new segment
		s.Flush(&b, false)
	}
	if len(b.Windows) != 0 {
		t.Fatalf("pause let out before a later flush could bring its collection: %+v", b.Windows)
	}
	s.flushed = true
	s.Flush(&b, false)
	if len(b.Windows) != 1 || b.Windows[0].Attributes[window.AttrJVMGCName] != nil {
		t.Fatalf("after a later flush: %+v", b.Windows)
	}
	if len(b.GCs) != 0 {
		t.Fatalf("counted before its collector is known: %+v", b.GCs)
	}
	// The cycle's event arrives: the cycle counts under no bean, its
	// Remark under G1 Concurrent GC, once.
	b = jvmevent.Batch{}
	if !s.collection(7, 2e18-5e7, 5e7, "G1Old", "G1 Evacuation Pause", &b) {
		t.Fatal("collection after the recording's start taken as before it")
	}
	want := []jvmevent.GC{{End: 1e18 + 1e6, Duration: time.Millisecond, Name: "G1 Concurrent GC", Action: ActionConcurrentPause, Cause: "G1 Evacuation Pause"}}
	if !reflect.DeepEqual(b.GCs, want) {
		t.Fatalf("late pause counted as %+v, want %+v", b.GCs, want)
	}
	b = jvmevent.Batch{}
	s.collection(7, 2e18-5e7, 5e7, "G1Old", "G1 Evacuation Pause", &b)
	if len(b.GCs) != 0 || s.lateN != 0 || len(s.late) != 0 {
		t.Fatalf("late pause counted again: %+v (held %d)", b.GCs, s.lateN)
	}
	// A late pause of a collector without a pause bean counts nothing
	// beyond its collection.
	s.awaitCollection(pendingPause{w: window.Window{Start: 3e18, Attributes: map[string]any{}}, gcID: 9})
	b = jvmevent.Batch{}
	s.collection(9, 3e18, 1e6, "G1New", "", &b)
	if len(b.GCs) != 1 || b.GCs[0].Name != "G1 Young Generation" {
		t.Fatalf("young collection with a late pause: %+v", b.GCs)
	}

	s.pauses = append(s.pauses, pendingPause{w: window.Window{Kind: window.KindJVMGCPause, Start: 2e18, Attributes: map[string]any{}}, gcID: 8})
	s.rememberGC(8, gcInfo{name: "G1New", cause: "System.gc()", collector: CollectorOf("G1New")})
	b = jvmevent.Batch{}
	s.Flush(&b, false)
	if len(b.Windows) != 1 || b.Windows[0].Attributes[window.AttrJVMGCName] != "G1 Young Generation" || b.Windows[0].Attributes[jvmevent.AttrGCJFRName] != "G1New" || b.Windows[0].Attributes[window.AttrJVMGCCause] != "System.gc()" {
		t.Fatalf("named pause: %+v", b.Windows)
	}
}

// TestLatePausesAreBounded checks that pauses awaiting a collection that
// never comes (a hostile recording) are held at most maxPending, the oldest
// collection's given up first.
func TestLatePausesAreBounded(t *testing.T) {
	s := New()
	for i := range maxPending + 10 {
		s.awaitCollection(pendingPause{w: window.Window{Start: int64(i + 1), Attributes: map[string]any{}}, gcID: int64(i)})
	}
	if s.lateN != maxPending || len(s.late) != maxPending {
		t.Fatalf("held %d pauses of %d collections, want %d", s.lateN, len(s.late), maxPending)
	}
	if _, ok := s.late[9]; ok {
		t.Fatal("oldest collections kept")
	}
	if _, ok := s.late[maxPending+9]; !ok {
		t.Fatal("newest collection given up")
	}
}

// TestSafepointFallbacks covers recordings without SafepointEnd: the window
// ends with the VM operation, else with SafepointBegin, and says which.
func TestSafepointFallbacks(t *testing.T) {
	s := New()
	s.safepoint(1).beginStart, s.safepoint(1).beginEnd = 1000, 1500
	sp2 := s.safepoint(2)
	sp2.beginStart, sp2.beginEnd, sp2.opEnd, sp2.op = 3000, 3200, 9000, "G1CollectFull"
	s.safepoint(3).end = 12345 // its begin fell under the threshold: no start
	var b jvmevent.Batch
	s.Flush(&b, true)
	got := map[int64]window.Window{}
	for _, w := range b.Windows {
		got[w.Attributes[window.AttrJVMSafepointID].(int64)] = w
	}
	if len(got) != 2 {
		t.Fatalf("windows %+v", b.Windows)
	}
	if w := got[1]; w.Start != 1000 || w.Duration != 500 || w.Attributes[AttrSafepointEndSource] != "jdk.SafepointBegin" {
		t.Errorf("begin-only window %+v", w)
	}
	if w := got[2]; w.Start != 3000 || w.Duration != 6000 || w.Attributes[AttrSafepointEndSource] != "jdk.ExecuteVMOperation" || w.Attributes[window.AttrJVMVMOperation] != "G1CollectFull" {
		t.Errorf("operation window %+v", w)
	}
	if len(b.Safepoints) != 2 {
		t.Errorf("measurements %+v", b.Safepoints)
	}
}

// wantGCs is what jfr print's collections and pauses should give as
// measurements: each collection under its MXBean's name, and the pauses of
// collectors that have a pause bean under that one.
func wantGCs(t *testing.T, gcs, pauses []jfroracletest.Event, names map[int64]jfroracletest.Event) []jvmevent.GC {
	t.Helper()
	var want []jvmevent.GC
	for _, e := range gcs {
		c := CollectorOf(e.Str("name"))
		if c.Name == "" {
			continue
		}
		start, _ := e.Time("startTime")
		dur, _ := e.Duration("duration")
		want = append(want, jvmevent.GC{End: start + int64(dur), Duration: dur, Name: c.Name, Action: c.Action, Cause: e.Str("cause")})
	}
	for _, e := range pauses {
		gc, ok := names[e.Int("gcId")]
		if !ok {
			continue
		}
		c := CollectorOf(gc.Str("name"))
		if c.Pauses == "" {
			continue
		}
		start, _ := e.Time("startTime")
		dur, _ := e.Duration("duration")
		want = append(want, jvmevent.GC{End: start + int64(dur), Duration: dur, Name: c.Pauses, Action: c.pauseAction(e.Str("name")), Cause: gc.Str("cause")})
	}
	return want
}

// TestCollectorNames checks the names and actions of every collector JFR
// names against what the OpenTelemetry Java agent 2.22.0 reported for it
// (its jvm.gc.duration attributes on JDK 17 and 25; see README.md).
func TestCollectorNames(t *testing.T) {
	for jfrName, want := range map[string][2]string{
		"G1New":            {"G1 Young Generation", "end of minor GC"},
		"G1Full":           {"G1 Old Generation", "end of major GC"},
		"ParallelScavenge": {"PS Scavenge", "end of minor GC"},
		"ParallelOld":      {"PS MarkSweep", "end of major GC"},
		"DefNew":           {"Copy", "end of minor GC"},
		"SerialOld":        {"MarkSweepCompact", "end of major GC"},
		"Z":                {"ZGC Cycles", "end of GC cycle"},
		"ZGC Minor":        {"ZGC Minor Cycles", "end of GC cycle"},
		"ZGC Major":        {"ZGC Major Cycles", "end of GC cycle"},
		"Shenandoah":       {"Shenandoah Cycles", "end of GC cycle"},
		"Something New":    {"Something New", "end of major GC"},
	} {
		if c := CollectorOf(jfrName); c.Name != want[0] || c.Action != want[1] {
			t.Errorf("%s: %q %q, want %q %q", jfrName, c.Name, c.Action, want[0], want[1])
		}
	}
	for _, tt := range []struct{ jfrName, phase, name, action string }{
		{"G1Old", "Pause Remark", "G1 Concurrent GC", "end of concurrent GC pause"},
		{"G1Old", "Pause Cleanup", "G1 Concurrent GC", "end of concurrent GC pause"},
		{"Z", "Pause Mark Start", "ZGC Pauses", "end of GC pause"},
		{"ZGC Minor", "Pause Relocate Start", "ZGC Minor Pauses", "end of GC pause"},
		{"ZGC Major", "Pause Mark Start (Major)", "ZGC Major Pauses", "end of GC pause"},
		{"Shenandoah", "Pause Init Mark (unload classes)", "Shenandoah Pauses", "Init Mark"},
		{"Shenandoah", "Pause Final Update Refs", "Shenandoah Pauses", "Final Update Refs"},
		{"Shenandoah", "Pause Degenerated GC (Mark)", "Shenandoah Pauses", "Degenerated GC"},
	} {
		c := CollectorOf(tt.jfrName)
		if c.Pauses != tt.name || c.pauseAction(tt.phase) != tt.action {
			t.Errorf("%s %q: %q %q, want %q %q", tt.jfrName, tt.phase, c.Pauses, c.pauseAction(tt.phase), tt.name, tt.action)
		}
	}
	if c := CollectorOf("G1Old"); c.Name != "" {
		t.Errorf("G1Old cycles counted as %q", c.Name)
	}
}

func TestParseVersion(t *testing.T) {
	for in, want := range map[string]string{
		"OpenJDK 64-Bit Server VM (17.0.15+6-Debian-1deb12u1) for linux-amd64 JRE (17.0.15+6-Debian-1deb12u1), built on 2025": "17.0.15+6-Debian-1deb12u1",
		"OpenJDK 64-Bit Server VM (25.0.3+9-LTS) for linux-amd64":                                                             "25.0.3+9-LTS",
		"garbage": "",
		"":        "",
	} {
		if got := ParseVersion(in); got != want {
			t.Errorf("ParseVersion(%q) = %q, want %q", in, got, want)
		}
	}
}
