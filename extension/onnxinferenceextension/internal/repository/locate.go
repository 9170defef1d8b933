package repository

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// EnvVar names the environment variable consulted when no repository is
// configured.
const EnvVar = "OTELCOL_AI_MODEL_REPOSITORY"

// DirName is the repository's directory name next to the executable, as
// the distribution ships it (dist/models, /otelcol-ai/models).
const DirName = "models"

// ErrNotFound: no repository configured, in the environment, or next to the
// executable.
var ErrNotFound = errors.New("model repository not found")

// Locate returns the repository directory: configured when set, else
// $OTELCOL_AI_MODEL_REPOSITORY, else models/ next to the executable — the
// same order as the ONNX Runtime library's lookup. A configured or
// environment path is returned as is (Open reports it if it is missing).
func Locate(configured string) (string, error) {
	return locate(configured, os.Getenv(EnvVar), os.Executable)
}

func locate(configured, env string, executable func() (string, error)) (string, error) {
	if configured != "" {
		return configured, nil
	}
	if env != "" {
		return env, nil
	}
	exe, err := executable()
	if err != nil {
		return "", fmt.Errorf("%w: repository unset, %s unset, executable unknown: %w", ErrNotFound, EnvVar, err)
	}
	if resolved, err := filepath.EvalSymlinks(exe); err == nil {
		exe = resolved
	}
	dir := filepath.Join(filepath.Dir(exe), DirName)
	if info, err := os.Stat(dir); err != nil || !info.IsDir() {
		return "", fmt.Errorf("%w: repository unset, %s unset, and no %s/ next to the executable (%s)", ErrNotFound, EnvVar, DirName, dir)
	}
	return dir, nil
}
