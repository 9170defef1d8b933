package jfrprint

import (
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/otelcol-ai/otelcol-ai/pkg/jfr"
)

// BenchmarkJSON prints every event of testdata's JDK 25 recording, or of
// the file named by JFR_BENCH_FILE, as `jfr print --json` does; bytes/s is
// recording bytes. The comparison with the JDK's tools, as a ratio in one
// run, is bench/jfr/print.sh (make bench).
func BenchmarkJSON(b *testing.B) {
	path := os.Getenv("JFR_BENCH_FILE")
	if path == "" {
		path = filepath.Join("..", "testdata", "zgc-default-nmt-jdk25.jfr")
	}
	st, err := os.Stat(path)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(st.Size())
	b.ReportAllocs()
	p := &JSON{StackDepth: 5}
	for b.Loop() {
		r, err := jfr.Open(path)
		if err != nil {
			b.Fatal(err)
		}
		err = p.Print(io.Discard, r)
		r.Close()
		if err != nil {
			b.Fatal(err)
		}
	}
}
