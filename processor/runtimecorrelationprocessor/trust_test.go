package runtimecorrelationprocessor

import (
	"context"
	"net"
	"net/netip"
	"reflect"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/client"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"

	"github.com/otelcol-ai/otelcol-ai/internal/procresource"
	"github.com/otelcol-ai/otelcol-ai/internal/procsocket"
	"github.com/otelcol-ai/otelcol-ai/internal/window"
	"github.com/otelcol-ai/otelcol-ai/processor/runtimecorrelationprocessor/internal/metadatatest"
)

// The tests below are written as the attacker: a workload on the node that
// sends OTLP claiming another workload's identity.

var (
	attackerPeer = netip.MustParseAddrPort("10.9.9.9:41000")
	victimPeer   = netip.MustParseAddrPort("10.1.1.1:42000")
	hostPeer     = netip.MustParseAddrPort("127.0.0.1:43000")
	hostVictim   = procresource.Identity{PID: 5151, VPID: 5151, StartTicks: 9000}
)

// newTrustHarness is a node with victim inA (pod P), attacker inB (pod Q)
// and two host processes, onHost (the attacker on the host) and
// hostVictim, each connected from its own peer; inA's and hostVictim's
// windows are indexed by the jfr receiver.
func newTrustHarness(t *testing.T, configure func(*Config)) (*harness, *fakeSockets) {
	h, _, sockets := newIdentityHarness(t, configure, inA, inB, onHost, hostVictim)
	sockets.owners[victimPeer] = procsocket.Owner{Identity: procresource.Identity{PID: inA.PID, VPID: 1, StartTicks: inA.StartTicks}}
	sockets.owners[attackerPeer] = procsocket.Owner{Identity: procresource.Identity{PID: inB.PID, VPID: 1, StartTicks: inB.StartTicks}}
	sockets.owners[hostPeer] = procsocket.Owner{Identity: procresource.Identity{PID: onHost.PID, VPID: onHost.PID, StartTicks: onHost.StartTicks}}
	h.sendWindows(windowsOf(inA), win(safepoint, 1*ms, 1*ms, 0))
	h.sendWindows(windowsOf(hostVictim), win(safepoint, 1*ms, 1*ms, 0))
	return h, sockets
}

// TestClaimedIdentityIsNotBelievedOverTheConnection: a span's process is
// the one that holds its connection; resource attributes naming another
// process make it a mismatch, never the named process's.
func TestClaimedIdentityIsNotBelievedOverTheConnection(t *testing.T) {
	tests := []struct {
		name   string
		scope  MatchScope
		peer   netip.AddrPort
		claim  resource
		reason string
	}{
		{name: "a pod claims the victim's container and pid", peer: attackerPeer,
			claim: resource{host: "pod-q", pid: 1, container: containerA}, reason: unmatchedMismatch},
		{name: "a pod claims the victim's pod and pid", peer: attackerPeer,
			claim: resource{host: "pod-q", pid: 1, pod: podP}, reason: unmatchedMismatch},
		{name: "a host process claims the victim host process's pid", peer: hostPeer,
			claim: resource{host: node, pid: int64(hostVictim.PID)}, reason: unmatchedMismatch},
		{name: "a host process claims the victim's container", peer: hostPeer,
			claim: resource{pid: int64(onHost.PID), container: containerA}, reason: unmatchedMismatch},
		{name: "pod scope: a pod claims the victim's pod", scope: ScopePod, peer: attackerPeer,
			claim: resource{host: "pod-q", pod: podP}, reason: unmatchedMismatch},
		{name: "an unknown peer claims the victim's container", peer: netip.MustParseAddrPort("10.7.7.7:1234"),
			claim: resource{pid: 1, container: containerA}, reason: unmatchedUnknownProcess},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, _ := newTrustHarness(t, func(cfg *Config) {
				if tt.scope != "" {
					cfg.MatchScope = tt.scope
				}
			})
			h.sendSpansCtx(withPeer(tt.peer), spanTraces(tt.claim, spanAt{"req", 0, 5 * ms}))
			got := attrsOf(spansByName(h.traceSink.AllTraces())["req"])
			if want := map[string]any{attrUnmatched: tt.reason}; !reflect.DeepEqual(got, want) {
				t.Fatalf("the attacker's span: got %v, want %v", got, want)
			}
			metadatatest.AssertEqualProcessorRuntimecorrelationSpansUnmatched(t, h.tel,
				unmatchedPoints(map[string]int64{tt.reason: 1}), metricdatatest.IgnoreTimestamp())
		})
	}
}

// TestConnectionClaimsThatAgreeAreMatched: what the workload says of
// itself, when it is true (its own pid as it sees itself or as the node
// does, its container, its pod's sandbox id, its pod), keeps the span its
// own process's.
func TestConnectionClaimsThatAgreeAreMatched(t *testing.T) {
	tests := []struct {
		name  string
		peer  netip.AddrPort
		claim resource
	}{
		{name: "nothing claimed", peer: victimPeer},
		{name: "its own container and pid", peer: victimPeer, claim: resource{host: "pod-p", pid: 1, container: containerA}},
		{name: "its own pod and pid", peer: victimPeer, claim: resource{host: "pod-p", pid: 1, pod: podP}},
		{name: "its host pid", peer: victimPeer, claim: resource{pid: int64(inA.PID)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, _ := newTrustHarness(t, nil)
			h.sendSpansCtx(withPeer(tt.peer), spanTraces(tt.claim, spanAt{"req", 0, 5 * ms}))
			if got := attrsOf(spansByName(h.traceSink.AllTraces())["req"]); !reflect.DeepEqual(got, safepointTotals) {
				t.Fatalf("the victim's own span: got %v, want %v", got, safepointTotals)
			}
			if got := resourceOf(t, h.traceSink.AllTraces(), "req")[attrIdentity]; got != identityConnection {
				t.Errorf("identity: got %v, want %q", got, identityConnection)
			}
		})
	}
}

// TestRetryAfterWaitingKeepsTheConnection: a span that waited for windows
// and was not matched on arrival is tried again through its connection,
// not by the claims of its resource.
func TestRetryAfterWaitingKeepsTheConnection(t *testing.T) {
	h, sockets := newTrustHarness(t, nil)
	// The attacker's connection is not found at first (a lookup that
	// failed): the retry must not fall back to the claimed container.
	delete(sockets.owners, attackerPeer)
	id := h.c.ids.resolve(withPeer(attackerPeer), spanTraces(resource{pid: 1, container: containerA}).ResourceSpans().At(0).Resource())
	if id.unmatched != unmatchedUnknownProcess || !id.hasPeer {
		t.Fatalf("on arrival: got %+v, want unknown_process through the connection", id)
	}
	sockets.owners[attackerPeer] = procsocket.Owner{Identity: procresource.Identity{PID: inB.PID, VPID: 1, StartTicks: inB.StartTicks}}
	h.clock.Advance(2 * h.cfg.Identity.CacheTTL)
	again := h.c.ids.retry(id, spanTraces(resource{pid: 1, container: containerA}).ResourceSpans().At(0).Resource())
	if again.unmatched != unmatchedMismatch {
		t.Fatalf("retried: got %+v, want mismatch (the connection is the attacker's)", again)
	}
}

// withAddressPort is a receiver context of a connection from a forwarding
// collector.
func withAddressPort(s string) context.Context {
	return client.NewContext(context.Background(), client.Info{Addr: net.TCPAddrFromAddrPort(netip.MustParseAddrPort(s))})
}

// TestWindowsFromWorkloadsAreNotIndexed: a log record shaped like a window
// that a workload sends over OTLP claiming the victim's identity is passed
// on as a log, not indexed, and counted; the victim's spans get only the
// windows this collector measured.
func TestWindowsFromWorkloadsAreNotIndexed(t *testing.T) {
	h, _ := newTrustHarness(t, nil)
	forged := windowLogs(t, windowsOf(inA), win(gcPause, 0, 5*ms, 0))
	if err := h.logs.ConsumeLogs(withPeer(attackerPeer), forged); err != nil {
		t.Fatal(err)
	}
	// No connection at all (a receiver of another kind) is not this
	// collector's measurement either.
	if err := h.logs.ConsumeLogs(context.Background(), windowLogs(t, windowsOf(inA), win(gcPause, 0, 5*ms, 0))); err != nil {
		t.Fatal(err)
	}
	if got := h.logSink.LogRecordCount(); got != 4 {
		t.Errorf("records passed on: got %d, want 4 (2 measured, 2 forged)", got)
	}
	h.sendSpansCtx(withPeer(victimPeer), spanTraces(resource{}, spanAt{"req", 0, 5 * ms}))
	if got := attrsOf(spansByName(h.traceSink.AllTraces())["req"]); !reflect.DeepEqual(got, safepointTotals) {
		t.Fatalf("the victim's span: got %v, want only its measured safepoint %v", got, safepointTotals)
	}
	metadatatest.AssertEqualProcessorRuntimecorrelationWindowsDropped(t, h.tel, []metricdata.DataPoint[int64]{
		{Value: 2, Attributes: attribute.NewSet(attribute.String("reason", reasonUntrusted))},
	}, metricdatatest.IgnoreTimestamp())
}

// TestTrustedPeersForwardForOthers: a sender the operator lists in
// identity::trusted_peers (a collector tier forwarding for others) has its
// windows indexed and its spans matched by their resource attributes.
func TestTrustedPeersForwardForOthers(t *testing.T) {
	h, _ := newTrustHarness(t, func(cfg *Config) { cfg.Identity.TrustedPeers = []string{"192.168.0.0/16", "fd00::1"} })
	trusted, err := h.cfg.Identity.trustedPrefixes()
	if err != nil {
		t.Fatal(err)
	}
	h.c.ids.trusted = trusted
	forwarder := withAddressPort("192.168.4.4:5000")
	if err := h.logs.ConsumeLogs(forwarder, windowLogs(t, windowsOf(inB), win(gilWait, 1*ms, 2*ms, 9))); err != nil {
		t.Fatal(err)
	}
	h.sendSpansCtx(forwarder, spanTraces(resource{host: "pod-q", pid: 1, container: containerB}, spanAt{"req", 0, 5 * ms}))
	want := map[string]any{"runtime.overlap.python.gil.wait.duration": 2 * ms, "runtime.overlap.python.gil.wait.count": int64(1)}
	if got := attrsOf(spansByName(h.traceSink.AllTraces())["req"]); !reflect.DeepEqual(got, want) {
		t.Fatalf("a forwarded span: got %v, want %v", got, want)
	}
	if got := resourceOf(t, h.traceSink.AllTraces(), "req")[attrIdentity]; got != identityContainer {
		t.Errorf("identity: got %v, want %q", got, identityContainer)
	}
	for _, a := range []string{"fd00::1", "::ffff:192.168.1.1"} {
		if !h.c.ids.isTrusted(netip.MustParseAddr(a)) {
			t.Errorf("%s: not trusted", a)
		}
	}
	if h.c.ids.isTrusted(netip.MustParseAddr("10.9.9.9")) {
		t.Error("10.9.9.9 trusted")
	}
}

func TestTrustedPeersValidation(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	cfg.Identity.TrustedPeers = []string{"10.0.0.0/8", "not-an-address", "10.0.0.1/99", "fe80::1%eth0"}
	err := cfg.Validate()
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{
		`identity::trusted_peers[1]: "not-an-address" is not an address or a CIDR prefix`,
		`identity::trusted_peers[2]: "10.0.0.1/99"`,
		`identity::trusted_peers[3]: "fe80::1%eth0"`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "trusted_peers[0]") {
		t.Errorf("a valid prefix reported: %v", err)
	}
}

// TestMeasuredMarksTheReceiver: the mark a receiver puts on its context
// names it, and a context without one names none.
func TestMeasuredMarksTheReceiver(t *testing.T) {
	id := component.MustNewIDWithName("pythongil", "a")
	if got, ok := window.MeasuredBy(window.Measured(context.Background(), id)); !ok || got != id {
		t.Errorf("MeasuredBy: got %v %v, want %v", got, ok, id)
	}
	if _, ok := window.MeasuredBy(withPeer(victimPeer)); ok {
		t.Error("a connection's context is marked measured")
	}
}
