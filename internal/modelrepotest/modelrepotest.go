// Package modelrepotest lays out model repositories
// (<repo>/<model>/<version>/model.onnx, Triton's layout) for the tests of
// what serves models from one, and skips those tests where ONNX Runtime
// cannot be loaded.
package modelrepotest

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/otelcol-ai/otelcol-ai/internal/ortlib"
)

// RequireLibrary skips the test when ONNX Runtime's shared library is not
// found.
func RequireLibrary(t testing.TB) {
	t.Helper()
	if _, _, err := ortlib.Locate(""); err != nil {
		t.Skipf("ONNX Runtime library not available (set %s, as `make test` does): %v", ortlib.EnvVar, err)
	}
}

// Place copies the model file src into repo as version of model and
// returns the path it wrote.
func Place(t testing.TB, repo, model string, version int64, src string) string {
	t.Helper()
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	return Write(t, repo, model, version, data)
}

// Write writes data into repo as version of model, dated a minute ago so
// that it counts as settled, and returns the path it wrote.
func Write(t testing.TB, repo, model string, version int64, data []byte) string {
	t.Helper()
	dir := filepath.Join(repo, model, strconv.FormatInt(version, 10))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "model.onnx")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Minute)
	if err := os.Chtimes(path, old, old); err != nil {
		t.Fatal(err)
	}
	return path
}
