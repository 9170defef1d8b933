// Package declaredtest checks the metrics a component emits against what
// its metadata.yaml declares, so that the generated documentation and
// switches describe what the component really sends.
package declaredtest

import (
	"os"
	"slices"
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.yaml.in/yaml/v3"
)

// Metadata is the part of a metadata.yaml that says what a component
// emits.
type Metadata struct {
	ResourceAttributes map[string]Attribute `yaml:"resource_attributes"`
	Attributes         map[string]Attribute `yaml:"attributes"`
	Metrics            map[string]Metric    `yaml:"metrics"`
}

// Metric is one declared metric: a gauge or a sum, with the keys of the
// attributes its points carry.
type Metric struct {
	Unit  string `yaml:"unit"`
	Gauge *struct {
		ValueType string `yaml:"value_type"`
	} `yaml:"gauge"`
	Sum *struct {
		ValueType   string `yaml:"value_type"`
		Monotonic   bool   `yaml:"monotonic"`
		Temporality string `yaml:"aggregation_temporality"`
	} `yaml:"sum"`
	Attributes []string `yaml:"attributes"`
}

// Attribute is one declared attribute. A point may leave out one whose
// requirement level is conditionally_required; every other one it must
// carry.
type Attribute struct {
	NameOverride     string   `yaml:"name_override"`
	Type             string   `yaml:"type"`
	Enum             []string `yaml:"enum"`
	RequirementLevel string   `yaml:"requirement_level"`
}

// Histogram is a histogram built by hand, which metadata.yaml cannot
// declare: its unit and the type of each attribute its points may carry.
// It is cumulative.
type Histogram struct {
	Unit       string
	Attributes map[string]string
}

// Read reads metadata.yaml in the test's package; one that cannot be read
// or declares no metric fails the test.
func Read(t testing.TB) Metadata {
	t.Helper()
	data, err := os.ReadFile("metadata.yaml")
	if err != nil {
		t.Fatalf("os.ReadFile: %v", err)
	}
	var md Metadata
	if err := yaml.Unmarshal(data, &md); err != nil {
		t.Fatalf("yaml.Unmarshal: %v", err)
	}
	if len(md.Metrics) == 0 {
		t.Fatalf("md.Metrics: got empty, want at least one element")
	}
	return md
}

// Names is the sorted names of the declared metrics and of histograms.
func (md Metadata) Names(histograms map[string]Histogram) []string {
	var names []string
	for name := range md.Metrics {
		names = append(names, name)
	}
	for name := range histograms {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// Check asserts that every metric, point attribute and resource attribute
// in got is declared - in md with the same unit, type, monotonicity,
// temporality, value type and attributes, or in histograms - and returns
// the names of the metrics seen.
func (md Metadata) Check(t testing.TB, got pmetric.Metrics, histograms map[string]Histogram) map[string]bool {
	t.Helper()
	seen := map[string]bool{}
	for _, rm := range got.ResourceMetrics().All() {
		for k, v := range rm.Resource().Attributes().All() {
			a, ok := md.ResourceAttributes[k]
			if !ok {
				t.Errorf("resource attribute %s is not declared", k)
			} else if got := valueTypeName(v); got != a.Type {
				t.Errorf("resource attribute %s: got %q, want %q", k, got, a.Type)
			}
		}
		for _, sm := range rm.ScopeMetrics().All() {
			for _, m := range sm.Metrics().All() {
				seen[m.Name()] = true
				if m.Type() == pmetric.MetricTypeHistogram {
					checkHistogram(t, m, histograms)
					continue
				}
				d, ok := md.Metrics[m.Name()]
				if !ok {
					t.Errorf("metric %s is emitted but not declared", m.Name())
					continue
				}
				md.checkMetric(t, m, d)
			}
		}
	}
	return seen
}

func checkHistogram(t testing.TB, m pmetric.Metric, histograms map[string]Histogram) {
	t.Helper()
	h, ok := histograms[m.Name()]
	if !ok {
		t.Errorf("histogram %s is not declared", m.Name())
		return
	}
	if got := m.Unit(); got != h.Unit {
		t.Errorf("unit of %s: got %q, want %q", m.Name(), got, h.Unit)
	}
	if got := m.Histogram().AggregationTemporality(); got != pmetric.AggregationTemporalityCumulative {
		t.Errorf("temporality of %s: got %v, want %v", m.Name(), got, pmetric.AggregationTemporalityCumulative)
	}
	for _, dp := range m.Histogram().DataPoints().All() {
		for k, v := range dp.Attributes().All() {
			if got := valueTypeName(v); got != h.Attributes[k] {
				t.Errorf("attribute %s on %s: got %q, want %q", k, m.Name(), got, h.Attributes[k])
			}
		}
	}
}

func (md Metadata) checkMetric(t testing.TB, m pmetric.Metric, d Metric) {
	t.Helper()
	if got := m.Unit(); got != d.Unit {
		t.Errorf("unit of %s: got %q, want %q", m.Name(), got, d.Unit)
	}
	var dps pmetric.NumberDataPointSlice
	var valueType string
	switch m.Type() {
	case pmetric.MetricTypeGauge:
		if d.Gauge == nil {
			t.Errorf("%s is a gauge, declared otherwise", m.Name())
			return
		}
		dps, valueType = m.Gauge().DataPoints(), d.Gauge.ValueType
	case pmetric.MetricTypeSum:
		if d.Sum == nil {
			t.Errorf("%s is a sum, declared otherwise", m.Name())
			return
		}
		if got := m.Sum().IsMonotonic(); got != d.Sum.Monotonic {
			t.Errorf("monotonicity of %s: got %v, want %v", m.Name(), got, d.Sum.Monotonic)
		}
		if got := map[pmetric.AggregationTemporality]string{
			pmetric.AggregationTemporalityCumulative: "cumulative", pmetric.AggregationTemporalityDelta: "delta",
		}[m.Sum().AggregationTemporality()]; got != d.Sum.Temporality {
			t.Errorf("temporality of %s: got %q, want %q", m.Name(), got, d.Sum.Temporality)
		}
		dps, valueType = m.Sum().DataPoints(), d.Sum.ValueType
	default:
		t.Errorf("metric %s has type %s, which metadata.yaml cannot declare", m.Name(), m.Type())
		return
	}
	want := map[string]Attribute{}
	for _, key := range d.Attributes {
		a := md.Attributes[key]
		name := a.NameOverride
		if name == "" {
			name = key
		}
		want[name] = a
	}
	for _, dp := range dps.All() {
		if got := map[pmetric.NumberDataPointValueType]string{
			pmetric.NumberDataPointValueTypeInt: "int", pmetric.NumberDataPointValueTypeDouble: "double",
		}[dp.ValueType()]; got != valueType {
			t.Errorf("value type of %s: got %q, want %q", m.Name(), got, valueType)
		}
		for name, v := range dp.Attributes().All() {
			a, ok := want[name]
			if !ok {
				t.Errorf("attribute %s on %s is not declared for it", name, m.Name())
				continue
			}
			if got := valueTypeName(v); got != a.Type {
				t.Errorf("type of %s on %s: got %q, want %q", name, m.Name(), got, a.Type)
			}
			if len(a.Enum) > 0 && !slices.Contains(a.Enum, v.Str()) {
				t.Errorf("value of %s on %s: got %v, want it to contain %q", name, m.Name(), a.Enum, v.Str())
			}
		}
		for name, a := range want {
			if _, ok := dp.Attributes().Get(name); !ok && a.RequirementLevel != "conditionally_required" {
				t.Errorf("a %s point without %s", m.Name(), name)
			}
		}
	}
}

func valueTypeName(v pcommon.Value) string {
	switch v.Type() {
	case pcommon.ValueTypeStr:
		return "string"
	case pcommon.ValueTypeInt:
		return "int"
	case pcommon.ValueTypeDouble:
		return "double"
	case pcommon.ValueTypeBool:
		return "bool"
	}
	return v.Type().String()
}
