package jfr_test

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/otelcol-ai/otelcol-ai/pkg/jfr"
	"github.com/otelcol-ai/otelcol-ai/pkg/jfr/internal/jdktest"
	"github.com/otelcol-ai/otelcol-ai/pkg/jfr/jfrprint"
)

// The event types whose values are compared with `jfr print --json`, field
// by field (the JSON text must be identical).
var oracleTypes = []string{
	"jdk.GarbageCollection", "jdk.GCPhasePause", "jdk.GCPhasePauseLevel1",
	"jdk.SafepointBegin", "jdk.SafepointEnd", "jdk.ExecuteVMOperation",
	"jdk.GCHeapSummary", "jdk.DirectBufferStatistics",
	"jdk.NativeMemoryUsage", "jdk.NativeMemoryUsageTotal", "jdk.GCHeapMemoryUsage",
}

type oracleCase struct {
	name      string
	major     int
	settings  string
	flags     []string
	mustHave  []string // event types the recording must contain
	fullPrint bool     // also compare the JSON of every event in the file
	rotate    bool     // several chunks: later ones are converted with the first's clock
	env       []string // the JVM's extra environment
}

var oracleCases = []oracleCase{
	{name: "g1-default-17", major: 17, settings: "default", flags: []string{"-XX:+UseG1GC"}, mustHave: []string{"jdk.GarbageCollection", "jdk.SafepointEnd", "jdk.GCHeapSummary"}},
	{name: "g1-profile-17", major: 17, settings: "profile", flags: []string{"-XX:+UseG1GC"}, mustHave: []string{"jdk.ExecuteVMOperation", "jdk.SafepointBegin", "jdk.ExecutionSample"}},
	{name: "parallel-17", major: 17, settings: "default", flags: []string{"-XX:+UseParallelGC"}, mustHave: []string{"jdk.GarbageCollection"}},
	{name: "serial-17", major: 17, settings: "default", flags: []string{"-XX:+UseSerialGC"}, mustHave: []string{"jdk.GarbageCollection"}},
	{name: "zgc-17", major: 17, settings: "default", flags: []string{"-XX:+UseZGC"}, mustHave: []string{"jdk.GarbageCollection"}},
	{name: "shenandoah-17", major: 17, settings: "default", flags: []string{"-XX:+UseShenandoahGC"}, mustHave: []string{"jdk.GarbageCollection"}},
	{name: "g1-profile-nmt-25", major: 25, settings: "profile", flags: []string{"-XX:+UseG1GC", "-XX:NativeMemoryTracking=summary"}, mustHave: []string{"jdk.NativeMemoryUsage", "jdk.NativeMemoryUsageTotal", "jdk.GarbageCollection"}, fullPrint: true},
	{name: "zgc-generational-25", major: 25, settings: "default", flags: []string{"-XX:+UseZGC"}, mustHave: []string{"jdk.GarbageCollection", "jdk.GCHeapMemoryUsage"}},
	{name: "shenandoah-25", major: 25, settings: "default", flags: []string{"-XX:+UseShenandoahGC"}, mustHave: []string{"jdk.GarbageCollection"}},
	{name: "shenandoah-generational-25", major: 25, settings: "default", flags: []string{"-XX:+UseShenandoahGC", "-XX:ShenandoahGCMode=generational"}, mustHave: []string{"jdk.GarbageCollection"}},
	{name: "parallel-profile-25", major: 25, settings: "profile", flags: []string{"-XX:+UseParallelGC"}, mustHave: []string{"jdk.GarbageCollection", "jdk.ExecuteVMOperation"}},
	{name: "g1-profile-multichunk-25", major: 25, settings: "profile", flags: []string{"-XX:+UseG1GC"}, mustHave: []string{"jdk.GarbageCollection", "jdk.ExecutionSample"}, fullPrint: true, rotate: true},
	// A zone in daylight saving time for half the year, either half: JDK 25
	// prints times at gmtOffset + dst.
	{name: "g1-zone-dst-25", major: 25, settings: "default", flags: []string{"-XX:+UseG1GC"}, mustHave: []string{"jdk.GarbageCollection"}, env: []string{"TZ=" + dstZone()}},
}

// dstZone returns a zone in daylight saving time today: Sydney from
// November to March, Berlin from April to October.
func dstZone() string {
	if m := time.Now().UTC().Month(); m >= time.November || m <= time.March {
		return "Australia/Sydney"
	}
	return "Europe/Berlin"
}

func (oc oracleCase) spec(j jdktest.JDK) jdktest.Spec {
	return jdktest.Spec{Name: oc.name, JDK: j, Settings: oc.settings, Millis: 1500, Flags: oc.flags, Rotate: oc.rotate, Env: oc.env}
}

// TestJDKOracle records with every collector on the installed JDKs and
// compares pkg/jfr with the JDK's own tool: every event type's count with
// `jfr summary`, and the values of the GC, safepoint, VM-operation, heap,
// buffer and NMT events with `jfr print --json`. The JSON must be identical,
// so every time (startTime, duration, any Timestamp or Timespan field) is
// compared to the nanosecond, in multi-chunk files too.
func TestJDKOracle(t *testing.T) {
	for _, oc := range oracleCases {
		t.Run(oc.name, func(t *testing.T) {
			t.Parallel()
			j := jdktest.Find(t, oc.major)
			path := jdktest.Record(t, oc.spec(j))
			r, err := jfr.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			if oc.rotate {
				checkSeveralClocks(t, r)
			}
			if oc.env != nil {
				c, err := r.Chunk(0)
				if err != nil {
					t.Fatal(err)
				}
				if c.Metadata.DST == 0 {
					t.Fatalf("recorded with %v: no daylight saving offset in the metadata (gmtOffset %d ms)", oc.env, c.Metadata.GMTOffset)
				}
			}

			summary := jdktest.Tool(t, j, "summary", path)
			got := countAll(t, r)
			compareWithSummary(t, got, summary)
			for _, name := range oc.mustHave {
				if got[name] == 0 {
					t.Errorf("recording has no %s events", name)
				}
			}
			if oc.major >= 21 { // JDK 21+ orders the table deterministically
				s, err := jfrprint.Summarize(r)
				if err != nil {
					t.Fatal(err)
				}
				var b bytes.Buffer
				s.WriteTo(&b)
				if diff := firstDiff(b.Bytes(), summary); diff != "" {
					t.Errorf("jfrstat summary differs from jfr summary: %s", diff)
				}
			}

			want := jdktest.Tool(t, j, "print", "--json", "--events", strings.Join(oracleTypes, ","), path)
			accept := map[string]bool{}
			for _, n := range oracleTypes {
				accept[n] = true
			}
			var b bytes.Buffer
			p := &jfrprint.JSON{StackDepth: 5, Accept: func(t *jfr.Type) bool { return accept[t.Name] }}
			if err := p.Print(&b, r); err != nil {
				t.Fatal(err)
			}
			if diff := firstDiff(b.Bytes(), want); diff != "" {
				t.Errorf("JSON differs from jfr print --json: %s", diff)
			}
			if oc.fullPrint {
				want := jdktest.Tool(t, j, "print", "--json", path)
				b.Reset()
				if err := (&jfrprint.JSON{StackDepth: 5}).Print(&b, r); err != nil {
					t.Fatal(err)
				}
				if diff := firstDiff(b.Bytes(), want); diff != "" {
					t.Errorf("JSON of all events differs from jfr print --json: %s", diff)
				}
			}
		})
	}
}

// checkSeveralClocks makes sure a multi-chunk recording tests the clock
// choice: it has several chunks, and converting a later chunk's events with
// that chunk's own header gives other times than the first chunk's clock,
// which is what the JDK uses (and jfr print's JSON then tells which is right).
// Not a failure when they agree: the header's startNanos and startTicks are
// sampled a few ns apart, and now and then the drift rounds to zero.
func checkSeveralClocks(t *testing.T, r *jfr.Reader) {
	t.Helper()
	chunks := r.Chunks()
	if len(chunks) < 2 {
		t.Fatalf("%d chunks, want several", len(chunks))
	}
	first := chunks[0].Header.Clock()
	var drift int64
	for _, ci := range chunks[1:] {
		own := ci.Header.Clock()
		if d := own.EpochNanos(ci.Header.StartTicks) - first.EpochNanos(ci.Header.StartTicks); d != 0 {
			drift = d
		}
	}
	if drift == 0 { // sampling jitter makes this rare; TestReaderClock covers the choice without it
		t.Logf("%d chunks, all on the first chunk's clock to the ns: this run does not tell the clocks apart", len(chunks))
		return
	}
	t.Logf("%d chunks; a later chunk's own header is %d ns off the first chunk's clock", len(chunks), drift)
}

// firstDiff describes the first differing line, or returns "".
func firstDiff(got, want []byte) string {
	if bytes.Equal(got, want) {
		return ""
	}
	g, w := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
	for i := 0; i < len(g) && i < len(w); i++ {
		if g[i] != w[i] {
			return "line " + itoa(i+1) + ":\n got: " + g[i] + "\nwant: " + w[i]
		}
	}
	return "lengths differ: " + itoa(len(g)) + " vs " + itoa(len(w)) + " lines"
}

func itoa(i int) string { return strconv.Itoa(i) }

// TestJDKOracleMultiChunk reads a file in which the JVM started new chunks
// mid-recording, sequentially and in parallel, and compares with jfr summary.
func TestJDKOracleMultiChunk(t *testing.T) {
	t.Parallel()
	j := jdktest.Find(t, 17)
	path := jdktest.Record(t, jdktest.Spec{Name: "multichunk-17", JDK: j, Settings: "default", Millis: 1500, Rotate: true})
	r, err := jfr.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if n := len(r.Chunks()); n < 2 {
		t.Fatalf("%d chunks, want several", n)
	}
	got := countAll(t, r)
	compareWithSummary(t, got, jdktest.Tool(t, j, "summary", path))
	var mu sync.Mutex
	parallel := map[string]int64{}
	err = r.ForEachChunk(0, func(c *jfr.Chunk) error {
		local := map[string]int64{}
		er := c.Events()
		for er.Next() {
			ev := er.Event()
			local[ev.Type.Name]++
		}
		mu.Lock()
		for k, v := range local {
			parallel[k] += v
		}
		mu.Unlock()
		return er.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range parallel {
		if got[k] != v {
			t.Errorf("%s: %d decoded in parallel, %d sequentially", k, v, got[k])
		}
	}

	// Cut the file in the middle of its last chunk: the complete chunks
	// still read as the JDK reads them, and the cut one is a typed error
	// that names it.
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	last := r.Chunks()[len(r.Chunks())-1]
	cut := data[:last.Offset+last.Header.Size/2]
	whole := filepath.Join(t.TempDir(), "complete-chunks.jfr")
	if err := os.WriteFile(whole, data[:last.Offset], 0o644); err != nil {
		t.Fatal(err)
	}
	rc, err := jfr.NewReader(bytes.NewReader(cut), int64(len(cut)))
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]int64{}
	var cutErr error
	for i := range rc.Chunks() {
		c, err := rc.Chunk(i)
		if err != nil {
			cutErr = err
			break
		}
		stats, err := c.Stats()
		if err != nil {
			t.Fatal(err)
		}
		for _, st := range stats {
			switch {
			case st.ID == 0:
				counts["jdk.Metadata"] += st.Count
			case st.ID == 1:
				counts["checkpoint"] += st.Count
			case st.Type != nil:
				counts[st.Type.Name] += st.Count
			}
		}
	}
	var fe *jfr.FormatError
	if !errors.Is(cutErr, jfr.ErrTruncated) || !errors.As(cutErr, &fe) || fe.Chunk != last.Index {
		t.Fatalf("cut chunk: err %v, want ErrTruncated naming chunk %d", cutErr, last.Index)
	}
	compareWithSummary(t, counts, jdktest.Tool(t, j, "summary", whole))
}

// TestJDKOracleLiveRepository follows the chunk file in a running JVM's
// disk repository with LiveChunk, while the JVM writes it, until the chunk
// is finished; every event must arrive exactly once (counts equal jfr
// summary of the finished chunk), and some must arrive while the JVM runs.
func TestJDKOracleLiveRepository(t *testing.T) {
	t.Parallel()
	j := jdktest.Find(t, 17)
	repo := t.TempDir()
	spec := jdktest.Spec{Name: "live", JDK: j, Settings: "default", Millis: 4000, Flags: []string{
		"-XX:FlightRecorderOptions:repository=" + repo}}
	args, err := jdktest.JVMFlags(spec, filepath.Join(repo, "dump.jfr"), "flush-interval=1s")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(j.Java(), args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	exited := jdktest.Start(t, cmd)
	running := true

	deadline := time.Now().Add(60 * time.Second)
	var file string
	for file == "" {
		if time.Now().After(deadline) {
			t.Fatalf("no chunk file appeared in %s\n%s", repo, out.Bytes())
		}
		ms, _ := filepath.Glob(filepath.Join(repo, "*", "*.jfr"))
		sort.Strings(ms)
		if len(ms) > 0 {
			file = ms[0]
		}
		time.Sleep(50 * time.Millisecond)
	}
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()

	live := jfr.NewLiveChunk(f, 0)
	counts := map[string]int64{}
	var whileRunning int64
	segments := 0
	for !live.Finished() {
		if time.Now().After(deadline) {
			t.Fatalf("chunk not finished before the deadline; %d segments read", segments)
		}
		if running {
			select {
			case err := <-exited:
				running = false
				if err != nil {
					t.Fatalf("JVM failed: %v\n%s", err, out.Bytes())
				}
			default:
			}
		}
		seg, err := live.Poll()
		if err != nil {
			if !errorsIs(err, jfr.ErrNotFlushed) {
				t.Fatal(err)
			}
			time.Sleep(100 * time.Millisecond)
			continue
		}
		if !seg.Empty() {
			segments++
		}
		er := seg.Events()
		for er.Next() {
			ev := er.Event()
			counts[ev.Type.Name]++
			if running {
				whileRunning++
			}
		}
		if er.Err() != nil {
			t.Fatal(er.Err())
		}
		time.Sleep(200 * time.Millisecond)
	}
	if whileRunning == 0 || segments < 2 {
		t.Errorf("%d events in %d segments read while the JVM ran; want some events in at least 2 segments", whileRunning, segments)
	}
	// The JVM removes its repository at exit; the chunk's bytes as read
	// live are what the JDK's tool checks.
	finished := filepath.Join(t.TempDir(), "finished.jfr")
	if err := os.WriteFile(finished, live.Chunk().Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	want, err := jdktest.ParseSummary(jdktest.Tool(t, j, "summary", finished))
	if err != nil {
		t.Fatal(err)
	}
	for name, w := range want {
		if name == "jdk.Metadata" || name == "jdk.Checkpoint" || name == "jdk.CheckPoint" {
			continue
		}
		if counts[name] != w.Count {
			t.Errorf("%s: %d events read live, jfr summary of the finished chunk says %d", name, counts[name], w.Count)
		}
	}
	t.Logf("%d segments, %d events while the JVM ran", segments, whileRunning)
}
