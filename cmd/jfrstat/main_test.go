package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var testdata = filepath.Join("..", "..", "pkg", "jfr", "testdata")

func TestRun(t *testing.T) {
	const events = "jdk.GarbageCollection,jdk.GCPhasePause,jdk.SafepointBegin,jdk.SafepointEnd,jdk.ExecuteVMOperation,jdk.GCHeapSummary,jdk.DirectBufferStatistics,jdk.NativeMemoryUsage,jdk.NativeMemoryUsageTotal,jdk.GCHeapMemoryUsage"
	// The same names without the jdk. prefix, as the JDK tool accepts.
	short := strings.ReplaceAll(events, "jdk.", "")
	zgc := filepath.Join(testdata, "zgc-default-nmt-jdk25.jfr")
	tests := []struct {
		name   string
		args   []string
		golden string // file in testdata with the JDK's output
	}{
		{"summary equals jfr summary", []string{"summary", zgc}, "zgc-default-nmt-jdk25.summary.txt"},
		{"print --json equals jfr print --json", []string{"print", "--json", "--events", events, zgc}, "zgc-default-nmt-jdk25.oracle.json"},
		{"event names without jdk. prefix", []string{"print", "--json", "--events", short, zgc}, "zgc-default-nmt-jdk25.oracle.json"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			if err := run(tt.args, &out); err != nil {
				t.Fatal(err)
			}
			want, err := os.ReadFile(filepath.Join(testdata, tt.golden))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(out.Bytes(), want) {
				t.Errorf("output differs from the JDK's (%d vs %d bytes)", out.Len(), len(want))
			}
		})
	}
}

func TestRunSeveralFiles(t *testing.T) {
	a := filepath.Join(testdata, "g1-default-jdk17.jfr")
	b := filepath.Join(testdata, "zgc-default-nmt-jdk25.jfr")
	var out bytes.Buffer
	if err := run([]string{"summary", a, b}, &out); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	if !strings.HasPrefix(s, a+":\n") || !strings.Contains(s, "\n"+b+":\n") || strings.Count(s, " Version: 2.1") != 2 {
		t.Errorf("summary of two files:\n%s", s)
	}
}

func TestRunErrors(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.jfr")
	os.WriteFile(bad, []byte("not a recording at all, but long enough to hold a whole chunk header........"), 0o644)
	tests := []struct {
		name      string
		args      []string
		wantUsage bool
		wantText  string
	}{
		{"no command", nil, true, "no command"},
		{"unknown command", []string{"frobnicate"}, true, "unknown command"},
		{"summary without file", []string{"summary"}, true, "needs a file"},
		{"print without --json", []string{"print", bad}, true, "--json"},
		{"missing file", []string{"summary", filepath.Join(t.TempDir(), "none.jfr")}, false, "no such file"},
		{"not a recording", []string{"summary", bad}, false, "bad magic"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := run(tt.args, &bytes.Buffer{})
			var ue usageError
			if err == nil || errors.As(err, &ue) != tt.wantUsage || !strings.Contains(err.Error(), tt.wantText) {
				t.Errorf("err = %v; want usage error %v containing %q", err, tt.wantUsage, tt.wantText)
			}
		})
	}
}
