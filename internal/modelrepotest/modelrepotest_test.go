package modelrepotest

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestPlaceLaysOutASettledVersion(t *testing.T) {
	src := filepath.Join(t.TempDir(), "any.onnx")
	if err := os.WriteFile(src, []byte("model bytes"), 0o644); err != nil {
		t.Fatal(err)
	}
	repo := t.TempDir()
	path := Place(t, repo, "m", 3, src)
	if want := filepath.Join(repo, "m", "3", "model.onnx"); path != want {
		t.Errorf("Place: got %q, want %q", path, want)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(data) != "model bytes" {
		t.Errorf("os.ReadFile: got %q, want %q", data, "model bytes")
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if age := time.Since(fi.ModTime()); age < 59*time.Second {
		t.Errorf("modified %v ago, want at least a minute (settled)", age)
	}
}
