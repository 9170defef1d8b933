package ortenv

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/otelcol-ai/otelcol-ai/internal/ortlib"
	ort "github.com/yalue/onnxruntime_go"
)

func library(t *testing.T) string {
	t.Helper()
	path, _, err := ortlib.Locate("")
	if err != nil {
		t.Skipf("ONNX Runtime library not available (set %s): %v", ortlib.EnvVar, err)
	}
	return path
}

func TestAcquireIsReferenceCounted(t *testing.T) {
	path := library(t)
	for cycle := 0; cycle < 3; cycle++ {
		if err := Acquire(path); err != nil {
			t.Fatalf("cycle %d: first acquire: %v", cycle, err)
		}
		if err := Acquire(path); err != nil {
			t.Fatalf("cycle %d: second acquire: %v", cycle, err)
		}
		if got := Refs(); got != 2 {
			t.Fatalf("cycle %d: refs = %d, want 2", cycle, got)
		}
		if !ort.IsInitialized() || Version() == "" {
			t.Fatalf("cycle %d: environment not live (version %q)", cycle, Version())
		}
		if err := Release(); err != nil {
			t.Fatal(err)
		}
		if !ort.IsInitialized() {
			t.Fatalf("cycle %d: environment destroyed while a reference is held", cycle)
		}
		if err := Release(); err != nil {
			t.Fatal(err)
		}
		if ort.IsInitialized() || Refs() != 0 {
			t.Fatalf("cycle %d: environment still live after the last release", cycle)
		}
	}
}

func TestAcquireRefusesASecondLibrary(t *testing.T) {
	path := library(t)
	if err := Acquire(path); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = Release() }()
	other := filepath.Join(t.TempDir(), "libother.so")
	if err := os.WriteFile(other, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := Acquire(other); !errors.Is(err, ErrLibraryConflict) {
		t.Fatalf("Acquire(other) = %v, want ErrLibraryConflict", err)
	}
	if Refs() != 1 {
		t.Fatalf("refs = %d after a refused acquire, want 1", Refs())
	}
}

func TestReleaseWithoutAcquireIsAnError(t *testing.T) {
	if err := Release(); err == nil {
		t.Fatal("Release() without Acquire succeeded")
	}
}

func TestAcquireReportsABadLibrary(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "libonnxruntime.so.1")
	if err := os.WriteFile(bad, []byte("not an ELF file"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := Acquire(bad); err == nil {
		_ = Release()
		t.Fatal("Acquire(garbage) succeeded")
	}
	if Refs() != 0 {
		t.Fatalf("refs = %d after a failed acquire", Refs())
	}
}
