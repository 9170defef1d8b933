package jfrstream

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/otelcol-ai/otelcol-ai/internal/window"
	"github.com/otelcol-ai/otelcol-ai/pkg/jfr"
	"github.com/otelcol-ai/otelcol-ai/pkg/jfr/jfrtest"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/jfroracle"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/jvmevent"
)

func TestMain(m *testing.M) {
	code := m.Run()
	jfrtest.Cleanup()
	os.Exit(code)
}

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

			gcs := jfroracle.Events(t, j, path, "jdk.GarbageCollection")
			if len(b.GCs) != len(gcs) || len(gcs) == 0 {
				t.Fatalf("%d GCs, jfr print has %d", len(b.GCs), len(gcs))
			}
			names := map[int64]jfroracle.Event{}
			for _, e := range gcs {
				names[e.Int("gcId")] = e
			}
			for i, g := range b.GCs {
				// GCs arrive in the order the JVM wrote them; jfr print
				// sorts by time: match on the end time.
				var e jfroracle.Event
				for _, o := range gcs {
					s, _ := o.Time("startTime")
					d, _ := o.Duration("duration")
					if near(s+int64(d), g.End) && o.Str("name") == g.Name {
						e = o
					}
				}
				start, _ := e.Time("startTime")
				dur, _ := e.Duration("duration")
				if g.Name != e.Str("name") || g.Cause != e.Str("cause") || !near(int64(g.Duration), int64(dur)) || !near(g.End, start+int64(dur)) {
					t.Errorf("GC %d: %+v, jfr print: %v", i, g, e.Values)
				}
				if g.Action != Action(g.Name) {
					t.Errorf("GC %d action %q", i, g.Action)
				}
			}

			pauses := jfroracle.Events(t, j, path, "jdk.GCPhasePause")
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
				if !near(w.Start, start) || !near(int64(w.Duration), int64(dur)) ||
					w.Attributes[window.AttrJVMGCName] != gc.Str("name") || w.Attributes[window.AttrJVMGCCause] != gc.Str("cause") ||
					w.Attributes[AttrGCPhase] != e.Str("name") || w.Attributes[window.AttrJVMGCID] != e.Int("gcId") {
					t.Errorf("pause window %+v, jfr print: %v (gc %v)", w, e.Values, gc.Values)
				}
			}

			begins := jfroracle.Events(t, j, path, "jdk.SafepointBegin")
			ends := map[int64]int64{}
			for _, e := range jfroracle.Events(t, j, path, "jdk.SafepointEnd") {
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

			bufs := jfroracle.Events(t, j, path, "jdk.DirectBufferStatistics")
			if len(b.Buffers) != len(bufs) || len(bufs) == 0 {
				t.Fatalf("%d buffer samples, jfr print has %d", len(b.Buffers), len(bufs))
			}
			for i, e := range bufs {
				got := b.Buffers[i]
				if got.Count != e.Int("count") || got.Used != e.Int("memoryUsed") || got.Capacity != e.Int("totalCapacity") {
					t.Errorf("buffers %d: %+v, jfr print %v", i, got, e.Values)
				}
			}

			heap := jfroracle.Events(t, j, path, "jdk.GCHeapSummary")
			var heapSamples []jvmevent.Memory
			for _, m := range b.Memory {
				if m.Type == jvmevent.MemoryHeap && m.Pool == "" {
					heapSamples = append(heapSamples, m)
				}
			}
			if len(heap) == 0 || len(heapSamples) < len(heap) {
				t.Fatalf("%d heap samples, jfr print has %d GCHeapSummary", len(heapSamples), len(heap))
			}
			first := heap[0]
			hs := first.Values["heapSpace"].(map[string]any)
			if m := heapSamples[0]; m.Used != first.Int("heapUsed") || m.Committed != int64(hs["committedSize"].(float64)) {
				t.Errorf("first heap sample %+v, jfr print %v", m, first.Values)
			}

			nmt := jfroracle.Events(t, j, path, "jdk.NativeMemoryUsage", "jdk.NativeMemoryUsageTotal")
			if tt.nmt != (len(nmt) > 0) || len(b.NativeMemory) != len(nmt) {
				t.Fatalf("%d NMT samples, jfr print has %d", len(b.NativeMemory), len(nmt))
			}
		})
	}
}

// TestPauseWaitsForItsCollection checks the join across segments: a pause
// whose jdk.GarbageCollection has not arrived waits one flush, and is let
// out unnamed after it rather than held forever.
func TestPauseWaitsForItsCollection(t *testing.T) {
	s := New()
	w := window.Window{Kind: window.KindJVMGCPause, Start: 1e18, Duration: time.Millisecond, Attributes: map[string]any{window.AttrJVMGCID: int64(7)}}
	s.pauses = append(s.pauses, pendingPause{w: w, gcID: 7})
	var b jvmevent.Batch
	s.Flush(&b, false)
	if len(b.Windows) != 0 {
		t.Fatalf("pause let out before its collection could arrive: %+v", b.Windows)
	}
	s.Flush(&b, false)
	if len(b.Windows) != 1 || b.Windows[0].Attributes[window.AttrJVMGCName] != nil {
		t.Fatalf("after two flushes: %+v", b.Windows)
	}

	s.pauses = append(s.pauses, pendingPause{w: window.Window{Kind: window.KindJVMGCPause, Start: 2e18, Attributes: map[string]any{}}, gcID: 8})
	s.rememberGC(8, gcInfo{name: "G1New", cause: "System.gc()"})
	b = jvmevent.Batch{}
	s.Flush(&b, false)
	if len(b.Windows) != 1 || b.Windows[0].Attributes[window.AttrJVMGCName] != "G1New" || b.Windows[0].Attributes[window.AttrJVMGCCause] != "System.gc()" {
		t.Fatalf("named pause: %+v", b.Windows)
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
