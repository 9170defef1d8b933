package runtimecorrelationprocessor

import (
	"context"
	"fmt"
	"net/netip"
	"runtime"
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/otelcol-ai/otelcol-ai/internal/procresource"
	"github.com/otelcol-ai/otelcol-ai/internal/procsocket"
	"github.com/otelcol-ai/otelcol-ai/internal/window"
)

// benchIdentities is a correlator on node with n containers' processes
// (each pid 1 inside) learned from their windows and in a fake table.
func benchIdentities(b *testing.B, n int) (*correlator, []pcommon.Resource) {
	c := benchCorrelator(b, 100_000)
	c.node = procresource.Node{HostName: node}
	table := &fakeTable{}
	var procs []procresource.Identity
	var spans []pcommon.Resource
	for i := range n {
		p := procresource.Identity{PID: 1000 + i, VPID: 1, StartTicks: uint64(i + 1),
			ContainerID: fmt.Sprintf("%064x", i), PodUID: fmt.Sprintf("%08x-0000-0000-0000-000000000000", i)}
		procs = append(procs, p)
		res := pcommon.NewResource()
		res.Attributes().PutStr(window.ResourceContainerID, p.ContainerID)
		res.Attributes().PutInt(window.ResourcePID, 1)
		res.Attributes().PutStr(window.ResourceHostName, "pod")
		spans = append(spans, res)
	}
	table.set(procs...)
	c.ids = newIdentities(c, table, &fakeSockets{}, c.cfg.Identity.CacheTTL, nil)
	for _, p := range procs {
		c.ingestLogs(measured(context.Background()), windowLogs(b, windowsOf(p), win(gilWait, 0, 1000, 1)))
	}
	return c, spans
}

// BenchmarkResolveSpanResource is the identity lookup of one span
// resource (a batch's spans share it): from the cache, and afresh (the
// learned maps, as after the cache's TTL).
func BenchmarkResolveSpanResource(b *testing.B) {
	c, spans := benchIdentities(b, 1000)
	ctx := context.Background()
	b.Run("cache-hit", func(b *testing.B) {
		for i := range b.N {
			if id := c.ids.resolve(ctx, spans[i%len(spans)]); id.unmatched != "" {
				b.Fatal(id.unmatched)
			}
		}
	})
	b.Run("miss", func(b *testing.B) {
		for i := range b.N {
			if id := c.ids.retry(spanIdentity{}, spans[i%len(spans)]); id.unmatched != "" {
				b.Fatal(id.unmatched)
			}
		}
	})
	b.Run("connection-hit", func(b *testing.B) {
		peer := netip.MustParseAddrPort("127.0.0.1:40000")
		c.ids.sockets = &fakeSockets{owners: map[netip.AddrPort]procsocket.Owner{peer: {Identity: procresource.Identity{PID: 1000, StartTicks: 1}}}}
		ctx := withPeer(peer)
		res := pcommon.NewResource()
		res.Attributes().PutStr("service.name", "svc")
		for range b.N {
			if id := c.ids.resolve(ctx, res); id.unmatched != "" {
				b.Fatal(id.unmatched)
			}
		}
	})
	// A span over a workload's connection whose resource claims its own
	// container and pid: the claims are checked against the owner.
	b.Run("connection-claims-checked", func(b *testing.B) {
		peer := netip.MustParseAddrPort("127.0.0.1:40001")
		c.ids.sockets = &fakeSockets{owners: map[netip.AddrPort]procsocket.Owner{peer: {Identity: procresource.Identity{PID: 1000, VPID: 1, StartTicks: 1}}}}
		ctx := withPeer(peer)
		res := spans[0]
		for range b.N {
			if id := c.ids.resolve(ctx, res); id.unmatched != "" {
				b.Fatal(id.unmatched)
			}
		}
	})
}

// BenchmarkWindowIdentity is the identity cost of one window resource at
// ingest: reading it, asking the process table for its start ticks, and
// learning it under the lock.
func BenchmarkWindowIdentity(b *testing.B) {
	c, _ := benchIdentities(b, 1000)
	lds := make([]plog.Logs, 1000)
	for i := range lds {
		p, _ := c.ids.table.ByHostPID(1000 + i)
		lds[i] = windowLogs(b, windowsOf(p))
	}
	b.ResetTimer()
	for i := range b.N {
		src := c.sourceOf(lds[i%len(lds)].ResourceLogs().At(0).Resource())
		src.maxStart = t0
		c.mu.Lock()
		c.learn([]source{src})
		c.mu.Unlock()
	}
}

// BenchmarkMemoryPerProcess reports the heap held per process learned
// from windows (its record and its container, pod and vpid entries).
func BenchmarkMemoryPerProcess(b *testing.B) {
	const n = 10_000
	for range b.N {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		ps := newProcesses(n)
		for i := range n {
			ps.learn(node, procresource.Identity{PID: 100_000 + i, VPID: 1, StartTicks: uint64(i + 1),
				ContainerID: fmt.Sprintf("%064x", i), PodUID: fmt.Sprintf("%08x-0000-0000-0000-000000000000", i)}, t0, 0)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n, "B/process")
		runtime.KeepAlive(ps)
	}
}
