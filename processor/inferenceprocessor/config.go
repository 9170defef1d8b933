package inferenceprocessor // import "github.com/otelcol-ai/otelcol-ai/processor/inferenceprocessor"

import (
	"errors"
	"fmt"
	"math"
	"time"

	"go.opentelemetry.io/collector/component"
)

// Config is the inference processor's configuration.
type Config struct {
	// Extension is the ID of the extension serving the model (an
	// onnxinference extension).
	Extension component.ID `mapstructure:"extension"`
	// Model is the model's name in the extension's repository.
	Model string `mapstructure:"model"`
	// ModelVersion pins a version; 0 runs the newest one served.
	ModelVersion int64 `mapstructure:"model_version"`
	// Input is the model input the features feed; empty when the model has
	// exactly one input.
	Input string `mapstructure:"input"`
	// Conditions select the items to judge (OTTL, span or log context):
	// an item is judged when any condition is true. Empty: every item.
	Conditions []string `mapstructure:"conditions"`
	// AttributesPresent selects items that carry every one of these
	// attributes (on the item itself). Combined with Conditions by AND.
	AttributesPresent []string `mapstructure:"attributes_present"`
	// Features are the columns of the float32 input tensor, in order.
	Features []FeatureConfig `mapstructure:"features"`
	// Outputs map model outputs to attributes.
	Outputs []OutputConfig `mapstructure:"outputs"`
	// Batch bounds the rows per model run.
	Batch BatchConfig `mapstructure:"batch"`
	// prevent unkeyed literal initialization
	_ struct{}
}

// FeatureConfig is one column of the input tensor: exactly one of
// Attribute, ResourceAttribute and Field names where it comes from.
type FeatureConfig struct {
	// Attribute is an attribute of the span or log record.
	Attribute string `mapstructure:"attribute"`
	// ResourceAttribute is an attribute of the item's resource.
	ResourceAttribute string `mapstructure:"resource_attribute"`
	// Field is a field of the item: for spans duration (ns), status
	// (0 unset, 1 ok, 2 error), kind (0-5, OTLP's SpanKind); for logs
	// severity_number.
	Field string `mapstructure:"field"`
	// Default is used when the value is missing or not a number. Without
	// one, an item missing the value is not judged (forwarded unchanged
	// and counted).
	Default *float64 `mapstructure:"default"`
	// Scale and Offset transform the value: value*scale + offset (scale
	// 0 means 1). Booleans are 0 or 1; numeric strings are parsed.
	Scale  float64 `mapstructure:"scale"`
	Offset float64 `mapstructure:"offset"`
}

// OutputConfig writes one element of a model output onto each item.
type OutputConfig struct {
	// Output names the model output (a tensor whose first dimension is
	// the batch).
	Output string `mapstructure:"output"`
	// Index is the element within the item's row of that output.
	Index int `mapstructure:"index"`
	// Attribute is the attribute written: a double for float outputs, an
	// int for integer ones.
	Attribute string `mapstructure:"attribute"`
}

// BatchConfig bounds batching.
type BatchConfig struct {
	// MaxSize is the most rows in one model run.
	MaxSize int `mapstructure:"max_size"`
	// MaxWait is how long a run short of MaxSize rows waits for rows from
	// concurrent calls; 0 runs at once.
	MaxWait time.Duration `mapstructure:"max_wait"`
}

var _ component.Config = (*Config)(nil)

// Fields of spans and logs a feature can read.
const (
	FieldDuration       = "duration"
	FieldStatus         = "status"
	FieldKind           = "kind"
	FieldSeverityNumber = "severity_number"
)

// Attributes every judged item carries.
const (
	AttributeModelName    = "inference.model.name"
	AttributeModelVersion = "inference.model.version"
)

// Validate checks the configuration, naming the field at fault.
func (cfg *Config) Validate() error {
	var errs []error
	if cfg.Extension.Type().String() == "" {
		errs = append(errs, errors.New("extension: must name the extension serving the model, e.g. onnxinference"))
	}
	if cfg.Model == "" {
		errs = append(errs, errors.New("model: must be set"))
	}
	if cfg.ModelVersion < 0 {
		errs = append(errs, fmt.Errorf("model_version: must not be negative, got %d", cfg.ModelVersion))
	}
	if len(cfg.Features) == 0 {
		errs = append(errs, errors.New("features: at least one is needed"))
	}
	for i, f := range cfg.Features {
		if err := f.validate(); err != nil {
			errs = append(errs, fmt.Errorf("features[%d]: %w", i, err))
		}
	}
	if len(cfg.Outputs) == 0 {
		errs = append(errs, errors.New("outputs: at least one is needed"))
	}
	seen := map[string]bool{}
	for i, o := range cfg.Outputs {
		switch {
		case o.Output == "":
			errs = append(errs, fmt.Errorf("outputs[%d]::output: must name a model output", i))
		case o.Attribute == "":
			errs = append(errs, fmt.Errorf("outputs[%d]::attribute: must be set", i))
		case o.Index < 0:
			errs = append(errs, fmt.Errorf("outputs[%d]::index: must not be negative, got %d", i, o.Index))
		case o.Attribute == AttributeModelName || o.Attribute == AttributeModelVersion:
			errs = append(errs, fmt.Errorf("outputs[%d]::attribute: %s is written by the processor itself", i, o.Attribute))
		case seen[o.Attribute]:
			errs = append(errs, fmt.Errorf("outputs[%d]::attribute: %s is written twice", i, o.Attribute))
		}
		seen[o.Attribute] = true
	}
	if cfg.Batch.MaxSize <= 0 {
		errs = append(errs, fmt.Errorf("batch::max_size: must be positive, got %d", cfg.Batch.MaxSize))
	}
	if cfg.Batch.MaxWait < 0 {
		errs = append(errs, fmt.Errorf("batch::max_wait: must not be negative, got %s", cfg.Batch.MaxWait))
	}
	for i, a := range cfg.AttributesPresent {
		if a == "" {
			errs = append(errs, fmt.Errorf("attributes_present[%d]: must not be empty", i))
		}
	}
	return errors.Join(errs...)
}

func (f FeatureConfig) validate() error {
	set := 0
	for _, s := range []string{f.Attribute, f.ResourceAttribute, f.Field} {
		if s != "" {
			set++
		}
	}
	if set != 1 {
		return errors.New("set exactly one of attribute, resource_attribute, field")
	}
	switch f.Field {
	case "", FieldDuration, FieldStatus, FieldKind, FieldSeverityNumber:
	default:
		return fmt.Errorf("field: %q is not one of %s, %s, %s, %s", f.Field, FieldDuration, FieldStatus, FieldKind, FieldSeverityNumber)
	}
	for name, v := range map[string]float64{"scale": f.Scale, "offset": f.Offset} {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("%s: must be finite", name)
		}
	}
	if f.Default != nil && (math.IsNaN(*f.Default) || math.IsInf(*f.Default, 0)) {
		return errors.New("default: must be finite")
	}
	return nil
}
