package repository

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestLocate(t *testing.T) {
	bin := t.TempDir()
	exe := func() (string, error) { return filepath.Join(bin, "otelcol-ai"), nil }
	if got, _ := locate("/configured", "/env", exe); got != "/configured" {
		t.Errorf("configured: %s", got)
	}
	if got, _ := locate("", "/env", exe); got != "/env" {
		t.Errorf("environment: %s", got)
	}
	if _, err := locate("", "", exe); !errors.Is(err, ErrNotFound) {
		t.Errorf("nothing next to the executable: %v, want ErrNotFound", err)
	}
	if err := os.Mkdir(filepath.Join(bin, DirName), 0o755); err != nil {
		t.Fatal(err)
	}
	if got, err := locate("", "", exe); err != nil || got != filepath.Join(bin, DirName) {
		t.Errorf("next to the executable: %s, %v", got, err)
	}
	if _, err := locate("", "", func() (string, error) { return "", errors.New("no") }); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown executable: %v", err)
	}
}
