// Package procsocket names the local process that opened a TCP connection,
// from the connection's peer address as the receiving side sees it: the
// OTLP receiver knows the peer (client.FromContext(ctx).Addr), and an SDK
// with default settings sends neither process.pid nor host.name.
//
// # Method
//
// The client's socket has the peer address as its local address, in the
// network namespace the client lives in: the host's, or its pod's. Lookup
// groups the processes of the proc root by network namespace
// (/proc/<pid>/ns/net), and for each namespace that has the peer's address
// among its own (/proc/<pid>/net/fib_trie LOCAL routes for IPv4,
// net/if_inet6 for IPv6) reads its socket tables through one member
// (/proc/<pid>/net/tcp, then tcp6), looking for a row whose local address
// is the peer. A v4 peer also matches its v4-mapped form in tcp6, as a
// dual-stack socket shows it; LISTEN rows and rows without an inode
// (TIME_WAIT, orphans) are ignored; ESTABLISHED is preferred. The
// collector's own namespace comes first, and is the only one searched for
// a loopback peer, which can only be local to it. The row's inode is then
// looked for among the /proc/<pid>/fd links ("socket:[inode]") of that
// namespace's processes only. Every process of the namespace is scanned,
// each until it is found to hold the socket, because a socket shared by
// two processes (a fork after connect, a descriptor passed over a unix
// socket) names no one process: that is ErrAmbiguous. Threads share their
// process's descriptors and /proc lists only thread-group leaders, so a
// socket used by several threads names its process.
//
// Each process is reached through a descriptor of its /proc/<pid>
// directory, so its namespace, descriptors and start time are read from
// one process even if its pid is reused during the scan. Owner carries the
// process's identity as procresource reads it, for the same reason: with
// its start time (/proc/<pid>/stat field 22) a caller that keeps an Owner
// can tell it from a later process with the same pid. Its VPID (the
// innermost NSpid of /proc/<pid>/status) is the process.pid its SDK
// reports.
//
// # Owners of an address
//
// The OTLP/HTTP receiver (confighttp) gives only the peer's IP
// (client.Info.Addr is a *net.IPAddr), not its port, so Lookup cannot be
// asked. OwnersFrom(ip) returns every process holding an ESTABLISHED socket
// with local address ip, any port, whose remote end is one of this
// process's listening TCP sockets; a caller narrows them by VPID to the one
// whose SDK reported that process.pid. It searches the namespaces Lookup
// would (where ip is local; for loopback, this process's only), reading
// both tcp and tcp6 of each (a JVM's sockets are dual-stack). This
// process's listeners are read from its own descriptors (SO_ACCEPTCONN,
// then getsockname: no table walk, and a listener made in another
// namespace counts) and kept for a few seconds; one bound to 0.0.0.0 or ::
// matches any remote address with its port. In a pod the IP names the
// pod's network namespace, and VPID its container's process; on a bare
// host many processes share the host's addresses, and the IP alone names
// them all. Answers are cached per address for DefaultOwnersTTL, not
// revalidated: a process that closed its connection or exited stays listed
// until then, and one that just connected is missed until then. Misses
// share Lookup's negative cache and cache bound, and an address's scans
// spend the budget Lookup's do for a peer at that address.
//
// # Cost and cache
//
// A full scan costs one readlink per process and a read of each
// namespace's addresses (microseconds); then, for the namespace that has
// the peer's address, its socket tables, and one readlink per descriptor of
// each of its processes. Reading a socket table walks the kernel's whole
// established hash, shared by all namespaces (262144 buckets here: 4.5 ms
// per table even when it holds two sockets), which is why tables are read
// only where the address is local; rows are streamed and matched as bytes
// before any is parsed. A peer from another node costs no table read.
// Connections are long-lived (gRPC, HTTP keep-alive), so results are cached
// per peer (at most DefaultCacheSize entries, least recently used out, for
// DefaultTTL). A hit is revalidated with two reads: the owner's descriptor
// that held the socket still names it (one readlink) and the owner's start
// time is unchanged. Misses and ambiguous peers are cached for
// DefaultNegativeTTL, so a stream of requests from an unknown peer costs
// one scan. Scans run one at a time; hits never wait for them.
//
// # Scan budgets
//
// A sender that opens connections from new ports misses the cache with
// each, so full scans are rate-limited (DefaultScansPerSecond, with as
// large a burst), and a lookup that would exceed the rate fails with
// ErrBusy instead of scanning. The rate is per network namespace of the
// peer, so that a pod's connection storm spends its own budget and not its
// neighbours': in Kubernetes a pod's address names its pod's namespace,
// which only that pod's processes can connect from. The budget is chosen
// before the scan, from the peer's address, so that a refused lookup costs
// no scan (about a microsecond): a loopback peer spends this process's namespace's budget (the
// only one its socket can be in); another address, the budget of the one
// namespace of the proc root that has it among its addresses, from a map of
// every namespace's addresses (/proc/<pid>/net/fib_trie LOCAL /32 routes
// and net/if_inet6, through one member of each; no socket table: 0.2 ms
// for 97 processes here) read again when a scan is wanted and it is over a
// second old. Keyed by
// namespace rather than by address, a tenant that gives its namespace more
// addresses gets no more scans; the map keeps at most 64 addresses of a
// namespace, and the rest, with addresses two namespaces have, wider LOCAL
// routes (AnyIP) and addresses of no namespace here (peers on other nodes;
// a pod started within the last second), share one more budget, the
// unplaced peers'. The host's network namespace is one namespace: host
// processes and hostNetwork pods share its budget. At most 1024
// namespaces hold a budget; one that has refilled is dropped (a fresh one
// is the same), and while all are in use, a namespace without one shares
// the unplaced peers'. Scans still run one at a time, so a storm delays
// other namespaces' scans by its own, at most its rate's worth a second.
//
// # Limits
//
//   - A peer on another node has no socket here: ErrNotFound. So has a
//     connection that closed before the lookup.
//   - A proxied connection (a sidecar, a node-local agent, kube-proxy in
//     userspace mode) names the proxy, the process that connected to us.
//     A source-NATed connection has a translated address that names no
//     socket, or an unrelated socket that happens to have that address: a
//     pod behind SNAT must not be trusted to this package.
//   - A socket bound to an address its namespace does not have
//     (IP_FREEBIND, IP_TRANSPARENT: transparent proxies) is not found;
//     neither is one of two sockets bound to one address and port with
//     SO_REUSEADDR in the two families, once the other is found.
//   - A socket held only by processes outside the namespace it was created
//     in (created, then setns; or passed to another namespace) is not
//     found.
//   - Sharing that begins after an owner was cached goes unnoticed until
//     the entry expires (TTL).
//   - OwnersFrom cannot tell apart two clients with one VPID at one
//     address (pid 1 of two containers on the host's network).
//   - Behind destination NAT (a Service's ClusterIP, a hostPort) a
//     client's socket has the untranslated address as its remote end: it
//     matches a wildcard listener of the same port (as does a connection
//     to that port on another host), and nothing when the port is
//     translated too.
//   - Unix-domain sockets are not resolved: the OTLP receiver gives a
//     net.Addr, and a unix socket's peer credentials (SO_PEERCRED) are
//     known only to the receiver that holds the connection.
//   - Reading other processes' ns and fd links needs CAP_SYS_PTRACE (the
//     agent runs as root with hostPID); processes that cannot be read are
//     skipped, like processes that exit mid-scan.
//
// Every proc file is opened non-blocking, without following a final
// symlink, and read only if it is a regular file, with a cap; malformed
// rows are skipped.
package procsocket // import "github.com/otelcol-ai/otelcol-ai/internal/procsocket"

import (
	"errors"
	"fmt"
	"math"
	"net/netip"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/otelcol-ai/otelcol-ai/internal/procresource"
)

// Errors callers branch on with errors.Is.
var (
	// ErrNotFound: no process in any network namespace of the proc root
	// holds a TCP socket with the peer as its local address.
	ErrNotFound = errors.New("no local socket with that address")
	// ErrAmbiguous: the socket is held by several processes.
	ErrAmbiguous = errors.New("socket held by several processes")
	// ErrBusy: the lookup needed a full scan and the scan rate of the
	// peer's network namespace is spent; the peer is unknown for now, not
	// known to be absent.
	ErrBusy = errors.New("rate limited: too many scans")
)

// errTableTooLarge marks a socket table cut at maxTableBytes.
var errTableTooLarge = errors.New("socket table too large")

// Defaults, for a node agent that sees a few hundred senders.
const (
	// DefaultCacheSize bounds the peers remembered: far more connections
	// than a node's senders keep open, small in memory (~100 B each).
	DefaultCacheSize = 4096
	// DefaultTTL is how long an owner is trusted (revalidated on every
	// hit) before it is looked up afresh, which catches late sharing.
	DefaultTTL = 5 * time.Minute
	// DefaultNegativeTTL is how long a miss is remembered: long enough
	// that a burst of requests from one unknown peer scans once, short
	// enough that a connection just opened is found on a later request.
	DefaultNegativeTTL = time.Second
	// DefaultScansPerSecond bounds the full scans for the peers of one
	// network namespace (and their burst).
	DefaultScansPerSecond = 10
	// DefaultOwnersTTL is how long OwnersFrom's answer for an address is
	// kept, unrevalidated: the set of connections from an address changes
	// as clients come and go, while a busy sender's keep-alive
	// connections stay and are found again in the next scan.
	DefaultOwnersTTL = 2 * time.Second
)

// listenersTTL is how long this process's listening sockets are kept: a
// receiver starts listening once, so a new listener is missed for a few
// seconds at most.
const listenersTTL = 3 * time.Second

// Owner names the process that holds a socket.
type Owner struct {
	// Identity is the process as procresource.Reader.Identity read it
	// when the socket was found: PID as the proc root's pid namespace
	// sees it, VPID as the process sees itself (0 when unknown: an SDK's
	// process.pid is this one), StartTicks, and the container and pod of
	// its cgroup.
	procresource.Identity
	// NetNS is the inode of the network namespace the socket was found in
	// (/proc/<pid>/ns/net is "net:[NetNS]").
	NetNS uint64
}

// Option configures a Resolver.
type Option func(*options)

type options struct {
	cacheSize      int
	ttl            time.Duration
	negativeTTL    time.Duration
	ownersTTL      time.Duration
	scansPerSecond float64
}

// WithCacheSize sets how many peers are remembered (n > 0; otherwise
// DefaultCacheSize).
func WithCacheSize(n int) Option {
	return func(o *options) {
		if n > 0 {
			o.cacheSize = n
		}
	}
}

// WithTTL sets how long a found owner is cached (d > 0; otherwise
// DefaultTTL).
func WithTTL(d time.Duration) Option {
	return func(o *options) {
		if d > 0 {
			o.ttl = d
		}
	}
}

// WithNegativeTTL sets how long a miss or an ambiguous peer is cached;
// 0 turns that off (a negative d keeps DefaultNegativeTTL).
func WithNegativeTTL(d time.Duration) Option {
	return func(o *options) {
		if d >= 0 {
			o.negativeTTL = d
		}
	}
}

// WithOwnersTTL sets how long OwnersFrom's answer for an address is cached
// (d > 0; otherwise DefaultOwnersTTL).
func WithOwnersTTL(d time.Duration) Option {
	return func(o *options) {
		if d > 0 {
			o.ownersTTL = d
		}
	}
}

// WithMaxScansPerSecond bounds the full scans for the peers of one network
// namespace to n per second, with bursts of up to max(n, 1); math.Inf(1)
// removes the bound. n <= 0 or NaN keeps DefaultScansPerSecond.
func WithMaxScansPerSecond(n float64) Option {
	return func(o *options) {
		if n > 0 {
			o.scansPerSecond = n
		}
	}
}

// Resolver maps peer addresses to the processes that own them. It is safe
// for concurrent use.
type Resolver struct {
	procRoot string
	stat     *procresource.Reader
	// selfNetNS is this process's network namespace (0 when unknown): the
	// one a loopback peer must be in.
	selfNetNS uint64
	opts      options
	now       func() time.Time

	mu      sync.Mutex // guards cache and budgets
	cache   *peerCache
	budgets *scanBudgets

	scanMu sync.Mutex // one full scan at a time; guards listeners and book
	// listeners is this process's listening sockets, read by OwnersFrom
	// scans.
	listeners listenerSet
	// book places peers' addresses in network namespaces, for budgets.
	book addressBook
	// scans counts full scans started, tableReads the socket tables
	// opened, for tests and telemetry.
	scans, tableReads atomic.Uint64
}

// NewResolver returns a Resolver over the proc filesystem at procRoot
// ("" means /proc). The collector reads its own network namespace from
// /proc/self, whatever procRoot is, since namespace inodes are the same in
// every proc mount.
func NewResolver(procRoot string, opts ...Option) *Resolver {
	if procRoot == "" {
		procRoot = procresource.DefaultProcRoot
	}
	o := options{
		cacheSize:      DefaultCacheSize,
		ttl:            DefaultTTL,
		negativeTTL:    DefaultNegativeTTL,
		ownersTTL:      DefaultOwnersTTL,
		scansPerSecond: DefaultScansPerSecond,
	}
	for _, opt := range opts {
		opt(&o)
	}
	r := &Resolver{
		procRoot: procRoot,
		stat:     procresource.NewReader(procRoot, 0),
		opts:     o,
		now:      time.Now,
		cache:    newPeerCache(o.cacheSize),
		budgets:  newScanBudgets(o.scansPerSecond, maxScanBudgets),
	}
	if link, err := os.Readlink("/proc/self/ns/net"); err == nil {
		r.selfNetNS, _ = parseBracketInode("net:", []byte(link))
	}
	return r
}

// Lookup returns the process that owns the TCP socket whose local address
// is peer: the client side of a connection this process accepted. Errors
// wrap ErrNotFound, ErrAmbiguous or ErrBusy.
func (r *Resolver) Lookup(peer netip.AddrPort) (Owner, error) {
	if !peer.IsValid() || peer.Port() == 0 {
		return Owner{}, fmt.Errorf("procsocket: peer %v: not a connected TCP address: %w", peer, ErrNotFound)
	}
	// A dual-stack listener sees a v4 client as ::ffff:a.b.c.d; tables
	// are matched on the unmapped address, and zones play no part.
	peer = netip.AddrPortFrom(peer.Addr().Unmap().WithZone(""), peer.Port())
	e, err := r.resolve(peer, r.opts.ttl, func() (cacheEntry, error) {
		found, err := r.scan(peer)
		return cacheEntry{owner: found.owner, fd: found.fd, inode: found.inode}, err
	})
	return e.owner, err
}

// OwnersFrom returns every process that holds an ESTABLISHED TCP socket
// with local address ip, any port, connected to one of this process's
// listening sockets: the clients of this process at ip, in no particular
// order, for a receiver that knows a peer's address but not its port.
// Errors wrap ErrNotFound or ErrBusy.
func (r *Resolver) OwnersFrom(ip netip.Addr) ([]Owner, error) {
	if !ip.IsValid() || ip.IsUnspecified() {
		return nil, fmt.Errorf("procsocket: from %v: not a connected address: %w", ip, ErrNotFound)
	}
	ip = ip.Unmap().WithZone("")
	e, err := r.resolve(addressKey(ip), r.opts.ownersTTL, func() (cacheEntry, error) {
		owners, err := r.scanFrom(ip)
		return cacheEntry{owners: owners}, err
	})
	return slices.Clone(e.owners), err
}

// addressKey is the cache key of OwnersFrom's answer for ip: a peer with
// port 0, which Lookup never caches.
func addressKey(ip netip.Addr) netip.AddrPort { return netip.AddrPortFrom(ip, 0) }

// resolve answers key from the cache, or else by scan, one scan at a
// time and within the scan rate, and caches the answer: for ttl when
// found, for the negative TTL when not.
func (r *Resolver) resolve(key netip.AddrPort, ttl time.Duration, scan func() (cacheEntry, error)) (cacheEntry, error) {
	if e, ok := r.cached(key); ok {
		return e, e.err
	}
	r.scanMu.Lock()
	defer r.scanMu.Unlock()
	// The scan this one waited for may have answered key.
	if e, ok := r.cached(key); ok {
		return e, e.err
	}
	netns := uint64(unplaced)
	if !math.IsInf(r.opts.scansPerSecond, 1) {
		netns = r.placeAddress(key.Addr())
	}
	r.mu.Lock()
	allowed := r.budgets.allow(netns, r.now())
	r.mu.Unlock()
	if !allowed {
		return cacheEntry{}, fmt.Errorf("procsocket: %s: %w (%g per second %s)", describeKey(key), ErrBusy, r.opts.scansPerSecond, describeBudget(netns))
	}
	r.scans.Add(1)
	e, err := scan()
	if err != nil {
		e = cacheEntry{err: err}
		ttl = r.opts.negativeTTL
	}
	if ttl > 0 {
		e.expires = r.now().Add(ttl)
		r.mu.Lock()
		r.cache.put(key, e)
		r.mu.Unlock()
	}
	return e, err
}

// describeKey names a cache key in errors as Lookup and OwnersFrom do.
func describeKey(key netip.AddrPort) string {
	if key.Port() == 0 {
		return "from " + key.Addr().String()
	}
	return "peer " + key.String()
}

// describeBudget names the scan budget of netns in errors.
func describeBudget(netns uint64) string {
	if netns == unplaced {
		return "for addresses of no one network namespace here"
	}
	return fmt.Sprintf("for network namespace %d", netns)
}

// cached returns key's unexpired cache entry, a found owner only once it
// has been revalidated. An address's owners are not revalidated: they are
// kept for a short TTL only.
func (r *Resolver) cached(key netip.AddrPort) (cacheEntry, bool) {
	r.mu.Lock()
	e, ok := r.cache.get(key, r.now())
	r.mu.Unlock()
	if !ok || e.err != nil || key.Port() == 0 {
		return e, ok
	}
	if r.stillHolds(e) {
		return e, true
	}
	r.mu.Lock()
	r.cache.removeIf(key, e)
	r.mu.Unlock()
	return cacheEntry{}, false
}
