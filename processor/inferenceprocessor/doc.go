//go:generate go tool mdatagen metadata.yaml

// Package inferenceprocessor runs a model on spans or log records: it turns
// their attributes and fields into a float32 tensor, runs the model through a
// modelrunner.Provider (the onnxinference extension), and writes chosen
// outputs onto each item together with inference.model.name and
// inference.model.version. Items the model cannot judge pass unchanged.
package inferenceprocessor // import "github.com/otelcol-ai/otelcol-ai/processor/inferenceprocessor"
