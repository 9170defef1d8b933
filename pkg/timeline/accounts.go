package timeline // import "github.com/otelcol-ai/otelcol-ai/pkg/timeline"

import (
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/otelcol-ai/otelcol-ai/internal/window"
)

// KindAccounts is the query kind of the JVM memory accounts' points.
const KindAccounts = "accounts"

// AccountPoint is one reading of one of a JVM's memory accounts (the jfr
// receiver's: jvm.memory.leak.source's names), drawn on its process's lane
// as the GPU memory is.
type AccountPoint struct {
	Lane    int    `json:"lane"`
	Account string `json:"account"`
	T       int64  `json:"t"`
	Value   int64  `json:"value"`
}

// The accounts the page draws, from the jfr receiver's metrics: the
// off-heap ones a native or GPU leak moves (the heap has its own panels).
const (
	AccountNativeUnaccounted = "native_unaccounted"
	AccountJNIGlobalRefs     = "jni_global_refs"
	AccountDirectBuffers     = "direct_buffers"
	AccountMetaspace         = "metaspace"
)

// accountMetrics says which metric, and which of its points, is an
// account: the metric, the attribute and value a point must have ("" for
// any), the account.
var accountMetrics = []struct {
	metric, attr, value, account string
}{
	{"jvm.native_memory.unaccounted", "", "", AccountNativeUnaccounted},
	{"jvm.jni.reference.count", "jvm.jni.reference.kind", "global", AccountJNIGlobalRefs},
	{"jvm.buffer.memory.used", "jvm.buffer.pool.name", "direct", AccountDirectBuffers},
	{"jvm.memory.used", "jvm.memory.pool.name", "Metaspace", AccountMetaspace},
}

// AccountPoints calls f with each point of m that is a JVM account's
// reading (time, value), when m is one of the metrics accounts come from.
func AccountPoints(m pmetric.Metric, f func(account string, t, value int64)) {
	for _, a := range accountMetrics {
		if m.Name() != a.metric {
			continue
		}
		var dps pmetric.NumberDataPointSlice
		switch m.Type() {
		case pmetric.MetricTypeSum:
			dps = m.Sum().DataPoints()
		case pmetric.MetricTypeGauge:
			dps = m.Gauge().DataPoints()
		default:
			return
		}
		for _, dp := range dps.All() {
			if a.attr != "" && window.StrAttr(dp.Attributes(), a.attr) != a.value {
				continue
			}
			v := dp.IntValue()
			if dp.ValueType() == pmetric.NumberDataPointValueTypeDouble {
				v = int64(dp.DoubleValue())
			}
			f(a.account, int64(dp.Timestamp()), v)
		}
		return
	}
}
