// Package jfrtest lets tests outside pkg/jfr (the jfr receiver's) find the
// JDKs installed on a machine, run the JFR test workload on them and use the
// JDK's own `jfr` tool as the oracle. It is a thin, importable face of
// pkg/jfr's internal jdktest package; tests that need a JDK skip, with the
// reason, when none is found or when run with -short.
package jfrtest // import "github.com/otelcol-ai/otelcol-ai/pkg/jfr/jfrtest"

import (
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/otelcol-ai/otelcol-ai/pkg/jfr/internal/jdktest"
)

// JDK is an installed JDK: its home and major version.
type JDK = jdktest.JDK

// Spec describes a recording made by Record.
type Spec = jdktest.Spec

// Find returns a JDK of the given major version or skips the test.
func Find(t testing.TB, major int) JDK { return jdktest.Find(t, major) }

// Lookup returns an installed JDK of the given major version.
func Lookup(major int) (JDK, bool) { return jdktest.Lookup(major) }

// Record makes the recording once per test binary and returns its path.
func Record(t testing.TB, s Spec) string { return jdktest.Record(t, s) }

// Start starts cmd and waits for it in the background: exited receives
// how it ended, once; the test's cleanup kills it and waits for it.
func Start(t testing.TB, cmd *exec.Cmd) (exited chan error) { return jdktest.Start(t, cmd) }

// Tool runs the JDK's jfr tool and returns its standard output.
func Tool(t testing.TB, j JDK, args ...string) []byte { return jdktest.Tool(t, j, args...) }

// Workload returns the path of the Java workload (run it as `java
// Workload.java MILLIS [rotate]`) and of a settings file that adds
// DirectBufferStatistics every second and SafepointEnd to "default" or
// "profile". Both live in a folder shared by the test binary that Cleanup
// removes.
func Workload() (source, extraSettings string, err error) {
	d, err := jdktest.Dir()
	if err != nil {
		return "", "", err
	}
	return filepath.Join(d, "Workload.java"), filepath.Join(d, "extra.jfc"), nil
}

// Cleanup removes what Record and Workload made; call it from TestMain
// after m.Run.
func Cleanup() { jdktest.Cleanup() }

// Main is a TestMain for packages whose tests record with JDKs: it runs the
// tests, removes what Record and Workload made, fails the run when a
// goroutine outlived the tests, and exits.
func Main(m *testing.M) { jdktest.Main(m) }
