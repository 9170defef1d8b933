package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/otelcol-ai/otelcol-ai/pkg/jfr/jfrtest"
)

// mainEnv makes the test binary run jfrstat's main instead of the tests, so
// that a test can measure jfrstat as a process of its own, and then write
// its peak RSS to the file the variable names. The process reads the peak
// itself (VmHWM): the rusage of a child started by Go counts the parent's
// memory, which the child shares until it executes.
const mainEnv = "JFRSTAT_TEST_PEAK_RSS_FILE"

// writePeakRSS writes the process's peak RSS in bytes to path.
func writePeakRSS(path string) {
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		fmt.Fprintln(os.Stderr, "jfrstat test:", err)
		os.Exit(1)
	}
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err == nil {
				os.WriteFile(path, []byte(strconv.FormatInt(kb<<10, 10)), 0o644)
				return
			}
		}
	}
	fmt.Fprintln(os.Stderr, "jfrstat test: no VmHWM in /proc/self/status")
	os.Exit(1)
}

// maxPrintRSS is the bound on jfrstat print's peak RSS for any input size.
const maxPrintRSS = 64 << 20

// TestPrintLargeRecordingInBoundedMemory prints a recording of copies of one
// JDK 25 recording (three, then up to 96 MB) and checks, byte for byte, that
// jfrstat's output equals JDK 25's `jfr print --json` and that the large
// print stays under 64 MB of RSS. JDK 25's tool is run on the three copies
// and on the single recording: printing copies prints the single
// recording's events once per copy (checked on the three), which gives the
// expected output of the large file without running the JDK on it. About
// 20-30 s (a JVM run, two jfr print runs, 96 MB printed). make bench runs the
// same on 1 GB (BenchmarkPrintLargeRecording).
func TestPrintLargeRecordingInBoundedMemory(t *testing.T) {
	j := jfrtest.Find(t, 25)
	src := largeSource(t, j)
	one := jfrtest.Tool(t, j, "print", "--json", src)
	three := copies(t, src, 3)
	want := jfrtest.Tool(t, j, "print", "--json", three)
	if got, err := io.ReadAll(repeatedPrint(t, one, 3)); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("JDK 25 prints three copies other than its print of one repeated: %s", firstLineDiff(got, want))
	}
	var got bytes.Buffer
	if err := run([]string{"print", "--json", three}, &got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Bytes(), want) {
		t.Fatalf("jfrstat differs from jfr print on three copies: %s", firstLineDiff(got.Bytes(), want))
	}
	checkLargePrint(t, src, one, 96<<20)
}

// BenchmarkPrintLargeRecording is the large case of
// TestPrintLargeRecordingInBoundedMemory: copies of a JDK 25 recording up
// to JFR_PRINT_LARGE_MB (default 1024) MB, printed by jfrstat in a process
// of its own; it fails if the output differs from JDK 25's or the peak RSS
// reaches 64 MB, and reports the peak RSS.
func BenchmarkPrintLargeRecording(b *testing.B) {
	mb := 1024
	if s := os.Getenv("JFR_PRINT_LARGE_MB"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			b.Fatalf("JFR_PRINT_LARGE_MB=%q", s)
		}
		mb = n
	}
	j := jfrtest.Find(b, 25)
	src := largeSource(b, j)
	one := jfrtest.Tool(b, j, "print", "--json", src)
	for b.Loop() {
		checkLargePrint(b, src, one, int64(mb)<<20)
	}
}

func largeSource(tb testing.TB, j jfrtest.JDK) string {
	return jfrtest.Record(tb, jfrtest.Spec{Name: "jfrstat-large-25", JDK: j, Settings: "default", Millis: 1500, Rotate: true, Flags: []string{"-XX:+UseG1GC"}})
}

// checkLargePrint prints copies of src up to size bytes with jfrstat in a
// process of its own and compares its output, as it streams, with one (the
// JDK's print of src) repeated once per copy.
func checkLargePrint(tb testing.TB, src string, one []byte, size int64) {
	tb.Helper()
	st, err := os.Stat(src)
	if err != nil {
		tb.Fatal(err)
	}
	n := int((size + st.Size() - 1) / st.Size())
	large := copies(tb, src, n)
	peakFile := filepath.Join(tb.TempDir(), "peak-rss")
	cmd := exec.Command(os.Args[0], "print", "--json", large)
	cmd.Env = append(os.Environ(), mainEnv+"="+peakFile)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	at, same, cmpErr := sameStream(out, repeatedPrint(tb, one, n))
	io.Copy(io.Discard, out)
	if err := cmd.Wait(); err != nil {
		tb.Fatalf("jfrstat print --json on %d MB: %v", int64(n)*st.Size()>>20, err)
	}
	if cmpErr != nil {
		tb.Fatal(cmpErr)
	}
	if !same {
		tb.Fatalf("jfrstat print --json on %d copies differs from JDK 25's print of one, repeated, at byte %d", n, at)
	}
	peak, err := os.ReadFile(peakFile)
	if err != nil {
		tb.Fatal(err)
	}
	rss, err := strconv.ParseInt(string(peak), 10, 64)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Logf("%d copies, %d MB: %d MB of JSON, peak RSS %.1f MB", n, int64(n)*st.Size()>>20, at>>20, float64(rss)/(1<<20))
	if b, ok := tb.(*testing.B); ok {
		b.ReportMetric(float64(rss)/(1<<20), "peak-RSS-MB")
		b.ReportMetric(float64(int64(n)*st.Size())/(1<<20), "input-MB")
	}
	if rss >= maxPrintRSS {
		tb.Errorf("peak RSS %d MB printing %d MB, want under %d MB", rss>>20, int64(n)*st.Size()>>20, maxPrintRSS>>20)
	}
}

// copies writes a recording made of n copies of src (a file of chunks
// stays valid when files of chunks are appended to it) and returns its path.
func copies(tb testing.TB, src string, n int) string {
	tb.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		tb.Fatal(err)
	}
	path := filepath.Join(tb.TempDir(), fmt.Sprintf("%dx.jfr", n))
	f, err := os.Create(path)
	if err != nil {
		tb.Fatal(err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	for i := 0; i < n; i++ {
		w.Write(b)
	}
	if err := w.Flush(); err != nil {
		tb.Fatal(err)
	}
	if err := f.Close(); err != nil {
		tb.Fatal(err)
	}
	return path
}

// repeatedPrint returns `jfr print --json` of n copies of a recording, given
// its print of one: the events listed n times, ", " between.
func repeatedPrint(tb testing.TB, one []byte, n int) io.Reader {
	tb.Helper()
	open := bytes.Index(one, []byte(`"events": [`))
	end := bytes.LastIndexByte(one, ']')
	if open < 0 || end < open {
		tb.Fatalf("no event list in jfr print --json output of %d bytes", len(one))
	}
	open += len(`"events": [`)
	head, events, tail := one[:open], one[open:end], one[end:]
	rs := []io.Reader{bytes.NewReader(head)}
	for i := 0; i < n; i++ {
		if i > 0 && len(events) > 0 {
			rs = append(rs, bytes.NewReader([]byte(", ")))
		}
		rs = append(rs, bytes.NewReader(events))
	}
	return io.MultiReader(append(rs, bytes.NewReader(tail))...)
}

// sameStream compares two streams; at is the length of their common prefix.
func sameStream(a, b io.Reader) (at int64, same bool, err error) {
	ba, bb := make([]byte, 256<<10), make([]byte, 256<<10)
	for {
		na, ea := io.ReadFull(a, ba)
		nb, eb := io.ReadFull(b, bb)
		n := min(na, nb)
		if i := firstDifference(ba[:n], bb[:n]); i >= 0 {
			return at + int64(i), false, nil
		}
		at += int64(n)
		endA, endB := ea == io.EOF || ea == io.ErrUnexpectedEOF, eb == io.EOF || eb == io.ErrUnexpectedEOF
		if ea != nil && !endA {
			return at, false, ea
		}
		if eb != nil && !endB {
			return at, false, eb
		}
		if na != nb || endA != endB {
			return at, false, nil
		}
		if endA {
			return at, true, nil
		}
	}
}

func firstDifference(a, b []byte) int {
	if bytes.Equal(a, b) {
		return -1
	}
	for i := range a {
		if a[i] != b[i] {
			return i
		}
	}
	return len(a)
}
