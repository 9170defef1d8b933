package declaredtest

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.yaml.in/yaml/v3"
)

// recorder keeps what Check reports instead of failing the test.
type recorder struct {
	testing.TB
	errors []string
}

func (r *recorder) Helper() {}

func (r *recorder) Errorf(format string, args ...any) {
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}

const declared = `
resource_attributes:
  process.pid: {type: int}
attributes:
  kind: {name_override: example.kind, type: string, enum: [a, b]}
  thread: {name_override: thread.id, type: int, requirement_level: conditionally_required}
metrics:
  example.count:
    unit: "{event}"
    sum: {value_type: int, monotonic: true, aggregation_temporality: cumulative}
    attributes: [kind, thread]
  example.level:
    unit: "1"
    gauge: {value_type: double}
`

// emit builds one resource with a point of example.count carrying attrs
// and, unless level is empty, a gauge named level.
func emit(unit string, attrs map[string]any, level string) pmetric.Metrics {
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	rm.Resource().Attributes().PutInt("process.pid", 42)
	ms := rm.ScopeMetrics().AppendEmpty().Metrics()
	m := ms.AppendEmpty()
	m.SetName("example.count")
	m.SetUnit(unit)
	m.SetEmptySum().SetIsMonotonic(true)
	m.Sum().SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	dp := m.Sum().DataPoints().AppendEmpty()
	dp.SetIntValue(1)
	if err := dp.Attributes().FromRaw(attrs); err != nil {
		panic(err)
	}
	if level != "" {
		g := ms.AppendEmpty()
		g.SetName(level)
		g.SetUnit("1")
		g.SetEmptyGauge().DataPoints().AppendEmpty().SetDoubleValue(0.5)
	}
	h := ms.AppendEmpty()
	h.SetName("example.duration")
	h.SetUnit("s")
	h.SetEmptyHistogram().SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	h.Histogram().DataPoints().AppendEmpty().Attributes().PutInt("thread.id", 7)
	return md
}

func TestCheck(t *testing.T) {
	var md Metadata
	if err := yaml.Unmarshal([]byte(declared), &md); err != nil {
		t.Fatalf("yaml.Unmarshal: %v", err)
	}
	histograms := map[string]Histogram{"example.duration": {Unit: "s", Attributes: map[string]string{"thread.id": "int"}}}
	for _, tt := range []struct {
		name string
		got  pmetric.Metrics
		want []string // what the reports contain, in order
	}{
		{"as declared", emit("{event}", map[string]any{"example.kind": "a", "thread.id": 3}, "example.level"), nil},
		{"a conditionally required attribute left out", emit("{event}", map[string]any{"example.kind": "b"}, ""), nil},
		{"another unit", emit("By", map[string]any{"example.kind": "a"}, ""), []string{`unit of example.count: got "By", want "{event}"`}},
		{"a value outside the enum", emit("{event}", map[string]any{"example.kind": "c"}, ""), []string{"value of example.kind on example.count"}},
		{"a required attribute left out", emit("{event}", map[string]any{}, ""), []string{"a example.count point without example.kind"}},
		{"an undeclared attribute", emit("{event}", map[string]any{"example.kind": "a", "other": 1}, ""), []string{"attribute other on example.count is not declared"}},
		{"an attribute of another type", emit("{event}", map[string]any{"example.kind": "a", "thread.id": "3"}, ""), []string{`type of thread.id on example.count: got "string", want "int"`}},
		{"an undeclared metric", emit("{event}", map[string]any{"example.kind": "a"}, "example.other"), []string{"metric example.other is emitted but not declared"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := &recorder{TB: t}
			seen := md.Check(r, tt.got, histograms)
			if len(r.errors) != len(tt.want) {
				t.Fatalf("md.Check: got %q, want %d reports containing %q", r.errors, len(tt.want), tt.want)
			}
			for i, want := range tt.want {
				if !strings.Contains(r.errors[i], want) {
					t.Errorf("report %d: got %q, want it to contain %q", i, r.errors[i], want)
				}
			}
			if !seen["example.count"] || !seen["example.duration"] {
				t.Errorf("seen: got %v, want example.count and example.duration in it", seen)
			}
		})
	}
	t.Run("an undeclared histogram", func(t *testing.T) {
		r := &recorder{TB: t}
		md.Check(r, emit("{event}", map[string]any{"example.kind": "a"}, ""), nil)
		if want := []string{"histogram example.duration is not declared"}; !slices.Equal(r.errors, want) {
			t.Errorf("md.Check: got %q, want %q", r.errors, want)
		}
	})
}

func TestNames(t *testing.T) {
	md := Metadata{Metrics: map[string]Metric{"b": {}, "a": {}}}
	if got, want := md.Names(map[string]Histogram{"c": {}}), []string{"a", "b", "c"}; !slices.Equal(got, want) {
		t.Errorf("md.Names: got %v, want %v", got, want)
	}
}
