package pythongilreceiver

import (
	"os"
	"slices"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.yaml.in/yaml/v3"

	"github.com/otelcol-ai/otelcol-ai/internal/window"
	"github.com/otelcol-ai/otelcol-ai/receiver/pythongilreceiver/internal/workloadtest"
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
					if !histograms[m.Name()] {
						t.Errorf("histogram %s is not declared (histograms[m.Name()] is false)", m.Name())
					}
					if got := m.Unit(); got != "s" {
						t.Errorf("m.Unit(): got %q, want %q", got, "s")
					}
					if got := m.Histogram().AggregationTemporality(); got != pmetric.AggregationTemporalityCumulative {
						t.Errorf("m.Histogram().AggregationTemporality(): got %v, want %v", got, pmetric.AggregationTemporalityCumulative)
					}
					for _, dp := range m.Histogram().DataPoints().All() {
						for k, v := range dp.Attributes().All() {
							if got := valueTypeName(v); got != histogramAttributes[k] {
								t.Errorf("attribute %s on %s: got %q, want %q", k, m.Name(), got, histogramAttributes[k])
							}
						}
					}
					continue
				}
				d, ok := decl.Metrics[m.Name()]
				if !ok {
					t.Errorf("metric %s is emitted but not declared", m.Name())
					continue
				}
				if got := m.Unit(); got != d.Unit {
					t.Errorf("unit of %s: got %q, want %q", m.Name(), got, d.Unit)
				}
				var dps pmetric.NumberDataPointSlice
				var valueType string
				switch m.Type() {
				case pmetric.MetricTypeGauge:
					if d.Gauge == nil {
						t.Errorf("%s is a gauge, declared otherwise", m.Name())
						continue
					}
					dps, valueType = m.Gauge().DataPoints(), d.Gauge.ValueType
				case pmetric.MetricTypeSum:
					if d.Sum == nil {
						t.Errorf("%s is a sum, declared otherwise", m.Name())
						continue
					}
					if got := m.Sum().IsMonotonic(); got != d.Sum.Monotonic {
						t.Errorf("monotonicity of %s: got %v, want %v", m.Name(), got, d.Sum.Monotonic)
					}
					if got := m.Sum().AggregationTemporality() == pmetric.AggregationTemporalityCumulative; got != (d.Sum.Temporality == "cumulative") {
						t.Errorf("temporality of %s: got %v, want %v", m.Name(), got, d.Sum.Temporality == "cumulative")
					}
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
						if len(a.Enum) > 0 {
							if !slices.Contains(a.Enum, v.Str()) {
								t.Errorf("value of %s on %s: got %v, want it to contain %q", name, m.Name(), a.Enum, v.Str())
							}
						}
					}
					for name, a := range want {
						if a.RequirementLevel != "conditionally_required" {
							_, ok := dp.Attributes().Get(name)
							if !ok {
								t.Errorf("a %s point without %s (ok is false)", m.Name(), name)
							}
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
	if err != nil {
		t.Fatalf("os.ReadFile: %v", err)
	}
	var decl declaredMetadata
	if err := yaml.Unmarshal(data, &decl); err != nil {
		t.Fatalf("yaml.Unmarshal: %v", err)
	}
	want := []string{}
	for name := range decl.Metrics {
		want = append(want, name)
	}
	for _, h := range histogramMetrics {
		want = append(want, h.name)
	}
	slices.Sort(want)

	sleep := workloadtest.Start(t, "sleep", "3", "20")
	spin := workloadtest.Start(t, "spin", "2", "0.5")
	collect := workloadtest.Start(t, "gc", "3")
	cfg := fastConfig(sleep.PID, spin.PID, collect.PID)
	cfg.PerThread = true
	// A budget, so that python.gil.probe.cost is reported, that these
	// workloads never reach: nothing detached.
	cfg.Overhead = OverheadConfig{Budget: 1, Period: time.Second, CostPerHit: time.Microsecond}
	h := startReceiver(t, cfg, componenttest.NewNopHost())
	for _, w := range []*workloadtest.Process{sleep, spin, collect} {
		h.waitAttached(w.PID)
	}
	img, err := readImage(libPython(t, spin.PID))
	if err != nil {
		t.Fatalf("readImage: %v", err)
	}
	if !img.Symbols.Switch() || img.Symbols.GC() == "" {
		t.Skipf("python3 has no take_gil/drop_gil or gc_collect_main symbols: held time, switches and GC pauses cannot be probed")
	}
	var v map[string]any
	for _, w := range []*workloadtest.Process{sleep, spin, collect} {
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
	if len(missing) != 0 {
		t.Errorf("declared but never emitted: got %v, want empty", missing)
	}
}

// libPython is the interpreter file pid maps, as this process sees it.
func libPython(t *testing.T, pid int) string {
	t.Helper()
	path, err := workloadtest.LibPython(pid)
	if err != nil {
		t.Fatalf("workloadtest.LibPython: %v", err)
	}
	return path
}
