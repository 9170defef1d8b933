package stallfs

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestStallBlocksUntilRelease: files read as written; once stalled, a stat,
// a listing and a read of an open file each block until Release, then
// answer with what they would have.
func TestStallBlocksUntilRelease(t *testing.T) {
	sfs := Mount(t)
	sfs.WriteFile("logs/gc.log", []byte("one\n"))
	name := filepath.Join(sfs.Dir(), "logs", "gc.log")
	if got, err := os.ReadFile(name); err != nil || string(got) != "one\n" {
		t.Fatalf("ReadFile before a stall = %q, %v; want %q", got, err, "one\n")
	}
	if entries, err := os.ReadDir(filepath.Join(sfs.Dir(), "logs")); err != nil || len(entries) != 1 || entries[0].Name() != "gc.log" {
		t.Fatalf("ReadDir before a stall = %v, %v; want [gc.log]", entries, err)
	}
	sfs.WriteFile("top.log", nil)
	if entries, err := os.ReadDir(sfs.Dir()); err != nil || len(entries) != 2 || entries[0].Name() != "logs" || !entries[0].IsDir() || entries[1].Name() != "top.log" {
		t.Fatalf("ReadDir of the mount before a stall = %v, %v; want [logs/ top.log]", entries, err)
	}
	f, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()

	calls := map[string]func() error{
		"stat":    func() error { _, err := os.Stat(name); return err },
		"readdir": func() error { _, err := os.ReadDir(sfs.Dir()); return err },
		"read":    func() error { _, err := f.ReadAt(make([]byte, 4), 0); return err },
	}
	for what, call := range calls {
		t.Run(what, func(t *testing.T) {
			sfs.Stall()
			done := make(chan error, 1)
			go func() { done <- call() }()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := sfs.WaitBlocked(ctx); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-done:
				t.Fatalf("%s returned (%v) while stalled", what, err)
			case <-time.After(200 * time.Millisecond):
			}
			if sfs.Blocked() < 1 {
				t.Errorf("Blocked() = %d while %s waits", sfs.Blocked(), what)
			}
			sfs.Release()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("%s after Release: %v", what, err)
				}
			case <-time.After(30 * time.Second):
				t.Fatalf("%s still blocked 30s after Release", what)
			}
		})
	}
}

// TestCleanupWhileStalled: a test that ends with calls still blocked
// unmounts all the same (the calls are released, nothing leaks: goleak in
// TestMain).
func TestCleanupWhileStalled(t *testing.T) {
	done := make(chan error, 1)
	t.Run("stalled", func(t *testing.T) {
		sfs := Mount(t)
		sfs.WriteFile("gc.log", []byte("x"))
		sfs.Stall()
		go func() { _, err := os.ReadFile(filepath.Join(sfs.Dir(), "gc.log")); done <- err }()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := sfs.WaitBlocked(ctx); err != nil {
			t.Fatal(err)
		}
	})
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("a call blocked on the mount was not released by its cleanup")
	}
}
