package jfrreceiver

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/otelcol-ai/otelcol-ai/internal/e2etest"
	"github.com/otelcol-ai/otelcol-ai/internal/window"
	"github.com/otelcol-ai/otelcol-ai/pkg/jfr/jfrtest"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/jfroracletest"
)

// TestBuiltCollectorFollowsJVM runs the built otelcol-ai on its embedded
// default configuration (faster polls overlaid) while a real JDK 17 JVM
// records JFR into its repository, and checks what the file exporter wrote
// against jfr print of the same recording: one window per GC pause and
// safepoint under the JVM's pid, and jvm.gc.duration counting every
// collection. Then SIGTERM: a clean exit.
func TestBuiltCollectorFollowsJVM(t *testing.T) {
	j := jfrtest.Find(t, 17)
	c := e2etest.Start(t, e2etest.Options{
		Configs: []string{"embedded:default"},
		ConfigYAML: `
receivers:
  jfr:
    poll_interval: 200ms
    collection_interval: 500ms
    repositories:
      discovery_interval: 200ms
`,
	})
	if err := c.WaitHealthy(60 * time.Second); err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	pid, exited, out := startJVM(t, j, dir, 3000)
	waitExit(t, exited, out)
	dump := dir + "/dump.jfr"
	gcs := jfroracletest.Events(t, j, dump, "jdk.GarbageCollection")
	pauses := jfroracletest.Events(t, j, dump, "jdk.GCPhasePause")
	begins := jfroracletest.Events(t, j, dump, "jdk.SafepointBegin")
	if len(gcs) == 0 || len(pauses) == 0 || len(begins) == 0 {
		t.Fatalf("recording too thin: %d GCs, %d pauses, %d safepoints", len(gcs), len(pauses), len(begins))
	}

	var kinds map[window.Kind]int
	var gcCount uint64
	var gcHist pmetric.Metric
	err := c.Eventually(60*time.Second, func() bool {
		batches, err := c.Logs("logs.jsonl")
		if err != nil {
			t.Fatal(err)
		}
		kinds = kindsOf(batches, int64(pid))
		metrics, err := c.Metrics("metrics.jsonl")
		if err != nil {
			t.Fatal(err)
		}
		gcHist = lastGCHistogram(metrics, int64(pid))
		gcCount = histCount(gcHist)
		return kinds[window.KindJVMGCPause] >= len(pauses) && kinds[window.KindJVMSafepoint] >= len(begins) && gcCount >= uint64(measuredGCs(gcs, pauses))
	})
	if err != nil {
		batches, _ := c.Logs("logs.jsonl")
		t.Fatalf("windows %v (jfr print: %d GCPhasePause, %d SafepointBegin), jvm.gc.duration count %d (jfr print: %d collections; %s): %v\n%s",
			kinds, len(pauses), len(begins), gcCount, measuredGCs(gcs, pauses), gcBreakdown(gcHist, gcs, pauses), err, whereMissing(t, batches, int64(pid), pauses, window.KindJVMGCPause))
	}
	if kinds[window.KindJVMGCPause] != len(pauses) || kinds[window.KindJVMSafepoint] != len(begins) || gcCount != uint64(measuredGCs(gcs, pauses)) {
		t.Errorf("windows %v, want %d GC pauses and %d safepoints; jvm.gc.duration count %d, want %d",
			kinds, len(pauses), len(begins), gcCount, measuredGCs(gcs, pauses))
	}

	code, err := c.Stop(30 * time.Second)
	if err != nil || code != 0 {
		t.Fatalf("stop: exit %d, %v", code, err)
	}
}

// kindsOf counts, per kind, the window records under pid's resource.
func kindsOf(batches []plog.Logs, pid int64) map[window.Kind]int {
	kinds := map[window.Kind]int{}
	for _, w := range e2etest.WindowsOf(batches, pid) {
		kinds[w.Kind]++
	}
	return kinds
}

// lastGCHistogram returns pid's newest jvm.gc.duration histogram
// (cumulative) across every batch (an empty metric when none).
func lastGCHistogram(batches []pmetric.Metrics, pid int64) pmetric.Metric {
	last := pmetric.NewMetric()
	for _, md := range batches {
		for i := range md.ResourceMetrics().Len() {
			rm := md.ResourceMetrics().At(i)
			if pidOf(rm.Resource()) != pid {
				continue
			}
			if h, ok := metric(rm, "jvm.gc.duration"); ok {
				last = h
			}
		}
	}
	return last
}

// whereMissing says where in the recording the GC pauses that have no
// window are: how many jfr print pauses start before the first window of
// kind and after the last one (1 ms slack), and the spans of both.
func whereMissing(t *testing.T, batches []plog.Logs, pid int64, events []jfroracletest.Event, kind window.Kind) string {
	var starts []int64
	for _, e := range events {
		s, err := e.Time("startTime")
		if err != nil {
			t.Fatal(err)
		}
		starts = append(starts, s)
	}
	var ws []int64
	for _, w := range e2etest.WindowsOf(batches, pid) {
		if w.Kind == kind {
			ws = append(ws, w.Start)
		}
	}
	if len(starts) == 0 || len(ws) == 0 {
		return fmt.Sprintf("%d events, %d windows", len(starts), len(ws))
	}
	slices.Sort(starts)
	slices.Sort(ws)
	before, after := 0, 0
	for _, s := range starts {
		if s < ws[0]-int64(time.Millisecond) {
			before++
		}
		if s > ws[len(ws)-1]+int64(time.Millisecond) {
			after++
		}
	}
	return fmt.Sprintf("%s: jfr print %d from +0 to +%v; windows %d from %+v to %+v (relative to the first event); %d events before the first window, %d after the last",
		kind, len(starts), time.Duration(starts[len(starts)-1]-starts[0]), len(ws),
		time.Duration(ws[0]-starts[0]), time.Duration(ws[len(ws)-1]-starts[0]), before, after)
}
