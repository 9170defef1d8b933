package inferenceprocessor // import "github.com/otelcol-ai/otelcol-ai/processor/inferenceprocessor"

import (
	"context"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/processorhelper"

	"github.com/otelcol-ai/otelcol-ai/processor/inferenceprocessor/internal/metadata"
)

const (
	defaultModel        = "runtime_overlap"
	defaultMaxBatchSize = 512
	nsToMs              = 1e-6
)

// NewFactory returns the inference processor's factory.
func NewFactory() processor.Factory {
	return processor.NewFactory(
		metadata.Type,
		createDefaultConfig,
		processor.WithTraces(createTraces, metadata.TracesStability),
		processor.WithLogs(createLogs, metadata.LogsStability),
	)
}

// createDefaultConfig runs the distribution's default model, runtime_overlap,
// on every span: its duration and the runtime overlaps runtimecorrelation
// wrote onto it (ns, converted to ms; absent means no overlap).
func createDefaultConfig() component.Config {
	zero := 0.0
	overlap := func(kind string) FeatureConfig {
		return FeatureConfig{Attribute: "runtime.overlap." + kind + ".duration", Default: &zero, Scale: nsToMs}
	}
	return &Config{
		Extension: component.MustNewID("onnxinference"),
		Model:     defaultModel,
		Features: []FeatureConfig{
			{Field: FieldDuration, Scale: nsToMs},
			overlap("jvm.safepoint"),
			overlap("jvm.gc.pause"),
			overlap("python.gil.wait"),
			overlap("python.gc.pause"),
		},
		Outputs: []OutputConfig{
			{Output: "explained_fraction", Attribute: "inference.runtime_overlap.explained_fraction"},
			{Output: "unexplained_ms", Attribute: "inference.runtime_overlap.unexplained_ms"},
			{Output: "dominant_cause", Attribute: "inference.runtime_overlap.dominant_cause"},
			{Output: "anomaly_score", Attribute: "inference.runtime_overlap.anomaly_score"},
		},
		Batch: BatchConfig{MaxSize: defaultMaxBatchSize},
	}
}

func createTraces(ctx context.Context, set processor.Settings, cfg component.Config, next consumer.Traces) (processor.Traces, error) {
	p, err := newInferenceProcessor(set, cfg.(*Config), false)
	if err != nil {
		return nil, err
	}
	return processorhelper.NewTraces(ctx, set, cfg, next, p.processTraces,
		processorhelper.WithStart(p.start),
		processorhelper.WithShutdown(p.shutdown),
		processorhelper.WithCapabilities(consumer.Capabilities{MutatesData: true}))
}

func createLogs(ctx context.Context, set processor.Settings, cfg component.Config, next consumer.Logs) (processor.Logs, error) {
	p, err := newInferenceProcessor(set, cfg.(*Config), true)
	if err != nil {
		return nil, err
	}
	return processorhelper.NewLogs(ctx, set, cfg, next, p.processLogs,
		processorhelper.WithStart(p.start),
		processorhelper.WithShutdown(p.shutdown),
		processorhelper.WithCapabilities(consumer.Capabilities{MutatesData: true}))
}
