// Package sharedcomponent lets the pipeline instances of one component ID
// share one value.
//
// The collector creates a component once per pipeline type (logs, metrics,
// traces) even when the configuration names it once. A receiver that reads
// each source once, or a processor that correlates what its pipelines see,
// keeps one value per component ID and gives each pipeline its own handle.
//
// Map is the general form: one reference-counted value per key, made by the
// first Acquire and destroyed by the last Release, so that a later pipeline
// build (a config reload, the generated lifecycle test) starts from a fresh
// value.
//
// Cores, Core and Face are the receiver form: a Core is started by the
// first of its faces to start and stopped by the last to shut down; each
// Face is one pipeline's component.Component, with optional hooks that
// connect and disconnect that pipeline's consumer. Cores keeps one Core per
// component ID while any Face made for it has not been shut down.
package sharedcomponent // import "github.com/otelcol-ai/otelcol-ai/internal/sharedcomponent"
