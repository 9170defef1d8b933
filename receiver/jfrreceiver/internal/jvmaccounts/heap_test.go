package jvmaccounts

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/otelcol-ai/otelcol-ai/pkg/jfr/jfrtest"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/attach"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/leaktest"
)

// TestParseHeapInfo reads the GC.heap_info answers of JDK 17 and JDK 25
// JVMs (testdata/heapinfo, -Xms256m -Xmx1g: a heap reserved at
// [3 GiB, 4 GiB) whatever the collector) and hostile ones.
func TestParseHeapInfo(t *testing.T) {
	reserved := HeapPlace{Lo: 0xc0000000, Hi: 0x100000000}
	for _, gc := range []string{"g1", "parallel", "serial", "shenandoah", "z"} {
		for _, jdk := range []string{"jdk17", "jdk25"} {
			name := gc + "-" + jdk + ".txt"
			t.Run(name, func(t *testing.T) {
				data, err := os.ReadFile(filepath.Join("testdata", "heapinfo", name))
				if err != nil {
					t.Fatal(err)
				}
				got, err := ParseHeapInfo(string(data))
				if err != nil {
					t.Fatal(err)
				}
				want := reserved
				if gc == "z" {
					want = HeapPlace{Shared: true}
				}
				if got != want {
					t.Errorf("ParseHeapInfo: %+v, want %+v", got, want)
				}
			})
		}
	}
	for _, bad := range []struct {
		name, out string
		err       error // nil: any error
	}{
		{"no range", " garbage-first heap   total 397312K, used 18929K\n", ErrNoHeapPlace},
		{"empty", "", ErrNoHeapPlace},
		{"a range after Metaspace only", " Metaspace       used 8976K\n [0x10, 0x20)\n", ErrNoHeapPlace},
		{"reversed", " heap [0x0000000800000000, 0x0000000687400000)\n", nil},
		{"one bound", " heap [0x0000000800000000)\n", nil},
		{"not hex", " heap [0xzz, 0x0000000800000000)\n", nil},
		{"unclosed", " heap [0x0000000687400000, 0x0000000800000000\n", nil},
		{"beyond the address space", " heap [0x0, 0xffffffffffffffff)\n", nil},
		{"two ranges beyond the address space together", " young [0x0, 0x7fffffffffff)\n old [0x7fffffffffff, 0xfffffffffffe)\n", nil},
	} {
		t.Run(bad.name, func(t *testing.T) {
			got, err := ParseHeapInfo(bad.out)
			if err == nil || (bad.err != nil && !errors.Is(err, bad.err)) {
				t.Errorf("ParseHeapInfo: %+v, %v; want error %v", got, err, bad.err)
			}
		})
	}
}

// smapsOf writes an smaps text of mappings, each "lo-hi rss-kB [path]".
func smapsOf(mappings ...string) string {
	var b strings.Builder
	for _, m := range mappings {
		f := strings.Fields(m)
		path := ""
		if len(f) > 2 {
			path = f[2]
		}
		fmt.Fprintf(&b, "%s rw-p 00000000 00:00 0 %s\nSize:               4096 kB\nKernelPageSize:        4 kB\nRss:                %s kB\nPss:                %s kB\nAnonymous:          %s kB\nVmFlags: rd wr mr mw me ac\n",
			f[0], path, f[1], f[1], f[1])
	}
	return b.String()
}

func TestHeapRSS(t *testing.T) {
	h := HeapPlace{Lo: 0x687400000, Hi: 0x800000000}
	tests := []struct {
		name  string
		smaps string
		want  int64
		err   bool
	}{
		{"the heap's committed and reserved parts; not what lies around it", smapsOf(
			"55c7f7e36000-55c7f7e7d000 280 [heap]",
			"687400000-69f000000 123456",
			"69f000000-7ff800000 0",
			"7ff800000-800400000 999",
			"7fca95bfe000-7fca97e00000 34000"), 123456 << 10, false},
		{"a mapping across the heap's end is not the heap's", smapsOf("7ff000000-800400000 5000"), 0, false},
		{"no mapping", "", 0, false},
		{"an Rss in another unit", strings.Replace(smapsOf("687400000-69f000000 12"), "Rss:                12 kB", "Rss: 12 MB", 1), 0, true},
		{"a negative Rss", strings.Replace(smapsOf("687400000-69f000000 12"), "Rss:                12 kB", "Rss: -12 kB", 1), 0, true},
		{"a line past the scanner's bound", "687400000-69f000000 rw-p 00000000 00:00 0 /" + strings.Repeat("x", 10000) + "\n", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := heapRSS(strings.NewReader(tt.smaps), h)
			if (err != nil) != tt.err || got != tt.want {
				t.Errorf("heapRSS: %d, %v; want %d, error %v", got, err, tt.want, tt.err)
			}
		})
	}
	// More than maxSmaps is refused, not read on.
	long := io.MultiReader(strings.NewReader(smapsOf("687400000-69f000000 4")), repeatReader("Rss:                4 kB\n", maxSmaps))
	if _, err := heapRSS(long, h); !errors.Is(err, ErrSmapsTooLarge) {
		t.Errorf("heapRSS of more than %d bytes: %v, want ErrSmapsTooLarge", maxSmaps, err)
	}
}

// repeatReader repeats line until n bytes.
func repeatReader(line string, n int) io.Reader {
	return io.LimitReader(&repeater{line: line}, int64(n))
}

type repeater struct {
	line string
	off  int
}

func (r *repeater) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		c := copy(p[n:], r.line[r.off:])
		n += c
		r.off = (r.off + c) % len(r.line)
	}
	return n, nil
}

// TestHeapResidentOfRealJVMs: JDK 17 JVMs asked where their heap lies
// (GC.heap_info through the attach protocol, as the Reader asks): a heap
// of 512 MiB committed at start is mostly not resident a few seconds in,
// the same heap touched at start (AlwaysPreTouch) is all resident, and
// ZGC's is in shared memory (0 of it in RssAnon).
func TestHeapResidentOfRealJVMs(t *testing.T) {
	jdk := jfrtest.Find(t, 17)
	prog := leaktest.Build(t, jdk)
	const heap = 512 << 20
	tests := []struct {
		name     string
		opts     []string
		min, max int64
	}{
		{"committed, not touched", []string{"-Xms512m", "-Xmx512m"}, 1, heap / 2},
		{"touched at start", []string{"-Xms512m", "-Xmx512m", "-XX:+AlwaysPreTouch"}, heap - 8<<20, heap},
		{"ZGC", []string{"-XX:+UseZGC", "-Xms512m", "-Xmx512m", "-XX:+AlwaysPreTouch"}, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := leaktest.Start(t, jdk.Java(), prog, leaktest.Threads, 0, 0, 0, tt.opts, "0")
			target := attach.Target{ProcRoot: "/proc", PID: j.PID, Timeout: 10 * time.Second}
			deadline := time.Now().Add(30 * time.Second)
			for j.Leaked().Lines == 0 {
				if time.Now().After(deadline) {
					t.Fatalf("the JVM did not come up: %s", j.Output())
				}
				time.Sleep(100 * time.Millisecond)
			}
			out, err := target.Jcmd("GC.heap_info")
			if err != nil {
				t.Fatal(err)
			}
			place, err := ParseHeapInfo(out)
			if err != nil {
				t.Fatalf("%v:\n%s", err, out)
			}
			rss, err := HeapResident("/proc", j.PID, place)
			if err != nil {
				t.Fatal(err)
			}
			st, err := ReadStatus("/proc", j.PID)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("heap %+v: %d MiB resident; RssAnon %d MiB", place, rss>>20, st.RSSAnon>>20)
			if rss < tt.min || rss > tt.max || rss > st.RSSAnon {
				t.Errorf("%d MiB of the heap resident, want %d-%d MiB and at most RssAnon (%d MiB)", rss>>20, tt.min>>20, tt.max>>20, st.RSSAnon>>20)
			}
		})
	}
}

// TestReaderAsksWhereTheHeapLies: a Reader with thread dumps off still asks
// a real JDK 17 JVM where its heap lies, once, and says what jcmd says; a
// JVM that opted out is HeapUnknown, and a pid with no JVM behind it is
// HeapUnknown after heapTries tries.
func TestReaderAsksWhereTheHeapLies(t *testing.T) {
	jdk := jfrtest.Find(t, 17)
	prog := leaktest.Build(t, jdk)
	j := leaktest.Start(t, jdk.Java(), prog, leaktest.Threads, 0, 0, 0, []string{"-Xms64m", "-Xmx256m"}, "0")
	deadline := time.Now().Add(30 * time.Second)
	for j.Leaked().Lines == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the JVM did not come up: %s", j.Output())
		}
		time.Sleep(100 * time.Millisecond)
	}
	out, err := attach.Target{ProcRoot: "/proc", PID: j.PID, Timeout: 10 * time.Second}.Jcmd("GC.heap_info")
	if err != nil {
		t.Fatal(err)
	}
	want, err := ParseHeapInfo(out)
	if err != nil {
		t.Fatal(err)
	}
	var heapDone []error
	optedOut := map[int]bool{}
	r := NewReader(ReaderConfig{ProcRoot: "/proc", Timeout: 10 * time.Second,
		OptOut: func(tg Target) string {
			if optedOut[tg.PID] {
				return "opted out"
			}
			return ""
		},
		HeapDone: func(_ Target, err error) { heapDone = append(heapDone, err) }})
	defer r.Close(context.Background())
	poll := func(tg Target) (HeapPlace, HeapState) {
		deadline := time.Now().Add(30 * time.Second)
		for {
			r.Poll(tg, 1, time.Now())
			if place, state := r.Heap(tg); state != HeapPending || time.Now().After(deadline) {
				return place, state
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	jvm := Target{PID: j.PID, NSPID: j.PID}
	if place, state := poll(jvm); state != HeapKnown || place != want {
		t.Errorf("heap %+v, state %d; want %+v, known", place, state, want)
	}
	optedOut[j.PID] = true
	other := Target{PID: j.PID, NSPID: j.PID, StartTicks: 1} // another JVM for the reader
	if _, state := poll(other); state != HeapUnknown {
		t.Errorf("an opted-out JVM: state %d, want unknown", state)
	}
	gone := Target{PID: 1 << 22} // beyond pid_max
	if _, state := poll(gone); state != HeapUnknown {
		t.Errorf("no JVM: state %d, want unknown", state)
	}
	if len(heapDone) != 2 || heapDone[0] != nil || heapDone[1] == nil {
		t.Errorf("HeapDone told %v; want nil for the JVM and one error for the missing pid (an opt-out is not a read)", heapDone)
	}
}
