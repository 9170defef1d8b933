package runtimecorrelationprocessor

import (
	"sync"

	"go.opentelemetry.io/collector/pdata/pcommon"
)

// namingKeys are the resource attributes that name a process's cluster,
// node, namespace, pod, container and workload. Processors ahead of this one
// (k8s_attributes, a resource processor setting k8s.cluster.name) put them
// on the windows' resources; the runtime.overlap records and overlap
// metrics this processor makes come after those processors, so it copies
// them from the scope's windows.
var namingKeys = []string{
	"k8s.cluster.name", "k8s.node.name", "k8s.namespace.name", "k8s.pod.name", "k8s.container.name",
	"k8s.deployment.name", "k8s.statefulset.name", "k8s.daemonset.name", "k8s.replicaset.name",
	"k8s.job.name", "k8s.cronjob.name", "container.image.name",
}

// maxNamedScopes bounds the names kept: one entry per process (scope) with
// windows. When full, the map starts over; the names come back with the
// next windows of each process.
const maxNamedScopes = 8192

// scopeNames holds the last naming attributes seen on each scope's windows.
// Only trusted windows reach it (ingestLogs drops the others first).
type scopeNames struct {
	mu sync.Mutex
	m  map[scopeKey][]string // key, value, key, value...
}

func newScopeNames() *scopeNames { return &scopeNames{m: map[scopeKey][]string{}} }

// note records res's naming attributes for key; a resource without any
// leaves what was recorded.
func (n *scopeNames) note(key scopeKey, res pcommon.Map) {
	var kv []string
	for _, k := range namingKeys {
		if v, ok := res.Get(k); ok && v.Type() == pcommon.ValueTypeStr && v.Str() != "" {
			kv = append(kv, k, v.Str())
		}
	}
	if len(kv) == 0 {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if _, ok := n.m[key]; !ok && len(n.m) >= maxNamedScopes {
		clear(n.m)
	}
	n.m[key] = kv
}

// put writes key's recorded names onto attrs, leaving any attrs has.
func (n *scopeNames) put(key scopeKey, attrs pcommon.Map) {
	n.mu.Lock()
	kv := n.m[key]
	n.mu.Unlock()
	for i := 0; i+1 < len(kv); i += 2 {
		if _, ok := attrs.Get(kv[i]); !ok {
			attrs.PutStr(kv[i], kv[i+1])
		}
	}
}
