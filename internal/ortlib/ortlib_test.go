package ortlib

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestLocateSearchOrder(t *testing.T) {
	dir := t.TempDir()
	lib := func(name string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("ELF"), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	fromConfig := lib("config.so")
	fromEnv := lib("env.so")
	exeDir := filepath.Join(dir, "bin")
	if err := os.Mkdir(exeDir, 0o755); err != nil {
		t.Fatal(err)
	}
	nextToExe := filepath.Join(exeDir, FileName)
	if err := os.WriteFile(nextToExe, []byte("ELF"), 0o644); err != nil {
		t.Fatal(err)
	}
	exe := func() (string, error) { return filepath.Join(exeDir, "otelcol-ai"), nil }
	noExe := func() (string, error) { return "", errors.New("no executable") }
	emptyDir := func() (string, error) { return filepath.Join(dir, "otelcol-ai"), nil }

	tests := []struct {
		name       string
		configured string
		env        string
		executable func() (string, error)
		wantPath   string
		wantSource Source
		wantErr    bool
	}{
		{"config wins over env and executable", fromConfig, fromEnv, exe, fromConfig, SourceConfig, false},
		{"env wins over executable", "", fromEnv, exe, fromEnv, SourceEnv, false},
		{"next to the executable last", "", "", exe, nextToExe, SourceExecutable, false},
		{"configured but missing is an error, not a fallback", filepath.Join(dir, "typo.so"), fromEnv, exe, "", "", true},
		{"env set but missing is an error", "", filepath.Join(dir, "gone.so"), exe, "", "", true},
		{"configured directory is an error", dir, "", exe, "", "", true},
		{"nothing anywhere", "", "", emptyDir, "", "", true},
		{"executable unknown", "", "", noExe, "", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, source, err := locate(tt.configured, tt.env, tt.executable)
			if tt.wantErr {
				if !errors.Is(err, ErrNotFound) {
					t.Fatalf("err = %v, want ErrNotFound", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.wantPath || source != tt.wantSource {
				t.Fatalf("got %s from %q, want %s from %q", got, source, tt.wantPath, tt.wantSource)
			}
		})
	}
}
