package jfrreceiver

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/otelcol-ai/otelcol-ai/pkg/jfr/jfrtest"
)

// runTests is TestMain's body (see metadata.yaml): it runs the tests,
// removes the workload files the JVM tests made, and fails the run when a
// goroutine outlived the tests. It exits the process.
func runTests(m *testing.M) {
	code := m.Run()
	jfrtest.Cleanup()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}
