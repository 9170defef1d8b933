package metadata

import "go.opentelemetry.io/collector/processor/processortest"

// settings are what the generated TestMetricsBuilder builds with (mdatagen
// declares them for receivers only).
var settings = processortest.NewNopSettings(Type)
