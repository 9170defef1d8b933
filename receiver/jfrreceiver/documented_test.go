package jfrreceiver

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/receiver/receivertest"
	"go.yaml.in/yaml/v3"

	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/jvmmetrics"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/metadata"
)

// declaredMetric is what metadata.yaml (or jvmmetrics.Histograms) says of
// one metric.
type declaredMetric struct {
	Unit string `yaml:"unit"`
	Sum  *struct {
		ValueType string `yaml:"value_type"`
		Monotonic bool   `yaml:"monotonic"`
	} `yaml:"sum"`
	Gauge *struct {
		ValueType string `yaml:"value_type"`
	} `yaml:"gauge"`
	Histogram  bool
	Attributes []string `yaml:"attributes"`
}

type declarations struct {
	ResourceAttributes map[string]struct {
		Type string `yaml:"type"`
	} `yaml:"resource_attributes"`
	Attributes map[string]struct {
		Type string `yaml:"type"`
	} `yaml:"attributes"`
	Metrics map[string]declaredMetric `yaml:"metrics"`
}

func readDeclarations(t *testing.T) declarations {
	t.Helper()
	data, err := os.ReadFile("metadata.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var d declarations
	if err := yaml.Unmarshal(data, &d); err != nil {
		t.Fatal(err)
	}
	for _, h := range jvmmetrics.Histograms {
		if _, dup := d.Metrics[h.Name]; dup {
			t.Errorf("%s is declared in metadata.yaml and as a histogram", h.Name)
		}
		d.Metrics[h.Name] = declaredMetric{Unit: h.Unit, Histogram: true, Attributes: h.Attributes}
	}
	return d
}

// TestEmittedMetricsAreDeclared drives the receiver on the project's two
// fixture recordings (G1 on JDK 17; ZGC with Native Memory Tracking on JDK
// 25, both recorded with the JDK's default settings) and checks every
// metric it emits against metadata.yaml and jvmmetrics.Histograms: the
// name declared, the unit, type, monotonicity and value type as declared,
// every point attribute declared for that metric and every resource
// attribute declared; then that every declared metric was emitted, but
// the safepoint metrics: the JDK's default settings record no safepoint
// under 10 ms and the fixtures have none (the receiver's tests on live
// JVMs check those). About 1 s.
func TestEmittedMetricsAreDeclared(t *testing.T) {
	d := readDeclarations(t)
	dir := t.TempDir()
	for _, f := range []string{"g1-default-jdk17.jfr", "zgc-default-nmt-jdk25.jfr"} {
		data, err := os.ReadFile(filepath.Join("..", "..", "pkg", "jfr", "testdata", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	f := NewFactory()
	cfg := f.CreateDefaultConfig().(*Config)
	cfg.PollInterval = 20 * time.Millisecond
	cfg.CollectionInterval = 50 * time.Millisecond
	cfg.Repositories.Enabled = false
	cfg.Recordings.Include = []string{filepath.Join(dir, "*.jfr")}
	cfg.Recordings.DiscoveryInterval = 20 * time.Millisecond
	sink := new(consumertest.MetricsSink)
	r, err := f.CreateMetrics(context.Background(), receivertest.NewNopSettings(metadata.Type), cfg, sink)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(context.Background(), componenttest.NewNopHost()); err != nil {
		t.Fatal(err)
	}
	emitted := map[string]bool{}
	deadline := time.Now().Add(30 * time.Second)
	for len(emitted) < len(d.Metrics)-3-len(liveOnly)-len(accountsOnly) && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
		for _, md := range sink.AllMetrics() {
			for i := range md.ResourceMetrics().Len() {
				ms := md.ResourceMetrics().At(i).ScopeMetrics().At(0).Metrics()
				for k := range ms.Len() {
					emitted[ms.At(k).Name()] = true
				}
			}
		}
	}
	if err := r.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}

	for _, md := range sink.AllMetrics() {
		for i := range md.ResourceMetrics().Len() {
			rm := md.ResourceMetrics().At(i)
			for k := range rm.Resource().Attributes().All() {
				if _, ok := d.ResourceAttributes[k]; !ok {
					t.Errorf("resource attribute %s is not declared", k)
				}
			}
			if sc := rm.ScopeMetrics().At(0).Scope().Name(); sc != metadata.ScopeName {
				t.Errorf("scope %q", sc)
			}
			ms := rm.ScopeMetrics().At(0).Metrics()
			for k := range ms.Len() {
				checkDeclared(t, d, ms.At(k))
			}
		}
	}
	var missing []string
	for name := range d.Metrics {
		if !emitted[name] && !strings.HasPrefix(name, "jvm.safepoint.") && !liveOnly[name] && !accountsOnly[name] {
			missing = append(missing, name)
		}
	}
	slices.Sort(missing)
	if len(missing) > 0 {
		t.Errorf("declared but not emitted on the fixtures: %v", missing)
	}
}

// liveOnly are the metrics of running JVMs only, which recording files do
// not give: TestAgentParity checks their declarations.
var liveOnly = map[string]bool{"jvm.cpu.time": true}

// accountsOnly are the accounts read beside JFR from running JVMs (a
// thread dump, /proc) and their leak verdicts, which neither recording
// files nor TestAgentParity's JVMs (no attach, no leak window) give:
// TestAccountLeaks checks their declarations.
var accountsOnly = map[string]bool{"jvm.jni.reference.count": true, "jvm.native_memory.unaccounted": true, "jvm.memory.leak.suspected": true}

func checkDeclared(t *testing.T, d declarations, m pmetric.Metric) {
	t.Helper()
	decl, ok := d.Metrics[m.Name()]
	if !ok {
		t.Errorf("%s is emitted but not declared", m.Name())
		return
	}
	if m.Unit() != decl.Unit {
		t.Errorf("%s unit %q, declared %q", m.Name(), m.Unit(), decl.Unit)
	}
	var attrs []func(yield func(string) bool)
	valueType := func(vt pmetric.NumberDataPointValueType) string {
		if vt == pmetric.NumberDataPointValueTypeInt {
			return "int"
		}
		return "double"
	}
	switch {
	case decl.Histogram:
		if m.Type() != pmetric.MetricTypeHistogram {
			t.Errorf("%s is a %s, declared a histogram", m.Name(), m.Type())
			return
		}
		for i := range m.Histogram().DataPoints().Len() {
			attrs = append(attrs, keys(m.Histogram().DataPoints().At(i).Attributes().All()))
		}
	case decl.Sum != nil:
		if m.Type() != pmetric.MetricTypeSum || m.Sum().IsMonotonic() != decl.Sum.Monotonic ||
			m.Sum().AggregationTemporality() != pmetric.AggregationTemporalityCumulative {
			t.Errorf("%s: %s, declared a cumulative sum, monotonic %v", m.Name(), m.Type(), decl.Sum.Monotonic)
			return
		}
		for i := range m.Sum().DataPoints().Len() {
			dp := m.Sum().DataPoints().At(i)
			if valueType(dp.ValueType()) != decl.Sum.ValueType {
				t.Errorf("%s value type %s, declared %s", m.Name(), dp.ValueType(), decl.Sum.ValueType)
			}
			attrs = append(attrs, keys(dp.Attributes().All()))
		}
	case decl.Gauge != nil:
		if m.Type() != pmetric.MetricTypeGauge {
			t.Errorf("%s is a %s, declared a gauge", m.Name(), m.Type())
			return
		}
		for i := range m.Gauge().DataPoints().Len() {
			dp := m.Gauge().DataPoints().At(i)
			if valueType(dp.ValueType()) != decl.Gauge.ValueType {
				t.Errorf("%s value type %s, declared %s", m.Name(), dp.ValueType(), decl.Gauge.ValueType)
			}
			attrs = append(attrs, keys(dp.Attributes().All()))
		}
	default:
		t.Errorf("%s declared without a type", m.Name())
	}
	for _, seq := range attrs {
		for k := range seq {
			if !slices.Contains(decl.Attributes, k) {
				t.Errorf("%s carries %s, which it does not declare", m.Name(), k)
			}
		}
	}
}

func keys[V any](all func(yield func(string, V) bool)) func(yield func(string) bool) {
	return func(yield func(string) bool) {
		for k := range all {
			if !yield(k) {
				return
			}
		}
	}
}
