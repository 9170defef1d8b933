package runtimecorrelationprocessor

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"reflect"
	"sync"
	"testing"

	"go.opentelemetry.io/collector/client"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"

	"github.com/otelcol-ai/otelcol-ai/internal/procresource"
	"github.com/otelcol-ai/otelcol-ai/internal/procsocket"
	"github.com/otelcol-ai/otelcol-ai/processor/runtimecorrelationprocessor/internal/metadatatest"
)

// fakeTable is a processTable over a fixed list of live processes.
type fakeTable struct {
	mu    sync.Mutex
	procs []procresource.Identity
	byPID map[int]procresource.Identity
	// containerVPIDs are vpids of processes in other pid namespaces that
	// have no entry of their own.
	containerVPIDs []int
}

func (f *fakeTable) set(procs ...procresource.Identity) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.procs = procs
	f.byPID = map[int]procresource.Identity{}
	for _, p := range procs {
		f.byPID[p.PID] = p
	}
}

func (f *fakeTable) ByHostPID(pid int) (procresource.Identity, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	p, ok := f.byPID[pid]
	return p, ok
}

func (f *fakeTable) ByContainer(id string, vpid int) (procresource.Identity, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, p := range f.procs {
		if p.ContainerID == id && p.VPID == vpid {
			return p, true
		}
	}
	return procresource.Identity{}, false
}

func (f *fakeTable) ByPod(uid string, vpid int) []procresource.Identity {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []procresource.Identity
	for _, p := range f.procs {
		if p.PodUID == uid && p.VPID == vpid {
			out = append(out, p)
		}
	}
	return out
}

func (f *fakeTable) SeenAs(vpid int) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, p := range f.procs {
		if p.VPID == vpid && p.VPID != p.PID {
			return true
		}
	}
	for _, v := range f.containerVPIDs {
		if v == vpid {
			return true
		}
	}
	return false
}

// fakeSockets answers Lookup from a map of peers, and OwnersFrom from a
// map of addresses.
type fakeSockets struct {
	owners  map[netip.AddrPort]procsocket.Owner
	errs    map[netip.AddrPort]error
	from    map[netip.Addr][]procsocket.Owner
	lookups int
}

func (f *fakeSockets) OwnersFrom(ip netip.Addr) ([]procsocket.Owner, error) {
	f.lookups++
	if o, ok := f.from[ip]; ok {
		return o, nil
	}
	return nil, fmt.Errorf("fake: %v: %w", ip, procsocket.ErrNotFound)
}

func (f *fakeSockets) Lookup(peer netip.AddrPort) (procsocket.Owner, error) {
	f.lookups++
	if err, ok := f.errs[peer]; ok {
		return procsocket.Owner{}, err
	}
	if o, ok := f.owners[peer]; ok {
		return o, nil
	}
	return procsocket.Owner{}, fmt.Errorf("fake: %v: %w", peer, procsocket.ErrNotFound)
}

// The node of these tests, and processes on it.
const node = "node-1"

const (
	containerA = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	containerB = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
	containerC = "cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc"
	podP       = "11111111-2222-3333-4444-555555555555"
	podQ       = "99999999-2222-3333-4444-555555555555"
)

var (
	// Two containers of two pods, each process pid 1 inside.
	inA = procresource.Identity{PID: 101, VPID: 1, StartTicks: 5000, ContainerID: containerA, PodUID: podP}
	inB = procresource.Identity{PID: 202, VPID: 1, StartTicks: 6000, ContainerID: containerB, PodUID: podQ}
	// A second container of pod P, also pid 1 inside.
	inC = procresource.Identity{PID: 303, VPID: 1, StartTicks: 7000, ContainerID: containerC, PodUID: podP}
	// A process on the bare host.
	onHost = procresource.Identity{PID: 4242, VPID: 4242, StartTicks: 8000}
)

// windowsOf is the resource the receivers give p's windows.
func windowsOf(p procresource.Identity) resource {
	return resource{host: node, pid: int64(p.PID), vpid: int64(p.VPID), container: p.ContainerID, pod: p.PodUID}
}

// newIdentityHarness is a harness on node with a fake process table and
// fake socket owners.
func newIdentityHarness(t *testing.T, configure func(*Config), procs ...procresource.Identity) (*harness, *fakeTable, *fakeSockets) {
	h := newHarness(t, configure)
	table := &fakeTable{}
	table.set(procs...)
	sockets := &fakeSockets{owners: map[netip.AddrPort]procsocket.Owner{}, errs: map[netip.AddrPort]error{}}
	h.c.node = procresource.Node{HostName: node}
	h.c.ids = newIdentities(h.c, table, sockets, h.cfg.Identity.CacheTTL, nil)
	return h, table, sockets
}

// resourceOf returns the attributes of the resource holding span name.
func resourceOf(t *testing.T, batches []ptrace.Traces, name string) map[string]any {
	t.Helper()
	for _, td := range batches {
		for i := 0; i < td.ResourceSpans().Len(); i++ {
			rs := td.ResourceSpans().At(i)
			sss := rs.ScopeSpans()
			for j := 0; j < sss.Len(); j++ {
				for k := 0; k < sss.At(j).Spans().Len(); k++ {
					if sss.At(j).Spans().At(k).Name() == name {
						return rs.Resource().Attributes().AsRaw()
					}
				}
			}
		}
	}
	t.Fatalf("no span %s", name)
	return nil
}

func unmatchedPoints(counts map[string]int64) []metricdata.DataPoint[int64] {
	var out []metricdata.DataPoint[int64]
	for reason, n := range counts {
		out = append(out, metricdata.DataPoint[int64]{Value: n, Attributes: attribute.NewSet(attribute.String("reason", reason))})
	}
	return out
}

var (
	waitTotals = map[string]any{
		"runtime.overlap.python.gil.wait.duration": 1 * ms,
		"runtime.overlap.python.gil.wait.count":    int64(1),
	}
	safepointTotals = map[string]any{
		"runtime.overlap.jvm.safepoint.duration": 1 * ms,
		"runtime.overlap.jvm.safepoint.count":    int64(1),
	}
)

func TestSpansMatchTheirOwnProcess(t *testing.T) {
	// inA had a GIL wait and inB a safepoint over the same time; both are
	// pid 1 in their containers. inC and onHost have no windows.
	tests := []struct {
		name    string
		span    resource
		want    map[string]any
		how     string
		learned bool // the process table does not know the process: only its windows do
	}{
		{name: "container A and its pid", span: resource{host: "pod-a", pid: 1, container: containerA}, want: waitTotals, how: "container"},
		{name: "container B and its pid", span: resource{host: "pod-b", pid: 1, container: containerB}, want: safepointTotals, how: "container"},
		{name: "container known from windows only (process exited)", span: resource{host: "pod-a", pid: 1, container: containerA}, want: waitTotals, how: "container", learned: true},
		{name: "pod whose only pid 1 is B", span: resource{pid: 1, pod: podQ}, want: safepointTotals, how: "pod"},
		{name: "live container without windows: nothing overlapped", span: resource{pid: 1, container: containerC}, want: map[string]any{}, how: "container"},
		{name: "bare host: node and host pid", span: resource{host: node, pid: int64(onHost.PID)}, want: map[string]any{}, how: "host"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			procs := []procresource.Identity{inA, inB, inC, onHost}
			if tt.learned {
				procs = []procresource.Identity{inB, inC, onHost}
			}
			h, _, _ := newIdentityHarness(t, nil, procs...)
			h.sendWindows(windowsOf(inA), win(gilWait, 1*ms, 1*ms, 7))
			h.sendWindows(windowsOf(inB), win(safepoint, 1*ms, 1*ms, 0))
			h.sendSpans(spanTraces(tt.span, spanAt{"req", 0, 5 * ms}))
			got := h.traceSink.AllTraces()
			if got2 := attrsOf(spansByName(got)["req"]); !reflect.DeepEqual(got2, tt.want) {
				t.Errorf("attrsOf(spansByName(got)[\"req\"]): got %v, want %v", got2, tt.want)
			}
			if got2 := resourceOf(t, got, "req")["runtime.correlation.identity"]; !reflect.DeepEqual(got2, tt.how) {
				t.Errorf("resourceOf(t, got, \"req\")[\"runtime.correlation.identity\"]: got %v, want %q", got2, tt.how)
			}
		})
	}
}

func TestUnmatchedSpansAreMarkedAndCounted(t *testing.T) {
	tests := []struct {
		name   string
		span   resource
		procs  []procresource.Identity
		vpids  []int // container processes' vpids beyond procs
		reason string
	}{
		{
			name:   "two containers of the pod are pid 1",
			span:   resource{host: "pod-p", pid: 1, pod: podP},
			procs:  []procresource.Identity{inA, inC},
			reason: "ambiguous",
		},
		{
			name:   "hostNetwork-like: node's hostname, a pid that a container's process also sees itself as",
			span:   resource{host: node, pid: int64(onHost.PID)},
			procs:  []procresource.Identity{onHost},
			vpids:  []int{onHost.PID},
			reason: "ambiguous",
		},
		{
			name:   "a container id no local process has",
			span:   resource{host: "pod-x", pid: 1, container: "dddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddd"},
			procs:  []procresource.Identity{inA},
			reason: "unknown_process",
		},
		{
			name:   "a host pid no local process has",
			span:   resource{host: node, pid: 31337},
			procs:  []procresource.Identity{onHost},
			reason: "unknown_process",
		},
		{
			name:   "the node's pid names a container's process, not a host one",
			span:   resource{host: node, pid: int64(inA.PID)},
			procs:  []procresource.Identity{inA},
			reason: "unknown_process",
		},
		{
			name:   "no identity and no connection",
			span:   resource{},
			reason: "no_identity",
		},
		{
			name:   "a pod's hostname and a pid, nothing else",
			span:   resource{host: "pod-a", pid: 1},
			procs:  []procresource.Identity{inA},
			reason: "no_identity",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, table, _ := newIdentityHarness(t, nil, tt.procs...)
			table.containerVPIDs = tt.vpids
			for _, p := range tt.procs {
				h.sendWindows(windowsOf(p), win(gilWait, 1*ms, 1*ms, 7))
			}
			h.sendSpans(spanTraces(tt.span, spanAt{"req", 0, 5 * ms}, spanAt{"req-2", 0, 5 * ms}))
			got := h.traceSink.AllTraces()
			for _, name := range []string{"req", "req-2"} {
				if got2 := attrsOf(spansByName(got)[name]); !reflect.DeepEqual(got2, map[string]any{"runtime.overlap.unmatched": tt.reason}) {
					t.Errorf("%v: got %v, want %v", name, got2, map[string]any{"runtime.overlap.unmatched": tt.reason})
				}
			}
			if v, ok := resourceOf(t, got, "req")["runtime.correlation.identity"]; ok {
				t.Errorf("resource of req: got runtime.correlation.identity = %v, want no such attribute", v)
			}
			metadatatest.AssertEqualProcessorRuntimecorrelationSpansUnmatched(t, h.tel,
				unmatchedPoints(map[string]int64{tt.reason: 2}), metricdatatest.IgnoreTimestamp())
		})
	}
}

func TestReusedPidDoesNotInheritTheOldProcessWindows(t *testing.T) {
	h, table, _ := newIdentityHarness(t, nil, inA)
	h.sendWindows(windowsOf(inA), win(gilWait, 1*ms, 1*ms, 7))

	// inA exits; a new container's pid 1 gets host pid 101.
	successor := procresource.Identity{PID: inA.PID, VPID: 1, StartTicks: inA.StartTicks + 100, ContainerID: containerB, PodUID: podQ}
	table.set(successor)
	h.sendSpans(spanTraces(resource{pid: 1, container: containerB}, spanAt{"new", 0, 5 * ms}))
	// The host path names the successor too, which is no host process.
	h.sendSpans(spanTraces(resource{host: node, pid: int64(inA.PID)}, spanAt{"by-host-pid", 0, 5 * ms}))
	got := spansByName(h.traceSink.AllTraces())
	if got2 := attrsOf(got["new"]); !reflect.DeepEqual(got2, map[string]any{}) {
		t.Errorf("matched, and nothing of the old process overlapped it: got %v, want %v", got2, map[string]any{})
	}
	if got2 := attrsOf(got["by-host-pid"]); !reflect.DeepEqual(got2, map[string]any{"runtime.overlap.unmatched": "unknown_process"}) {
		t.Errorf("attrsOf(got[\"by-host-pid\"]): got %v, want %v", got2, map[string]any{"runtime.overlap.unmatched": "unknown_process"})
	}

	// The successor's own windows come under a new incarnation: its
	// spans see them, and not the old ones.
	h.sendWindows(windowsOf(successor), win(safepoint, 2*ms, 1*ms, 0))
	h.sendSpans(spanTraces(resource{pid: 1, container: containerB}, spanAt{"new-2", 0, 5 * ms}))
	if got := attrsOf(spansByName(h.traceSink.AllTraces())["new-2"]); !reflect.DeepEqual(got, safepointTotals) {
		t.Errorf("attrsOf(spansByName(h.traceSink.AllTraces())[\"new-2\"]): got %v, want %v", got, safepointTotals)
	}
	h.c.mu.RLock()
	if got := h.c.procs.byHost[nodePID{node, int64(inA.PID)}].gen; got != uint32(1) {
		t.Errorf("h.c.procs.byHost[nodePID{node, inA.PID}].gen: got %v, want %v", got, uint32(1))
	}
	h.c.mu.RUnlock()
}

// withPeer is a receiver context whose client.Info names peer.
func withPeer(peer netip.AddrPort) context.Context {
	return client.NewContext(context.Background(), client.Info{Addr: net.TCPAddrFromAddrPort(peer)})
}

func TestSpansWithoutProcessAreMatchedByTheirConnection(t *testing.T) {
	peer := netip.MustParseAddrPort("127.0.0.1:40001")
	tests := []struct {
		name   string
		span   resource
		owner  *procsocket.Owner
		err    error
		want   map[string]any
		how    string
		reason string
	}{
		{name: "no identity: the connection's process", span: resource{}, owner: &procsocket.Owner{Identity: procresource.Identity{PID: onHost.PID, StartTicks: onHost.StartTicks}}, want: waitTotals, how: "connection"},
		{name: "a pod's hostname and its in-container pid", span: resource{host: "pod-a", pid: 1}, owner: &procsocket.Owner{Identity: procresource.Identity{PID: inA.PID, StartTicks: inA.StartTicks}}, want: safepointTotals, how: "connection"},
		{name: "a pid that is not the connection's process", span: resource{pid: 77}, owner: &procsocket.Owner{Identity: procresource.Identity{PID: onHost.PID, StartTicks: onHost.StartTicks}}, reason: "mismatch"},
		{name: "the owner's pid was reused", span: resource{}, owner: &procsocket.Owner{Identity: procresource.Identity{PID: onHost.PID, StartTicks: 1}}, reason: "unknown_process"},
		{name: "a socket shared by two processes", span: resource{}, err: procsocket.ErrAmbiguous, reason: "ambiguous"},
		{name: "no local socket", span: resource{}, err: procsocket.ErrNotFound, reason: "unknown_process"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, _, sockets := newIdentityHarness(t, nil, inA, onHost)
			if tt.owner != nil {
				sockets.owners[peer] = *tt.owner
			}
			if tt.err != nil {
				sockets.errs[peer] = fmt.Errorf("fake: %w", tt.err)
			}
			h.sendWindows(windowsOf(onHost), win(gilWait, 1*ms, 1*ms, 7))
			h.sendWindows(windowsOf(inA), win(safepoint, 1*ms, 1*ms, 0))
			// Three batches from one connection cost one lookup.
			for range 3 {
				h.sendSpansCtx(withPeer(peer), spanTraces(tt.span, spanAt{"req", 0, 5 * ms}))
			}
			if sockets.lookups != 1 {
				t.Errorf("sockets.lookups: got %v, want %v", sockets.lookups, 1)
			}
			got := h.traceSink.AllTraces()
			if tt.reason != "" {
				if got2 := attrsOf(spansByName(got)["req"]); !reflect.DeepEqual(got2, map[string]any{"runtime.overlap.unmatched": tt.reason}) {
					t.Errorf("attrsOf(spansByName(got)[\"req\"]): got %v, want %v", got2, map[string]any{"runtime.overlap.unmatched": tt.reason})
				}
				metadatatest.AssertEqualProcessorRuntimecorrelationSpansUnmatched(t, h.tel,
					unmatchedPoints(map[string]int64{tt.reason: 3}), metricdatatest.IgnoreTimestamp())
				return
			}
			if got2 := attrsOf(spansByName(got)["req"]); !reflect.DeepEqual(got2, tt.want) {
				t.Errorf("attrsOf(spansByName(got)[\"req\"]): got %v, want %v", got2, tt.want)
			}
			if got2 := resourceOf(t, got, "req")["runtime.correlation.identity"]; !reflect.DeepEqual(got2, tt.how) {
				t.Errorf("resourceOf(t, got, \"req\")[\"runtime.correlation.identity\"]: got %v, want %q", got2, tt.how)
			}
		})
	}
}

// withAddress is a receiver context as OTLP/HTTP makes it: the peer's
// address, no port.
func withAddress(ip netip.Addr) context.Context {
	return client.NewContext(context.Background(), client.Info{Addr: &net.IPAddr{IP: ip.AsSlice()}})
}

// TestSpansOverHTTPAreMatchedByTheirAddress: OTLP/HTTP gives the peer's
// address without its port, so the process is the one connected from that
// address that the span's process.pid names (a pod's IP names its network
// namespace), when those connected are of one pod; two that fit, or
// processes of several tenants, are ambiguous, never guessed.
func TestSpansOverHTTPAreMatchedByTheirAddress(t *testing.T) {
	podIP := netip.MustParseAddr("10.1.2.3")
	ownerA := procsocket.Owner{Identity: procresource.Identity{PID: inA.PID, VPID: 1, StartTicks: inA.StartTicks}}
	ownerB := procsocket.Owner{Identity: procresource.Identity{PID: inB.PID, VPID: 1, StartTicks: inB.StartTicks}}
	ownerHost := procsocket.Owner{Identity: procresource.Identity{PID: onHost.PID, VPID: onHost.PID, StartTicks: onHost.StartTicks}}
	// A second process of A's container (pod P).
	sibling := procresource.Identity{PID: 111, VPID: 7, StartTicks: 5100, ContainerID: containerA, PodUID: podP}
	ownerSibling := procsocket.Owner{Identity: procresource.Identity{PID: sibling.PID, VPID: 7, StartTicks: sibling.StartTicks}}
	tests := []struct {
		name   string
		span   resource
		owners []procsocket.Owner
		want   map[string]any
		reason string
	}{
		{name: "the pod's process that is pid 1", span: resource{pid: 1}, owners: []procsocket.Owner{ownerA, ownerSibling}, want: safepointTotals},
		// Which of two tenants sent the request is not known: a claimed
		// pid must not pick one (the host process could claim pid 1).
		{name: "a pod's process and a host process", span: resource{pid: 1}, owners: []procsocket.Owner{ownerA, ownerHost}, reason: "ambiguous"},
		{name: "no pid: the only process connected", span: resource{}, owners: []procsocket.Owner{ownerA}, want: safepointTotals},
		{name: "two pid 1 on one network namespace", span: resource{pid: 1}, owners: []procsocket.Owner{ownerA, ownerB}, reason: "ambiguous"},
		{name: "no pid and two processes", span: resource{}, owners: []procsocket.Owner{ownerA, ownerHost}, reason: "ambiguous"},
		{name: "no process connected with that pid", span: resource{pid: 77}, owners: []procsocket.Owner{ownerA}, reason: "mismatch"},
		{name: "nothing connected from the address", span: resource{pid: 1}, reason: "unknown_process"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, _, sockets := newIdentityHarness(t, nil, inA, inB, onHost, sibling)
			sockets.from = map[netip.Addr][]procsocket.Owner{}
			if tt.owners != nil {
				sockets.from[podIP] = tt.owners
			}
			h.sendWindows(windowsOf(inA), win(safepoint, 1*ms, 1*ms, 0))
			h.sendWindows(windowsOf(inB), win(gilWait, 1*ms, 1*ms, 7))
			for range 3 {
				h.sendSpansCtx(withAddress(podIP), spanTraces(tt.span, spanAt{"req", 0, 5 * ms}))
			}
			if sockets.lookups != 1 {
				t.Errorf("one lookup for three batches: got %v, want %v", sockets.lookups, 1)
			}
			got := spansByName(h.traceSink.AllTraces())["req"]
			if tt.reason != "" {
				if got2 := attrsOf(got); !reflect.DeepEqual(got2, map[string]any{"runtime.overlap.unmatched": tt.reason}) {
					t.Errorf("attrsOf(got): got %v, want %v", got2, map[string]any{"runtime.overlap.unmatched": tt.reason})
				}
				return
			}
			if got2 := attrsOf(got); !reflect.DeepEqual(got2, tt.want) {
				t.Errorf("attrsOf(got): got %v, want %v", got2, tt.want)
			}
			if got := resourceOf(t, h.traceSink.AllTraces(), "req")["runtime.correlation.identity"]; !reflect.DeepEqual(got, "connection") {
				t.Errorf("resourceOf(t, h.traceSink.AllTraces(), \"req\")[\"runtime.correlation.identity\"]: got %v, want %q", got, "connection")
			}
		})
	}
}

func TestConnectionResolvesBeforeSpansWait(t *testing.T) {
	// With a delay the span is annotated later, on a context that no
	// longer names the connection: the identity is taken on arrival.
	peer := netip.MustParseAddrPort("[::1]:40002")
	h, _, sockets := newIdentityHarness(t, func(cfg *Config) { cfg.Spans.Delay = 2e9 }, onHost)
	sockets.owners[peer] = procsocket.Owner{Identity: procresource.Identity{PID: onHost.PID, StartTicks: onHost.StartTicks}}
	h.sendSpansCtx(withPeer(peer), spanTraces(resource{}, spanAt{"req", 0, 5 * ms}))
	h.sendWindows(windowsOf(onHost), win(gilWait, 1*ms, 1*ms, 7))
	if got := h.traces.releaseDue(endOfTime); got != 1 {
		t.Fatalf("h.traces.releaseDue(endOfTime): got %v, want %v", got, 1)
	}
	if got := attrsOf(spansByName(h.traceSink.AllTraces())["req"]); !reflect.DeepEqual(got, waitTotals) {
		t.Errorf("attrsOf(spansByName(h.traceSink.AllTraces())[\"req\"]): got %v, want %v", got, waitTotals)
	}
}

func TestOverlapRecordsNameTheContainer(t *testing.T) {
	h, _, _ := newIdentityHarness(t, nil, inA, inB)
	h.sendWindows(windowsOf(inB), win(safepoint, 0, 2*ms, 0))
	out := h.sendWindows(windowsOf(inA), win(safepoint, 0, 2*ms, 0), win(gilWait, 1*ms, 2*ms, 7))
	recs := overlapRecords(out)
	if got := len(recs); got != 1 {
		t.Fatalf("inB's safepoint is another process's: got %d, want %d", got, 1)
	}
	if got, want := recs[0]["resource"], map[string]any{
		"host.name": node, "process.pid": int64(inA.PID), "process.vpid": int64(1),
		"container.id": containerA, "k8s.pod.uid": podP,
	}; !reflect.DeepEqual(got, want) {
		t.Errorf("recs[0][\"resource\"]: got %v, want %v", got, want)
	}

	md := h.c.overlapMetrics()
	if got := md.ResourceMetrics().Len(); got != 1 {
		t.Fatalf("md.ResourceMetrics().Len(): got %v, want %v", got, 1)
	}
	if got := md.ResourceMetrics().At(0).Resource().Attributes().AsRaw(); !reflect.DeepEqual(got, recs[0]["resource"]) {
		t.Errorf("md.ResourceMetrics().At(0).Resource().Attributes().AsRaw(): got %v, want %v", got, recs[0]["resource"])
	}
}

func TestScopes(t *testing.T) {
	tests := []struct {
		scope MatchScope
		span  resource
		want  map[string]any
	}{
		// The pod of the span's container: inA's and inC's windows.
		{ScopePod, resource{pid: 1, container: containerA}, map[string]any{
			"runtime.overlap.python.gil.wait.duration": 1 * ms, "runtime.overlap.python.gil.wait.count": int64(1),
			"runtime.overlap.python.gc.pause.duration": 1 * ms, "runtime.overlap.python.gc.pause.count": int64(1),
		}},
		// Every window of the node.
		{ScopeHost, resource{pid: 1, container: containerB}, map[string]any{
			"runtime.overlap.python.gil.wait.duration": 1 * ms, "runtime.overlap.python.gil.wait.count": int64(1),
			"runtime.overlap.python.gc.pause.duration": 1 * ms, "runtime.overlap.python.gc.pause.count": int64(1),
			"runtime.overlap.jvm.safepoint.duration": 1 * ms, "runtime.overlap.jvm.safepoint.count": int64(1),
		}},
	}
	for _, tt := range tests {
		t.Run(string(tt.scope), func(t *testing.T) {
			h, _, _ := newIdentityHarness(t, func(cfg *Config) {
				cfg.MatchScope = tt.scope
				cfg.Windows.MaxPerScope = cfg.Windows.MaxWindows
			}, inA, inB, inC)
			h.sendWindows(windowsOf(inA), win(gilWait, 1*ms, 1*ms, 7))
			h.sendWindows(windowsOf(inB), win(safepoint, 1*ms, 1*ms, 0))
			h.sendWindows(windowsOf(inC), win(pyGC, 1*ms, 1*ms, 0))
			h.sendSpans(spanTraces(tt.span, spanAt{"req", 0, 5 * ms}))
			if got := attrsOf(spansByName(h.traceSink.AllTraces())["req"]); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("attrsOf(spansByName(h.traceSink.AllTraces())[\"req\"]): got %v, want %v", got, tt.want)
			}
		})
	}
}
