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

var registry = struct {
	sync.Mutex
	sources map[string]Source
}{sources: map[string]Source{}}

// Register makes src findable under name (a component ID, e.g.
// "runtimecorrelation/agent") until the returned function is called. A
// second registration under one name replaces the first until either is
// undone.
func Register(name string, src Source) (unregister func()) {
	registry.Lock()
	defer registry.Unlock()
	registry.sources[name] = src
	var once sync.Once
	return func() {
		once.Do(func() {
			registry.Lock()
			defer registry.Unlock()
			if registry.sources[name] == src {
				delete(registry.sources, name)
			}
		})
	}
}

// Lookup returns the source registered under name; with name empty, the
// only one registered.
func Lookup(name string) (Source, error) {
	registry.Lock()
	defer registry.Unlock()
	if name != "" {
		src, ok := registry.sources[name]
		if !ok {
			return nil, fmt.Errorf("timeline: %q: %w (registered: %v)", name, ErrNoSource, namesLocked())
		}
		return src, nil
	}
	switch len(registry.sources) {
	case 0:
		return nil, fmt.Errorf("timeline: %w: is a runtimecorrelation processor in a pipeline?", ErrNoSource)
	case 1:
		for _, src := range registry.sources {
			return src, nil
		}
	}
	return nil, fmt.Errorf("timeline: %w (%v): set the extension's source", ErrAmbiguous, namesLocked())
}

// Names returns the registered sources' names, sorted.
func Names() []string {
	registry.Lock()
	defer registry.Unlock()
	return namesLocked()
}

func namesLocked() []string {
	names := make([]string, 0, len(registry.sources))
	for n := range registry.sources {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}
