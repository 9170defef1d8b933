// Package nvmlstubtest builds the stub libnvidia-ml.so.1 (testdata/nvmlstub.c, a
// scripted NVIDIA driver library) for the tests that run the nvml
// receiver's real path (go-nvml's dlopen and cgo calls) without a GPU.
package nvmlstubtest // import "github.com/otelcol-ai/otelcol-ai/receiver/nvmlreceiver/nvmlstubtest"

import (
	_ "embed"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

//go:embed testdata/nvmlstub.c
var source []byte

// Build compiles the stub against go-nvml's own nvml.h (so that every
// struct matches the real library's) into a libnvidia-ml.so.1 in a
// temporary folder and returns its path. It skips the test without gcc.
// The stub's environment variables: NVML_STUB_LOG (a file each
// nvmlInit/nvmlShutdown appends a line to) and NVML_STUB_PROCESSES (GPU 0's
// compute processes, "<pid> <bytes>" per line, read at each call).
func Build(t testing.TB) string {
	t.Helper()
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("gcc not found: the stub NVML library cannot be built")
	}
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/NVIDIA/go-nvml").Output()
	if err != nil {
		t.Fatalf("locating go-nvml's nvml.h: %v", err)
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "nvmlstub.c")
	if err := os.WriteFile(src, source, 0o644); err != nil {
		t.Fatal(err)
	}
	lib := filepath.Join(dir, "libnvidia-ml.so.1")
	msg, err := exec.Command(gcc, "-Wall", "-Werror", "-Wno-deprecated-declarations", "-shared", "-fPIC",
		"-I", filepath.Join(strings.TrimSpace(string(out)), "pkg", "nvml"), "-o", lib, src).CombinedOutput()
	if err != nil {
		t.Fatalf("gcc: %s: %v", msg, err)
	}
	return lib
}
