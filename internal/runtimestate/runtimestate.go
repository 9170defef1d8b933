// Package runtimestate is the state components share about the node's
// processes, owned by the runtimestate extension and found through the
// collector's host by the extension's component ID (as a storage extension
// is), so that the dependency is in the configuration and the state lives
// from the extension's Start to its Shutdown. It holds, per process, the
// readings of its runtime's memory accounts (the jfr receiver's JVM
// accounts), which the nvml receiver joins with a process's GPU memory; the
// timeline sources (the runtimecorrelation processor's state) that the
// timeline extension draws; and the attention marks the runtimecorrelation
// processor makes and the pythongil receiver's budget follows.
package runtimestate // import "github.com/otelcol-ai/otelcol-ai/internal/runtimestate"

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"go.opentelemetry.io/collector/component"

	"github.com/otelcol-ai/otelcol-ai/internal/attention"
	"github.com/otelcol-ai/otelcol-ai/internal/procresource"
	"github.com/otelcol-ai/otelcol-ai/pkg/timeline"
)

// Process names a process: its pid in the collector's proc root and its
// start time (field 22 of /proc/<pid>/stat), so that a pid reused by
// another process names another process.
type Process struct {
	PID        int
	StartTicks uint64
}

// ProcessOf is the process procresource identifies as id.
func ProcessOf(id procresource.Identity) Process {
	return Process{PID: id.PID, StartTicks: id.StartTicks}
}

// Reading is one reading of an account.
type Reading struct {
	At    time.Time
	Value int64
}

// Config bounds a Store.
type Config struct {
	// Retention is how long readings are kept.
	Retention time.Duration
	// MaxProcesses bounds the processes held; a new one past it is not
	// recorded (counted in Dropped).
	MaxProcesses int
	// MaxReadings bounds the readings held per account of a process; the
	// oldest go first.
	MaxReadings int
}

// Store holds the accounts of processes. It is safe for concurrent use.
type Store struct {
	cfg   Config
	mu    sync.Mutex
	procs map[Process]map[string][]Reading
	// gpu is each process's GPU memory by device (RecordGPU), bounded as
	// procs is.
	gpu map[Process]map[string][]Reading
	// verdicts are the writer's own leak verdict per account (Assess).
	verdicts  map[Process]map[string]bool
	timelines *timeline.Registry
	attention *attention.Registry
	dropped   int64
	now       func() time.Time
}

// New returns an empty store.
func New(cfg Config) *Store {
	return &Store{cfg: cfg, procs: map[Process]map[string][]Reading{}, gpu: map[Process]map[string][]Reading{}, verdicts: map[Process]map[string]bool{}, timelines: timeline.NewRegistry(),
		attention: attention.New(attention.DefaultMax, attention.DefaultTTL), now: time.Now}
}

// Record adds a reading of one of p's accounts ("heap", "jni_global_refs",
// …). A reading not newer than the account's last is ignored.
func (s *Store) Record(p Process, account string, at time.Time, value int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.addLocked(s.procs, p, account, at, value)
}

// RecordGPU adds a reading of p's memory on one GPU (the nvml receiver's
// per-process memory, by device id), which the timeline draws beside the
// process's windows. A reading not newer than the device's last is
// ignored.
func (s *Store) RecordGPU(p Process, device string, at time.Time, bytes int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.addLocked(s.gpu, p, device, at, bytes)
}

// addLocked adds one reading to a series of p in m, within the bounds.
func (s *Store) addLocked(m map[Process]map[string][]Reading, p Process, name string, at time.Time, value int64) {
	series := m[p]
	if series == nil {
		if len(m) >= s.cfg.MaxProcesses {
			s.sweepLocked()
			if len(m) >= s.cfg.MaxProcesses {
				s.dropped++
				return
			}
		}
		series = map[string][]Reading{}
		m[p] = series
	}
	rs := series[name]
	if n := len(rs); n > 0 && !at.After(rs[n-1].At) {
		return
	}
	if len(rs) >= s.cfg.MaxReadings {
		rs = slices.Delete(rs, 0, len(rs)-s.cfg.MaxReadings+1)
	}
	series[name] = append(rs, Reading{At: at, Value: value})
}

// Attention is where the runtimecorrelation processor marks the processes
// and pods that had spans or JVM pauses, and the pythongil receiver reads
// them (package attention).
func (s *Store) Attention() *attention.Registry { return s.attention }

// Timelines is where timeline sources register and are found by name.
func (s *Store) Timelines() *timeline.Registry { return s.timelines }

// Assess records the writer's own verdict on one of p's accounts (its leak
// detection's: the account is suspected of leaking, or assessed and not),
// kept while p has readings.
func (s *Store) Assess(p Process, account string, suspected bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.procs[p] == nil {
		return
	}
	v := s.verdicts[p]
	if v == nil {
		v = map[string]bool{}
		s.verdicts[p] = v
	}
	v[account] = suspected
}

// Verdicts returns the writer's verdicts on p's accounts (a copy).
func (s *Store) Verdicts(p Process) map[string]bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]bool, len(s.verdicts[p]))
	for k, v := range s.verdicts[p] {
		out[k] = v
	}
	return out
}

// Accounts returns p's readings from from on, by account (copies); none
// when p has none.
func (s *Store) Accounts(p Process, from time.Time) map[string][]Reading {
	s.mu.Lock()
	defer s.mu.Unlock()
	return since(s.procs[p], from)
}

// GPU returns p's GPU memory readings from from on, by device (copies).
func (s *Store) GPU(p Process, from time.Time) map[string][]Reading {
	s.mu.Lock()
	defer s.mu.Unlock()
	return since(s.gpu[p], from)
}

// since copies the readings of each series from from on.
func since(series map[string][]Reading, from time.Time) map[string][]Reading {
	out := map[string][]Reading{}
	for name, rs := range series {
		i, _ := slices.BinarySearchFunc(rs, from, func(r Reading, t time.Time) int { return r.At.Compare(t) })
		if i < len(rs) {
			out[name] = slices.Clone(rs[i:])
		}
	}
	return out
}

// Processes lists the processes with account or GPU readings.
func (s *Store) Processes() []Process {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Process, 0, len(s.procs)+len(s.gpu))
	for p := range s.procs {
		out = append(out, p)
	}
	for p := range s.gpu {
		if s.procs[p] == nil {
			out = append(out, p)
		}
	}
	return out
}

// Forget drops a process (it exited).
func (s *Store) Forget(p Process) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.procs, p)
	delete(s.gpu, p)
	delete(s.verdicts, p)
}

// Sweep drops readings older than the retention, and processes left with
// none.
func (s *Store) Sweep() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sweepLocked()
}

func (s *Store) sweepLocked() {
	cut := s.now().Add(-s.cfg.Retention)
	for _, m := range []map[Process]map[string][]Reading{s.procs, s.gpu} {
		for p, series := range m {
			for name, rs := range series {
				i, _ := slices.BinarySearchFunc(rs, cut, func(r Reading, t time.Time) int { return r.At.Compare(t) })
				if i == len(rs) {
					delete(series, name)
					continue
				}
				series[name] = slices.Delete(rs, 0, i)
			}
			if len(series) == 0 {
				delete(m, p)
			}
		}
	}
	for p := range s.verdicts {
		if s.procs[p] == nil {
			delete(s.verdicts, p)
		}
	}
}

// Len returns the processes held and the readings refused for the bound.
func (s *Store) Len() (processes int, dropped int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.procs), s.dropped
}

// Reset drops everything (the extension's Shutdown).
func (s *Store) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.procs)
	clear(s.gpu)
	clear(s.verdicts)
	s.dropped = 0
}

// Holder is what the runtimestate extension is to the components that
// find it.
type Holder interface {
	RuntimeState() *Store
}

// ErrNotFound: no extension of the ID is configured and started.
var ErrNotFound = errors.New("runtimestate: extension not found")

// Lookup finds the store of the runtimestate extension id through host,
// for a component's Start (extensions start before pipelines).
func Lookup(host component.Host, id component.ID) (*Store, error) {
	ext, ok := host.GetExtensions()[id]
	if !ok {
		return nil, fmt.Errorf("%w: %s is not among the service's extensions", ErrNotFound, id)
	}
	h, ok := ext.(Holder)
	if !ok {
		return nil, fmt.Errorf("runtimestate: extension %s is not a runtimestate extension", id)
	}
	s := h.RuntimeState()
	if s == nil {
		return nil, fmt.Errorf("%w: %s has not started", ErrNotFound, id)
	}
	return s, nil
}

// Join is how one account moved with a series (a process's GPU memory).
type Join struct {
	// Account names it.
	Account string
	// Correlation is Pearson's r between the series and the account's
	// value at each of the series' times (its last reading then), over the
	// times the account had a reading; NaN when it cannot be computed
	// (fewer than MinPairs, or either side flat).
	Correlation float64
	// Growth is the account's least-squares slope over its readings in the
	// window, units per second.
	Growth float64
	// Pairs is how many of the series' readings were paired.
	Pairs int
}

// MinPairs is the fewest paired readings a correlation is computed from.
const MinPairs = 4

// Correlate sets each account against series (readings in time order):
// one Join per account that has readings, by account name.
func Correlate(series []Reading, accounts map[string][]Reading) []Join {
	names := make([]string, 0, len(accounts))
	for name := range accounts {
		names = append(names, name)
	}
	slices.Sort(names)
	out := make([]Join, 0, len(names))
	for _, name := range names {
		rs := accounts[name]
		j := Join{Account: name, Correlation: math.NaN(), Growth: slope(rs)}
		var xs, ys []float64
		k := 0
		for _, r := range series {
			for k < len(rs) && !rs[k].At.After(r.At) {
				k++
			}
			if k == 0 {
				continue // no account reading yet at this time
			}
			xs = append(xs, float64(r.Value))
			ys = append(ys, float64(rs[k-1].Value))
		}
		j.Pairs = len(xs)
		if len(xs) >= MinPairs {
			j.Correlation = pearson(xs, ys)
		}
		out = append(out, j)
	}
	return out
}

// slope is the least-squares slope of rs, units per second (0 for fewer
// than two readings).
func slope(rs []Reading) float64 {
	if len(rs) < 2 {
		return 0
	}
	t0 := rs[0].At
	var sx, sy, sxx, sxy float64
	n := float64(len(rs))
	for _, r := range rs {
		x, y := r.At.Sub(t0).Seconds(), float64(r.Value)
		sx, sy, sxx, sxy = sx+x, sy+y, sxx+x*x, sxy+x*y
	}
	d := n*sxx - sx*sx
	if d == 0 {
		return 0
	}
	return (n*sxy - sx*sy) / d
}

func pearson(xs, ys []float64) float64 {
	n := float64(len(xs))
	var mx, my float64
	for i := range xs {
		mx, my = mx+xs[i], my+ys[i]
	}
	mx, my = mx/n, my/n
	var sxy, sxx, syy float64
	for i := range xs {
		dx, dy := xs[i]-mx, ys[i]-my
		sxy, sxx, syy = sxy+dx*dy, sxx+dx*dx, syy+dy*dy
	}
	if sxx == 0 || syy == 0 {
		return math.NaN()
	}
	return sxy / math.Sqrt(sxx*syy)
}
