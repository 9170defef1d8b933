package repository

import (
	"bytes"
	"cmp"
	"context"
	"math"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/otelcol-ai/otelcol-ai/internal/window"
	"github.com/otelcol-ai/otelcol-ai/pkg/jfr/jfrtest"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/jfroracletest"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/jfrstream"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/jvmevent"
)

func TestMain(m *testing.M) { jfrtest.Main(m) }

// runJVM starts the test workload with a recording whose repository is
// under dir and which dumps itself to dir/dump.jfr at exit. options are
// more -XX:FlightRecorderOptions ("maxchunksize=1m").
func runJVM(t *testing.T, j jfrtest.JDK, dir string, millis int, options string, extra ...string) (*exec.Cmd, chan error, *bytes.Buffer) {
	t.Helper()
	src, jfc, err := jfrtest.Workload()
	if err != nil {
		t.Fatal(err)
	}
	if options != "" {
		options = "," + options
	}
	args := append([]string{"-Xmx128m", "-Xlog:disable", "-XX:FlightRecorderOptions:repository=" + dir + options,
		"-XX:StartFlightRecording:settings=profile,settings=" + jfc + ",filename=" + filepath.Join(dir, "dump.jfr")}, extra...)
	args = append(args, src, strconv.Itoa(millis), "rotate")
	cmd := exec.Command(j.Java(), args...)
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	return cmd, jfrtest.Start(t, cmd), &out
}

// TestFollowsLiveJVM runs real JVMs that rotate chunks while recording,
// discovers them through /proc, follows their repositories until they
// exit, and checks what arrived against jfr print of the recording the
// JVM dumped at exit: every GC, pause and safepoint exactly once, with the
// same values, some of them while the JVM still ran.
func TestFollowsLiveJVM(t *testing.T) {
	forJDKs(t, func(t *testing.T, j jfrtest.JDK, dir string, src *Source) {
		var got jvmevent.Batch
		var version string
		collect := func(pid int) func(jvmevent.Batch) {
			return func(b jvmevent.Batch) {
				if b.JVM.PID != pid {
					return // another JVM on this machine
				}
				version = b.RuntimeVersion
				got.Windows = append(got.Windows, b.Windows...)
				got.GCs = append(got.GCs, b.GCs...)
				got.Safepoints = append(got.Safepoints, b.Safepoints...)
				got.Buffers = append(got.Buffers, b.Buffers...)
				got.Memory = append(got.Memory, b.Memory...)
			}
		}
		cmd, exited, out := runJVM(t, j, dir, 3000, "")
		emit := collect(cmd.Process.Pid)
		var repo string
		whileRunning := 0
		running := true
		deadline := time.Now().Add(90 * time.Second)
		for {
			if time.Now().After(deadline) {
				t.Fatalf("not done before the deadline; following %v\n%s", src.Following(), out)
			}
			if running {
				select {
				case err := <-exited:
					exited <- err
					running = false
					if err != nil {
						t.Fatalf("JVM: %v\n%s", err, out)
					}
				default:
				}
			}
			if err := src.Poll(context.Background(), emit); err != nil {
				t.Errorf("poll: %v", err)
			}
			if running {
				whileRunning = len(got.Windows)
			}
			for _, d := range src.Following() {
				if strings.HasSuffix(filepath.Dir(d), dir) {
					repo = d
				}
			}
			if !running && repo != "" && !contains(src.Following(), repo) {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if whileRunning == 0 {
			t.Error("no window arrived while the JVM ran")
		}
		if version == "" {
			t.Error("no runtime version")
		}

		dump := filepath.Join(dir, "dump.jfr")
		gcs := jfroracletest.Events(t, j, dump, "jdk.GarbageCollection")
		if want := measuredGCs(gcs, jfroracletest.Events(t, j, dump, "jdk.GCPhasePause")); len(got.GCs) != want || len(gcs) == 0 {
			t.Errorf("%d GCs, jfr print gives %d", len(got.GCs), want)
		}
		// A live chunk's header is read while the JVM writes it; jfr
		// print reads the finished one, whose time base can differ (a
		// few ns usually; more, once, on a loaded machine): every
		// window lies at one common offset from jfr print's, within a
		// microsecond, and that offset is under a millisecond.
		pausesGot := byKind(got.Windows, window.KindJVMGCPause)
		pauses := jfroracletest.Events(t, j, dump, "jdk.GCPhasePause")
		if len(pauses) == 0 || len(pausesGot) != len(pauses) {
			t.Errorf("%d pause windows, jfr print has %d", len(pausesGot), len(pauses))
		}
		offset := commonOffset(t, pausesGot, pauses)
		for _, e := range pauses {
			start, _ := e.Time("startTime")
			dur, _ := e.Duration("duration")
			w, ok := nearest(pausesGot, start+offset)
			if d := w.Duration - dur; !ok || d < -time.Microsecond || d > time.Microsecond || w.Attributes[window.AttrJVMGCName] == nil {
				t.Errorf("pause at %d (%v), offset %d ns: window %+v found %v", start, dur, offset, w, ok)
			}
		}
		begins := jfroracletest.Events(t, j, dump, "jdk.SafepointBegin")
		sps := byKind(got.Windows, window.KindJVMSafepoint)
		if len(begins) == 0 || len(sps) != len(begins) {
			t.Errorf("%d safepoint windows, jfr print has %d SafepointBegin", len(sps), len(begins))
		}
		for _, e := range begins {
			start, _ := e.Time("startTime")
			if w, ok := nearest(sps, start+offset); !ok || w.Attributes[window.AttrJVMSafepointID] != e.Int("safepointId") {
				t.Errorf("safepoint %d at %d: window %+v found %v", e.Int("safepointId"), start, w, ok)
			}
		}
		bufs := jfroracletest.Events(t, j, dump, "jdk.DirectBufferStatistics")
		if len(bufs) == 0 || len(got.Buffers) != len(bufs) {
			t.Errorf("%d buffer samples, jfr print has %d", len(got.Buffers), len(bufs))
		}
	})
}

// forJDKs runs body for JDK 17 and 25 in parallel, each with a folder for
// its JVM and a source that discovers JVMs through /proc and has polled
// once (so that the JVM started next is read from its first chunk).
func forJDKs(t *testing.T, body func(t *testing.T, j jfrtest.JDK, dir string, src *Source)) {
	for _, major := range []int{17, 25} {
		t.Run("jdk"+strconv.Itoa(major), func(t *testing.T) {
			t.Parallel()
			j := jfrtest.Find(t, major)
			src := New(Config{Discover: true, ProcRoot: "/proc", DiscoveryInterval: 100 * time.Millisecond})
			defer src.Close()
			if err := src.Poll(context.Background(), func(jvmevent.Batch) {}); err != nil {
				t.Logf("first poll: %v", err)
			}
			body(t, j, t.TempDir(), src)
		})
	}
}

// TestChunksDeletedBetweenPollsAreRead runs real JVMs that rotate at 1 MB
// (a chunk every few hundred ms) and delete their repository at exit, and
// polls them only once a second: the chunks begun within the last second
// are created, finished and deleted between two polls. Every GC, pause and
// safepoint jfr print finds in the recording the JVM dumped must still
// arrive, exactly once: the source holds each chunk file open from the
// moment the JVM creates it.
func TestChunksDeletedBetweenPollsAreRead(t *testing.T) {
	forJDKs(t, func(t *testing.T, j jfrtest.JDK, dir string, src *Source) {
		cmd, exited, out := runJVM(t, j, dir, 3000, "maxchunksize=1m")
		pid := cmd.Process.Pid
		var got jvmevent.Batch
		emit := func(b jvmevent.Batch) {
			if b.JVM.PID == pid {
				got.Windows = append(got.Windows, b.Windows...)
				got.GCs = append(got.GCs, b.GCs...)
			}
		}
		// Poll until the JVM is found, then once a second.
		var repo string
		running := true
		deadline := time.Now().Add(90 * time.Second)
		for repo == "" || running || contains(src.Following(), repo) {
			if time.Now().After(deadline) {
				t.Fatalf("not done before the deadline; following %v\n%s", src.Following(), out)
			}
			select {
			case err := <-exited:
				exited <- err
				if running && err != nil {
					t.Fatalf("JVM: %v\n%s", err, out)
				}
				running = false
			default:
			}
			if err := src.Poll(context.Background(), emit); err != nil {
				t.Errorf("poll: %v", err)
			}
			for _, d := range src.Following() {
				if strings.HasSuffix(filepath.Dir(d), dir) {
					repo = d
				}
			}
			if repo == "" {
				time.Sleep(20 * time.Millisecond)
			} else {
				time.Sleep(time.Second)
			}
		}

		dump := filepath.Join(dir, "dump.jfr")
		summary := string(jfrtest.Tool(t, j, "summary", dump))
		if !strings.Contains(summary, "Chunks:") || strings.Contains(summary, "Chunks: 1\n") {
			t.Fatalf("the JVM wrote one chunk; the test needs many:\n%s", summary)
		}
		gcs := jfroracletest.Events(t, j, dump, "jdk.GarbageCollection")
		pauses := jfroracletest.Events(t, j, dump, "jdk.GCPhasePause")
		begins := jfroracletest.Events(t, j, dump, "jdk.SafepointBegin")
		pausesGot := byKind(got.Windows, window.KindJVMGCPause)
		sps := byKind(got.Windows, window.KindJVMSafepoint)
		if len(gcs) == 0 || len(got.GCs) != measuredGCs(gcs, pauses) || len(pausesGot) != len(pauses) || len(sps) != len(begins) {
			t.Errorf("%d GCs, %d pause windows, %d safepoint windows; jfr print gives %d, %d and %d",
				len(got.GCs), len(pausesGot), len(sps), measuredGCs(gcs, pauses), len(pauses), len(begins))
		}
	})
}

// commonOffset is the median difference between the start of each event
// and of the window nearest to it (within 10 ms); it fails the test when
// that is a millisecond or more.
func commonOffset(t *testing.T, ws []window.Window, events []jfroracletest.Event) int64 {
	t.Helper()
	var offsets []int64
	for _, e := range events {
		start, _ := e.Time("startTime")
		i, _ := slices.BinarySearchFunc(ws, start, func(w window.Window, t int64) int { return cmp.Compare(w.Start, t) })
		best := int64(math.MaxInt64)
		for _, k := range []int{i - 1, i} {
			if k >= 0 && k < len(ws) && absDiff(ws[k].Start, start) < absDiff(best, 0) {
				best = ws[k].Start - start
			}
		}
		if absDiff(best, 0) < int64(10*time.Millisecond) {
			offsets = append(offsets, best)
		}
	}
	if len(offsets) == 0 {
		if len(events) > 0 {
			t.Errorf("no window starts within 10 ms of any of %d events", len(events))
		}
		return 0
	}
	slices.Sort(offsets)
	off := offsets[len(offsets)/2]
	if absDiff(off, 0) >= int64(time.Millisecond) {
		t.Errorf("windows are %d ns off jfr print's times", off)
	} else if absDiff(off, 0) > int64(time.Microsecond) {
		t.Logf("windows are %d ns off jfr print's times (the live chunk header's time base)", off)
	}
	return off
}

func absDiff(a, b int64) int64 {
	if a < b {
		return b - a
	}
	return a - b
}

func byKind(ws []window.Window, k window.Kind) []window.Window {
	var out []window.Window
	for _, w := range ws {
		if w.Kind == k {
			out = append(out, w)
		}
	}
	slices.SortFunc(out, func(a, b window.Window) int { return cmp.Compare(a.Start, b.Start) })
	return out
}

// nearest finds the window of a sorted list that starts within a
// microsecond of start.
func nearest(ws []window.Window, start int64) (window.Window, bool) {
	i, _ := slices.BinarySearchFunc(ws, start-int64(time.Microsecond), func(w window.Window, t int64) int { return cmp.Compare(w.Start, t) })
	if i < len(ws) && ws[i].Start <= start+int64(time.Microsecond) {
		return ws[i], true
	}
	return window.Window{}, false
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// measuredGCs is how many collections the receiver measures for jfr
// print's collections and pauses: a collection once under its MXBean, and
// each pause of a collector with a pause bean (jfrstream.CollectorOf).
func measuredGCs(gcs, pauses []jfroracletest.Event) int {
	n := 0
	withPauses := map[int64]bool{}
	for _, e := range gcs {
		c := jfrstream.CollectorOf(e.Str("name"))
		if c.Name != "" {
			n++
		}
		if c.Pauses != "" {
			withPauses[e.Int("gcId")] = true
		}
	}
	for _, e := range pauses {
		if withPauses[e.Int("gcId")] {
			n++
		}
	}
	return n
}
