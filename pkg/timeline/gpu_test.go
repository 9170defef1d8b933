package timeline

import (
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
)

// TestRecordingGPUPointsNameTheirDevice: a per-process GPU memory point
// gets the device nvml names it by (hw.id); a point that names none is
// kept without one.
func TestRecordingGPUPointsNameTheirDevice(t *testing.T) {
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	rm.Resource().Attributes().PutInt("process.pid", 4242)
	rm.Resource().Attributes().PutStr("host.name", "node-1")
	m := rm.ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
	m.SetName(MetricGPUProcessMemory)
	dps := m.SetEmptyGauge().DataPoints()
	for i, device := range []string{"GPU-5f0c", ""} {
		dp := dps.AppendEmpty()
		dp.SetTimestamp(pcommon.Timestamp(1_700_000_000_000_000_000 + int64(i)*1_000_000))
		dp.SetIntValue(int64(i+1) << 30)
		if device != "" {
			dp.Attributes().PutStr(AttrGPUDevice, device)
		}
	}
	rec := NewRecording()
	rec.AddMetrics(md)
	s := rec.Snapshot("test", 0, 0)
	if len(s.GPU) != 2 || s.GPU[0].Device != "GPU-5f0c" || s.GPU[0].Bytes != 1<<30 || s.GPU[1].Device != "" || s.GPU[1].Bytes != 2<<30 {
		t.Fatalf("gpu points %+v, want GPU-5f0c at 1 GiB then one without a device at 2 GiB", s.GPU)
	}
}
