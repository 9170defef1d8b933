package jfrreceiver

import (
	"cmp"
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/otelcol-ai/otelcol-ai/internal/window"
	"github.com/otelcol-ai/otelcol-ai/pkg/jfr/jfrtest"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/jfroracletest"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/jvmevent"
)

// TestJFRPreferredOverXlogOfTheSameJVM configures the receiver as
// examples/hybrid does, for real JDK 17 (G1) and 25 (ZGC) JVMs that record
// JFR and log -Xlog:gc*,safepoint with the pid decorator: the JVM's
// repository through a pattern, its log through another. With
// xlog::prefer_jfr (the default) every safepoint and GC pause of the
// recording (jfr print of the dump the JVM wrote at exit) arrives exactly
// once: JFR's windows and the log's that JFR's replaced at the handover
// add up to the recording's events, and no two windows of one kind
// overlap (a pause reported twice would); the log's windows before the
// recording started, which JFR never saw, are kept. With prefer_jfr off,
// every JFR window arrives and so does the log's copy of it.
func TestJFRPreferredOverXlogOfTheSameJVM(t *testing.T) {
	for _, tc := range []struct {
		name   string
		major  int
		gc     string
		prefer bool
	}{
		{"jdk17-G1", 17, "-XX:+UseG1GC", true},
		{"jdk25-ZGC", 25, "-XX:+UseZGC", true},
		{"jdk17-G1-prefer_jfr-off", 17, "-XX:+UseG1GC", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j := jfrtest.Find(t, tc.major)
			dir := t.TempDir()
			f := NewFactory()
			cfg := f.CreateDefaultConfig().(*Config)
			cfg.PollInterval = 200 * time.Millisecond
			cfg.Repositories.Discover = false
			cfg.Repositories.Include = []string{filepath.Join(dir, "2*_*")}
			cfg.Repositories.DiscoveryInterval = 200 * time.Millisecond
			cfg.XLog.Include = []string{filepath.Join(dir, "gc.log")}
			cfg.XLog.DiscoveryInterval = 200 * time.Millisecond
			cfg.XLog.PreferJFR = tc.prefer
			r, logs := startLogs(t, cfg)
			defer r.Shutdown(context.Background())

			pid, exited, out := startJVM(t, j, dir, 3000, tc.gc,
				"-Xlog:gc*,safepoint:file="+filepath.Join(dir, "gc.log")+":time,uptimenanos,timenanos,pid,level,tags")
			waitExit(t, exited, out)
			// Read until nothing new arrives for 2 s (the repository is
			// read to its end once the JVM deleted it).
			count, since := -1, time.Now()
			for deadline := time.Now().Add(60 * time.Second); time.Since(since) < 2*time.Second; time.Sleep(100 * time.Millisecond) {
				if n := logs.LogRecordCount(); n != count {
					count, since = n, time.Now()
				}
				if time.Now().After(deadline) {
					t.Fatal("windows kept coming")
				}
			}
			if err := r.Shutdown(context.Background()); err != nil {
				t.Fatal(err)
			}

			dump := filepath.Join(dir, "dump.jfr")
			begins := jfroracletest.Events(t, j, dump, "jdk.SafepointBegin")
			pauses := jfroracletest.Events(t, j, dump, "jdk.GCPhasePause")
			if len(begins) == 0 || len(pauses) == 0 {
				t.Fatalf("recording too thin: %d safepoints, %d pauses", len(begins), len(pauses))
			}
			// The recording's span: its events' first start and last end.
			first, last := int64(1<<62), int64(0)
			for _, e := range append(slices.Clone(begins), pauses...) {
				s, err := e.Time("startTime")
				if err != nil {
					t.Fatal(err)
				}
				d, _ := e.Duration("duration")
				first, last = min(first, s), max(last, s+int64(d))
			}

			got := map[window.Kind]map[string][]window.Window{} // kind → "jfr"/"xlog" → windows
			for _, w := range windowsOf(t, logs.AllLogs(), int64(pid)) {
				src := "jfr"
				if w.Attributes[jvmevent.AttrWindowSource] == "xlog" {
					src = "xlog"
				}
				if got[w.Kind] == nil {
					got[w.Kind] = map[string][]window.Window{}
				}
				got[w.Kind][src] = append(got[w.Kind][src], w)
			}
			for _, k := range []struct {
				kind   window.Kind
				events int
			}{{window.KindJVMSafepoint, len(begins)}, {window.KindJVMGCPause, len(pauses)}} {
				fromJFR, fromLog := got[k.kind]["jfr"], got[k.kind]["xlog"]
				t.Logf("%s: recording %d, received %d from JFR, %d from -Xlog", k.kind, k.events, len(fromJFR), len(fromLog))
				if !tc.prefer {
					if len(fromJFR) != k.events {
						t.Errorf("%s: %d JFR windows, the recording has %d", k.kind, len(fromJFR), k.events)
					}
					missing := 0
					for _, w := range fromJFR {
						if !slices.ContainsFunc(fromLog, func(l window.Window) bool { return copyOf(w, l) }) {
							missing++
						}
					}
					if missing > 0 {
						t.Errorf("%s: %d of %d JFR windows have no -Xlog copy with prefer_jfr off", k.kind, missing, len(fromJFR))
					}
					continue
				}
				// The log's windows within the recording stand for JFR's
				// (those JFR's copy of was dropped at the handover).
				inRecording := 0
				for _, w := range fromLog {
					if w.End() >= first && w.Start <= last {
						inRecording++
					}
				}
				if len(fromJFR)+inRecording != k.events {
					t.Errorf("%s: %d from JFR + %d from -Xlog within the recording, the recording has %d", k.kind, len(fromJFR), inRecording, k.events)
				}
				all := append(slices.Clone(fromJFR), fromLog...)
				slices.SortFunc(all, func(a, b window.Window) int { return cmp.Compare(a.Start, b.Start) })
				for i := 1; i < len(all); i++ {
					if overlap(all[i-1], all[i]) {
						t.Errorf("%s reported twice: %v %d..%d and %v %d..%d", k.kind,
							all[i-1].Attributes, all[i-1].Start, all[i-1].End(), all[i].Attributes, all[i].Start, all[i].End())
					}
				}
			}
		})
	}
}

// copyOf reports whether the -Xlog window l is the JFR window w's copy: the
// same collection (GC id) for a pause, within 50 ms, since HotSpot writes
// a pause's line after the pause, stamped when written, and the writer may
// be descheduled first (a clean-clone run under load found 1 of 303 JFR
// pauses without an overlapping -Xlog pause); time overlap for a safepoint.
func copyOf(w, l window.Window) bool {
	if w.Kind == window.KindJVMGCPause {
		const near = int64(50 * time.Millisecond)
		return w.Attributes[window.AttrJVMGCID] == l.Attributes[window.AttrJVMGCID] &&
			l.Start < w.End()+near && w.Start < l.End()+near
	}
	return overlap(w, l)
}

// overlap reports whether two windows share some time.
func overlap(a, b window.Window) bool {
	return a.Start < b.End() && b.Start < a.End()
}
