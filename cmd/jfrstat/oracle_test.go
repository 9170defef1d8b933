package main

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/otelcol-ai/otelcol-ai/pkg/jfr"
	"github.com/otelcol-ai/otelcol-ai/pkg/jfr/jfrtest"
)

func TestMain(m *testing.M) {
	if peakFile := os.Getenv(mainEnv); peakFile != "" {
		main()
		writePeakRSS(peakFile)
		os.Exit(0)
	}
	jfrtest.Main(m)
}

// TestPrintMatchesJDKOnSeveralChunks records with JDK 25 a file of several
// chunks (a second recording starts and stops midway) and checks that
// `jfrstat print --json` writes exactly what JDK 25's `jfr print --json`
// writes for it: every event of every chunk, every startTime and duration
// to the nanosecond. About 10 s (one JVM run, two jfr print runs).
func TestPrintMatchesJDKOnSeveralChunks(t *testing.T) {
	j := jfrtest.Find(t, 25)
	path := jfrtest.Record(t, jfrtest.Spec{Name: "jfrstat-multichunk-25", JDK: j, Settings: "profile", Millis: 1500, Rotate: true, Flags: []string{"-XX:+UseG1GC"}})
	r, err := jfr.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	chunks := len(r.Chunks())
	r.Close()
	if chunks < 2 {
		t.Fatalf("%d chunks, want several", chunks)
	}
	tests := []struct {
		name string
		args []string
	}{
		{"every event", []string{"--json", path}},
		{"GC and safepoint events", []string{"--json", "--events", "GarbageCollection,GCPhasePause,SafepointBegin,ExecutionSample", path}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := jfrtest.Tool(t, j, append([]string{"print"}, tt.args...)...)
			var got bytes.Buffer
			if err := run(append([]string{"print"}, tt.args...), &got); err != nil {
				t.Fatal(err)
			}
			if n := strings.Count(got.String(), "\"startTime\""); n == 0 {
				t.Fatalf("no events printed")
			}
			if !bytes.Equal(got.Bytes(), want) {
				t.Errorf("jfrstat differs from jfr print over %d chunks: %s", chunks, firstLineDiff(got.Bytes(), want))
			}
		})
	}
}

// firstLineDiff describes the first line that differs and how many do.
func firstLineDiff(got, want []byte) string {
	g, w := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
	first, n := -1, 0
	for i := 0; i < len(g) && i < len(w); i++ {
		if g[i] != w[i] {
			if first < 0 {
				first = i
			}
			n++
		}
	}
	if first < 0 {
		return "one output is longer"
	}
	return fmt.Sprintf("line %d of %d differing:\n got: %s\nwant: %s", first+1, n, g[first], w[first])
}
