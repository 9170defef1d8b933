package xlog

import (
	"bytes"
	"cmp"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/otelcol-ai/otelcol-ai/internal/window"
	"github.com/otelcol-ai/otelcol-ai/pkg/jfr"
	"github.com/otelcol-ai/otelcol-ai/pkg/jfr/jfrtest"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/discovery"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/jfrstream"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/jvmevent"
)

func TestMain(m *testing.M) { jfrtest.Main(m) }

func appendFile(t *testing.T, path, s string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(s); err != nil {
		t.Fatal(err)
	}
}

func pollAll(t *testing.T, s *Source) jvmevent.Batch {
	t.Helper()
	var all jvmevent.Batch
	if err := s.Poll(context.Background(), func(b jvmevent.Batch) {
		all.JVM = b.JVM
		all.Windows = append(all.Windows, b.Windows...)
		all.Safepoints = append(all.Safepoints, b.Safepoints...)
		all.Ended = all.Ended || b.Ended
	}); err != nil {
		t.Fatal(err)
	}
	return all
}

// TestTailFollowsRotationAndPartialLines: lines split across writes are
// read once whole; a file present at start is read from its end; after
// the JVM rotates (renames the file, starts a new one) the rest of the old
// file and all of the new one arrive; a truncated file is read again from
// its start; a deleted file ends.
func TestTailFollowsRotationAndPartialLines(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "gc.log")
	appendFile(t, path, g1Safepoint17+"\n")
	clock := window.NewFixedClock(1_000_000_000)
	s := NewSource(Config{Include: []string{filepath.Join(dir, "*.log")}, DiscoveryInterval: time.Hour, Clock: clock})
	defer s.Close()

	if b := pollAll(t, s); len(b.Windows) != 0 {
		t.Fatalf("a file found at start was read from its beginning: %+v", b.Windows)
	}
	half := len(g1Pause17) / 2
	appendFile(t, path, g1Safepoint17+"\n"+g1Pause17[:half])
	b := pollAll(t, s)
	if len(b.Windows) != 1 || b.Windows[0].Kind != window.KindJVMSafepoint {
		t.Fatalf("after one line and a half: %+v", b.Windows)
	}
	w := b.Windows[0]
	if w.Start != 1_000_000_000+2759442805832-17189926 || w.Duration != 17189926 || w.Attributes[window.AttrJVMVMOperation] != "G1CollectForAllocation" {
		t.Errorf("safepoint window %+v", w)
	}
	if b.JVM.PID != 13177 || len(b.Safepoints) != 1 || b.Safepoints[0].TimeToSafepoint != 6559 {
		t.Errorf("batch %+v", b)
	}
	appendFile(t, path, g1Pause17[half:]+"\n")
	if b := pollAll(t, s); len(b.Windows) != 1 || b.Windows[0].Kind != window.KindJVMGCPause || b.Windows[0].Duration != 17024*time.Microsecond {
		t.Fatalf("the rest of the split line: %+v", b.Windows)
	}

	// Rotation: a last line lands in the old file after the rename.
	if err := os.Rename(path, path+".0"); err != nil {
		t.Fatal(err)
	}
	appendFile(t, path+".0", zPause25+"\n")
	appendFile(t, path, zSafepoint25+"\n"+zPause25+"\n")
	if b := pollAll(t, s); len(b.Windows) != 3 {
		t.Fatalf("after rotation: %d windows, want 3: %+v", len(b.Windows), b.Windows)
	}

	// Truncation in place.
	if err := os.WriteFile(path, []byte(zSafepoint25+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if b := pollAll(t, s); len(b.Windows) != 0 {
		t.Fatalf("read the truncated file before noticing: %+v", b.Windows)
	}
	if b := pollAll(t, s); len(b.Windows) != 1 {
		t.Fatalf("after truncation: %+v", b.Windows)
	}

	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if b := pollAll(t, s); !b.Ended {
		t.Fatalf("deleted file not ended: %+v", b)
	}
}

// TestXlogAgreesWithJFR runs real JDK 17 and 25 JVMs that both record JFR
// (SafepointBegin/End at 0 ms) and log -Xlog:gc*,safepoint, and checks that
// every safepoint of the recording has a window from the log that starts
// and ends within 1 ms of it: with timenanos (CLOCK_MONOTONIC through
// window.Clock), and again with that decorator removed, so that the time
// and uptimenanos decorators carry it. It reads the log with this source
// alone: the receiver's xlog::prefer_jfr, which drops a log's windows while
// the JVM's repository is read, plays no part.
func TestXlogAgreesWithJFR(t *testing.T) {
	for _, tc := range []struct {
		major int
		gc    string
	}{{17, "-XX:+UseG1GC"}, {25, "-XX:+UseZGC"}} {
		t.Run("jdk"+strconv.Itoa(tc.major), func(t *testing.T) {
			t.Parallel()
			j := jfrtest.Find(t, tc.major)
			dir := t.TempDir()
			src, jfc, err := jfrtest.Workload()
			if err != nil {
				t.Fatal(err)
			}
			logPath := filepath.Join(dir, "gc.log")
			dump := filepath.Join(dir, "dump.jfr")
			cmd := exec.Command(j.Java(), "-Xmx128m", tc.gc,
				"-Xlog:gc*,safepoint:file="+logPath+":time,uptimenanos,timenanos,pid,tid,level,tags",
				"-XX:StartFlightRecording:settings=profile,settings="+jfc+",filename="+dump,
				src, "2000")
			cmd.Dir = dir
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("JVM: %v\n%s", err, out)
			}
			jfrWindows, endStarts, jfrPauseNames := recordingSafepoints(t, dump)
			if len(jfrWindows) == 0 {
				t.Fatal("the recording has no safepoints")
			}

			raw, err := os.ReadFile(logPath)
			if err != nil {
				t.Fatal(err)
			}
			noNanos := regexp.MustCompile(`(?m)^(\[[^\]]+\])\[\d+ns\]`).ReplaceAll(raw, []byte("$1"))
			for name, content := range map[string][]byte{"timenanos": raw, "time+uptimenanos": noNanos} {
				logDir := t.TempDir()
				if err := os.WriteFile(filepath.Join(logDir, "gc.log"), content, 0o644); err != nil {
					t.Fatal(err)
				}
				s := NewSource(Config{Include: []string{filepath.Join(logDir, "*.log")}, FromStart: true, DiscoveryInterval: time.Hour})
				namedAsJFR := 0
				b := pollAll(t, s)
				s.Close()
				var logWindows []window.Window
				pauses := 0
				for _, w := range b.Windows {
					switch w.Kind {
					case window.KindJVMSafepoint:
						logWindows = append(logWindows, w)
					case window.KindJVMGCPause:
						pauses++
						// Named as JFR's window of the same collection is
						// (jfrstream.CollectorOf's MXBean names).
						id, _ := w.Attributes[window.AttrJVMGCID].(int64)
						if want, ok := jfrPauseNames[id]; ok && w.Attributes[window.AttrJVMGCName] != want {
							t.Errorf("%s: log pause %v of GC(%d) is named %v, JFR's %q", name, w.Attributes[jvmevent.AttrGCPhase], id, w.Attributes[window.AttrJVMGCName], want)
						} else if ok {
							namedAsJFR++
						}
					}
				}
				if pauses == 0 || namedAsJFR < pauses/2 {
					t.Errorf("%s: %d GC pause windows from the log, %d of them compared with JFR's", name, pauses, namedAsJFR)
				}
				// Paired by end within the same VM operation: the instant
				// both sources stamp as the safepoint's end (HotSpot logs
				// the line as it ends).
				ends := map[any][]window.Window{}
				for _, w := range logWindows {
					op := w.Attributes[window.AttrJVMVMOperation]
					ends[op] = append(ends[op], window.Window{Start: w.End(), Attributes: w.Attributes, Duration: w.Duration})
				}
				for _, ws := range ends {
					slices.SortFunc(ws, func(a, b window.Window) int { return cmp.Compare(a.Start, b.Start) })
				}
				// Timing outliers: the log's Total starts when HotSpot's own
				// timer does, and its line is written as the safepoint ends;
				// a VM thread preempted between JFR's stamps and those
				// (other packages' JVMs run beside this test) shifts them,
				// start or end, by more than 1 ms, late but never early.
				// Tolerated for a few safepoints when the log's window starts
				// no earlier than JFR's and ends within 50 ms of it; an
				// unpaired safepoint never is.
				outliers := 0
				for _, jw := range jfrWindows {
					op := jw.Attributes[window.AttrJVMVMOperation]
					e, ok := closest(ends[op], jw.End())
					lw := window.Window{Start: e.Start - int64(e.Duration), Duration: e.Duration, Attributes: e.Attributes}
					if !ok {
						t.Errorf("%s: JFR safepoint %v (%d..%d) has no log safepoint of that operation", name, op, jw.Start, jw.End())
						continue
					}
					// JFR's SafepointEnd event spans the resumption of the
					// threads: the log's end must fall within that event
					// (give or take 1 ms), its start within 1 ms of JFR's.
					endStart := endStarts[jw.Attributes[window.AttrJVMSafepointID].(int64)]
					ms := int64(time.Millisecond)
					exact := abs(lw.Start-jw.Start) <= ms && lw.End() >= endStart-ms && lw.End() <= jw.End()+ms
					late := lw.Start >= jw.Start-ms && lw.End() <= jw.End()+50*ms && lw.Start < lw.End()
					switch {
					case exact:
					case late:
						outliers++
					default:
						t.Errorf("%s: JFR safepoint %v (%d..%d) vs log %v (%d..%d)", name,
							op, jw.Start, jw.End(), lw.Attributes[window.AttrJVMVMOperation], lw.Start, lw.End())
					}
				}
				if outliers > 1+len(jfrWindows)/10 {
					t.Errorf("%s: %d of %d log safepoints differ from JFR's by more than 1 ms", name, outliers, len(jfrWindows))
				}
			}
		})
	}
}

// recordingSafepoints reads the safepoint windows of a finished recording,
// the start of each safepoint's jdk.SafepointEnd event by id, and the
// jvm.gc.name of its pause windows by GC id.
func recordingSafepoints(t *testing.T, path string) ([]window.Window, map[int64]int64, map[int64]string) {
	t.Helper()
	r, err := jfr.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	s := jfrstream.New()
	var b jvmevent.Batch
	endStarts := map[int64]int64{}
	sel := jfr.NewSelection()
	sel.Add("jdk.SafepointEnd", "startTime", "safepointId")
	for i := range r.Chunks() {
		c, err := r.Chunk(i)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Chunk(c, &b); err != nil {
			t.Fatal(err)
		}
		sc := c.Scan(sel)
		for sc.Next() {
			start, _ := sc.Record().Nanos(0)
			endStarts[sc.Record().Int(1)] = start
		}
	}
	s.Flush(&b, true)
	var out []window.Window
	names := map[int64]string{}
	for _, w := range b.Windows {
		if w.Kind == window.KindJVMSafepoint && w.Attributes[jfrstream.AttrSafepointEndSource] == "jdk.SafepointEnd" {
			out = append(out, w)
		}
		if name, ok := w.Attributes[window.AttrJVMGCName].(string); ok && w.Kind == window.KindJVMGCPause {
			names[w.Attributes[window.AttrJVMGCID].(int64)] = name
		}
	}
	return out, endStarts, names
}

func closest(ws []window.Window, start int64) (window.Window, bool) {
	i, _ := slices.BinarySearchFunc(ws, start, func(w window.Window, t int64) int { return cmp.Compare(w.Start, t) })
	best, ok := window.Window{}, false
	for _, k := range []int{i - 1, i} {
		if k >= 0 && k < len(ws) && (!ok || abs(ws[k].Start-start) < abs(best.Start-start)) {
			best, ok = ws[k], true
		}
	}
	return best, ok
}

func abs(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}

// TestDiscoversLogsOfJVMsWithoutJFR: a real JVM that logs -Xlog to a file
// named relative to its working directory, with %p, and records no JFR, is
// found through /proc; its windows carry its pid and start time, and the
// file is let go when the JVM exits.
func TestDiscoversLogsOfJVMsWithoutJFR(t *testing.T) {
	j := jfrtest.Find(t, 17)
	src, _, err := jfrtest.Workload()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cmd := exec.Command(j.Java(), "-Xmx64m", "-Xlog:gc,safepoint:file=gc-%p.log:time,uptimenanos,timenanos,pid,level,tags", src, "2500")
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	jfrtest.Start(t, cmd)
	s := NewSource(Config{Scanner: discovery.NewScanner("/proc"), DiscoveryInterval: 100 * time.Millisecond})
	defer s.Close()
	pid := cmd.Process.Pid
	var got jvmevent.Batch
	ended := false
	deadline := time.Now().Add(60 * time.Second)
	for !ended {
		if time.Now().After(deadline) {
			t.Fatalf("not ended; %d windows\n%s", len(got.Windows), out.String())
		}
		if err := s.Poll(context.Background(), func(b jvmevent.Batch) {
			if b.JVM.PID != pid {
				return
			}
			if b.JVM.StartTicks == 0 {
				t.Errorf("discovered JVM without start time: %+v", b.JVM)
			}
			got.Windows = append(got.Windows, b.Windows...)
			ended = ended || b.Ended
		}); err != nil {
			t.Logf("poll: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	kinds := map[window.Kind]int{}
	for _, w := range got.Windows {
		kinds[w.Kind]++
	}
	if kinds[window.KindJVMGCPause] == 0 || kinds[window.KindJVMSafepoint] == 0 {
		t.Errorf("windows %v", kinds)
	}
	// Other tests' JVMs may run beside this one and be discovered too: only
	// this JVM's file must have been let go.
	for path, tl := range s.files {
		if tl.jvm != nil && tl.jvm.PID == pid {
			t.Errorf("file %s still tailed after its JVM exited", path)
		}
	}
}
