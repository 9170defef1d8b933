package runtimecorrelationprocessor // import "github.com/otelcol-ai/otelcol-ai/processor/runtimecorrelationprocessor"

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"go.opentelemetry.io/collector/component"

	"github.com/otelcol-ai/otelcol-ai/internal/window"
	"github.com/otelcol-ai/otelcol-ai/processor/runtimecorrelationprocessor/internal/metadata"
)

// MatchScope says which windows and spans are compared with each other.
type MatchScope string

// The match scopes.
const (
	// ScopeProcess compares what happened in one process: a span is
	// matched to its own process by container.id and its pid, k8s.pod.uid
	// and its pid, the node and host pid, or its connection.
	ScopeProcess MatchScope = "process"
	// ScopePod compares what happened in one pod: the span's k8s.pod.uid,
	// or the pod of its process.
	ScopePod MatchScope = "pod"
	// ScopeHost compares what happened on one node: every window of the
	// node the span's process runs on.
	ScopeHost MatchScope = "host"
)

// Config is the runtimecorrelation processor's configuration.
type Config struct {
	// MatchScope is process (default), pod or host.
	MatchScope MatchScope `mapstructure:"match_scope"`
	// OverlapPairs are the pairs of window kinds whose overlaps are
	// emitted, each [first, second]; by default every JVM kind with every
	// Python kind.
	OverlapPairs [][]window.Kind `mapstructure:"overlap_pairs"`
	// Windows bounds the window index.
	Windows WindowsConfig `mapstructure:"windows"`
	// Spans says how spans are matched and annotated.
	Spans SpansConfig `mapstructure:"spans"`
	// Metrics says how often overlap metrics go down a metrics pipeline.
	Metrics MetricsConfig `mapstructure:"metrics"`
	// Identity says how spans are matched to local processes.
	Identity IdentityConfig `mapstructure:"identity"`
	// Timeline bounds what is kept for the timeline page beside the index.
	Timeline TimelineConfig `mapstructure:"timeline"`
	// RuntimeState, when set, is the runtimestate extension the processor's
	// state is registered in for the timeline extension to draw (by this
	// processor's component ID); nil registers it nowhere.
	RuntimeState *component.ID `mapstructure:"runtime_state"`
	// prevent unkeyed literal initialization
	_ struct{}
}

// WindowsConfig bounds the window index.
type WindowsConfig struct {
	// Retention is how long a window is kept after the newest window's
	// start.
	Retention time.Duration `mapstructure:"retention"`
	// MaxWindows is the most windows indexed at once, over all scopes;
	// beyond it the oldest are evicted.
	MaxWindows int `mapstructure:"max_windows"`
	// MaxPerScope is the most windows indexed at once in one match scope;
	// beyond it that scope's oldest are evicted, so that one sender
	// flooding the index cannot evict everyone else's windows.
	MaxPerScope int `mapstructure:"max_per_scope"`
	// MaxClockSkew is how far after the collector's clock a window or span
	// may end and still be indexed.
	MaxClockSkew time.Duration `mapstructure:"max_clock_skew"`
}

// SpansConfig says how spans are matched and annotated.
type SpansConfig struct {
	// Delay is how long spans wait for windows that arrive after them;
	// 0 annotates and forwards each batch at once.
	Delay time.Duration `mapstructure:"delay"`
	// MaxWaiting is the most spans waiting at once; beyond it the batches
	// due first are released early.
	MaxWaiting int `mapstructure:"max_waiting"`
	// Events adds a span event per overlapping window.
	Events bool `mapstructure:"events"`
	// ChildSpans adds a child span per overlapping window, covering the
	// part of the window inside the span.
	ChildSpans bool `mapstructure:"child_spans"`
	// MaxPlacements is the most events or child spans added to one span.
	MaxPlacements int `mapstructure:"max_placements"`
}

// MetricsConfig says how often overlap metrics are emitted, and which.
type MetricsConfig struct {
	// Interval is the time between two emissions of the cumulative
	// overlap metrics into the metrics pipelines the processor is in.
	Interval time.Duration `mapstructure:"interval"`
	// MetricsConfig switches each overlap metric
	// (metrics::<name>::enabled), as metadata.yaml declares them.
	metadata.MetricsConfig `mapstructure:",squash"`
}

// TimelineConfig bounds the recent spans kept for the timeline page
// (pkg/timeline), whether or not anyone looks.
type TimelineConfig struct {
	// MaxSpans is the most spans kept; beyond it the oldest go.
	MaxSpans int `mapstructure:"max_spans"`
	// MaxBytes is the most bytes the kept spans hold (names, ids, overlap
	// totals, scores); beyond it the oldest go.
	MaxBytes int64 `mapstructure:"max_bytes"`
}

// IdentityConfig says how spans are matched to the processes whose
// windows are indexed.
type IdentityConfig struct {
	// ProcRoot is the proc filesystem local processes and sockets are
	// looked up in: the host's /proc with hostPID.
	ProcRoot string `mapstructure:"proc_root"`
	// Connection identifies each span by the OTLP connection it came over:
	// its process is the local process that holds the connection's client
	// socket, and resource attributes that name another process make the
	// span a mismatch. Off, a sender's resource attributes are believed:
	// only for a collector that no workload can reach.
	Connection bool `mapstructure:"connection"`
	// CacheTTL is how long a resolved identity (per resource identity and
	// per connection) is reused.
	CacheTTL time.Duration `mapstructure:"cache_ttl"`
	// MaxProcesses bounds the processes whose identity is learned from
	// window resources.
	MaxProcesses int `mapstructure:"max_processes"`
	// TrustedPeers are the addresses (CIDR prefixes, or single addresses)
	// of OTLP senders that speak for others: a forwarding collector tier.
	// Windows they send are indexed, and their spans are matched by their
	// resource attributes. Every other sender is a workload: its windows
	// are not indexed and its spans are its own connection's process's.
	TrustedPeers []string `mapstructure:"trusted_peers"`
}

// trustedPrefixes parses TrustedPeers; Validate reports what does not
// parse.
func (cfg *IdentityConfig) trustedPrefixes() ([]netip.Prefix, error) {
	var (
		out  []netip.Prefix
		errs []error
	)
	for i, s := range cfg.TrustedPeers {
		p, err := parsePeerPrefix(s)
		if err != nil {
			errs = append(errs, fmt.Errorf("identity::trusted_peers[%d]: %w", i, err))
			continue
		}
		out = append(out, p)
	}
	return out, errors.Join(errs...)
}

// parsePeerPrefix reads a CIDR prefix or a single address (a /32 or /128).
func parsePeerPrefix(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return netip.Prefix{}, fmt.Errorf("%q is not an address or a CIDR prefix", s)
		}
		return p.Masked(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil || a.Zone() != "" {
		return netip.Prefix{}, fmt.Errorf("%q is not an address or a CIDR prefix", s)
	}
	a = a.Unmap()
	return netip.PrefixFrom(a, a.BitLen()), nil
}

var _ component.Config = (*Config)(nil)

// minTimelineBytes is room for the costliest span the timeline keeps.
const minTimelineBytes = 64 << 10

// defaultOverlapPairs pairs every JVM kind with every Python kind.
func defaultOverlapPairs() [][]window.Kind {
	jvm := []window.Kind{window.KindJVMSafepoint, window.KindJVMGCPause}
	python := []window.Kind{window.KindPythonGILReleased, window.KindPythonGILWait, window.KindPythonGCPause}
	var pairs [][]window.Kind
	for _, j := range jvm {
		for _, p := range python {
			pairs = append(pairs, []window.Kind{j, p})
		}
	}
	return pairs
}

// Validate checks the configuration, naming the key at fault.
func (cfg *Config) Validate() error {
	var errs []error
	switch cfg.MatchScope {
	case ScopeProcess, ScopePod, ScopeHost:
	default:
		errs = append(errs, fmt.Errorf("match_scope: %q is not one of %s, %s, %s", cfg.MatchScope, ScopeProcess, ScopePod, ScopeHost))
	}
	seen := map[[2]window.Kind]int{}
	for i, p := range cfg.OverlapPairs {
		if len(p) != 2 {
			errs = append(errs, fmt.Errorf("overlap_pairs[%d]: want two kinds [first, second], got %d", i, len(p)))
			continue
		}
		ok := true
		for _, k := range p {
			if !k.Known() {
				errs = append(errs, fmt.Errorf("overlap_pairs[%d]: %q is not a window kind (one of %v)", i, k, window.Kinds()))
				ok = false
			}
		}
		if !ok {
			continue
		}
		if p[0] == p[1] {
			errs = append(errs, fmt.Errorf("overlap_pairs[%d]: pairs one kind with itself (%s); overlaps are across kinds", i, p[0]))
			continue
		}
		key := [2]window.Kind{min(p[0], p[1]), max(p[0], p[1])}
		if j, dup := seen[key]; dup {
			errs = append(errs, fmt.Errorf("overlap_pairs[%d]: %s and %s are already paired by overlap_pairs[%d]", i, p[0], p[1], j))
			continue
		}
		seen[key] = i
	}
	if cfg.Windows.Retention <= 0 {
		errs = append(errs, fmt.Errorf("windows::retention: must be positive, got %s", cfg.Windows.Retention))
	} else if cfg.Windows.Retention <= cfg.Spans.Delay {
		errs = append(errs, fmt.Errorf("windows::retention: %s must exceed spans::delay (%s), or waiting spans find their windows gone", cfg.Windows.Retention, cfg.Spans.Delay))
	}
	if cfg.Windows.MaxWindows <= 0 {
		errs = append(errs, fmt.Errorf("windows::max_windows: must be positive, got %d", cfg.Windows.MaxWindows))
	}
	if cfg.Windows.MaxPerScope <= 0 {
		errs = append(errs, fmt.Errorf("windows::max_per_scope: must be positive, got %d", cfg.Windows.MaxPerScope))
	}
	if cfg.Windows.MaxClockSkew < 0 {
		errs = append(errs, fmt.Errorf("windows::max_clock_skew: must not be negative, got %s", cfg.Windows.MaxClockSkew))
	}
	if cfg.Spans.Delay < 0 {
		errs = append(errs, fmt.Errorf("spans::delay: must not be negative, got %s", cfg.Spans.Delay))
	}
	if cfg.Spans.MaxWaiting <= 0 {
		errs = append(errs, fmt.Errorf("spans::max_waiting: must be positive, got %d", cfg.Spans.MaxWaiting))
	}
	if cfg.Spans.MaxPlacements < 0 {
		errs = append(errs, fmt.Errorf("spans::max_placements: must not be negative, got %d", cfg.Spans.MaxPlacements))
	}
	if cfg.Identity.ProcRoot == "" {
		errs = append(errs, errors.New("identity::proc_root: must not be empty"))
	}
	if cfg.Identity.CacheTTL < 0 {
		errs = append(errs, fmt.Errorf("identity::cache_ttl: must not be negative, got %s", cfg.Identity.CacheTTL))
	}
	if _, err := cfg.Identity.trustedPrefixes(); err != nil {
		errs = append(errs, err)
	}
	if cfg.Identity.MaxProcesses <= 0 {
		errs = append(errs, fmt.Errorf("identity::max_processes: must be positive, got %d", cfg.Identity.MaxProcesses))
	}
	if cfg.Timeline.MaxSpans <= 0 {
		errs = append(errs, fmt.Errorf("timeline::max_spans: must be positive, got %d", cfg.Timeline.MaxSpans))
	}
	if cfg.Timeline.MaxBytes < minTimelineBytes {
		errs = append(errs, fmt.Errorf("timeline::max_bytes: must be at least %d (one span with a clipped name and scores), got %d", minTimelineBytes, cfg.Timeline.MaxBytes))
	}
	if cfg.Metrics.Interval <= 0 {
		errs = append(errs, fmt.Errorf("metrics::interval: must be positive, got %s", cfg.Metrics.Interval))
	}
	return errors.Join(errs...)
}

// pairTable returns first×second → whether their overlaps are emitted,
// indexed by kindIndex.
func (cfg *Config) pairTable() [numKinds][numKinds]bool {
	var t [numKinds][numKinds]bool
	for _, p := range cfg.OverlapPairs {
		if len(p) != 2 {
			continue
		}
		a, okA := kindIndex(p[0])
		b, okB := kindIndex(p[1])
		if okA && okB {
			t[a][b] = true
		}
	}
	return t
}

// numKinds bounds the kinds the processor tells apart, for fixed-size
// tables; window.Kinds() beyond it (none today) are not indexed.
const numKinds = 16

// kinds are the window kinds in index order.
var kinds = func() []window.Kind {
	k := window.Kinds()
	return k[:min(len(k), numKinds)]
}()

// kindIndex returns k's index in kinds, or false.
func kindIndex(k window.Kind) (uint8, bool) {
	i := slices.Index(kinds, k)
	return uint8(i), i >= 0
}
