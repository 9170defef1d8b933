package sharedcomponent

import "sync"

// Map holds one shared value per key, reference-counted: the first Acquire
// of a key makes the value, each holder releases its Ref, and the last
// release destroys it and forgets the key. The zero Map is ready to use.
type Map[K comparable, V any] struct {
	mu      sync.Mutex
	entries map[K]*entry[V]
}

type entry[V any] struct {
	value   V
	users   int
	destroy func(V)
}

// Ref is one holder's reference to a shared value.
type Ref[V any] struct {
	value   V
	release func()
	once    sync.Once
}

// Value returns the shared value.
func (r *Ref[V]) Value() V { return r.value }

// Release gives the reference up; further calls do nothing. The last
// release of a value calls its destroy function and forgets it.
func (r *Ref[V]) Release() { r.once.Do(r.release) }

// Acquire returns a reference to the value under key, made by create when
// there is none (destroy, which may be nil, is called after the last
// release). An error from create is returned as is and nothing is stored.
func (m *Map[K, V]) Acquire(key K, create func() (V, error), destroy func(V)) (*Ref[V], error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.entries[key]
	if !ok {
		v, err := create()
		if err != nil {
			return nil, err
		}
		e = &entry[V]{value: v, destroy: destroy}
		if m.entries == nil {
			m.entries = make(map[K]*entry[V])
		}
		m.entries[key] = e
	}
	e.users++
	return &Ref[V]{value: e.value, release: func() { m.release(key, e) }}, nil
}

func (m *Map[K, V]) release(key K, e *entry[V]) {
	m.mu.Lock()
	e.users--
	last := e.users == 0
	if last && m.entries[key] == e {
		delete(m.entries, key)
	}
	m.mu.Unlock()
	if last && e.destroy != nil {
		e.destroy(e.value)
	}
}

// Len returns the number of values held.
func (m *Map[K, V]) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.entries)
}
