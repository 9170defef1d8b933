// Package timeline is what the timeline page shows and where it comes
// from: one time axis per node with, per process, its request spans, JVM
// pauses, GIL windows per thread, Python GC and GPU memory.
//
// A [Source] (the runtimecorrelation processor's shared state) answers a
// [Query] with a [Snapshot], a copy made within the source's own caps; the
// timeline extension finds sources in the process-wide registry
// ([Register], [Lookup]) by component ID, so neither component imports the
// other. [Recording] builds a Snapshot from the file exporter's OTLP JSON
// lines instead, and [Render] writes the page, live or with a snapshot
// inside it.
package timeline // import "github.com/otelcol-ai/otelcol-ai/pkg/timeline"
