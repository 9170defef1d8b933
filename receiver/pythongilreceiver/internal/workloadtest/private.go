package workloadtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// PrivateLibPython copies python3's libpython into a directory of the
// test's own and returns the environment that makes a workload load the
// copy (LD_LIBRARY_PATH): its uprobes fire only in the processes that load
// it, and each copy is a file (a gil.Library) of its own, as every
// container's is in Kubernetes. It skips where python3 is built static.
func PrivateLibPython(t testing.TB) []string {
	t.Helper()
	return privateLibPython(t, false)
}

// StrippedLibPython is PrivateLibPython with the copy stripped of every
// symbol table but .dynsym (strip --strip-all), as the official python
// images' build links it: take_gil, drop_gil and gc_collect_main are
// then named nowhere. It skips where binutils' strip is missing.
func StrippedLibPython(t testing.TB) []string {
	t.Helper()
	return privateLibPython(t, true)
}

func privateLibPython(t testing.TB, strip bool) []string {
	t.Helper()
	w := Start(t, "sleep", "1", "1")
	lib, err := LibPython(w.PID)
	w.Stop()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(filepath.Base(lib), "libpython") {
		t.Skipf("python3 is built static (%s): no libpython to copy", lib)
	}
	dir := t.TempDir()
	data, err := os.ReadFile(lib)
	if err != nil {
		t.Fatal(err)
	}
	copied := filepath.Join(dir, filepath.Base(lib))
	if err := os.WriteFile(copied, data, 0o755); err != nil {
		t.Fatal(err)
	}
	if strip {
		tool, err := exec.LookPath("strip")
		if err != nil {
			t.Skipf("no strip (binutils): %v", err)
		}
		if out, err := exec.Command(tool, "--strip-all", copied).CombinedOutput(); err != nil {
			t.Fatalf("strip %s: %v: %s", copied, err, out)
		}
	}
	return append(os.Environ(), "LD_LIBRARY_PATH="+dir)
}

// Churn starts gilwork.py churn (n hashlib calls, paced at rate a second,
// 0 flat out) in the environment env, checking that it maps the copy of
// libpython env names.
func Churn(t testing.TB, env []string, rate, n int) *Process {
	t.Helper()
	cmd := exec.Command(Python(t), Script(), "churn", strconv.Itoa(rate), strconv.Itoa(n), "--exit")
	cmd.Env = env
	w := StartCommand(t, cmd)
	lib, err := LibPython(w.PID)
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range env {
		if dir, ok := strings.CutPrefix(kv, "LD_LIBRARY_PATH="); ok && filepath.Dir(lib) != dir {
			t.Fatalf("workload %d maps %s, not the copy in %s", w.PID, lib, dir)
		}
	}
	return w
}
