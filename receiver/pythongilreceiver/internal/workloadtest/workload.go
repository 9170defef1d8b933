// Package workloadtest starts the CPython workloads of
// testdata/workloads/gilwork.py for tests: real processes that report their
// own ground truth (thread ids, call counts, times) as JSON lines.
package workloadtest // import "github.com/otelcol-ai/otelcol-ai/receiver/pythongilreceiver/internal/workloadtest"

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// Python returns the python3 interpreter the workloads run on, or skips the
// test when there is none.
func Python(t testing.TB) string {
	t.Helper()
	p, err := exec.LookPath("python3")
	if err != nil {
		t.Skipf("no python3 on PATH: %v", err)
	}
	return p
}

// Script returns the absolute path of gilwork.py.
func Script() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "testdata", "workloads", "gilwork.py")
}

// Process is one running workload.
type Process struct {
	t      testing.TB
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan string
	PID    int
	waited bool
}

// Ready is the workload's first line.
type Ready struct {
	PID     int `json:"pid"`
	MainTID int `json:"main_tid"`
}

// Start runs gilwork.py on python3 with args and waits for its ready line.
// The process is killed when the test ends.
func Start(t testing.TB, args ...string) *Process {
	t.Helper()
	return StartWith(t, Python(t), args...)
}

// StartWith is Start on a given interpreter.
func StartWith(t testing.TB, python string, args ...string) *Process {
	t.Helper()
	return StartCommand(t, exec.Command(python, append([]string{Script()}, args...)...))
}

// StartEnv is Start in the environment env (PrivateLibPython's).
func StartEnv(t testing.TB, env []string, args ...string) *Process {
	t.Helper()
	cmd := exec.Command(Python(t), append([]string{Script()}, args...)...)
	cmd.Env = env
	return StartCommand(t, cmd)
}

// StartCommand starts any program that speaks gilwork.py's protocol (a
// ready line with its pid, a line on stdin to run, a result line).
func StartCommand(t testing.TB, cmd *exec.Cmd) *Process {
	t.Helper()
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start workload %v: %v", cmd.Args, err)
	}
	p := &Process{t: t, cmd: cmd, stdin: stdin, lines: make(chan string, 4), PID: cmd.Process.Pid}
	go func() {
		defer close(p.lines)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 0, 1<<16), 64<<20)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
	}()
	t.Cleanup(p.Stop)
	var r Ready
	p.next(&r)
	if r.PID != p.PID {
		t.Fatalf("workload says pid %d, started %d", r.PID, p.PID)
	}
	return p
}

func (p *Process) next(v any) {
	p.t.Helper()
	select {
	case line, ok := <-p.lines:
		if !ok {
			p.t.Fatalf("workload %d ended without output", p.PID)
		}
		if err := json.Unmarshal([]byte(line), v); err != nil {
			p.t.Fatalf("workload %d line %q: %v", p.PID, line, err)
		}
	case <-time.After(2 * time.Minute):
		p.t.Fatalf("workload %d: no output in 2 minutes", p.PID)
	}
}

// Run tells the workload to start and decodes its result line into v.
func (p *Process) Run(v any) {
	p.t.Helper()
	p.Go()
	p.Result(v)
}

// Go tells the workload to start and returns at once: workloads told to
// go one after the other run side by side, under the same load.
func (p *Process) Go() {
	p.t.Helper()
	if _, err := io.WriteString(p.stdin, "go\n"); err != nil {
		p.t.Fatalf("workload %d: %v", p.PID, err)
	}
}

// Result waits for the result line of a workload told to Go and decodes
// it into v.
func (p *Process) Result(v any) {
	p.t.Helper()
	p.next(v)
}

// Wait closes stdin and waits for the process to exit.
func (p *Process) Wait() {
	if p.waited {
		return
	}
	p.waited = true
	_ = p.stdin.Close()
	done := make(chan error, 1)
	go func() { done <- p.cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		err = <-done
	}
	_ = err // reaped; how the workload exited is judged by the tests that care
}

// Stop kills the process if it still runs and reaps it.
func (p *Process) Stop() {
	if p.waited {
		return
	}
	_ = p.cmd.Process.Kill()
	p.Wait()
}

// LibPython returns the path, as seen from this process, of the ELF file
// that holds pid's CPython: the mapped libpython3.*.so*, or the executable.
func LibPython(pid int) (string, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		return "", err
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		fields := strings.Fields(line)
		if len(fields) >= 6 && strings.HasPrefix(filepath.Base(fields[5]), "libpython3") {
			return fields[5], nil
		}
	}
	return os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
}

// Jep compiles testdata/jep/<source> (a Java program that embeds CPython
// through Jep and speaks gilwork.py's protocol) against the Jep installed
// for python3 and returns the command that runs it, or skips with what is
// missing (in CI, where everything is installed, it fails instead).
func Jep(t testing.TB, source string, args ...string) *exec.Cmd {
	t.Helper()
	missing := func(format string, a ...any) {
		t.Helper()
		if os.Getenv("CI") != "" {
			t.Fatalf(format, a...)
		}
		t.Skipf(format, a...)
	}
	python := Python(t)
	out, err := exec.Command(python, "-c", "import importlib.util, os, sysconfig; print(os.path.dirname(importlib.util.find_spec('jep').origin)); print(sysconfig.get_config_var('LIBDIR'))").Output()
	if err != nil {
		missing("Jep is not installed for python3 (install: JAVA_HOME=<jdk> python3 -m pip install jep==4.3.2)")
	}
	lines := strings.Fields(string(out))
	if len(lines) != 2 {
		t.Fatalf("unexpected jep/libdir output %q", out)
	}
	jepDir, libDir := lines[0], lines[1]
	jars, _ := filepath.Glob(filepath.Join(jepDir, "jep-*.jar"))
	if len(jars) == 0 {
		missing("no jep-*.jar in %s", jepDir)
	}
	javac, err := exec.LookPath("javac")
	if err != nil {
		missing("no javac (a JDK 17+ is needed)")
	}
	java, err := exec.LookPath("java")
	if err != nil {
		missing("no java")
	}
	build := t.TempDir()
	src := filepath.Join(filepath.Dir(Script()), "..", "jep", source)
	if out, err := exec.Command(javac, "-cp", jars[0], "-d", build, src).CombinedOutput(); err != nil {
		t.Fatalf("javac: %v\n%s", err, out)
	}
	class := strings.TrimSuffix(source, ".java")
	cmd := exec.Command(java, append([]string{"-cp", jars[0] + string(os.PathListSeparator) + build,
		"-Djava.library.path=" + jepDir, class}, args...)...)
	cmd.Env = append(os.Environ(), "LD_LIBRARY_PATH="+libDir)
	return cmd
}
