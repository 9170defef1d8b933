// Package ortenv owns the process's ONNX Runtime environment.
//
// ONNX Runtime allows one environment per process, and onnxruntime_go keeps it
// in package state, so every user in the process shares it: Acquire creates it
// on first use and each Release gives one reference back; the last one
// destroys it and unloads the library. Extension instances and their
// start/stop cycles (the collector's lifecycle test starts and stops a
// component twice in one process) each hold one reference while started.
package ortenv // import "github.com/otelcol-ai/otelcol-ai/extension/onnxinferenceextension/internal/ortenv"

import (
	"errors"
	"fmt"
	"sync"

	ort "github.com/yalue/onnxruntime_go"
)

// ErrLibraryConflict is returned when a second user asks for a different
// library than the one the live environment was created from.
var ErrLibraryConflict = errors.New("ONNX Runtime is already loaded from another library")

var (
	mu      sync.Mutex
	refs    int
	libPath string
	version string
)

// Acquire takes one reference to the environment, creating it from the shared
// library at path when it does not exist. Every successful Acquire must be
// matched by one Release.
func Acquire(path string) error {
	mu.Lock()
	defer mu.Unlock()
	if refs > 0 {
		if path != libPath {
			return fmt.Errorf("ortenv: %w: loaded from %s, asked for %s", ErrLibraryConflict, libPath, path)
		}
		refs++
		return nil
	}
	ort.SetSharedLibraryPath(path)
	if err := ort.InitializeEnvironment(ort.WithLogLevelError()); err != nil {
		return fmt.Errorf("ortenv: initialise ONNX Runtime from %s: %w", path, err)
	}
	refs, libPath, version = 1, path, ort.GetVersion()
	return nil
}

// Release gives back one reference; the last one destroys the environment.
// Releasing more often than acquiring is an error, not a crash.
func Release() error {
	mu.Lock()
	defer mu.Unlock()
	if refs == 0 {
		return errors.New("ortenv: release without acquire")
	}
	refs--
	if refs > 0 {
		return nil
	}
	libPath, version = "", ""
	if err := ort.DestroyEnvironment(); err != nil {
		return fmt.Errorf("ortenv: destroy ONNX Runtime environment: %w", err)
	}
	return nil
}

// Refs returns the number of references held, for tests and diagnostics.
func Refs() int {
	mu.Lock()
	defer mu.Unlock()
	return refs
}

// Version returns the ONNX Runtime version of the live environment, or "".
func Version() string {
	mu.Lock()
	defer mu.Unlock()
	return version
}
