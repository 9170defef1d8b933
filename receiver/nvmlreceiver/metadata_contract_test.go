package nvmlreceiver

import (
	"os"
	"reflect"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh200"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.yaml.in/yaml/v3"
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
	NameOverride string   `yaml:"name_override"`
	Type         string   `yaml:"type"`
	Enum         []string `yaml:"enum"`
}

func readDeclaredMetadata(t *testing.T) declaredMetadata {
	t.Helper()
	data, err := os.ReadFile("metadata.yaml")
	if err != nil {
		t.Fatalf("os.ReadFile: %v", err)
	}
	var md declaredMetadata
	if err := yaml.Unmarshal(data, &md); err != nil {
		t.Fatalf("yaml.Unmarshal: %v", err)
	}
	if len(md.Metrics) == 0 {
		t.Fatalf("md.Metrics: got empty, want at least one element")
	}
	return md
}

// checkDeclared asserts that every metric, point attribute and resource
// attribute in got is declared in metadata.yaml with the same unit, type,
// monotonicity, temporality, value type and attribute set, and returns the
// names of the metrics seen.
func checkDeclared(t *testing.T, decl declaredMetadata, got pmetric.Metrics) map[string]bool {
	t.Helper()
	seen := map[string]bool{}
	for i := range got.ResourceMetrics().Len() {
		rm := got.ResourceMetrics().At(i)
		for k, v := range rm.Resource().Attributes().All() {
			a, ok := decl.ResourceAttributes[k]
			if !ok {
				t.Errorf("resource attribute %s is not declared", k)
			} else if got := valueTypeName(v); got != a.Type {
				t.Errorf("resource attribute %s: got %q, want %q", k, got, a.Type)
			}
		}
		for j := range rm.ScopeMetrics().Len() {
			ms := rm.ScopeMetrics().At(j).Metrics()
			for k := range ms.Len() {
				m := ms.At(k)
				seen[m.Name()] = true
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
					if got := map[pmetric.AggregationTemporality]string{
						pmetric.AggregationTemporalityCumulative: "cumulative", pmetric.AggregationTemporalityDelta: "delta",
					}[m.Sum().AggregationTemporality()]; got != d.Sum.Temporality {
						t.Errorf("temporality of %s: got %q, want %q", m.Name(), got, d.Sum.Temporality)
					}
					dps, valueType = m.Sum().DataPoints(), d.Sum.ValueType
				default:
					t.Errorf("metric %s has type %s, which metadata.yaml cannot declare", m.Name(), m.Type())
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
				for p := range dps.Len() {
					dp := dps.At(p)
					if got := map[pmetric.NumberDataPointValueType]string{
						pmetric.NumberDataPointValueTypeInt: "int", pmetric.NumberDataPointValueTypeDouble: "double",
					}[dp.ValueType()]; got != valueType {
						t.Errorf("value type of %s: got %q, want %q", m.Name(), got, valueType)
					}
					var names []string
					for name, v := range dp.Attributes().All() {
						names = append(names, name)
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
					wantNames := make([]string, 0, len(want))
					for name := range want {
						wantNames = append(wantNames, name)
					}
					sort.Strings(names)
					sort.Strings(wantNames)
					if !reflect.DeepEqual(names, wantNames) {
						t.Errorf("attributes of a %s point: got %v, want %v", m.Name(), names, wantNames)
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
	case pcommon.ValueTypeBool:
		return "bool"
	}
	return v.Type().String()
}

// TestEmittedMetricsAreDeclared drives the receiver over a DGX H200 mock
// (one GPU in MIG mode with a process on a MIG device, processes on whole
// GPUs with per-process samples, a leaking process so that the growth rate
// is reported) and checks every emitted metric against metadata.yaml:
// nothing emitted is undeclared or declared differently, and every
// declared metric was emitted.
func TestEmittedMetricsAreDeclared(t *testing.T) {
	srv := dgxh200.New()
	node := newFakeNode(t, srv)
	d := srv.Devices[7].(*server.Device)
	_, ret := d.SetMigMode(nvml.DEVICE_MIG_ENABLE)
	if ret != nvml.SUCCESS {
		t.Fatalf("d.SetMigMode: got %v, want %v", ret, nvml.SUCCESS)
	}
	profile, ret := d.GetGpuInstanceProfileInfo(nvml.GPU_INSTANCE_PROFILE_1_SLICE)
	if ret != nvml.SUCCESS {
		t.Fatalf("d.GetGpuInstanceProfileInfo: got %v, want %v", ret, nvml.SUCCESS)
	}
	gi, ret := d.CreateGpuInstance(&profile)
	if ret != nvml.SUCCESS {
		t.Fatalf("d.CreateGpuInstance: got %v, want %v", ret, nvml.SUCCESS)
	}
	info, ret := gi.GetInfo()
	if ret != nvml.SUCCESS {
		t.Fatalf("gi.GetInfo: got %v, want %v", ret, nvml.SUCCESS)
	}
	node.migs[7] = []*fakeMIG{{uuid: "MIG-aaaa", instanceID: int(info.Id), total: 18 * 1024 * mib, used: 4 * 1024 * mib,
		processes: []nvml.ProcessInfo{{Pid: 700, UsedGpuMemory: 4 * 1024 * mib}}}}

	tr := newTestReceiver(t, node, func(c *Config) {
		c.LeakDetection.Window = time.Minute
		c.LeakDetection.MinSamples = 3
	})
	clock := &fakeClock{t: time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC), step: 10 * time.Second}
	tr.now = clock.now
	writeProc(t, tr.cfg.Processes.ProcRoot, fakeProc{pid: 4242, exe: "/usr/bin/python3.12", cmdline: "python3\x00serve.py\x00",
		cgroup: "0::/kubepods.slice/kubepods-pod" + podUIDUnder + ".slice/cri-containerd-" + containerID + ".scope\n", vpid: 1})

	decl := readDeclaredMetadata(t)
	seen := map[string]bool{}
	for i := range 6 {
		node.setProcess(0, 4242, uint64(1024+64*i)*mib)
		node.setProcess(1, 5000, 2048*mib)
		node.advanceSamples()
		for name := range checkDeclared(t, decl, tr.scrapeOnce(t)) {
			seen[name] = true
		}
	}
	var missing []string
	for name := range decl.Metrics {
		if !seen[name] {
			missing = append(missing, name)
		}
	}
	slices.Sort(missing)
	if len(missing) != 0 {
		t.Errorf("declared in metadata.yaml but never emitted: got %v, want empty", missing)
	}
}

// pointCount is the number of points of metric name on rm.
func pointCount(rm pmetric.ResourceMetrics, name string) int {
	n := 0
	for i := range rm.ScopeMetrics().Len() {
		ms := rm.ScopeMetrics().At(i).Metrics()
		for j := range ms.Len() {
			if m := ms.At(j); m.Name() == name {
				switch m.Type() {
				case pmetric.MetricTypeGauge:
					n += m.Gauge().DataPoints().Len()
				case pmetric.MetricTypeSum:
					n += m.Sum().DataPoints().Len()
				}
			}
		}
	}
	return n
}
