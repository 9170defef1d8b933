package jfrreceiver

import (
	"testing"

	"github.com/otelcol-ai/otelcol-ai/pkg/jfr/jfrtest"
)

// runTests is TestMain's body (see metadata.yaml): jfrtest.Main runs the
// tests, removes the workload files the JVM tests made, fails the run when
// a goroutine outlived the tests, and exits the process.
func runTests(m *testing.M) { jfrtest.Main(m) }
