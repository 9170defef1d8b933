package jfrreceiver

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/receiver"
	"go.opentelemetry.io/collector/receiver/receivertest"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"
	"golang.org/x/sys/unix"

	"github.com/otelcol-ai/otelcol-ai/internal/procresource"
	"github.com/otelcol-ai/otelcol-ai/internal/window"
	"github.com/otelcol-ai/otelcol-ai/pkg/jfr"
	"github.com/otelcol-ai/otelcol-ai/pkg/jfr/jfrtest"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/jfroracletest"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/jfrstream"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/jvmevent"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/metadata"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/metadatatest"
)

// openFDs counts this process's open file descriptors.
func openFDs(t *testing.T) int {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(entries)
}

// startJVM runs the test workload with a recording whose repository is
// under dir and which is dumped to dir/dump.jfr at exit.
func startJVM(t *testing.T, j jfrtest.JDK, dir string, millis int, flags ...string) (pid int, exited chan error, out *bytes.Buffer) {
	t.Helper()
	src, jfc, err := jfrtest.Workload()
	if err != nil {
		t.Fatal(err)
	}
	args := append([]string{"-Xmx128m", "-Xlog:disable"}, flags...)
	args = append(args, "-XX:FlightRecorderOptions:repository="+dir,
		"-XX:StartFlightRecording:settings=profile,settings="+jfc+",filename="+filepath.Join(dir, "dump.jfr"),
		src, strconv.Itoa(millis))
	cmd := exec.Command(j.Java(), args...)
	cmd.Dir = dir
	out = &bytes.Buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	exited = jfrtest.Start(t, cmd)
	return cmd.Process.Pid, exited, out
}

// measuredGCs is how many collections jvm.gc.duration counts for jfr
// print's collections and pauses: a collection once under its MXBean, each
// pause of a collector with a pause bean (jfrstream.CollectorOf), and the
// collections before the recording (its lowest gcId; ids start at 0).
func measuredGCs(gcs, pauses []jfroracletest.Event) int {
	n, _ := measured(gcs, pauses)
	return n
}

// measured returns measuredGCs and the sum of their durations in seconds
// (the collections before the recording have none).
func measured(gcs, pauses []jfroracletest.Event) (n int, seconds float64) {
	byBean, seconds, before := tally(gcs, pauses)
	for _, k := range byBean {
		n += k
	}
	return n + before, seconds
}

// tally counts jfr print's collections and pauses per MXBean, as
// jvm.gc.duration counts them (a collection once under its bean, each pause
// of a collector with a pause bean under that one), sums their durations in
// seconds, and says how many collections came before the recording (its
// lowest gcId; ids start at 0).
func tally(gcs, pauses []jfroracletest.Event) (byBean map[string]int, seconds float64, before int) {
	byBean = map[string]int{}
	pauseBean := map[int64]string{}
	lowest := int64(-1)
	for _, e := range gcs {
		c := jfrstream.CollectorOf(e.Str("name"))
		if c.Name != "" {
			d, _ := e.Duration("duration")
			byBean[c.Name]++
			seconds += d.Seconds()
		}
		if c.Pauses != "" {
			pauseBean[e.Int("gcId")] = c.Pauses
		}
		if id := e.Int("gcId"); lowest < 0 || id < lowest {
			lowest = id
		}
	}
	for _, e := range pauses {
		if bean, ok := pauseBean[e.Int("gcId")]; ok {
			d, _ := e.Duration("duration")
			byBean[bean]++
			seconds += d.Seconds()
		}
	}
	return byBean, seconds, int(max(lowest, 0))
}

// gcBreakdown says, per jvm.gc.name, what a jvm.gc.duration histogram
// counted and what jfr print's collections and pauses make of it (the
// collections before the recording apart), for a failure's message.
func gcBreakdown(h pmetric.Metric, gcs, pauses []jfroracletest.Event) string {
	got := map[string]uint64{}
	if h.Type() == pmetric.MetricTypeHistogram {
		dps := h.Histogram().DataPoints()
		for i := range dps.Len() {
			name, _ := dps.At(i).Attributes().Get("jvm.gc.name")
			got[name.Str()] += dps.At(i).Count()
		}
	}
	want, _, before := tally(gcs, pauses)
	return fmt.Sprintf("counted %v; jfr print %v and %d before the recording (lowest gcId)", got, want, before)
}

// startLogs creates a logs receiver with cfg feeding a sink and starts it;
// the caller shuts it down.
func startLogs(t *testing.T, cfg *Config) (receiver.Logs, *consumertest.LogsSink) {
	t.Helper()
	logs := new(consumertest.LogsSink)
	r, err := NewFactory().CreateLogs(context.Background(), receivertest.NewNopSettings(metadata.Type), cfg, logs)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(context.Background(), componenttest.NewNopHost()); err != nil {
		t.Fatal(err)
	}
	return r, logs
}

// waitExit waits up to 90 s for a JVM started by startJVM to exit, and
// fails unless it exited cleanly; the exit stays readable on exited.
func waitExit(t *testing.T, exited chan error, out *bytes.Buffer) {
	t.Helper()
	select {
	case err := <-exited:
		exited <- err
		if err != nil {
			t.Fatalf("JVM: %v\n%s", err, out)
		}
	case <-time.After(90 * time.Second):
		t.Fatalf("JVM did not exit\n%s", out)
	}
}

// pidOf returns a resource's process.pid (-1 when absent).
func pidOf(res pcommon.Resource) int64 {
	v, ok := res.Attributes().Get(window.ResourcePID)
	if !ok {
		return -1
	}
	return v.Int()
}

// TestReceiverFollowsLiveJVM runs the receiver's logs and metrics faces
// against a real JDK 17 JVM found by /proc discovery and checks, against
// jfr print of the recording the JVM dumped at exit: one window per GC
// pause and safepoint with the JVM's resource, jvm.gc.duration counting
// every collection, the last direct-buffer sample, heap memory; and that
// nothing is left open afterwards.
func TestReceiverFollowsLiveJVM(t *testing.T) {
	j := jfrtest.Find(t, 17)
	fdsBefore := openFDs(t)
	dir := t.TempDir()

	f := NewFactory()
	cfg := f.CreateDefaultConfig().(*Config)
	cfg.PollInterval = 200 * time.Millisecond
	cfg.CollectionInterval = 300 * time.Millisecond
	cfg.Repositories.DiscoveryInterval = 200 * time.Millisecond
	logs, metrics, shutdown := startBoth(t, cfg, receivertest.NewNopSettings(metadata.Type), componenttest.NewNopHost())

	pid, exited, out := startJVM(t, j, dir, 3000)
	waitExit(t, exited, out)
	dump := filepath.Join(dir, "dump.jfr")
	gcs := jfroracletest.Events(t, j, dump, "jdk.GarbageCollection")
	pauses := jfroracletest.Events(t, j, dump, "jdk.GCPhasePause")
	begins := jfroracletest.Events(t, j, dump, "jdk.SafepointBegin")
	buffers := jfroracletest.Events(t, j, dump, "jdk.DirectBufferStatistics")
	if len(gcs) == 0 || len(pauses) == 0 || len(begins) == 0 || len(buffers) == 0 {
		t.Fatalf("recording too thin: %d GCs, %d pauses, %d safepoints, %d buffer samples", len(gcs), len(pauses), len(begins), len(buffers))
	}

	// The receiver is done with the JVM once its metrics stop changing
	// after the exit: wait for the collection count to reach the oracle's.
	deadline := time.Now().Add(60 * time.Second)
	var last pmetric.ResourceMetrics
	var counted uint64
	for {
		if rm, ok := lastForPID(metrics.AllMetrics(), int64(pid)); ok {
			last = rm
			if h, ok := metric(rm, "jvm.gc.duration"); ok {
				if counted = histCount(h); counted == uint64(measuredGCs(gcs, pauses)) {
					break
				}
			}
		}
		if time.Now().After(deadline) {
			h, _ := metric(last, "jvm.gc.duration")
			t.Fatalf("jvm.gc.duration counted %d collections, never the %d of the recording (and before it): %s", counted, measuredGCs(gcs, pauses), gcBreakdown(h, gcs, pauses))
		}
		time.Sleep(100 * time.Millisecond)
	}
	shutdown()

	// Windows.
	counts := map[string]int{}
	for _, ld := range logs.AllLogs() {
		for i := range ld.ResourceLogs().Len() {
			rl := ld.ResourceLogs().At(i)
			if pidOf(rl.Resource()) != int64(pid) {
				continue
			}
			checkJVMResource(t, rl.Resource(), "17.")
			recs := rl.ScopeLogs().At(0).LogRecords()
			for k := range recs.Len() {
				w, err := window.Decode(recs.At(k))
				if err != nil {
					t.Fatalf("record %d is not a window: %v", k, err)
				}
				counts[string(w.Kind)]++
			}
		}
	}
	if counts[string(window.KindJVMGCPause)] != len(pauses) || counts[string(window.KindJVMSafepoint)] != len(begins) {
		t.Errorf("windows %v; jfr print has %d GCPhasePause, %d SafepointBegin", counts, len(pauses), len(begins))
	}

	// Metrics.
	checkJVMResource(t, last.Resource(), "17.")
	h, _ := metric(last, "jvm.gc.duration")
	_, sum := measured(gcs, pauses)
	if got := histSum(h); math.Abs(got-sum) > 1e-6 {
		t.Errorf("jvm.gc.duration sum %v s, jfr print %v s", got, sum)
	}
	if sp, ok := metric(last, "jvm.safepoint.duration"); !ok || histCount(sp) != uint64(len(begins)) {
		t.Errorf("jvm.safepoint.duration count %d, jfr print has %d safepoints", histCount(sp), len(begins))
	}
	lastBuf := buffers[len(buffers)-1]
	if bc, ok := metric(last, "jvm.buffer.count"); !ok || bc.Sum().DataPoints().At(0).IntValue() != lastBuf.Int("count") {
		t.Errorf("jvm.buffer.count %v, last jfr sample %d", bc.Sum().DataPoints(), lastBuf.Int("count"))
	}
	if used, ok := metric(last, "jvm.buffer.memory.used"); !ok || used.Sum().DataPoints().At(0).IntValue() != lastBuf.Int("memoryUsed") {
		t.Errorf("jvm.buffer.memory.used, last jfr sample %d", lastBuf.Int("memoryUsed"))
	}
	if mu, ok := metric(last, "jvm.memory.used"); !ok || mu.Sum().DataPoints().Len() == 0 {
		t.Error("no jvm.memory.used")
	}

	if after := openFDs(t); after > fdsBefore {
		t.Errorf("%d file descriptors open before, %d after", fdsBefore, after)
	}
}

func checkJVMResource(t *testing.T, res pcommon.Resource, versionPrefix string) {
	t.Helper()
	attrs := res.Attributes()
	if v, _ := attrs.Get(window.ResourceRuntimeName); v.Str() != "java" {
		t.Errorf("process.runtime.name %q", v.Str())
	}
	if v, _ := attrs.Get(window.ResourceRuntimeVersion); !strings.HasPrefix(v.Str(), versionPrefix) {
		t.Errorf("process.runtime.version %q, want %s…", v.Str(), versionPrefix)
	}
	if v, _ := attrs.Get(window.ResourceHostName); v.Str() != procresource.LocalNode().HostName || v.Str() == "" {
		t.Errorf("host.name %q, want the node's %q", v.Str(), procresource.LocalNode().HostName)
	}
	// The test's JVMs run in the host's pid namespace: they see themselves
	// as the node sees them.
	if v, _ := attrs.Get(window.ResourceVPID); v.Int() != pidOf(res) {
		t.Errorf("process.vpid %d, want process.pid %d", v.Int(), pidOf(res))
	}
}

// lastForPID returns the newest ResourceMetrics of the process.
func lastForPID(all []pmetric.Metrics, pid int64) (pmetric.ResourceMetrics, bool) {
	for i := len(all) - 1; i >= 0; i-- {
		rms := all[i].ResourceMetrics()
		for k := range rms.Len() {
			if pidOf(rms.At(k).Resource()) == pid {
				return rms.At(k), true
			}
		}
	}
	return pmetric.ResourceMetrics{}, false
}

func metric(rm pmetric.ResourceMetrics, name string) (pmetric.Metric, bool) {
	ms := rm.ScopeMetrics().At(0).Metrics()
	for i := range ms.Len() {
		if ms.At(i).Name() == name {
			return ms.At(i), true
		}
	}
	return pmetric.NewMetric(), false
}

func histCount(m pmetric.Metric) uint64 {
	if m.Type() != pmetric.MetricTypeHistogram {
		return 0
	}
	var n uint64
	dps := m.Histogram().DataPoints()
	for i := range dps.Len() {
		n += dps.At(i).Count()
	}
	return n
}

func histSum(m pmetric.Metric) float64 {
	var s float64
	dps := m.Histogram().DataPoints()
	for i := range dps.Len() {
		s += dps.At(i).Sum()
	}
	return s
}

// TestShutdownWithoutStart and twice: the lifecycle contract.
func TestShutdownWithoutStartAndTwice(t *testing.T) {
	f := NewFactory()
	set := receivertest.NewNopSettings(metadata.Type)
	r, err := f.CreateLogs(context.Background(), set, f.CreateDefaultConfig(), consumertest.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := r.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 {
		if err := r.Start(context.Background(), componenttest.NewNopHost()); err != nil {
			t.Fatal(err)
		}
		if err := r.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}

// fixtureChunk is a one-chunk recording a JDK 17 JVM wrote.
var fixtureChunk = filepath.Join("..", "..", "pkg", "jfr", "testdata", "g1-default-jdk17.jfr")

// fixtureWindows is the number of windows the fixture's chunk makes.
func fixtureWindows(t *testing.T, data []byte) int {
	t.Helper()
	c, err := jfr.NewChunk(data, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var b jvmevent.Batch
	s := jfrstream.New()
	if err := s.Chunk(c, &b); err != nil {
		t.Fatal(err)
	}
	s.Flush(&b, true)
	return len(b.Windows)
}

// TestHostileRepositoryFilesCountedAndReported: one repository folder
// holds a FIFO named like a chunk and a sparse chunk whose header claims
// 2 GiB, another a real chunk. The receiver sends every window of the real
// one, counts the two refusals by reason in its own telemetry, reports
// each through component status with the claim and the cap, and holds no
// chunk memory once the real chunk is read.
func TestHostileRepositoryFilesCountedAndReported(t *testing.T) {
	data, err := os.ReadFile(fixtureChunk)
	if err != nil {
		t.Fatal(err)
	}
	want := fixtureWindows(t, data)
	base := t.TempDir()
	hostile := filepath.Join(base, "2026_11_29_10_00_00_4301")
	honest := filepath.Join(base, "2026_11_29_10_00_00_4302")
	for _, d := range []string{hostile, honest} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := unix.Mkfifo(filepath.Join(hostile, "a.jfr"), 0o644); err != nil {
		t.Fatal(err)
	}
	sparse := append([]byte(nil), data...)
	binary.BigEndian.PutUint64(sparse[8:], 2<<30)
	if err := os.WriteFile(filepath.Join(hostile, "b.jfr"), sparse, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(filepath.Join(hostile, "b.jfr"), 2<<30); err != nil {
		t.Fatal(err)
	}
	final := append([]byte(nil), data...)
	binary.BigEndian.PutUint16(final[66:], binary.BigEndian.Uint16(final[66:])|2) // the JVM's last chunk
	if err := os.WriteFile(filepath.Join(honest, "a.jfr"), final, 0o644); err != nil {
		t.Fatal(err)
	}

	cfg := createDefaultConfig().(*Config)
	cfg.PollInterval = 50 * time.Millisecond
	cfg.Repositories.Discover = false
	cfg.Repositories.Include = []string{filepath.Join(base, "2*_*")}
	// A FIFO where an -Xlog file is expected, counted by the xlog source.
	if err := unix.Mkfifo(filepath.Join(base, "gc.log"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg.XLog.Include = []string{filepath.Join(base, "*.log")}
	tel := componenttest.NewTelemetry()
	defer tel.Shutdown(context.Background())
	logs := new(consumertest.LogsSink)
	r, err := NewFactory().CreateLogs(context.Background(), metadatatest.NewSettings(tel), cfg, logs)
	if err != nil {
		t.Fatal(err)
	}
	host := &statusHost{Host: componenttest.NewNopHost()}
	if err := r.Start(context.Background(), host); err != nil {
		t.Fatal(err)
	}
	reported := func() error { return errors.Join(host.errors()...) }
	for deadline := time.Now().Add(30 * time.Second); logs.LogRecordCount() < want || !strings.Contains(fmt.Sprint(reported()), "chunk claims") || !strings.Contains(fmt.Sprint(reported()), "gc.log"); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d windows; reported %v", logs.LogRecordCount(), want, reported())
		}
	}
	if err := r.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := logs.LogRecordCount(); n != want {
		t.Errorf("%d windows, the real chunk has %d", n, want)
	}
	msg := reported().Error()
	for _, s := range []string{"a.jfr refused: not a regular file", "chunk claims 2147483648 bytes, limit is 67108864", "repositories::max_chunk_size_mib"} {
		if !strings.Contains(msg, s) {
			t.Errorf("status does not say %q: %s", s, msg)
		}
	}
	refused := func(source, r string) attribute.Set {
		return attribute.NewSet(attribute.String("source", source), attribute.String("reason", r))
	}
	metadatatest.AssertEqualReceiverJfrRefused(t, tel, []metricdata.DataPoint[int64]{
		{Value: 1, Attributes: refused("repository", "not_regular")},
		{Value: 1, Attributes: refused("repository", "too_large")},
		{Value: 1, Attributes: refused("xlog", "not_regular")},
	}, metricdatatest.IgnoreTimestamp())
	metadatatest.AssertEqualReceiverJfrRepositoryMemoryHeld(t, tel, []metricdata.DataPoint[int64]{{Value: 0}}, metricdatatest.IgnoreTimestamp())
}

// startBoth creates the receiver's logs and metrics faces with cfg and set,
// feeding two sinks, and starts them on host; shutdown (safe to call
// again, and called when the test ends) shuts both down, failing the test
// on an error.
func startBoth(t *testing.T, cfg *Config, set receiver.Settings, host component.Host) (logs *consumertest.LogsSink, metrics *consumertest.MetricsSink, shutdown func()) {
	t.Helper()
	logs, metrics = new(consumertest.LogsSink), new(consumertest.MetricsSink)
	f := NewFactory()
	lr, err := f.CreateLogs(context.Background(), set, cfg, logs)
	if err != nil {
		t.Fatal(err)
	}
	mr, err := f.CreateMetrics(context.Background(), set, cfg, metrics)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []component.Component{lr, mr} {
		if err := c.Start(context.Background(), host); err != nil {
			t.Fatal(err)
		}
	}
	var once sync.Once
	shutdown = func() {
		once.Do(func() {
			for _, c := range []component.Component{lr, mr} {
				if err := c.Shutdown(context.Background()); err != nil {
					t.Errorf("shutdown: %v", err)
				}
			}
		})
	}
	t.Cleanup(shutdown)
	return logs, metrics, shutdown
}
