package runtimecorrelationprocessor // import "github.com/otelcol-ai/otelcol-ai/processor/runtimecorrelationprocessor"

import (
	"github.com/otelcol-ai/otelcol-ai/internal/window"
)

// The correlator marks, in the attention registry of the runtimestate
// extension its runtime_state names (none without it), the local processes whose spans it
// matched and whose JVM pauses it indexed, in the terms of its match
// scope: a process (process), a pod (pod); on host scope every window of
// the node overlaps every span and pause, so there is nothing to aim at
// and nothing is marked. The pythongil receiver spends its uprobe budget
// on the interpreters so marked.

// isLocal reports whether a window's or a span's node is this one: the
// receivers of this collector, which read the registry, probe it.
func (c *correlator) isLocal(node string) bool {
	return node != "" && (node == c.node.HostName || node == c.node.K8sNodeName)
}

// markSpans marks the process of a span resource that was matched.
func (c *correlator) markSpans(id spanIdentity) {
	if id.unmatched != "" {
		return
	}
	switch c.cfg.MatchScope {
	case ScopeProcess:
		if id.scope.gen != goneGen && c.isLocal(id.scope.host) {
			c.attention.Load().MarkProcess(int(id.scope.pid), 0, c.now())
		}
	case ScopePod:
		c.attention.Load().MarkPod(id.scope.pod, c.now())
	}
}

// markPaused marks the process of a batch of windows that held a JVM
// pause.
func (c *correlator) markPaused(s source) {
	switch c.cfg.MatchScope {
	case ScopeProcess:
		if s.hasPID && c.isLocal(s.node) {
			c.attention.Load().MarkProcess(s.proc.PID, s.proc.StartTicks, c.now())
		}
	case ScopePod:
		c.attention.Load().MarkPod(s.proc.PodUID, c.now())
	}
}

// isPause reports whether a window kind stops the JVM's threads.
func isPause(k window.Kind) bool {
	return k == window.KindJVMSafepoint || k == window.KindJVMGCPause
}
