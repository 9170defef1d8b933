package checkpoint

import (
	"context"
	"testing"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/extension/storage/filestorage"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/extension/extensiontest"
	"go.opentelemetry.io/collector/extension/xextension/storage"
)

// fileClient opens a client of a real file_storage extension on dir; the
// cleanup closes both.
func fileClient(t *testing.T, dir string) (storage.Client, func()) {
	t.Helper()
	f := filestorage.NewFactory()
	cfg := f.CreateDefaultConfig().(*filestorage.Config)
	cfg.Directory = dir
	ext, err := f.Create(context.Background(), extensiontest.NewNopSettings(f.Type()), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := ext.Start(context.Background(), componenttest.NewNopHost()); err != nil {
		t.Fatal(err)
	}
	c, err := ext.(storage.Extension).GetClient(context.Background(), component.KindReceiver, component.MustNewID("jfr"), "checkpoints")
	if err != nil {
		t.Fatal(err)
	}
	return c, func() {
		if err := c.Close(context.Background()); err != nil {
			t.Error(err)
		}
		if err := ext.Shutdown(context.Background()); err != nil {
			t.Error(err)
		}
	}
}

type state struct {
	Offset int64 `json:"offset"`
}

// TestBoundedRateAndShutdown: a source saving at every 10 ms poll for
// 1.2 s writes at most twice (once a second), a forced save (shutdown)
// writes the latest, an unchanged one writes nothing, and a new extension
// on the same folder (a restarted collector) loads what was written last.
func TestBoundedRateAndShutdown(t *testing.T) {
	dir := t.TempDir()
	c, done := fileClient(t, dir)
	writes := 0
	s := New(c, "jfr.test", time.Second, func() { writes++ })
	var last state
	for deadline := time.Now().Add(1200 * time.Millisecond); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		last.Offset++
		if err := s.Save(context.Background(), last, false); err != nil {
			t.Fatal(err)
		}
	}
	if writes < 1 || writes > 2 {
		t.Errorf("%d writes in 1.2 s of saves every 10 ms, want 1 or 2", writes)
	}
	t.Logf("%d saves asked, %d written", last.Offset, writes)
	if err := s.Save(context.Background(), last, true); err != nil {
		t.Fatal(err)
	}
	n := writes
	if err := s.Save(context.Background(), last, true); err != nil {
		t.Fatal(err)
	}
	if writes != n {
		t.Errorf("an unchanged checkpoint was written again")
	}
	done()

	c2, done2 := fileClient(t, dir)
	defer done2()
	var got state
	ok, err := New(c2, "jfr.test", time.Second, nil).Load(context.Background(), &got)
	if err != nil || !ok || got != last {
		t.Errorf("after the restart: %+v, %v, %v; want %+v", got, ok, err, last)
	}
	var none state
	if ok, err := New(c2, "jfr.other", time.Second, nil).Load(context.Background(), &none); ok || err != nil {
		t.Errorf("a key never written loads: %v, %v", ok, err)
	}
	// A checkpoint that is not JSON (another version, damage) is an error,
	// not a panic nor a silent zero.
	if err := c2.Set(context.Background(), "jfr.bad", []byte("{")); err != nil {
		t.Fatal(err)
	}
	if _, err := New(c2, "jfr.bad", time.Second, nil).Load(context.Background(), &none); err == nil {
		t.Error("a damaged checkpoint loaded without an error")
	}
}
