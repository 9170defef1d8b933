//go:generate mdatagen metadata.yaml

// Package runtimestateextension holds the state that components share about
// the node's processes (internal/runtimestate); components name it by its
// component ID in their configuration.
package runtimestateextension // import "github.com/otelcol-ai/otelcol-ai/extension/runtimestateextension"
