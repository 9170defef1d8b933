// Package leaktest starts real JVMs that leak at a known rate for the jfr
// receiver's account and leak-detection tests: a JNI library the test
// compiles (gcc, the JDK's jni.h) that mallocs and touches memory and makes
// global references, never freeing them or freeing them at once, and a
// Java program that calls it, or leaks direct buffers, every 100 ms.
package leaktest // import "github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/leaktest"

import (
	"bufio"
	_ "embed"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/otelcol-ai/otelcol-ai/pkg/jfr/jfrtest"
)

//go:embed testdata/LeakWorkload.java
var javaSource []byte

//go:embed testdata/leakworkload.c
var cSource []byte

// Modes of the workload.
const (
	// Native leaks malloc'd, touched memory and JNI global references.
	Native = "native"
	// Direct leaks direct buffers.
	Direct = "direct"
	// Healthy does Native's and Direct's work and frees it.
	Healthy = "healthy"
	// Threads leaks nothing and starts idle threads.
	Threads = "threads"
)

// Tick is how often the workload leaks (or works).
const Tick = 100 * time.Millisecond

// Program is the compiled library and the folder of the compiled class
// that loads it.
type Program struct {
	Library, Classes string
}

// Build compiles the JNI library against jdk's headers into a temporary
// folder; it skips the test when gcc is missing.
func Build(t testing.TB, jdk jfrtest.JDK) Program {
	t.Helper()
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("gcc not found: the JNI test library cannot be built")
	}
	dir := t.TempDir()
	p := Program{Library: filepath.Join(dir, "libleakworkload.so"), Classes: dir}
	c, source := filepath.Join(dir, "leakworkload.c"), filepath.Join(dir, "LeakWorkload.java")
	for path, data := range map[string][]byte{source: javaSource, c: cSource} {
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	include := filepath.Join(jdk.Home, "include")
	out, err := exec.Command(gcc, "-Wall", "-Werror", "-Wno-unused-parameter", "-O1", "-shared", "-fPIC",
		"-I", include, "-I", filepath.Join(include, "linux"), "-o", p.Library, c).CombinedOutput()
	if err != nil {
		t.Fatalf("gcc: %s: %v", out, err)
	}
	// Compiled once, not by each JVM (source-file mode): four JVMs
	// compiling at once on two loaded cores took 20 s to start leaking.
	if out, err := exec.Command(filepath.Join(jdk.Home, "bin", "javac"), "-d", dir, source).CombinedOutput(); err != nil {
		t.Fatalf("javac: %s: %v", out, err)
	}
	return p
}

// JVM is a running workload.
type JVM struct {
	PID int

	mu     sync.Mutex
	out    strings.Builder
	leaked Leaked
	first  time.Time // the first report: the leak's start, within a tick
}

// Leaked is what the workload says it has leaked so far, and when it said
// so.
type Leaked struct {
	At                time.Time
	NativeBytes, Refs int64
	DirectBytes       int64
	Lines             int
}

// Start runs the workload in mode with java, leaking (or working through)
// bytes and refs every Tick for ticks Ticks (0: all along), with the JVM
// options opts before the class and extra arguments after the mode's
// (Threads: the thread count). It starts no JFR and no logging. The JVM is
// killed when the test ends.
func Start(t testing.TB, java string, p Program, mode string, bytes, refs, ticks int, opts []string, extra ...string) *JVM {
	t.Helper()
	args := append(append([]string{}, opts...), "-cp", p.Classes, "LeakWorkload", p.Library, mode, strconv.Itoa(bytes), strconv.Itoa(refs), strconv.Itoa(ticks))
	args = append(args, extra...)
	cmd := exec.Command(java, args...)
	cmd.Dir = t.TempDir()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	j := &JVM{}
	cmd.Stderr = writerFunc(j.append)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	j.PID = cmd.Process.Pid
	read := make(chan struct{})
	go func() {
		defer close(read)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			j.line(sc.Text())
		}
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-read
		_ = cmd.Wait()
	})
	return j
}

type writerFunc func([]byte)

func (w writerFunc) Write(b []byte) (int, error) { w(b); return len(b), nil }

func (j *JVM) append(b []byte) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.out.Len() < 64<<10 {
		j.out.Write(b)
	}
}

func (j *JVM) line(s string) {
	var n, r, d int64
	if _, err := fmt.Sscanf(s, "leaked %d %d %d", &n, &r, &d); err != nil {
		j.append([]byte(s + "\n"))
		return
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	now := time.Now()
	if j.first.IsZero() {
		j.first = now
	}
	j.leaked = Leaked{At: now, NativeBytes: n, Refs: r, DirectBytes: d, Lines: j.leaked.Lines + 1}
}

// Started returns when the workload's first report came (its first tick,
// when the leak starts), false before.
func (j *JVM) Started() (time.Time, bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.first, !j.first.IsZero()
}

// Leaked returns the workload's latest report.
func (j *JVM) Leaked() Leaked {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.leaked
}

// Output returns what the JVM wrote besides its reports.
func (j *JVM) Output() string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.out.String()
}
