package jfrreceiver

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/extension/xextension/storage"
	"go.opentelemetry.io/collector/receiver/receivertest"

	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/metadata"
)

// storageHost offers extensions by ID.
type storageHost struct {
	component.Host
	exts map[component.ID]component.Component
}

func (h storageHost) GetExtensions() map[component.ID]component.Component { return h.exts }

// memExtension is a storage extension over one map.
type memExtension struct {
	component.StartFunc
	component.ShutdownFunc
	data map[string][]byte
}

func (e *memExtension) GetClient(context.Context, component.Kind, component.ID, string) (storage.Client, error) {
	return &memClient{data: e.data}, nil
}

type memClient struct{ data map[string][]byte }

func (c *memClient) Get(_ context.Context, k string) ([]byte, error)    { return c.data[k], nil }
func (c *memClient) Set(_ context.Context, k string, v []byte) error    { c.data[k] = v; return nil }
func (c *memClient) Delete(_ context.Context, k string) error           { delete(c.data, k); return nil }
func (c *memClient) Batch(context.Context, ...*storage.Operation) error { return nil }
func (c *memClient) Close(context.Context) error                        { return nil }

// TestRecordingsThroughStorage: with recordings::storage naming a storage
// extension, a recording is read once, and a second receiver (a restarted
// collector) with the same storage does not read it again; a storage ID
// that names nothing fails Start with ErrStorageNotFound.
func TestRecordingsThroughStorage(t *testing.T) {
	dir := t.TempDir()
	data, err := os.ReadFile(filepath.Join("..", "..", "pkg", "jfr", "testdata", "g1-default-jdk17.jfr"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "dump.jfr"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	storeID := component.MustNewIDWithName("file_storage", "jfr")
	ext := &memExtension{data: map[string][]byte{}}
	host := storageHost{Host: componenttest.NewNopHost(), exts: map[component.ID]component.Component{storeID: ext}}

	run := func(expectWindows bool) int {
		f := NewFactory()
		cfg := f.CreateDefaultConfig().(*Config)
		cfg.PollInterval = 20 * time.Millisecond
		cfg.Repositories.Enabled = false
		cfg.Recordings.Include = []string{filepath.Join(dir, "*.jfr")}
		cfg.Recordings.Storage = &storeID
		cfg.Recordings.DiscoveryInterval = 20 * time.Millisecond
		logs := new(consumertest.LogsSink)
		r, err := f.CreateLogs(context.Background(), receivertest.NewNopSettings(metadata.Type), cfg, logs)
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Start(context.Background(), host); err != nil {
			t.Fatal(err)
		}
		// Two scans make a file stable; then one poll reads its chunk. A
		// restarted receiver has nothing to show for it: give it the same
		// time.
		deadline := time.Now().Add(30 * time.Second)
		for expectWindows && logs.LogRecordCount() == 0 && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if !expectWindows {
			time.Sleep(300 * time.Millisecond)
		}
		if err := r.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		return logs.LogRecordCount()
	}
	if n := run(true); n == 0 {
		t.Fatal("the recording gave no windows")
	}
	if len(ext.data) != 1 {
		t.Fatalf("progress entries %v", ext.data)
	}
	if n := run(false); n != 0 {
		t.Fatalf("a restarted receiver read the recording again: %d windows", n)
	}

	f := NewFactory()
	cfg := f.CreateDefaultConfig().(*Config)
	cfg.Recordings.Include = []string{filepath.Join(dir, "*.jfr")}
	missing := component.MustNewID("nothing")
	cfg.Recordings.Storage = &missing
	r, err := f.CreateLogs(context.Background(), receivertest.NewNopSettings(metadata.Type), cfg, consumertest.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(context.Background(), host); !errors.Is(err, ErrStorageNotFound) {
		t.Fatalf("Start with a missing storage: %v", err)
	}
	if err := r.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
}
