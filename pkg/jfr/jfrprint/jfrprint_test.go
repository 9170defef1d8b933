package jfrprint

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/otelcol-ai/otelcol-ai/pkg/jfr"
)

// The event types in testdata's *.oracle.json (make-fixtures.sh).
var oracleTypes = "jdk.GarbageCollection,jdk.GCPhasePause,jdk.SafepointBegin,jdk.SafepointEnd,jdk.ExecuteVMOperation,jdk.GCHeapSummary,jdk.DirectBufferStatistics,jdk.NativeMemoryUsage,jdk.NativeMemoryUsageTotal,jdk.GCHeapMemoryUsage"

func open(t *testing.T, name string) *jfr.Reader {
	t.Helper()
	r, err := jfr.Open(filepath.Join("..", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

func golden(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func firstDiff(got, want []byte) string {
	if bytes.Equal(got, want) {
		return ""
	}
	g, w := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
	for i := 0; i < len(g) && i < len(w); i++ {
		if g[i] != w[i] {
			return "line " + strconv.Itoa(i+1) + ":\n got: " + g[i] + "\nwant: " + w[i]
		}
	}
	return "different lengths"
}

// TestJSONMatchesJDK compares with the output of JDK 17's and JDK 25's
// `jfr print --json --events …` on the same recordings, byte for byte.
func TestJSONMatchesJDK(t *testing.T) {
	accept := map[string]bool{}
	for _, n := range strings.Split(oracleTypes, ",") {
		accept[n] = true
	}
	for _, name := range []string{"g1-default-jdk17", "zgc-default-nmt-jdk25"} {
		t.Run(name, func(t *testing.T) {
			var b bytes.Buffer
			p := &JSON{StackDepth: 5, Accept: func(t *jfr.Type) bool { return accept[t.Name] }}
			if err := p.Print(&b, open(t, name+".jfr")); err != nil {
				t.Fatal(err)
			}
			if d := firstDiff(b.Bytes(), golden(t, name+".oracle.json")); d != "" {
				t.Errorf("differs from jfr print --json: %s", d)
			}
		})
	}
}

// TestSummaryMatchesJDK25 compares with JDK 25's `jfr summary`, byte for
// byte (JDK 17 orders equal counts by hash, so only its counts are
// compared, in pkg/jfr's tests).
func TestSummaryMatchesJDK25(t *testing.T) {
	s, err := Summarize(open(t, "zgc-default-nmt-jdk25.jfr"))
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if _, err := s.WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	if d := firstDiff(b.Bytes(), golden(t, "zgc-default-nmt-jdk25.summary.txt")); d != "" {
		t.Errorf("differs from jfr summary: %s", d)
	}
}

func TestJavaDuration(t *testing.T) {
	tests := []struct {
		ns   int64
		want string
	}{
		{0, "PT0S"},
		{6123962, "PT0.006123962S"},
		{370640, "PT0.00037064S"},
		{1_000_000_000, "PT1S"},
		{3_723_500_000_000, "PT1H2M3.5S"},
		{3_600_000_000_000, "PT1H"},
		{-500_000_000, "PT-0.5S"},
		{-1_500_000_000, "PT-1.5S"},
	}
	for _, tt := range tests {
		s, n := durationOfNanos(tt.ns)
		if got := string(appendJavaDuration(nil, s, n)); got != tt.want {
			t.Errorf("javaDuration(%d ns) = %q, want %q", tt.ns, got, tt.want)
		}
	}
	if got := string(appendJavaDuration(nil, math.MaxInt64, 999_999_999)); got != "PT2562047788015215H30M7.999999999S" {
		t.Errorf("FOREVER = %q", got)
	}
}

func TestJavaOffsetDateTime(t *testing.T) {
	tests := []struct {
		sec    int64
		nanos  int32
		offset int64
		want   string
	}{
		{1795945304, 197323272, 0, "2026-11-29T09:41:44.197323272Z"},
		{1795945304, 197000000, 0, "2026-11-29T09:41:44.197Z"},
		{1795945304, 197323000, 0, "2026-11-29T09:41:44.197323Z"},
		{1795945260, 0, 0, "2026-11-29T09:41Z"},
		{1795945304, 0, 3600, "2026-11-29T10:41:44+01:00"},
		{0, 0, -5*3600 - 1800, "1969-12-31T18:30-05:30"},
		{951782400, 0, 0, "2000-02-29T00:00Z"},
	}
	for _, tt := range tests {
		if got := string(appendJavaOffsetDateTime(nil, tt.sec, tt.nanos, tt.offset)); got != tt.want {
			t.Errorf("javaOffsetDateTime(%d, %d, %d) = %q, want %q", tt.sec, tt.nanos, tt.offset, got, tt.want)
		}
	}
}

func TestJavaDouble(t *testing.T) {
	tests := []struct {
		v    float64
		bits int
		want string
	}{
		{0, 64, "0.0"},
		{math.Copysign(0, -1), 64, "-0.0"},
		{1, 64, "1.0"},
		{0.5, 64, "0.5"},
		{0.001, 64, "0.001"},
		{0.0001, 64, "1.0E-4"},
		{1234567, 64, "1234567.0"},
		{1e7, 64, "1.0E7"},
		{1.2345678e10, 64, "1.2345678E10"},
		{-3.25e-5, 64, "-3.25E-5"},
		{float64(float32(0.1)), 32, "0.1"},
	}
	for _, tt := range tests {
		if got := javaDouble(tt.v, tt.bits); got != tt.want {
			t.Errorf("javaDouble(%v, %d) = %q, want %q", tt.v, tt.bits, got, tt.want)
		}
	}
}

func TestJSONStringEscapes(t *testing.T) {
	got := string(appendJSONString(nil, "a/b\"c\\\n\té中\U0001F600\x01\x7f"))
	want := `"a\/b\"c\\\n\t\u00e9\u4e2d\ud83d\ude00\u0001` + "\x7f" + `"`
	if got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}
