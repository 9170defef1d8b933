// Package ortlib finds the ONNX Runtime shared library that the distribution
// ships beside its binary.
//
// The search order is fixed and documented for every component that loads
// ONNX Runtime: the path set in the component's configuration, then the
// environment variable EnvVar, then FileName next to the running executable.
// The first candidate that is set is used; a candidate that is set but does
// not name a readable regular file is an error, never a silent fallback, so
// that a typo in a config does not load some other library.
package ortlib // import "github.com/otelcol-ai/otelcol-ai/internal/ortlib"

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// EnvVar names the environment variable consulted when no path is configured.
const EnvVar = "OTELCOL_AI_ONNXRUNTIME_LIB"

// FileName is the library's file name, as `make build` places it in dist/
// and the container image in /otelcol-ai/.
const FileName = "libonnxruntime.so.1"

// ErrNotFound is returned when no candidate names an existing library.
var ErrNotFound = errors.New("ONNX Runtime shared library not found")

// Source says where a library path came from.
type Source string

// The places a library path can come from, in search order.
const (
	SourceConfig     Source = "config"
	SourceEnv        Source = "environment " + EnvVar
	SourceExecutable Source = "next to the executable"
)

// Locate returns the library path and where it came from. configured is the
// component's own setting ("" when unset).
func Locate(configured string) (string, Source, error) {
	return locate(configured, os.Getenv(EnvVar), os.Executable)
}

func locate(configured, env string, executable func() (string, error)) (string, Source, error) {
	if configured != "" {
		return check(configured, SourceConfig)
	}
	if env != "" {
		return check(env, SourceEnv)
	}
	exe, err := executable()
	if err != nil {
		return "", "", fmt.Errorf("%w: no path configured, %s unset, and the executable's location is unknown: %w", ErrNotFound, EnvVar, err)
	}
	if resolved, err := filepath.EvalSymlinks(exe); err == nil {
		exe = resolved
	}
	candidate := filepath.Join(filepath.Dir(exe), FileName)
	if _, err := os.Stat(candidate); err != nil {
		return "", "", fmt.Errorf("%w: no path configured, %s unset, and no %s next to the executable (%s)", ErrNotFound, EnvVar, FileName, candidate)
	}
	return check(candidate, SourceExecutable)
}

func check(path string, source Source) (string, Source, error) {
	info, err := os.Stat(path)
	if err != nil {
		return "", "", fmt.Errorf("%w: %s (from %s): %w", ErrNotFound, path, source, err)
	}
	if !info.Mode().IsRegular() {
		return "", "", fmt.Errorf("%w: %s (from %s) is not a regular file", ErrNotFound, path, source)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", "", fmt.Errorf("ortlib: %s (from %s): %w", path, source, err)
	}
	return abs, source, nil
}
