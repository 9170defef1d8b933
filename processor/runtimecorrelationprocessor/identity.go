package runtimecorrelationprocessor // import "github.com/otelcol-ai/otelcol-ai/processor/runtimecorrelationprocessor"

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"sync"
	"time"

	"go.opentelemetry.io/collector/client"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.uber.org/zap"

	"github.com/otelcol-ai/otelcol-ai/internal/procresource"
	"github.com/otelcol-ai/otelcol-ai/internal/procsocket"
	"github.com/otelcol-ai/otelcol-ai/internal/window"
)

// How a span's process was found: the value of the resource attribute
// runtime.correlation.identity.
const (
	attrIdentity       = "runtime.correlation.identity"
	identityContainer  = "container"
	identityPod        = "pod"
	identityHost       = "host"
	identityConnection = "connection"
)

// Why a span was not matched: the value of the span attribute
// runtime.overlap.unmatched and the reason of spans_unmatched.
const (
	attrUnmatched           = "runtime.overlap.unmatched"
	unmatchedNoIdentity     = "no_identity"
	unmatchedAmbiguous      = "ambiguous"
	unmatchedUnknownProcess = "unknown_process"
	unmatchedMismatch       = "mismatch"
)

// socketOwners names the process that owns a connection's client socket
// (procsocket.Resolver; tests use a fake): by the peer's address and port
// (OTLP/gRPC gives both), or, by its address alone (OTLP/HTTP gives no
// port), every process connected to the collector from it.
type socketOwners interface {
	Lookup(peer netip.AddrPort) (procsocket.Owner, error)
	OwnersFrom(ip netip.Addr) ([]procsocket.Owner, error)
}

// spanIdentity is what a span resource was matched to: the scope its
// spans are compared in and how it was found, or why it was not.
type spanIdentity struct {
	scope     scopeKey
	how       string
	unmatched string
	// peer is the connection the span came over when its identity is
	// that connection's (a workload's): a second try looks the peer up
	// again, never the resource's claims.
	peer    netip.AddrPort
	hasPeer bool
}

// found is a span resource's process, resolved to where its windows are.
type found struct {
	node string
	proc procresource.Identity
	gen  uint32
	how  string
	// checked: proc's container and pod are the process table's (the
	// kernel's), so "" means none, not unknown.
	checked bool
}

// resourceKey is the part of a span resource that identity depends on.
type resourceKey struct {
	container, pod, host string
	pid                  int64
	hasPID               bool
}

// resolution is a cached answer for a resourceKey or a peer: a process,
// or the reason none was found.
type resolution struct {
	found   found
	ok      bool
	reason  string
	expires time.Time
}

// maxCached bounds each resolution cache: far more distinct senders than
// a node has.
const maxCached = 4096

// identities resolves span resources to processes, caching answers per
// resource identity and per peer for a short TTL, so that a stream of
// batches from one sender costs one lookup per TTL.
type identities struct {
	c       *correlator
	table   processTable // nil: no local process table
	sockets socketOwners // nil: connections are not used
	ttl     time.Duration
	// trusted are the senders whose spans are matched by their resource
	// attributes and whose windows are indexed (identity::trusted_peers).
	trusted []netip.Prefix

	mu        sync.Mutex
	resources map[resourceKey]resolution
	peers     map[netip.AddrPort]resolution
	addresses map[addressKey]resolution
}

func newIdentities(c *correlator, table processTable, sockets socketOwners, ttl time.Duration, trusted []netip.Prefix) *identities {
	return &identities{
		c: c, table: table, sockets: sockets, ttl: ttl, trusted: trusted,
		resources: map[resourceKey]resolution{},
		peers:     map[netip.AddrPort]resolution{},
		addresses: map[addressKey]resolution{},
	}
}

// resolve returns the scope of a span resource's spans. A span that came
// over a workload's connection is that connection's process's, whatever
// its resource claims (resolveByPeer); one from a trusted sender, or with
// no connection to go by, is matched by its resource's attributes (ctx
// must be the receiver's: client.Info is gone after batching).
func (ids *identities) resolve(ctx context.Context, res pcommon.Resource) spanIdentity {
	rk := resourceKeyOf(res.Attributes())
	if peer, ok := ids.workloadPeer(ctx); ok {
		return ids.resolveByPeer(peer, rk)
	}
	return ids.resolveByClaims(rk)
}

// retry resolves a resource again after its spans waited: through its
// connection when its identity is the connection's, else by its
// attributes afresh.
func (ids *identities) retry(id spanIdentity, res pcommon.Resource) spanIdentity {
	rk := resourceKeyOf(res.Attributes())
	if id.hasPeer {
		return ids.resolveByPeer(id.peer, rk)
	}
	f, reason := ids.byResource(rk)
	if reason != "" {
		return spanIdentity{unmatched: reason}
	}
	return ids.scopeOf(f)
}

// workloadPeer returns the connection ctx names when a span's identity is
// that connection's: connections are used and the peer is not trusted.
func (ids *identities) workloadPeer(ctx context.Context) (netip.AddrPort, bool) {
	if ids.sockets == nil {
		return netip.AddrPort{}, false
	}
	peer, ok := peerOf(ctx)
	if !ok || ids.isTrusted(peer.Addr()) {
		return netip.AddrPort{}, false
	}
	return peer, true
}

// fromTrustedPeer reports whether ctx names a connection from a sender in
// identity::trusted_peers.
func (ids *identities) fromTrustedPeer(ctx context.Context) bool {
	peer, ok := peerOf(ctx)
	return ok && ids.isTrusted(peer.Addr())
}

// isTrusted reports whether a is in identity::trusted_peers.
func (ids *identities) isTrusted(a netip.Addr) bool {
	a = a.Unmap()
	for _, p := range ids.trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// resolveByClaims resolves a resource by its own attributes (cached per
// resource identity): for a trusted sender's spans, or those with no
// connection.
func (ids *identities) resolveByClaims(rk resourceKey) spanIdentity {
	c := ids.c
	switch c.cfg.MatchScope {
	case ScopePod:
		if rk.pod != "" {
			return spanIdentity{scope: scopeKey{pod: rk.pod}, how: identityPod}
		}
	case ScopeHost:
		if rk.container == "" && rk.pod == "" && c.isNode(rk.host) {
			return spanIdentity{scope: scopeKey{host: rk.host}, how: identityHost}
		}
	}
	r := cachedResolution(ids, ids.resources, rk, c.now(), func() (found, string) { return ids.byResource(rk) })
	if !r.ok {
		return spanIdentity{unmatched: r.reason}
	}
	return ids.scopeOf(r.found)
}

// resolveByPeer resolves a span by the process that holds its
// connection's client socket. The resource may say less than the
// connection, never something else: a process.pid that is not the
// owner's (as the node or the owner sees it), a container.id or
// k8s.pod.uid of another container or pod make the span a mismatch.
func (ids *identities) resolveByPeer(peer netip.AddrPort, rk resourceKey) spanIdentity {
	now := ids.c.now()
	var (
		f      found
		reason string
	)
	if peer.Port() == 0 {
		f, reason = ids.byAddress(peer.Addr(), rk, now)
	} else {
		r := cachedResolution(ids, ids.peers, peer, now, func() (found, string) { return ids.lookupPeer(peer) })
		f, reason = r.found, r.reason
	}
	if reason == "" {
		if claim := ids.disagreement(f, rk); claim != "" {
			ids.c.logger.Debug("runtimecorrelation: span's resource names another process than its connection's",
				zap.String("attribute", claim), zap.Int("owner.pid", f.proc.PID), zap.Int("owner.vpid", f.proc.VPID),
				zap.String("peer", peer.String()))
			reason = unmatchedMismatch
		}
	}
	if reason != "" {
		return spanIdentity{unmatched: reason, peer: peer, hasPeer: true}
	}
	id := ids.scopeOf(f)
	id.peer, id.hasPeer = peer, true
	return id
}

// disagreement returns the resource attribute whose claim the
// connection's process f contradicts, or "". A container.id agrees when it
// is f's container, or its pod's sandbox (what SDK detectors may find),
// which the process table resolves to f.
func (ids *identities) disagreement(f found, rk resourceKey) string {
	p := f.proc
	if rk.hasPID && rk.pid != int64(p.PID) && rk.pid != int64(p.VPID) {
		return window.ResourcePID
	}
	vpid := p.VPID
	if vpid == 0 {
		vpid = p.PID
	}
	if rk.container != "" && rk.container != p.ContainerID {
		same := false
		if ids.table != nil {
			q, ok := ids.table.ByContainer(rk.container, vpid)
			same = ok && q.PID == p.PID
		}
		if !same && (f.checked || p.ContainerID != "" || ids.namesOther(rk.container, int64(vpid), int64(p.PID))) {
			return window.ResourceContainerID
		}
	}
	if rk.pod != "" && rk.pod != p.PodUID && (f.checked || p.PodUID != "") {
		return window.ResourceK8sPodUID
	}
	return ""
}

// namesOther reports whether the correlator learned (container, vpid) as
// a process other than pid.
func (ids *identities) namesOther(container string, vpid, pid int64) bool {
	c := ids.c
	c.mu.RLock()
	defer c.mu.RUnlock()
	k, ok := c.procs.byContainer[namePID{container, vpid}]
	return ok && k.pid != pid
}

// scopeOf returns the match scope of a found process.
func (ids *identities) scopeOf(f found) spanIdentity {
	switch ids.c.cfg.MatchScope {
	case ScopePod:
		pod := f.proc.PodUID
		if pod == "" {
			return spanIdentity{unmatched: unmatchedNoIdentity}
		}
		return spanIdentity{scope: scopeKey{pod: pod}, how: f.how}
	case ScopeHost:
		return spanIdentity{scope: scopeKey{host: f.node}, how: f.how}
	}
	return spanIdentity{scope: scopeKey{host: f.node, pid: int64(f.proc.PID), gen: f.gen}, how: f.how}
}

// byResource resolves a resource by its attributes, strongest identity
// first: container + in-container pid, pod + pid, node + host pid.
func (ids *identities) byResource(rk resourceKey) (found, string) {
	c := ids.c
	local := c.node.HostName
	reason := unmatchedNoIdentity
	if !rk.hasPID {
		return found{}, reason
	}
	if rk.container != "" {
		c.mu.RLock()
		k, ok := c.procs.byContainer[namePID{rk.container, rk.pid}]
		var p procresource.Identity
		if ok {
			p = c.procs.byHost[k].id
		}
		c.mu.RUnlock()
		if ok {
			return ids.at(k.node, p, identityContainer), ""
		}
		if ids.table != nil {
			if p, ok := ids.table.ByContainer(rk.container, int(rk.pid)); ok {
				return ids.at(local, p, identityContainer), ""
			}
		}
		reason = unmatchedUnknownProcess
	}
	if rk.pod != "" {
		var cands []found
		c.mu.RLock()
		for _, k := range c.procs.byPod[namePID{rk.pod, rk.pid}] {
			cands = append(cands, found{node: k.node, proc: c.procs.byHost[k].id})
		}
		c.mu.RUnlock()
		if ids.table != nil {
			for _, p := range ids.table.ByPod(rk.pod, int(rk.pid)) {
				cands = addCandidate(cands, found{node: local, proc: p})
			}
		}
		switch len(cands) {
		case 1:
			return ids.at(cands[0].node, cands[0].proc, identityPod), ""
		case 0:
			reason = unmatchedUnknownProcess
		default:
			return found{}, unmatchedAmbiguous
		}
	}
	if rk.container != "" || rk.pod != "" || !c.isNode(rk.host) {
		return found{}, reason
	}
	return ids.byHost(rk)
}

// byHost resolves a node's host name and a pid: the host process with that
// pid, unless a process in another pid namespace of the node also sees
// itself as that pid (a hostNetwork pod's SDK reports the node's hostname
// and its in-container pid), which makes the span ambiguous.
func (ids *identities) byHost(rk resourceKey) (found, string) {
	c := ids.c
	var host procresource.Identity
	hostOK, other := false, false
	c.mu.RLock()
	if r, ok := c.procs.byHost[nodePID{rk.host, rk.pid}]; ok && (r.id.VPID == 0 || int64(r.id.VPID) == rk.pid) {
		host, hostOK = r.id, true
	}
	other = len(c.procs.byVPID[nodePID{rk.host, rk.pid}]) > 0
	c.mu.RUnlock()
	if ids.table != nil && rk.host == c.node.HostName {
		if p, ok := ids.table.ByHostPID(int(rk.pid)); ok {
			if p.VPID == 0 || int64(p.VPID) == rk.pid {
				host, hostOK = p, true
			} else {
				hostOK = false // the pid's learned process is gone: reused by a container's
			}
		}
		other = other || ids.table.SeenAs(int(rk.pid))
	}
	switch {
	case other:
		return found{}, unmatchedAmbiguous
	case !hostOK:
		return found{}, unmatchedUnknownProcess
	}
	return ids.at(rk.host, host, identityHost), ""
}

func (ids *identities) lookupPeer(peer netip.AddrPort) (found, string) {
	owner, err := ids.sockets.Lookup(peer)
	if err != nil {
		reason := unmatchedUnknownProcess
		if errors.Is(err, procsocket.ErrAmbiguous) {
			reason = unmatchedAmbiguous
		}
		ids.c.logger.Debug("runtimecorrelation: connection names no local process", zap.String("peer", peer.String()), zap.Error(err))
		return found{}, reason
	}
	return ids.ownerFound(owner, peer.String())
}

// addressKey caches what an address-only connection (OTLP/HTTP) resolved
// to for one claimed pid (0: none claimed).
type addressKey struct {
	ip  netip.Addr
	pid int64
}

// byAddress resolves a span that came over a connection whose port is not
// known (OTLP/HTTP): among the processes connected to the collector from
// that address (in Kubernetes, a pod's IP names its network namespace), the
// one the span's process.pid names as its own pid or as the node sees it,
// or the only one when the span claims no pid. Several: ambiguous (two
// containers on one network namespace that are both pid 1), never guessed.
func (ids *identities) byAddress(ip netip.Addr, rk resourceKey, now time.Time) (found, string) {
	k := addressKey{ip: ip.Unmap()}
	if rk.hasPID {
		k.pid = rk.pid
	}
	r := cachedResolution(ids, ids.addresses, k, now, func() (found, string) { return ids.lookupAddress(k) })
	return r.found, r.reason
}

func (ids *identities) lookupAddress(k addressKey) (found, string) {
	owners, err := ids.sockets.OwnersFrom(k.ip)
	if err != nil {
		ids.c.logger.Debug("runtimecorrelation: no local process is connected from the span's address", zap.String("address", k.ip.String()), zap.Error(err))
		return found{}, unmatchedUnknownProcess
	}
	if len(owners) > 1 && !ids.oneTenant(owners) {
		// Which of them sent this request is not known, and a process.pid
		// is only a claim: one tenant's claim must not pick another's
		// process.
		ids.c.logger.Debug("runtimecorrelation: processes of several containers or pods are connected from the span's address",
			zap.String("address", k.ip.String()), zap.Int("processes", len(owners)))
		return found{}, unmatchedAmbiguous
	}
	var match []procsocket.Owner
	for _, o := range owners {
		if k.pid == 0 || int64(o.VPID) == k.pid || int64(o.PID) == k.pid {
			match = append(match, o)
		}
	}
	switch {
	case len(match) == 1:
		return ids.ownerFound(match[0], k.ip.String())
	case len(match) > 1:
		ids.c.logger.Debug("runtimecorrelation: several processes connected from the span's address fit it",
			zap.String("address", k.ip.String()), zap.Int64("process.pid", k.pid), zap.Int("processes", len(match)))
		return found{}, unmatchedAmbiguous
	}
	if k.pid != 0 {
		return found{}, unmatchedMismatch
	}
	return found{}, unmatchedUnknownProcess
}

// oneTenant reports whether owners are all processes of one pod (or, off
// Kubernetes, one container), as the process table says: among them a
// span's process.pid may pick one, since a tenant may claim to be any of
// its own processes. Host processes are each a tenant of their own.
func (ids *identities) oneTenant(owners []procsocket.Owner) bool {
	if ids.table == nil {
		return false
	}
	var tenant string
	for i, o := range owners {
		p, ok := ids.table.ByHostPID(o.PID)
		if !ok || (p.StartTicks != 0 && o.StartTicks != 0 && p.StartTicks != o.StartTicks) {
			return false
		}
		t := ""
		switch {
		case p.PodUID != "":
			t = "pod " + p.PodUID
		case p.ContainerID != "":
			t = "container " + p.ContainerID
		default:
			return false
		}
		if i > 0 && t != tenant {
			return false
		}
		tenant = t
	}
	return true
}

// ownerFound places a connection's owning process, unless its pid was
// reused since the windows were indexed.
func (ids *identities) ownerFound(owner procsocket.Owner, peer string) (found, string) {
	p := owner.Identity
	checked := false
	if ids.table != nil {
		if known, ok := ids.table.ByHostPID(p.PID); ok {
			if known.StartTicks != 0 && known.StartTicks != owner.StartTicks {
				ids.c.logger.Debug("runtimecorrelation: connection's process exited and its pid was reused",
					zap.String("peer", peer), zap.Int("pid", owner.PID))
				return found{}, unmatchedUnknownProcess
			}
			p = known
			checked = true
		}
	}
	if !checked {
		// Placed by pid and start time alone: only the table's container
		// and pod are checked ones; else they are what its windows said.
		p.ContainerID, p.PodUID = "", ""
	}
	f := ids.at(ids.c.node.HostName, p, identityConnection)
	f.checked = checked
	return f, ""
}

// at places p on node: the incarnation its windows are indexed under, and
// its pod from what the windows said when p itself does not say.
func (ids *identities) at(node string, p procresource.Identity, how string) found {
	c := ids.c
	c.mu.RLock()
	gen := c.procs.genFor(node, p)
	if r, ok := c.procs.byHost[nodePID{node, int64(p.PID)}]; ok && gen == r.gen && p.PodUID == "" {
		p.PodUID = r.id.PodUID
	}
	c.mu.RUnlock()
	return found{node: node, proc: p, gen: gen, how: how}
}

// addCandidate adds f unless a candidate names the same process.
func addCandidate(cands []found, f found) []found {
	for _, c := range cands {
		if c.node == f.node && c.proc.PID == f.proc.PID {
			return cands
		}
	}
	return append(cands, f)
}

// cachedResolution returns m's answer for k, looked up afresh (and stored)
// when m has none or it has expired. The lookup runs outside ids.mu.
func cachedResolution[K comparable](ids *identities, m map[K]resolution, k K, now time.Time, lookup func() (found, string)) resolution {
	ids.mu.Lock()
	r, hit := m[k]
	ids.mu.Unlock()
	if hit && !now.After(r.expires) {
		return r
	}
	f, reason := lookup()
	r = resolution{found: f, ok: reason == "", reason: reason, expires: now.Add(ids.ttl)}
	ids.mu.Lock()
	putBounded(m, k, r, now)
	ids.mu.Unlock()
	return r
}

// putBounded stores v, first dropping expired entries when m is full, and
// everything when that is not enough (a flood of distinct identities costs
// lookups, never memory).
func putBounded[K comparable](m map[K]resolution, k K, v resolution, now time.Time) {
	if _, ok := m[k]; !ok && len(m) >= maxCached {
		for k, e := range m {
			if now.After(e.expires) {
				delete(m, k)
			}
		}
		if len(m) >= maxCached {
			clear(m)
		}
	}
	m[k] = v
}

// peerOf returns the OTLP connection's peer that the receiver put on ctx.
func peerOf(ctx context.Context) (netip.AddrPort, bool) {
	switch a := client.FromContext(ctx).Addr.(type) {
	case nil:
		return netip.AddrPort{}, false
	case *net.TCPAddr:
		ap := a.AddrPort()
		return ap, ap.IsValid()
	case *net.IPAddr:
		// confighttp (OTLP/HTTP) keeps the address, not the port.
		ip, ok := netip.AddrFromSlice(a.IP)
		return netip.AddrPortFrom(ip.Unmap(), 0), ok
	default:
		ap, err := netip.ParseAddrPort(a.String())
		return ap, err == nil
	}
}

func resourceKeyOf(attrs pcommon.Map) resourceKey {
	pid, hasPID := window.IntAttr(attrs, window.ResourcePID)
	return resourceKey{
		container: window.StrAttr(attrs, window.ResourceContainerID),
		pod:       window.StrAttr(attrs, window.ResourceK8sPodUID),
		host:      window.StrAttr(attrs, window.ResourceHostName),
		pid:       pid,
		hasPID:    hasPID && pid > 0,
	}
}
