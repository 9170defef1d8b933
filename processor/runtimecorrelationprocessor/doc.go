//go:generate go tool mdatagen metadata.yaml

// Package runtimecorrelationprocessor correlates runtime windows (the log
// records of internal/window: JVM safepoints and GC pauses, Python GIL and
// GC windows) with each other and with spans. One state per component ID
// sits behind its logs, traces and metrics pipelines: windows from the logs
// pipeline are indexed per match scope (process, pod or host) and their
// cross-runtime overlaps emitted as runtime.overlap log records; spans get
// the totals of the windows that overlapped them, and optionally span events
// or child spans placing each window inside them; the metrics pipeline gets
// overlap counts and durations per kind pair.
package runtimecorrelationprocessor // import "github.com/otelcol-ai/otelcol-ai/processor/runtimecorrelationprocessor"
