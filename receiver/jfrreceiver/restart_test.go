package jfrreceiver

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/extension/storage/filestorage"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/extension"
	"go.opentelemetry.io/collector/extension/extensiontest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/receiver/receivertest"

	"github.com/otelcol-ai/otelcol-ai/internal/window"
	"github.com/otelcol-ai/otelcol-ai/pkg/jfr/jfrtest"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/jfroracletest"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/jvmevent"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/metadata"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/xlog"
)

var fileStorageID = component.MustNewID("file_storage")

// startFileStorage starts a file_storage extension keeping its files in
// dir, as a collector process does at its start.
func startFileStorage(t *testing.T, dir string) (extension.Extension, storageHost) {
	t.Helper()
	f := filestorage.NewFactory()
	cfg := f.CreateDefaultConfig().(*filestorage.Config)
	cfg.Directory = dir
	ext, err := f.Create(context.Background(), extensiontest.NewNopSettings(f.Type()), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := ext.Start(context.Background(), componenttest.NewNopHost()); err != nil {
		t.Fatal(err)
	}
	return ext, storageHost{Host: componenttest.NewNopHost(), exts: map[component.ID]component.Component{fileStorageID: ext}}
}

// startCollector starts one collector "process": a file_storage extension
// on storageDir (unless storageDir is empty) and the receiver with cfg,
// sending to logs. stop shuts the receiver and the extension down, in that
// order, as the service does on SIGTERM.
func startCollector(t *testing.T, cfg *Config, storageDir string, logs *consumertest.LogsSink) (stop func()) {
	t.Helper()
	var host component.Host = componenttest.NewNopHost()
	var ext extension.Extension
	if storageDir != "" {
		ext, host = startFileStorage(t, storageDir)
	}
	set := receivertest.NewNopSettings(metadata.Type)
	set.ID = component.NewID(metadata.Type) // the same receiver after the restart (the settings' is random)
	r, err := NewFactory().CreateLogs(context.Background(), set, cfg, logs)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(context.Background(), host); err != nil {
		t.Fatal(err)
	}
	return func() {
		t.Helper()
		if err := r.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		if ext != nil {
			if err := ext.Shutdown(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// restartDirs makes a test folder holding a folder named data (the JVM's
// logs or repository) and, with storage, one for the file_storage
// extension ("" without).
func restartDirs(t *testing.T, data string, storage bool) (dir, dataDir, storageDir string) {
	t.Helper()
	dir = t.TempDir()
	dataDir = filepath.Join(dir, data)
	dirs := []string{dataDir}
	if storage {
		storageDir = filepath.Join(dir, "storage")
		dirs = append(dirs, storageDir)
	}
	for _, d := range dirs {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir, dataDir, storageDir
}

// xlogRestartConfig reads gcLog's files only, every 100 ms; with storage
// its checkpoints go to the file_storage extension of startCollector.
func xlogRestartConfig(gcLog string, storage bool) *Config {
	cfg := NewFactory().CreateDefaultConfig().(*Config)
	cfg.PollInterval = 100 * time.Millisecond
	cfg.Repositories.Enabled = false
	cfg.XLog.Include = []string{gcLog}
	cfg.XLog.DiscoveryInterval = 100 * time.Millisecond
	if storage {
		id := fileStorageID
		cfg.Storage = &id
	}
	return cfg
}

// repositoryRestartConfig follows the repositories in repoDir only (found
// by a pattern, not by discovery), every 200 ms; with storage its
// checkpoints go to the file_storage extension of startCollector.
func repositoryRestartConfig(repoDir string, storage bool) *Config {
	cfg := NewFactory().CreateDefaultConfig().(*Config)
	cfg.PollInterval = 200 * time.Millisecond
	cfg.Repositories.Discover = false
	cfg.Repositories.Include = []string{filepath.Join(repoDir, "2*_*")}
	cfg.Repositories.DiscoveryInterval = 200 * time.Millisecond
	if storage {
		id := fileStorageID
		cfg.Storage = &id
	}
	return cfg
}

// waitFor waits up to 20 s for cond while the JVM runs.
func waitFor(t *testing.T, exited chan error, out fmt.Stringer, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
		select {
		case err := <-exited:
			t.Fatalf("the JVM exited before the test could go on: %v\n%s", err, out)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting\n%s", out)
		}
	}
}

func fileID(t *testing.T, path string) [2]uint64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	return [2]uint64{st.Dev, st.Ino}
}

// logPauses reads every pause and safepoint line of the -Xlog files
// matching pattern: "GC(id) phase" once per pause, safepointKey once per
// safepoint.
func logPauses(t *testing.T, pattern string, clock *window.Clock) map[string]int {
	t.Helper()
	files, err := filepath.Glob(pattern)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			l, ok := xlog.ParseLine(sc.Text())
			if !ok {
				continue
			}
			if sp, ok := xlog.ParseSafepoint(l.Message); ok {
				out[safepointKey(sp.Operation, int64(sp.Total), (clock.ToUnixNano(l.Monotonic)+5e5)/1e6)]++
				continue
			}
			if l.Tags != "gc" && l.Tags != "gc,phases" {
				continue
			}
			if p, ok := xlog.ParsePause(l.Message); ok {
				out[fmt.Sprintf("GC(%d) %s", p.GCID, p.Name)]++
			}
		}
		f.Close()
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// safepointKey tells safepoints apart by operation, total time (ns) and
// end, to the millisecond (the test's and the receiver's conversions of
// timenanos to epoch time differ by microseconds: receivedPauses takes a
// key of the log within a millisecond). Two safepoints of one operation
// may take the same total time: a log here had two of 1,902,900 ns, 192 ms
// apart.
func safepointKey(op string, total, endMs int64) string {
	return fmt.Sprintf("safepoint %s %d %d", op, total, endMs)
}

// receivedPauses keys the windows received as logPauses keys the lines
// (want): a safepoint whose end is a millisecond from a line's takes that
// line's key.
func receivedPauses(t *testing.T, want map[string]int, sinks ...*consumertest.LogsSink) map[string]int {
	t.Helper()
	out := map[string]int{}
	eachRecord(allLogs(sinks...), func(_ pcommon.Resource, lr plog.LogRecord) {
		w, err := window.Decode(lr)
		if err != nil {
			t.Fatal(err)
		}
		switch w.Kind {
		case window.KindJVMGCPause:
			out[gcPauseKey(w)]++
		case window.KindJVMSafepoint:
			op, _ := w.Attributes[window.AttrJVMVMOperation].(string)
			ms := (w.Start + int64(w.Duration) + 5e5) / 1e6
			key := safepointKey(op, int64(w.Duration), ms)
			for _, d := range []int64{-1, 1} {
				if k := safepointKey(op, int64(w.Duration), ms+d); want[key] == 0 && want[k] > 0 {
					key = k
				}
			}
			out[key]++
		}
	})
	return out
}

// gcPauseKey is "GC(id) phase", the key of a pause window in
// receivedPauses and jfrWindows.
func gcPauseKey(w window.Window) string {
	return fmt.Sprintf("GC(%v) %v", w.Attributes[window.AttrJVMGCID], w.Attributes[jvmevent.AttrGCPhase])
}

// compare counts what was received more often than the source holds it
// (duplicates: a key the source holds twice, such as two safepoints of one
// operation and total time ending in the same second, is received twice
// rightly) and what the source holds that was received less often (gaps),
// each occurrence once; dupKeys names the duplicated keys (at most 5).
func compare(want, got map[string]int) (dups, gaps, extra int, missing, dupKeys []string) {
	for k, n := range got {
		if n > max(want[k], 1) {
			dups += n - max(want[k], 1)
			if len(dupKeys) < 5 {
				dupKeys = append(dupKeys, fmt.Sprintf("%s: %d of %d", k, n, want[k]))
			}
		}
		if want[k] == 0 {
			extra++
		}
	}
	for k, n := range want {
		if got[k] < n {
			gaps += n - got[k]
			if len(missing) < 5 || os.Getenv("H_DEBUG") != "" {
				missing = append(missing, k)
			}
		}
	}
	return dups, gaps, extra, missing, dupKeys
}

// TestXlogRestartRotatedDuringDowntime: a real JDK 17 JVM logs
// -Xlog:gc*,safepoint to a file rotated every 16 KiB (HotSpot renames
// gc.log to gc.log.N and starts a new gc.log); the receiver, with a real
// file_storage extension, is shut down mid-run (as on SIGTERM), the file
// rotates while it is down, and a new receiver and extension on the same
// directory go on. Every pause and safepoint line of all the log's files
// must arrive exactly once. Without storage the same restart misses what
// was written during the downtime (the figure logged: the test checks it
// is not zero, so the with-storage case cannot pass by a thin log). About
// 2 × 10 s.
func TestXlogRestartRotatedDuringDowntime(t *testing.T) {
	j := jfrtest.Find(t, 17)
	for _, tc := range []struct {
		name    string
		storage bool
	}{{"file_storage", true}, {"no_storage", false}} {
		t.Run(tc.name, func(t *testing.T) {
			_, logDir, storageDir := restartDirs(t, "logs", tc.storage)
			gcLog := filepath.Join(logDir, "gc.log")
			cfg := xlogRestartConfig(gcLog, tc.storage)

			// The first run is up before the JVM: gc.log appears after
			// its first scan and is read from its start.
			sink1 := new(consumertest.LogsSink)
			stop1 := startCollector(t, cfg, storageDir, sink1)
			time.Sleep(300 * time.Millisecond)
			_, exited, out := startJVM(t, j, logDir, 7000,
				"-Xlog:gc*,safepoint:file="+gcLog+":time,uptimenanos,timenanos,pid,level,tags:filecount=500,filesize=64k")
			waitFor(t, exited, out, func() bool { _, err := os.Stat(gcLog); return err == nil })
			time.Sleep(2 * time.Second)
			stop1()
			// Down until gc.log rotated (HotSpot renames it gc.log.NNN and
			// starts a new one) and the new one was written to.
			before := fileID(t, gcLog)
			waitFor(t, exited, out, func() bool { _, err := os.Stat(gcLog); return err == nil && fileID(t, gcLog) != before })
			time.Sleep(500 * time.Millisecond)

			sink2 := runUntilExit(t, cfg, storageDir, exited, out)
			dups, gaps, extra, missing := checkLogOnce(t, tc.name, gcLog, 50, sink1, sink2)
			if tc.storage {
				if dups != 0 || gaps != 0 || extra != 0 {
					t.Errorf("across the restart: %d duplicates, %d gaps (%v), %d windows not in the log", dups, gaps, missing, extra)
				}
				return
			}
			if gaps == 0 {
				t.Errorf("without storage the restart missed nothing: the downtime was not exercised")
			}
		})
	}
}

// runUntilExit runs a collector on storageDir (the one after a restart)
// until the JVM has exited and its last lines were read.
func runUntilExit(t *testing.T, cfg *Config, storageDir string, exited chan error, out *bytes.Buffer) *consumertest.LogsSink {
	t.Helper()
	sink := new(consumertest.LogsSink)
	stop := startCollector(t, cfg, storageDir, sink)
	waitExit(t, exited, out)
	time.Sleep(time.Second) // the last lines are read
	stop()
	return sink
}

// checkLogOnce compares the pause and safepoint lines of gcLog's files with
// the windows the sinks received, logs the figures, and fails at once when
// the log holds fewer than minLines of them (too thin to tell).
// total is how many occurrences a key count holds.
func total(m map[string]int) int {
	n := 0
	for _, c := range m {
		n += c
	}
	return n
}

func checkLogOnce(t *testing.T, name, gcLog string, minLines int, sinks ...*consumertest.LogsSink) (dups, gaps, extra int, missing []string) {
	t.Helper()
	clock, err := window.NewClock()
	if err != nil {
		t.Fatal(err)
	}
	want := logPauses(t, gcLog+"*", clock)
	got := receivedPauses(t, want, sinks...)
	dups, gaps, extra, missing, dupKeys := compare(want, got)
	t.Logf("%s: log lines %d, received %d, duplicates %d %v, gaps %d (first: %v), not in the log %d",
		name, total(want), total(got), dups, dupKeys, gaps, missing, extra)
	if total(want) < minLines {
		t.Fatalf("log too thin: %d pauses and safepoints", total(want))
	}
	return dups, gaps, extra, missing
}

// jfrWindows keys the JFR windows received for pid: "GC(id) phase" per
// pause, "safepoint id" per safepoint.
func jfrWindows(t *testing.T, pid int64, sinks ...*consumertest.LogsSink) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, w := range windowsOf(t, allLogs(sinks...), pid) {
		switch w.Kind {
		case window.KindJVMGCPause:
			out[gcPauseKey(w)]++
		case window.KindJVMSafepoint:
			out[fmt.Sprintf("safepoint %v", w.Attributes[window.AttrJVMSafepointID])]++
		}
	}
	return out
}

// recordedPauses keys the jdk.GCPhasePause and jdk.SafepointBegin events
// of the recordings in files, by jfr print, as jfrWindows keys the windows.
func recordedPauses(t *testing.T, j jfrtest.JDK, files ...string) map[string]int {
	t.Helper()
	want := map[string]int{}
	for _, f := range files {
		for _, e := range jfroracletest.Events(t, j, f, "jdk.GCPhasePause") {
			want[fmt.Sprintf("GC(%d) %s", e.Int("gcId"), e.Str("name"))]++
		}
		for _, e := range jfroracletest.Events(t, j, f, "jdk.SafepointBegin") {
			want[fmt.Sprintf("safepoint %d", e.Int("safepointId"))]++
		}
	}
	return want
}

// checkRecordingOnce compares the pauses and safepoints of a recording
// (recordedPauses) with the windows of pid that the sinks received, the
// first of them the run before the restart, logs the figures, and fails
// at once when the recording holds fewer than 30 (too thin to tell).
func checkRecordingOnce(t *testing.T, name string, want map[string]int, pid int64, first *consumertest.LogsSink, rest ...*consumertest.LogsSink) (dups, gaps, extra int, missing []string) {
	t.Helper()
	got := jfrWindows(t, pid, append([]*consumertest.LogsSink{first}, rest...)...)
	dups, gaps, extra, missing, dupKeys := compare(want, got)
	t.Logf("%s: recording %d pauses and safepoints, received %d (first run %d), duplicates %d %v, gaps %d (first: %v), not in the recording %d",
		name, total(want), total(got), total(jfrWindows(t, pid, first)), dups, dupKeys, gaps, missing, extra)
	if total(want) < 30 {
		t.Fatalf("recording too thin: %d pauses and safepoints", total(want))
	}
	return dups, gaps, extra, missing
}

// waitQuiet waits until sink has received nothing new for 2 s.
func waitQuiet(t *testing.T, sink *consumertest.LogsSink) {
	t.Helper()
	count, since := -1, time.Now()
	for deadline := time.Now().Add(60 * time.Second); time.Since(since) < 2*time.Second; time.Sleep(100 * time.Millisecond) {
		if n := sink.LogRecordCount(); n != count {
			count, since = n, time.Now()
		}
		if time.Now().After(deadline) {
			t.Fatal("windows kept coming")
		}
	}
}

// TestRepositoryRestartJVMKeepsRunning: a real JDK 17 JVM records JFR into
// a repository the receiver follows (its defaults, the folder given by a
// pattern); the receiver, with a real file_storage extension, is shut down
// mid-run (as on SIGTERM) and a new one on the same storage directory
// starts 2 s later. Against the recording the JVM dumped at exit: every
// jdk.GCPhasePause and jdk.SafepointBegin arrives exactly once. Without
// storage the newest chunk is read again from its start (the 99
// pauses sent twice; or, when a new chunk began meanwhile, the rest of the
// old one is missed): the figure is logged and must not be zero, so that
// the with-storage case cannot pass by a restart that changed nothing.
// About 2 × 14 s.
func TestRepositoryRestartJVMKeepsRunning(t *testing.T) {
	j := jfrtest.Find(t, 17)
	for _, tc := range []struct {
		name    string
		storage bool
	}{{"file_storage", true}, {"no_storage", false}} {
		t.Run(tc.name, func(t *testing.T) {
			_, repoDir, storageDir := restartDirs(t, "repo", tc.storage)
			cfg := repositoryRestartConfig(repoDir, tc.storage)

			sink1 := new(consumertest.LogsSink)
			stop1 := startCollector(t, cfg, storageDir, sink1)
			time.Sleep(300 * time.Millisecond)
			pid, exited, out := startJVM(t, j, repoDir, 9000)
			waitFor(t, exited, out, func() bool {
				m, _ := filepath.Glob(filepath.Join(repoDir, "2*_*", "*.jfr"))
				return len(m) > 0
			})
			// Down once the first run sent a good part of the chunk.
			waitFor(t, exited, out, func() bool { return len(jfrWindows(t, int64(pid), sink1)) >= 300 })
			stop1()
			time.Sleep(2 * time.Second) // down

			sink2 := new(consumertest.LogsSink)
			stop2 := startCollector(t, cfg, storageDir, sink2)
			waitExit(t, exited, out)
			// The pattern's folder is gone with the JVM: the follower reads
			// what it holds open to the end.
			time.Sleep(3 * time.Second)
			stop2()

			want := recordedPauses(t, j, filepath.Join(repoDir, "dump.jfr"))
			dups, gaps, extra, missing := checkRecordingOnce(t, tc.name, want, int64(pid), sink1, sink2)
			if tc.storage {
				if dups != 0 || gaps != 0 || extra != 0 {
					t.Errorf("across the restart: %d duplicates, %d gaps (%v), %d windows not in the recording", dups, gaps, missing, extra)
				}
				return
			}
			// The newest chunk is read from its start: its first part twice,
			// or, when the JVM moved on to a new chunk meanwhile, the rest
			// of the old one never.
			if dups+gaps == 0 {
				t.Errorf("without storage the restart neither repeated nor missed anything: the restart was not exercised")
			}
		})
	}
}

// TestRepositoryRestartJVMExitsDuringDowntime: as
// TestRepositoryRestartJVMKeepsRunning, but the JVM (JDK 25) exits while
// the collector is down. HotSpot deletes the repository of an exiting JVM
// (its chunk files and folder) unless it runs with
// -XX:FlightRecorderOptions:preserve-repository=true (JDK 21+): with it the
// folder stays, the pattern still matches it and the restarted receiver
// reads the rest of the chunk it was reading and the chunks after it, up to
// the final one, once. Without it what was written during the downtime is
// gone with the folder: that figure is logged and must not be zero. About
// 2 × 12 s.
func TestRepositoryRestartJVMExitsDuringDowntime(t *testing.T) {
	j := jfrtest.Find(t, 25)
	src, jfc, err := jfrtest.Workload()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		preserve bool
	}{{"preserve-repository", true}, {"repository-deleted", false}} {
		t.Run(tc.name, func(t *testing.T) {
			dir, repoDir, storageDir := restartDirs(t, "repo", true)
			cfg := repositoryRestartConfig(repoDir, true)

			sink1 := new(consumertest.LogsSink)
			stop1 := startCollector(t, cfg, storageDir, sink1)
			time.Sleep(300 * time.Millisecond)
			// The JVM's own recording, for the oracle: dumped at exit
			// (dumponexit takes the chunks out of the repository, so a
			// preserved one is left empty), or, preserved, the chunk files
			// the repository keeps.
			opts, recording := "repository="+repoDir, "settings=profile,settings="+jfc+",filename="+filepath.Join(dir, "dump.jfr")
			if tc.preserve {
				opts, recording = opts+",preserve-repository=true", "settings=profile,settings="+jfc
			}
			cmd := exec.Command(j.Java(), "-Xmx128m", "-Xlog:disable", "-XX:FlightRecorderOptions:"+opts,
				"-XX:StartFlightRecording:"+recording, src, "7000")
			cmd.Dir = dir
			out := &bytes.Buffer{}
			cmd.Stdout, cmd.Stderr = out, out
			exited := jfrtest.Start(t, cmd)
			pid := int64(cmd.Process.Pid)
			waitFor(t, exited, out, func() bool { return len(jfrWindows(t, pid, sink1)) >= 200 })
			stop1()
			waitExit(t, exited, out) // during the downtime
			time.Sleep(500 * time.Millisecond)

			sink2 := new(consumertest.LogsSink)
			stop2 := startCollector(t, cfg, storageDir, sink2)
			time.Sleep(time.Second)
			waitQuiet(t, sink2)
			stop2()

			files := []string{filepath.Join(dir, "dump.jfr")}
			if tc.preserve {
				files, _ = filepath.Glob(filepath.Join(repoDir, "2*_*", "*.jfr"))
				if len(files) == 0 {
					t.Fatal("preserve-repository kept no chunk file")
				}
			}
			dups, gaps, extra, missing := checkRecordingOnce(t, tc.name, recordedPauses(t, j, files...), pid, sink1, sink2)
			if dups != 0 || extra != 0 {
				t.Errorf("across the restart: %d duplicates, %d windows not in the recording", dups, extra)
			}
			if tc.preserve && gaps != 0 {
				t.Errorf("across the restart: %d gaps (%v)", gaps, missing)
			}
			if !tc.preserve && gaps == 0 {
				t.Errorf("the deleted repository lost nothing: the JVM did not write during the downtime")
			}
			if tc.preserve {
				// A third start finds the preserved folder read to its end.
				sink3 := new(consumertest.LogsSink)
				stop3 := startCollector(t, cfg, storageDir, sink3)
				time.Sleep(2 * time.Second)
				stop3()
				if n := len(jfrWindows(t, pid, sink3)); n != 0 {
					t.Errorf("a third start read the preserved repository again: %d windows", n)
				}
			}
		})
	}
}

// TestFirstPipelineShutdownLosesNothing: the collector shuts the logs
// pipeline's face of the receiver down first and the metrics pipeline's a
// while later (other components between them; 1.5 s here). A real JDK 17
// JVM logs -Xlog:gc*,safepoint all along, and a second collector on the same
// file_storage goes on after the first: every pause and safepoint line
// arrives exactly once. When the receiver read on between the two
// shutdowns, the windows it read were refused by the closed logs pipeline
// while its checkpoint moved past them, and the next collector never sent
// them (a helm upgrade lost 8 collections so).
func TestFirstPipelineShutdownLosesNothing(t *testing.T) {
	j := jfrtest.Find(t, 17)
	_, logDir, storageDir := restartDirs(t, "logs", true)
	gcLog := filepath.Join(logDir, "gc.log")
	cfg := xlogRestartConfig(gcLog, true)

	// The first collector: both faces of one receiver, as in a config with
	// the receiver in a logs and a metrics pipeline.
	ext, host := startFileStorage(t, storageDir)
	set := receivertest.NewNopSettings(metadata.Type)
	set.ID = component.NewID(metadata.Type)
	f := NewFactory()
	sink1 := new(consumertest.LogsSink)
	logsFace, err := f.CreateLogs(context.Background(), set, cfg, sink1)
	if err != nil {
		t.Fatal(err)
	}
	metricsFace, err := f.CreateMetrics(context.Background(), set, cfg, new(consumertest.MetricsSink))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []component.Component{logsFace, metricsFace} {
		if err := c.Start(context.Background(), host); err != nil {
			t.Fatal(err)
		}
	}
	_, exited, out := startJVM(t, j, logDir, 6000,
		"-Xlog:gc*,safepoint:file="+gcLog+":time,uptimenanos,timenanos,pid,level,tags")
	waitFor(t, exited, out, func() bool { return sink1.LogRecordCount() >= 50 })
	if err := logsFace.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond) // the JVM logs on
	if err := metricsFace.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := ext.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}

	sink2 := runUntilExit(t, cfg, storageDir, exited, out)
	dups, gaps, extra, missing := checkLogOnce(t, "two shutdowns", gcLog, 100, sink1, sink2)
	if dups != 0 || gaps != 0 || extra != 0 {
		t.Errorf("across the two shutdowns and the restart: %d duplicates, %d gaps (%v), %d windows not in the log", dups, gaps, missing, extra)
	}
}
