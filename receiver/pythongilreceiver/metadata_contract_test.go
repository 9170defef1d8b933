package pythongilreceiver

import (
	"os"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.yaml.in/yaml/v3"

	"github.com/otelcol-ai/otelcol-ai/internal/window"
	"github.com/otelcol-ai/otelcol-ai/receiver/pythongilreceiver/internal/workload"
)

// declaredMetadata is the part of metadata.yaml that says what the
// receiver emits.
type declaredMetadata struct {
	ResourceAttributes map[string]declaredAttribute `yaml:"resource_attributes"`
	Attributes         map[string]declaredAttribute `yaml:"attributes"`
	Metrics            map[string]struct {
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
	} `yaml:"metrics"`
}

type declaredAttribute struct {
	NameOverride     string   `yaml:"name_override"`
	Type             string   `yaml:"type"`
	Enum             []string `yaml:"enum"`
	RequirementLevel string   `yaml:"requirement_level"`
}

// histogramAttributes are the attributes a hand-built histogram's points
// may carry (see appendHistograms).
var histogramAttributes = map[string]string{window.AttrThreadID: "int", attrCPythonGCGeneration: "int"}

// checkDeclared asserts that every metric, point attribute and resource
// attribute in got is declared - in metadata.yaml with the same unit,
// type, monotonicity, temporality, value type and attributes, or for the
// histograms in histogramMetrics - and returns the metric names seen.
func checkDeclared(t *testing.T, decl declaredMetadata, got pmetric.Metrics) map[string]bool {
	t.Helper()
	histograms := map[string]bool{}
	for _, h := range histogramMetrics {
		histograms[h.name] = true
	}
	seen := map[string]bool{}
	for _, rm := range got.ResourceMetrics().All() {
		for k, v := range rm.Resource().Attributes().All() {
			a, ok := decl.ResourceAttributes[k]
			if assert.True(t, ok, "resource attribute %s is not declared", k) {
				assert.Equal(t, a.Type, valueTypeName(v), "resource attribute %s", k)
			}
		}
		for _, sm := range rm.ScopeMetrics().All() {
			for _, m := range sm.Metrics().All() {
				seen[m.Name()] = true
				if m.Type() == pmetric.MetricTypeHistogram {
					assert.True(t, histograms[m.Name()], "histogram %s is not declared", m.Name())
					assert.Equal(t, "s", m.Unit())
					assert.Equal(t, pmetric.AggregationTemporalityCumulative, m.Histogram().AggregationTemporality())
					for _, dp := range m.Histogram().DataPoints().All() {
						for k, v := range dp.Attributes().All() {
							assert.Equal(t, histogramAttributes[k], valueTypeName(v), "attribute %s on %s", k, m.Name())
						}
					}
					continue
				}
				d, ok := decl.Metrics[m.Name()]
				if !assert.True(t, ok, "metric %s is emitted but not declared", m.Name()) {
					continue
				}
				assert.Equal(t, d.Unit, m.Unit(), "unit of %s", m.Name())
				var dps pmetric.NumberDataPointSlice
				var valueType string
				switch m.Type() {
				case pmetric.MetricTypeGauge:
					if !assert.NotNil(t, d.Gauge, "%s is a gauge, declared otherwise", m.Name()) {
						continue
					}
					dps, valueType = m.Gauge().DataPoints(), d.Gauge.ValueType
				case pmetric.MetricTypeSum:
					if !assert.NotNil(t, d.Sum, "%s is a sum, declared otherwise", m.Name()) {
						continue
					}
					assert.Equal(t, d.Sum.Monotonic, m.Sum().IsMonotonic(), "monotonicity of %s", m.Name())
					assert.Equal(t, d.Sum.Temporality == "cumulative", m.Sum().AggregationTemporality() == pmetric.AggregationTemporalityCumulative,
						"temporality of %s", m.Name())
					dps, valueType = m.Sum().DataPoints(), d.Sum.ValueType
				default:
					t.Errorf("metric %s has type %s", m.Name(), m.Type())
					continue
				}
				want := map[string]declaredAttribute{}
				for _, key := range d.Attributes {
					a := decl.Attributes[key]
					name := a.NameOverride
					if name == "" {
						name = key
					}
					want[name] = a
				}
				for _, dp := range dps.All() {
					assert.Equal(t, valueType, map[pmetric.NumberDataPointValueType]string{
						pmetric.NumberDataPointValueTypeInt: "int", pmetric.NumberDataPointValueTypeDouble: "double",
					}[dp.ValueType()], "value type of %s", m.Name())
					for name, v := range dp.Attributes().All() {
						a, ok := want[name]
						if !assert.True(t, ok, "attribute %s on %s is not declared for it", name, m.Name()) {
							continue
						}
						assert.Equal(t, a.Type, valueTypeName(v), "type of %s on %s", name, m.Name())
						if len(a.Enum) > 0 {
							assert.Contains(t, a.Enum, v.Str(), "value of %s on %s", name, m.Name())
						}
					}
					for name, a := range want {
						if a.RequirementLevel != "conditionally_required" {
							_, ok := dp.Attributes().Get(name)
							assert.True(t, ok, "a %s point without %s", m.Name(), name)
						}
					}
				}
			}
		}
	}
	return seen
}

func valueTypeName(v pcommon.Value) string {
	switch v.Type() {
	case pcommon.ValueTypeStr:
		return "string"
	case pcommon.ValueTypeInt:
		return "int"
	case pcommon.ValueTypeDouble:
		return "double"
	}
	return v.Type().String()
}

// TestEmittedMetricsAreDeclared probes three real CPython workloads (threads
// sleeping, two threads contending for the GIL past the switch interval,
// full collections of 200k cyclic objects) with per-thread series, and
// checks every metric the receiver emits against its declaration: nothing
// emitted is undeclared or declared differently, and every declared metric
// (the histograms included) is emitted. Runs in about 5 s.
func TestEmittedMetricsAreDeclared(t *testing.T) {
	data, err := os.ReadFile("metadata.yaml")
	require.NoError(t, err)
	var decl declaredMetadata
	require.NoError(t, yaml.Unmarshal(data, &decl))
	want := []string{}
	for name := range decl.Metrics {
		want = append(want, name)
	}
	for _, h := range histogramMetrics {
		want = append(want, h.name)
	}
	slices.Sort(want)

	sleep := workload.Start(t, "sleep", "3", "20")
	spin := workload.Start(t, "spin", "2", "0.5")
	collect := workload.Start(t, "gc", "3")
	cfg := fastConfig(sleep.PID, spin.PID, collect.PID)
	cfg.PerThread = true
	h := startReceiver(t, cfg, componenttest.NewNopHost())
	for _, w := range []*workload.Process{sleep, spin, collect} {
		h.waitAttached(w.PID)
	}
	img, err := readImage(libPython(t, spin.PID))
	require.NoError(t, err)
	if !img.Symbols.Switch() || img.Symbols.GC() == "" {
		t.Skipf("python3 has no take_gil/drop_gil or gc_collect_main symbols: held time, switches and GC pauses cannot be probed")
	}
	var v map[string]any
	for _, w := range []*workload.Process{sleep, spin, collect} {
		w.Run(&v)
	}

	seen := map[string]bool{}
	checked := 0
	missing := want
	for deadline := time.Now().Add(30 * time.Second); len(missing) > 0 && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
		all := h.metrics.AllMetrics()
		for _, md := range all[checked:] {
			for name := range checkDeclared(t, decl, md) {
				seen[name] = true
			}
		}
		checked = len(all)
		missing = slices.DeleteFunc(slices.Clone(want), func(name string) bool { return seen[name] })
	}
	assert.Empty(t, missing, "declared but never emitted")
}

// libPython is the interpreter file pid maps, as this process sees it.
func libPython(t *testing.T, pid int) string {
	t.Helper()
	path, err := workload.LibPython(pid)
	require.NoError(t, err)
	return path
}
