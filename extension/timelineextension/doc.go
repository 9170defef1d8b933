//go:generate go tool mdatagen metadata.yaml

// Package timelineextension serves the timeline page: on one time axis, per
// process (named by pod/container/executable), the request spans, JVM
// safepoints and GC pauses, each Python thread's GIL waits and releases,
// Python GC, where they overlap, and GPU memory, from the state of a
// runtimecorrelation processor found through pkg/timeline.
package timelineextension // import "github.com/otelcol-ai/otelcol-ai/extension/timelineextension"
