package runtimecorrelationprocessor

import (
	"net/netip"
	"testing"
	"time"

	"github.com/otelcol-ai/otelcol-ai/internal/attention"
	"github.com/otelcol-ai/otelcol-ai/internal/procresource"
	"github.com/otelcol-ai/otelcol-ai/internal/procsocket"
	"github.com/otelcol-ai/otelcol-ai/internal/window"
)

// withAttention gives h's correlator a registry of its own (the default
// one is the test binary's, shared by every test).
func withAttention(h *harness) *attention.Registry {
	r := attention.New(attention.DefaultMax, attention.DefaultTTL)
	h.c.attention.Store(r)
	return r
}

func attended(h *harness, r *attention.Registry, p procresource.Identity) bool {
	return r.Attended(attention.ProcessOf(p), h.clock.Now())
}

func TestMatchedSpansMarkTheirProcess(t *testing.T) {
	peer := netip.MustParseAddrPort("127.0.0.1:40001")
	tests := []struct {
		name string
		send func(h *harness)
		want []procresource.Identity
	}{
		{
			name: "container and in-container pid",
			send: func(h *harness) {
				h.sendSpans(spanTraces(resource{host: "pod-a", pid: 1, container: containerA}, spanAt{"req", 0, 5 * ms}))
			},
			want: []procresource.Identity{inA},
		},
		{
			// A Python SDK's spans carry no process.pid: the connection names the process.
			name: "no process.pid, by the connection",
			send: func(h *harness) {
				h.sendSpansCtx(withPeer(peer), spanTraces(resource{host: "pod-q"}, spanAt{"req", 0, 5 * ms}))
			},
			want: []procresource.Identity{inB},
		},
		{
			name: "bare host process",
			send: func(h *harness) {
				h.sendSpans(spanTraces(resource{host: node, pid: int64(onHost.PID)}, spanAt{"req", 0, 5 * ms}))
			},
			want: []procresource.Identity{onHost},
		},
		{
			name: "ambiguous span marks nothing",
			send: func(h *harness) {
				h.sendSpans(spanTraces(resource{host: "pod-p", pid: 1, pod: podP}, spanAt{"req", 0, 5 * ms}))
			},
		},
		{
			name: "unknown process marks nothing",
			send: func(h *harness) {
				h.sendSpans(spanTraces(resource{host: node, pid: 999}, spanAt{"req", 0, 5 * ms}))
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, _, sockets := newIdentityHarness(t, nil, inA, inB, inC, onHost)
			sockets.owners[peer] = procsocket.Owner{Identity: procresource.Identity{PID: inB.PID, VPID: inB.VPID, StartTicks: inB.StartTicks}}
			r := withAttention(h)
			tt.send(h)
			if n := len(h.traceSink.AllTraces()); n != 1 {
				t.Fatalf("%d batches forwarded, want 1", n)
			}
			for _, p := range []procresource.Identity{inA, inB, inC, onHost} {
				want := false
				for _, w := range tt.want {
					want = want || w == p
				}
				if got := attended(h, r, p); got != want {
					t.Errorf("pid %d attended %v, want %v", p.PID, got, want)
				}
			}
			if s := r.Stats(); s.Processes != len(tt.want) || s.Pods != 0 {
				t.Errorf("registry %+v, want %d processes and no pod (match_scope process)", s, len(tt.want))
			}
		})
	}
}

func TestJVMPausesMarkTheirProcess(t *testing.T) {
	h, _, _ := newIdentityHarness(t, nil, inA, inB, inC, onHost)
	r := withAttention(h)
	h.sendWindows(windowsOf(onHost), win(safepoint, 1*ms, 1*ms, 0))
	h.sendWindows(windowsOf(inA), win(gcPause, 1*ms, 1*ms, 0), win(gilWait, 1*ms, 1*ms, 7))
	// Windows that are not JVM pauses mark nothing.
	h.sendWindows(windowsOf(inB), win(gilWait, 1*ms, 1*ms, 7), win(window.KindPythonGCPause, 3*ms, 1*ms, 7))
	// Another node's pause is not this collector's to aim at.
	h.sendWindows(resource{host: "node-2", pid: int64(inC.PID)}, win(safepoint, 1*ms, 1*ms, 0))
	for _, tc := range []struct {
		p    procresource.Identity
		want bool
	}{
		{onHost, true},
		{inA, true},
		{inB, false},
		{inC, false},
		// The pause's process was told by its start ticks: a later
		// process under the same pid is not attended.
		{procresource.Identity{PID: onHost.PID, StartTicks: onHost.StartTicks + 1}, false},
	} {
		if got := attended(h, r, tc.p); got != tc.want {
			t.Errorf("pid %d (start %d) attended %v, want %v", tc.p.PID, tc.p.StartTicks, got, tc.want)
		}
	}
	// Marks last the registry's TTL.
	h.clock.Advance(attention.DefaultTTL + time.Second)
	if attended(h, r, onHost) {
		t.Error("still attended after the TTL")
	}
}

func TestAttentionFollowsTheMatchScope(t *testing.T) {
	t.Run("pod", func(t *testing.T) {
		h, _, _ := newIdentityHarness(t, func(c *Config) { c.MatchScope = ScopePod }, inA, inB, inC, onHost)
		r := withAttention(h)
		// A pause in pod P: every process of the pod can overlap it.
		h.sendWindows(windowsOf(inA), win(safepoint, 1*ms, 1*ms, 0))
		h.sendSpans(spanTraces(resource{host: "pod-q", pid: 1, pod: podQ}, spanAt{"req", 0, 5 * ms}))
		for _, tc := range []struct {
			p    procresource.Identity
			want bool
		}{{inA, true}, {inC, true}, {inB, true}, {onHost, false}} {
			if got := attended(h, r, tc.p); got != tc.want {
				t.Errorf("pid %d (pod %q) attended %v, want %v", tc.p.PID, tc.p.PodUID, got, tc.want)
			}
		}
		if s := r.Stats(); s.Processes != 0 || s.Pods != 2 {
			t.Errorf("registry %+v, want pods P and Q only", s)
		}
	})
	t.Run("host", func(t *testing.T) {
		h, _, _ := newIdentityHarness(t, func(c *Config) { c.MatchScope = ScopeHost }, inA, inB, inC, onHost)
		r := withAttention(h)
		h.sendWindows(windowsOf(inA), win(safepoint, 1*ms, 1*ms, 0))
		h.sendSpans(spanTraces(resource{host: node, pid: int64(onHost.PID)}, spanAt{"req", 0, 5 * ms}))
		if s := r.Stats(); s.Processes != 0 || s.Pods != 0 {
			t.Errorf("registry %+v: on host scope every window overlaps everything, nothing to mark", s)
		}
	})
}
