//go:generate go tool mdatagen metadata.yaml

// Package onnxinferenceextension serves ONNX models to other components of the
// collector, in-process, through ONNX Runtime: a Triton-style model
// repository with numeric versions, version policies, hot reload by polling
// and validation of every run's inputs. Components reach it through
// pkg/modelrunner, never through this package.
package onnxinferenceextension // import "github.com/otelcol-ai/otelcol-ai/extension/onnxinferenceextension"
