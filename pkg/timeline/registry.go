package timeline // import "github.com/otelcol-ai/otelcol-ai/pkg/timeline"

import (
	"errors"
	"fmt"
	"slices"
	"sync"
)

// Source answers queries with snapshots of its state. Snapshot copies what
// it needs under the source's own lock and returns; the caller renders the
// copy without holding anything of the source's.
type Source interface {
	Snapshot(q Query) (*Snapshot, error)
}

// ErrNoSource is wrapped by Lookup's error when no source is registered
// under the name asked for, or none at all.
var ErrNoSource = errors.New("no timeline source")

// ErrAmbiguous is wrapped by Lookup's error when no name is given and more
// than one source is registered.
var ErrAmbiguous = errors.New("several timeline sources")

// Registry is where sources are found by name: the runtimestate
// extension's (internal/runtimestate), which the runtimecorrelation
// processor registers in and the timeline extension looks in. It is safe
// for concurrent use.
type Registry struct {
	mu      sync.Mutex
	sources map[string]Source
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{sources: map[string]Source{}} }

// Register makes src findable under name (a component ID, e.g.
// "runtimecorrelation/agent") until the returned function is called. A
// second registration under one name replaces the first until either is
// undone.
func (r *Registry) Register(name string, src Source) (unregister func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sources[name] = src
	var once sync.Once
	return func() {
		once.Do(func() {
			r.mu.Lock()
			defer r.mu.Unlock()
			if r.sources[name] == src {
				delete(r.sources, name)
			}
		})
	}
}

// Lookup returns the source registered under name; with name empty, the
// only one registered.
func (r *Registry) Lookup(name string) (Source, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if name != "" {
		src, ok := r.sources[name]
		if !ok {
			return nil, fmt.Errorf("timeline: %q: %w (registered: %v)", name, ErrNoSource, r.namesLocked())
		}
		return src, nil
	}
	switch len(r.sources) {
	case 0:
		return nil, fmt.Errorf("timeline: %w: is a runtimecorrelation processor with the same runtime_state in a pipeline?", ErrNoSource)
	case 1:
		for _, src := range r.sources {
			return src, nil
		}
	}
	return nil, fmt.Errorf("timeline: %w (%v): set the extension's source", ErrAmbiguous, r.namesLocked())
}

// Names returns the registered sources' names, sorted.
func (r *Registry) Names() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.namesLocked()
}

func (r *Registry) namesLocked() []string {
	names := make([]string, 0, len(r.sources))
	for n := range r.sources {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}
