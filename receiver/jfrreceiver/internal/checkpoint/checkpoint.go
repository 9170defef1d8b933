// Package checkpoint keeps a source's progress in a storage extension, so
// that a restarted collector goes on where the last one stopped: one key
// per source, holding its positions as JSON, written at a bounded rate
// and when asked to (at shutdown), never when nothing changed.
package checkpoint

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"go.opentelemetry.io/collector/extension/xextension/storage"
)

// Store is one source's checkpoint. Use it from one goroutine.
type Store struct {
	client   storage.Client
	key      string
	interval time.Duration
	written  func() // called after every write
	last     time.Time
	saved    []byte
}

// New returns the store of key in client, written at most once per
// interval (except by Save with force); written, when set, is called
// after each write.
func New(client storage.Client, key string, interval time.Duration, written func()) *Store {
	if written == nil {
		written = func() {}
	}
	return &Store{client: client, key: key, interval: interval, written: written}
}

// Load reads the checkpoint into v; false when none was saved.
func (s *Store) Load(ctx context.Context, v any) (bool, error) {
	data, err := s.client.Get(ctx, s.key)
	if err != nil {
		return false, fmt.Errorf("checkpoint %s: %w", s.key, err)
	}
	if data == nil {
		return false, nil
	}
	if err := json.Unmarshal(data, v); err != nil {
		return false, fmt.Errorf("checkpoint %s: %w", s.key, err)
	}
	s.saved = data
	return true, nil
}

// Save writes v unless it is what was written last, or the last write
// is less than the interval old and force is false.
func (s *Store) Save(ctx context.Context, v any, force bool) error {
	now := time.Now()
	if !force && now.Sub(s.last) < s.interval {
		return nil
	}
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("checkpoint %s: %w", s.key, err)
	}
	if bytes.Equal(data, s.saved) {
		return nil
	}
	if err := s.client.Set(ctx, s.key, data); err != nil {
		return fmt.Errorf("checkpoint %s: %w", s.key, err)
	}
	s.last, s.saved = now, data
	s.written()
	return nil
}
