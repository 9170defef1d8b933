// Package sharedcomponent lets the pipeline instances of one component ID
// share one value.
//
// The collector creates a component once per pipeline type (logs, metrics,
// traces) even when the configuration names it once. A receiver that reads
// each source once, or a processor that correlates what its pipelines see,
// keeps one value per component ID and gives each pipeline its own handle.
//
// The words, used the same way everywhere:
//   - value: what the pipelines of one component ID share (a receiver, a
//     correlator).
//   - Acquire: get a handle on the value under a key, making the value when
//     there is none; the last handle let go destroys it, so a later
//     pipeline build (a config reload, the generated lifecycle test) starts
//     from a fresh value.
//   - Map and Ref: a value that is only shared. Ref.Release lets go.
//   - Cores, Core and Face: a value that also runs. A Core is started by the
//     first of its faces to start and stopped by the last to shut down, with
//     its value's [Lifecycle]; each Face is one pipeline's
//     component.Component, with [Hooks] that connect and disconnect that
//     pipeline's consumer. Face.Shutdown lets go.
//   - Share: what a receiver factory's create functions call, once per
//     pipeline: [Cores.Share] makes the value with its Lifecycle the first
//     time and returns the pipeline's Face.
package sharedcomponent // import "github.com/otelcol-ai/otelcol-ai/internal/sharedcomponent"
