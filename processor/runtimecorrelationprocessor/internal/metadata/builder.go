package metadata

import (
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/processor"
)

// NewMetricsBuilder makes a MetricsBuilder for the metrics metadata.yaml
// declares. mdatagen writes this constructor for receivers only; a metric
// added to metadata.yaml is added here too (the generated test fails
// until it is).
func NewMetricsBuilder(mbc MetricsBuilderConfig, settings processor.Settings, options ...MetricBuilderOption) *MetricsBuilder {
	mb := &MetricsBuilder{
		config:                       mbc,
		startTime:                    pcommon.NewTimestampFromTime(time.Now()),
		metricsBuffer:                pmetric.NewMetrics(),
		buildInfo:                    settings.BuildInfo,
		metricRuntimeOverlapCount:    newMetricRuntimeOverlapCount(mbc.Metrics.RuntimeOverlapCount),
		metricRuntimeOverlapDuration: newMetricRuntimeOverlapDuration(mbc.Metrics.RuntimeOverlapDuration),
	}
	for _, op := range options {
		op.apply(mb)
	}
	return mb
}

// RecordRuntimeOverlapCountSince adds a data point to runtime.overlap.count
// whose series started at start: each scope and kind pair counts from when
// it was first seen, not from the builder's start.
func (mb *MetricsBuilder) RecordRuntimeOverlapCountSince(start, ts pcommon.Timestamp, val int64, firstKind, secondKind, scope string) {
	mb.metricRuntimeOverlapCount.recordDataPoint(start, ts, val, firstKind, secondKind, scope)
}

// RecordRuntimeOverlapDurationSince adds a data point to
// runtime.overlap.duration whose series started at start.
func (mb *MetricsBuilder) RecordRuntimeOverlapDurationSince(start, ts pcommon.Timestamp, val float64, firstKind, secondKind, scope string) {
	mb.metricRuntimeOverlapDuration.recordDataPoint(start, ts, val, firstKind, secondKind, scope)
}
