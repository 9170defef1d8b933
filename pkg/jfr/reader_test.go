package jfr_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/otelcol-ai/otelcol-ai/pkg/jfr"
	"github.com/otelcol-ai/otelcol-ai/pkg/jfr/internal/jdktest"
)

func TestMain(m *testing.M) { jdktest.Main(m) }

// Fixtures: real recordings with the JDK's own summary and JSON output
// (see testdata/make-fixtures.sh).
var fixtures = []string{"g1-default-jdk17", "zgc-default-nmt-jdk25"}

func readFixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func openBytes(t testing.TB, b []byte) *jfr.Reader {
	t.Helper()
	r, err := jfr.NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// countAll counts the records of every type the way `jfr summary` names
// them, using Chunk.Stats, and cross-checks with the generic reader.
func countAll(t *testing.T, r *jfr.Reader) map[string]int64 {
	t.Helper()
	got := map[string]int64{}
	for i := range r.Chunks() {
		c, err := r.Chunk(i)
		if err != nil {
			t.Fatal(err)
		}
		stats, err := c.Stats()
		if err != nil {
			t.Fatal(err)
		}
		perType := map[string]int64{}
		for _, s := range stats {
			switch {
			case s.ID == 0:
				got["jdk.Metadata"] += s.Count
			case s.ID == 1:
				got["checkpoint"] += s.Count
			case s.Type != nil && s.Type.IsEvent():
				got[s.Type.Name] += s.Count
				perType[s.Type.Name] += s.Count
			default:
				got[fmt.Sprintf("%d (missing event metadata)", s.ID)] += s.Count
			}
		}
		decoded := map[string]int64{}
		er := c.Events()
		for er.Next() {
			ev := er.Event()
			decoded[ev.Type.Name]++
		}
		if err := er.Err(); err != nil {
			t.Fatalf("chunk %d: %v", i, err)
		}
		for name, n := range perType {
			if decoded[name] != n {
				t.Errorf("chunk %d %s: Events decoded %d, Stats counted %d", i, name, decoded[name], n)
			}
		}
	}
	return got
}

// compareWithSummary asserts that every row of a JDK summary matches.
func compareWithSummary(t *testing.T, got map[string]int64, summary []byte) {
	t.Helper()
	want, err := jdktest.ParseSummary(summary)
	if err != nil {
		t.Fatal(err)
	}
	for name, w := range want {
		key := name
		if name == "jdk.Checkpoint" || name == "jdk.CheckPoint" {
			key = "checkpoint"
		}
		if got[key] != w.Count {
			t.Errorf("%s: count %d, jfr summary says %d", name, got[key], w.Count)
		}
	}
	for name, n := range got {
		if _, ok := want[name]; !ok && name != "checkpoint" && n > 0 {
			t.Errorf("%s: %d records not in jfr summary", name, n)
		}
	}
}

func TestFixtureCountsMatchJDKSummary(t *testing.T) {
	for _, name := range fixtures {
		t.Run(name, func(t *testing.T) {
			r := openBytes(t, readFixture(t, name+".jfr"))
			compareWithSummary(t, countAll(t, r), readFixture(t, name+".summary.txt"))
		})
	}
}

// oracleEvents reads `jfr print --json` output.
func oracleEvents(t testing.TB, b []byte) []map[string]any {
	t.Helper()
	var doc struct {
		Recording struct {
			Events []struct {
				Type   string         `json:"type"`
				Values map[string]any `json:"values"`
			} `json:"events"`
		} `json:"recording"`
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	if err := d.Decode(&doc); err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for _, e := range doc.Recording.Events {
		e.Values["type"] = e.Type
		out = append(out, e.Values)
	}
	return out
}

// parseJavaDuration reads the "PT…S" durations jfr print writes for spans
// under an hour.
func parseJavaDuration(t testing.TB, s string) int64 {
	t.Helper()
	d, err := time.ParseDuration(strings.ToLower(strings.TrimPrefix(s, "PT")))
	if err != nil {
		t.Fatalf("duration %q: %v", s, err)
	}
	return int64(d)
}

func parseJavaTime(t testing.TB, s string) int64 {
	t.Helper()
	ts, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		ts, err = time.Parse("2006-01-02T15:04Z07:00", s)
	}
	if err != nil {
		t.Fatalf("time %q: %v", s, err)
	}
	return ts.UnixNano()
}

// TestGarbageCollectionValues checks the generic reader's values against
// the JDK's JSON, independently of the jfrprint formatter.
func TestGarbageCollectionValues(t *testing.T) {
	for _, name := range fixtures {
		t.Run(name, func(t *testing.T) {
			var want []map[string]any
			for _, e := range oracleEvents(t, readFixture(t, name+".oracle.json")) {
				if e["type"] == "jdk.GarbageCollection" {
					want = append(want, e)
				}
			}
			if len(want) == 0 {
				t.Fatal("fixture has no jdk.GarbageCollection events")
			}
			byID := map[int64]jfr.Event{}
			r := openBytes(t, readFixture(t, name+".jfr"))
			c, err := r.Chunk(0)
			if err != nil {
				t.Fatal(err)
			}
			er := c.AllEvents()
			for er.Next() {
				if ev := er.Event(); ev.Type.Name == "jdk.GarbageCollection" {
					byID[ev.Value("gcId").Int()] = *ev
				}
			}
			if len(byID) != len(want) {
				t.Fatalf("%d GC events, JDK printed %d", len(byID), len(want))
			}
			for _, w := range want {
				id, _ := w["gcId"].(json.Number).Int64()
				ev, ok := byID[id]
				if !ok {
					t.Fatalf("gcId %d missing", id)
				}
				checks := []struct {
					field string
					got   any
					want  any
				}{
					{"name", ev.Value("name").Str(), w["name"]},
					{"cause", ev.Value("cause").Str(), w["cause"]},
					{"startTime", ev.StartNanos(), parseJavaTime(t, w["startTime"].(string))},
					{"duration", ev.DurationNanos(), parseJavaDuration(t, w["duration"].(string))},
					{"sumOfPauses", mustTime(ev, "sumOfPauses"), parseJavaDuration(t, w["sumOfPauses"].(string))},
					{"longestPause", mustTime(ev, "longestPause"), parseJavaDuration(t, w["longestPause"].(string))},
				}
				for _, ck := range checks {
					if ck.got != ck.want {
						t.Errorf("gcId %d %s = %v, JDK says %v", id, ck.field, ck.got, ck.want)
					}
				}
			}
		})
	}
}

func mustTime(ev jfr.Event, field string) int64 {
	ns, ok := ev.Time(field)
	if !ok {
		return -1
	}
	return ns
}

// TestScannerAgreesWithEvents reads the same fields with both readers.
func TestScannerAgreesWithEvents(t *testing.T) {
	type row struct {
		typ                string
		start, dur, id     int64
		name, thread       string
		committed, reserve uint64
	}
	for _, name := range fixtures {
		t.Run(name, func(t *testing.T) {
			r := openBytes(t, readFixture(t, name+".jfr"))
			c, err := r.Chunk(0)
			if err != nil {
				t.Fatal(err)
			}
			var generic []row
			er := c.Events()
			for er.Next() {
				ev := er.Event()
				switch ev.Type.Name {
				case "jdk.GarbageCollection":
					generic = append(generic, row{typ: "gc", start: ev.StartNanos(), dur: ev.DurationNanos(), id: ev.Value("gcId").Int(), name: ev.Value("name").Str()})
				case "jdk.ExecuteVMOperation":
					generic = append(generic, row{typ: "vmop", start: ev.StartNanos(), dur: ev.DurationNanos(), id: ev.Value("safepointId").Int(), name: ev.Value("operation").Str(), thread: ev.Value("eventThread.osName").Str()})
				case "jdk.GCHeapSummary":
					generic = append(generic, row{typ: "heap", start: ev.StartNanos(), id: ev.Value("gcId").Int(), name: ev.Value("when").Str(),
						committed: ev.Value("heapSpace.committedSize").Uint(), reserve: ev.Value("heapSpace.reservedSize").Uint()})
				}
			}
			if er.Err() != nil {
				t.Fatal(er.Err())
			}
			sel := jfr.NewSelection()
			gc := sel.Add("jdk.GarbageCollection", "startTime", "duration", "gcId", "name")
			vmop := sel.Add("jdk.ExecuteVMOperation", "startTime", "duration", "safepointId", "operation", "eventThread.osName", "noSuchField")
			heap := sel.Add("jdk.GCHeapSummary", "startTime", "gcId", "when", "heapSpace.committedSize", "heapSpace.reservedSize")
			sel.Add("jdk.NoSuchEvent", "startTime")
			var fast []row
			sc := c.Scan(sel)
			for sc.Next() {
				rec := sc.Record()
				start, _ := rec.Nanos(0)
				switch rec.Selected {
				case gc:
					dur, _ := rec.Nanos(1)
					fast = append(fast, row{typ: "gc", start: start, dur: dur, id: rec.Int(2), name: rec.Str(3)})
				case vmop:
					dur, _ := rec.Nanos(1)
					if rec.Has(5) || !rec.Value(5).IsNull() {
						t.Fatalf("noSuchField: Has=%v, want false and null", rec.Has(5))
					}
					fast = append(fast, row{typ: "vmop", start: start, dur: dur, id: rec.Int(2), name: rec.Str(3), thread: rec.Str(4)})
				case heap:
					fast = append(fast, row{typ: "heap", start: start, id: rec.Int(1), name: rec.Str(2), committed: rec.Uint(3), reserve: rec.Uint(4)})
				default:
					t.Fatalf("unexpected selection %d", rec.Selected)
				}
			}
			if sc.Err() != nil {
				t.Fatal(sc.Err())
			}
			if len(fast) != len(generic) || len(fast) == 0 {
				t.Fatalf("scanner read %d records, generic reader %d", len(fast), len(generic))
			}
			for i := range fast {
				if fast[i] != generic[i] {
					t.Fatalf("record %d: scanner %+v, generic %+v", i, fast[i], generic[i])
				}
			}
		})
	}
}

// Reading every event, every field decoded and every reference resolved,
// allocates per reader and per constant (decoded once per chunk), never
// per event: string fields are left in the chunk until read.
func TestEventsAllocateNothingPerEvent(t *testing.T) {
	for _, name := range fixtures {
		r := openBytes(t, readFixture(t, name+".jfr"))
		c, err := r.Chunk(0)
		if err != nil {
			t.Fatal(err)
		}
		read := func() int {
			n := 0
			er := c.Events()
			for er.Next() {
				for _, v := range er.Event().Fields {
					_ = v.Kind()
				}
				n++
			}
			if er.Err() != nil {
				t.Fatal(er.Err())
			}
			return n
		}
		events := read() // decodes the constants once
		allocs := testing.AllocsPerRun(5, func() { read() })
		// The reader, its decoder and its value and struct blocks.
		if allocs > 6 {
			t.Errorf("%s: reading %d events: %.0f allocations, want at most 6 (per reader, none per event)", name, events, allocs)
		}
	}
}

func TestScannerSkipsWithoutAllocating(t *testing.T) {
	r := openBytes(t, readFixture(t, fixtures[0]+".jfr"))
	c, err := r.Chunk(0)
	if err != nil {
		t.Fatal(err)
	}
	sel := jfr.NewSelection()
	sel.Add("jdk.NoSuchEvent", "startTime")
	records := 0
	st, _ := c.Stats()
	for _, s := range st {
		records += int(s.Count)
	}
	allocs := testing.AllocsPerRun(5, func() {
		sc := c.Scan(sel)
		for sc.Next() {
		}
	})
	// Building the scanner's plan allocates a few objects per chunk; the
	// thousands of skipped records must add nothing.
	if allocs > 4 {
		t.Errorf("scanning %d skipped records: %.0f allocations, want at most 4 (per chunk, none per record)", records, allocs)
	}
}

func TestMultiChunkFile(t *testing.T) {
	a, b := readFixture(t, fixtures[0]+".jfr"), readFixture(t, fixtures[1]+".jfr")
	r := openBytes(t, append(append([]byte{}, a...), b...))
	if n := len(r.Chunks()); n != 2 {
		t.Fatalf("%d chunks, want 2", n)
	}
	if off := r.Chunks()[1].Offset; off != int64(len(a)) {
		t.Errorf("second chunk at %d, want %d", off, len(a))
	}
	got := countAll(t, r)
	want := countAll(t, openBytes(t, a))
	for k, v := range countAll(t, openBytes(t, b)) {
		want[k] += v
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %d in the two-chunk file, %d in the parts", k, got[k], v)
		}
	}
	var mu sync.Mutex
	perChunk := map[int]int{}
	err := r.ForEachChunk(2, func(c *jfr.Chunk) error {
		n := 0
		er := c.Events()
		for er.Next() {
			n++
		}
		mu.Lock()
		perChunk[c.Index] = n
		mu.Unlock()
		return er.Err()
	})
	if err != nil || len(perChunk) != 2 || perChunk[0] == 0 || perChunk[1] == 0 {
		t.Fatalf("ForEachChunk: err %v, events per chunk %v", err, perChunk)
	}
}

// TestReaderClock checks the time base of a file's later chunks: a Reader
// converts them with the first chunk's clock, as the JDK's reader does,
// while the same chunk parsed alone uses its own header. The second chunk
// here is the first one again with a header whose clock starts 1234 ns
// later, so the two conversions differ by exactly that.
func TestReaderClock(t *testing.T) {
	a := readFixture(t, fixtures[0]+".jfr")
	b := append([]byte{}, a...)
	h, err := jfr.ParseHeader(b)
	if err != nil {
		t.Fatal(err)
	}
	const shift = 1234
	setUint64(b[32:], uint64(h.StartNanos+shift))
	r := openBytes(t, append(append([]byte{}, a...), b...))
	second, err := r.Chunk(1)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := second.Clock(), h.Clock(); got != want {
		t.Errorf("chunk 1 of the file converts with %+v, want the first chunk's %+v", got, want)
	}
	alone, err := jfr.NewChunk(b, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := alone.Clock().StartNanos; got != h.StartNanos+shift {
		t.Errorf("the chunk parsed alone starts its clock at %d, want its own header's %d", got, h.StartNanos+shift)
	}
	inFile, single := second.Events(), alone.Events()
	n := 0
	for inFile.Next() && single.Next() {
		e, s := inFile.Event(), single.Event()
		if d := s.StartNanos() - e.StartNanos(); d != shift {
			t.Fatalf("event %d (%s): alone %d, in the file %d: %d ns apart, want %d", n, e.Type.Name, s.StartNanos(), e.StartNanos(), d, shift)
		}
		if e.DurationNanos() != s.DurationNanos() {
			t.Fatalf("event %d (%s): duration %d in the file, %d alone", n, e.Type.Name, e.DurationNanos(), s.DurationNanos())
		}
		n++
	}
	if inFile.Err() != nil || single.Err() != nil || n == 0 {
		t.Fatalf("%d events compared; errors %v, %v", n, inFile.Err(), single.Err())
	}

	// The Scanner (the jfr receiver's reader) converts through the same clock.
	scanStarts := func(c *jfr.Chunk) []int64 {
		sel := jfr.NewSelection()
		sel.Add("jdk.GarbageCollection", "startTime")
		var out []int64
		sc := c.Scan(sel)
		for sc.Next() {
			ns, _ := sc.Record().Nanos(0)
			out = append(out, ns)
		}
		if sc.Err() != nil {
			t.Fatal(sc.Err())
		}
		return out
	}
	a1, a2 := scanStarts(second), scanStarts(alone)
	if len(a1) == 0 || len(a1) != len(a2) {
		t.Fatalf("scanned %d and %d GCs", len(a1), len(a2))
	}
	for i := range a1 {
		if a2[i]-a1[i] != shift {
			t.Errorf("GC %d: scanned at %d in the file, %d alone; want %d ns apart", i, a1[i], a2[i], shift)
		}
	}
}

func TestDamagedInput(t *testing.T) {
	good := readFixture(t, fixtures[0]+".jfr")
	two := append(append([]byte{}, good...), good...)
	tests := []struct {
		name    string
		in      []byte
		chunk   int // chunk index the error must name
		wantErr error
	}{
		{"empty file", nil, 0, jfr.ErrTruncated},
		{"wrong magic", append([]byte("FLX\x00"), good[4:]...), 0, jfr.ErrMagic},
		{"header cut", good[:40], 0, jfr.ErrTruncated},
		{"cut after the header", good[:100], 0, jfr.ErrTruncated},
		{"cut mid-chunk", good[:len(good)/2], 0, jfr.ErrTruncated},
		{"second chunk cut mid-chunk", two[:len(good)+len(good)/3], 1, jfr.ErrTruncated},
		{"trailing garbage after last chunk", append(append([]byte{}, good...), "junk"...), 1, jfr.ErrTruncated},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := readEverything(tt.in)
			var fe *jfr.FormatError
			if !errors.Is(err, tt.wantErr) || !errors.As(err, &fe) {
				t.Fatalf("err = %v, want a FormatError wrapping %v", err, tt.wantErr)
			}
			if fe.Chunk != tt.chunk {
				t.Errorf("error names chunk %d, want %d (%v)", fe.Chunk, tt.chunk, err)
			}
			if !strings.Contains(err.Error(), "offset") {
				t.Errorf("error %q does not say where", err)
			}
		})
	}
}

// readEverything opens b, loads every chunk, decodes every event and
// resolves every top-level value; it returns the first error.
func readEverything(b []byte) error {
	r, err := jfr.NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		return err
	}
	for i := range r.Chunks() {
		c, err := r.Chunk(i)
		if err != nil {
			return err
		}
		er := c.Events()
		for er.Next() {
			ev := er.Event()
			for _, v := range ev.Fields {
				_ = v.String()
			}
		}
		if er.Err() != nil {
			return er.Err()
		}
	}
	return nil
}

// TestBestEffort damages one record in the middle of a chunk: the events
// before it are delivered, then an error that names the record's offset.
func TestBestEffort(t *testing.T) {
	good := readFixture(t, fixtures[0]+".jfr")
	r := openBytes(t, good)
	c, err := r.Chunk(0)
	if err != nil {
		t.Fatal(err)
	}
	var offsets []int64
	er := c.Events()
	for er.Next() {
		offsets = append(offsets, er.Event().Offset)
	}
	victim := len(offsets) / 2
	bad := append([]byte{}, good...)
	// A record size of 2^35: far past the chunk end.
	copy(bad[offsets[victim]:], []byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x01})
	c2, err := openBytes(t, bad).Chunk(0)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	er = c2.Events()
	for er.Next() {
		n++
	}
	var fe *jfr.FormatError
	if !errors.As(er.Err(), &fe) || !errors.Is(er.Err(), jfr.ErrCorrupt) {
		t.Fatalf("err = %v, want FormatError wrapping ErrCorrupt", er.Err())
	}
	if n != victim || fe.Offset != offsets[victim] {
		t.Errorf("delivered %d events then failed at %d; want %d events, failure at %d", n, fe.Offset, victim, offsets[victim])
	}
}

// TestRandomDamageNeverPanics flips bytes all over a real chunk.
func TestRandomDamageNeverPanics(t *testing.T) {
	good := readFixture(t, fixtures[1]+".jfr")
	rng := rand.New(rand.NewSource(1))
	for i := 0; i < 60; i++ {
		bad := append([]byte{}, good...)
		for k := 0; k < 1+i%8; k++ {
			bad[jfr.HeaderSize+rng.Intn(len(bad)-jfr.HeaderSize)] = byte(rng.Intn(256))
		}
		_ = readEverything(bad) // must return, not panic
	}
}

// growingFile serves a prefix of data that the test extends, standing in
// for a chunk file a JVM is writing.
type growingFile struct {
	mu   sync.Mutex
	data []byte
}

func (g *growingFile) ReadAt(p []byte, off int64) (int, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if off >= int64(len(g.data)) {
		return 0, errorsEOF
	}
	n := copy(p, g.data[off:])
	if n < len(p) {
		return n, errorsEOF
	}
	return n, nil
}

var errorsEOF = fmt.Errorf("growing file: %w", ioEOF)

func TestLiveChunkStates(t *testing.T) {
	full := readFixture(t, fixtures[0]+".jfr")
	g := &growingFile{}
	live := jfr.NewLiveChunk(g, 0)
	live.Retries, live.Backoff = 2, time.Microsecond

	if _, err := live.Poll(); !errors.Is(err, jfr.ErrNotFlushed) {
		t.Fatalf("empty file: err %v, want ErrNotFlushed", err)
	}
	// Header written, nothing flushed: metadata offset 0, state 1.
	hdr := append([]byte{}, full[:jfr.HeaderSize]...)
	setUint64(hdr[8:], jfr.HeaderSize)
	setUint64(hdr[16:], 0)
	setUint64(hdr[24:], 0)
	hdr[64] = 1
	g.data = hdr
	if _, err := live.Poll(); !errors.Is(err, jfr.ErrNotFlushed) {
		t.Fatalf("unflushed chunk: err %v, want ErrNotFlushed", err)
	}
	// Header being rewritten: 0xFF keeps us waiting.
	g.data[64] = jfr.StateUpdating
	if _, err := live.Poll(); !errors.Is(err, jfr.ErrNotFlushed) {
		t.Fatalf("state 0xFF: err %v, want ErrNotFlushed", err)
	}
	// The whole chunk flushed but still in progress (generation 2).
	g.data = append([]byte{}, full...)
	g.data[64] = 2
	seg, err := live.Poll()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	er := seg.Events()
	for er.Next() {
		n++
	}
	if er.Err() != nil {
		t.Fatal(er.Err())
	}
	r := openBytes(t, full)
	c, _ := r.Chunk(0)
	want := 0
	er = c.Events()
	for er.Next() {
		want++
	}
	if n != want || live.Finished() {
		t.Fatalf("first flush: %d events, finished=%v; want %d, false", n, live.Finished(), want)
	}
	// No growth: an empty segment. Then the JVM finishes the chunk.
	if seg, err := live.Poll(); err != nil || !seg.Empty() {
		t.Fatalf("no growth: segment %d..%d err %v, want empty", seg.From, seg.To, err)
	}
	g.data[64] = jfr.StateFinished
	if seg, err := live.Poll(); err != nil || !seg.Empty() || !live.Finished() {
		t.Fatalf("finished: segment %d..%d err %v finished %v", seg.From, seg.To, err, live.Finished())
	}
}

func setUint64(b []byte, v uint64) {
	for i := 7; i >= 0; i-- {
		b[i] = byte(v)
		v >>= 8
	}
}

func TestOpenFile(t *testing.T) {
	r, err := jfr.Open(filepath.Join("testdata", fixtures[1]+".jfr"))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ci := r.Chunks()[0]
	if ci.Header.Major != 2 || ci.Header.TicksPerSecond <= 0 || !ci.Header.Finished() {
		t.Errorf("header %+v: want a finished 2.x chunk", ci.Header)
	}
	c, err := r.Chunk(0)
	if err != nil {
		t.Fatal(err)
	}
	th := c.Metadata.TypeByName("java.lang.Thread")
	if th == nil || c.PoolSize("java.lang.Thread") == 0 {
		t.Fatal("no java.lang.Thread pool")
	}
	gc := c.Metadata.TypeByName("jdk.GarbageCollection")
	if gc == nil || !gc.IsEvent() || gc.Label() != "Garbage Collection" {
		t.Fatalf("jdk.GarbageCollection type %+v", gc)
	}
	f := gc.Fields[gc.FieldIndex("duration")]
	if f.Timespan != "TICKS" || f.Type.Name != "long" {
		t.Errorf("duration field: timespan %q type %s, want TICKS long", f.Timespan, f.Type.Name)
	}
	if _, err := jfr.Open(filepath.Join("testdata", "missing.jfr")); err == nil {
		t.Error("opening a missing file succeeded")
	}
	_ = strconv.Itoa
}

func TestForEachChunkStopsItsGoroutines(t *testing.T) {
	a := readFixture(t, fixtures[0]+".jfr")
	r := openBytes(t, append(append(append([]byte{}, a...), a...), a...))
	before := runtime.NumGoroutine()
	stop := errors.New("stop")
	for _, tc := range []struct {
		name string
		fn   func(*jfr.Chunk) error
		want error
	}{
		{"all chunks", func(*jfr.Chunk) error { return nil }, nil},
		{"error stops the rest", func(*jfr.Chunk) error { return stop }, stop},
	} {
		if err := r.ForEachChunk(4, tc.fn); !errors.Is(err, tc.want) {
			t.Errorf("%s: err %v, want %v", tc.name, err, tc.want)
		}
	}
	deadline := time.Now().Add(2 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		t.Errorf("%d goroutines after ForEachChunk, %d before", n, before)
	}
}

func TestLiveChunkRejectsAnnouncedBytesNotInFile(t *testing.T) {
	full := readFixture(t, fixtures[0]+".jfr")
	g := &growingFile{data: append([]byte{}, full...)}
	setUint64(g.data[8:], jfr.DefaultMaxChunkSize) // the most allowed, not present
	g.data[64] = 3
	live := jfr.NewLiveChunk(g, 0)
	if _, err := live.Poll(); !errors.Is(err, jfr.ErrNotFlushed) {
		t.Fatalf("err %v, want ErrNotFlushed", err)
	}
}
