// Package jdktest finds the JDKs installed on a machine and makes JFR
// recordings with them, for tests that use the JDK's own `jfr` tool as the
// oracle. Tests that need a JDK skip, with the reason, when none is found.
//
// A JDK of a given major version N is looked for in, in order: the
// environment variable JFR_TEST_JDK<N> (a JDK home), JAVA_HOME, the `java`
// on PATH, and the usual install folders (/usr/lib/jvm, /opt/java,
// /Library/Java/JavaVirtualMachines).
package jdktest

import (
	"bufio"
	"bytes"
	_ "embed"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"go.uber.org/goleak"
)

//go:embed Workload.java
var workloadSource []byte

//go:embed extra.jfc
var extraSettings []byte

// JDK is an installed JDK.
type JDK struct {
	Home  string
	Major int
}

// Java is the path of the java launcher.
func (j JDK) Java() string { return filepath.Join(j.Home, "bin", "java") }

// JFR is the path of the jfr tool.
func (j JDK) JFR() string { return filepath.Join(j.Home, "bin", "jfr") }

var (
	findOnce sync.Once
	homes    []JDK
)

func discover() {
	seen := map[string]bool{}
	add := func(home string) {
		if home == "" {
			return
		}
		if h, err := filepath.EvalSymlinks(home); err == nil {
			home = h
		}
		if seen[home] {
			return
		}
		seen[home] = true
		major := releaseMajor(home)
		if major == 0 {
			return
		}
		if _, err := os.Stat(filepath.Join(home, "bin", "jfr")); err != nil {
			return
		}
		homes = append(homes, JDK{Home: home, Major: major})
	}
	for _, kv := range os.Environ() {
		if k, v, ok := strings.Cut(kv, "="); ok && strings.HasPrefix(k, "JFR_TEST_JDK") {
			add(v)
		}
	}
	add(os.Getenv("JAVA_HOME"))
	if p, err := exec.LookPath("java"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			add(filepath.Dir(filepath.Dir(real)))
		}
	}
	for _, pattern := range []string{"/usr/lib/jvm/*", "/opt/java/*", "/Library/Java/JavaVirtualMachines/*/Contents/Home"} {
		ms, _ := filepath.Glob(pattern)
		for _, m := range ms {
			add(m)
		}
	}
}

// releaseMajor reads JAVA_VERSION from a JDK's release file.
func releaseMajor(home string) int {
	f, err := os.Open(filepath.Join(home, "release"))
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		v, ok := strings.CutPrefix(sc.Text(), "JAVA_VERSION=")
		if !ok {
			continue
		}
		v = strings.Trim(v, `"`)
		head, _, _ := strings.Cut(v, ".")
		n, _ := strconv.Atoi(head)
		return n
	}
	return 0
}

// Lookup returns an installed JDK of the given major version.
func Lookup(major int) (JDK, bool) {
	findOnce.Do(discover)
	if env := os.Getenv(fmt.Sprintf("JFR_TEST_JDK%d", major)); env != "" {
		for _, j := range homes {
			if h, _ := filepath.EvalSymlinks(env); j.Home == h && j.Major == major {
				return j, true
			}
		}
	}
	for _, j := range homes {
		if j.Major == major {
			return j, true
		}
	}
	return JDK{}, false
}

// Find returns a JDK of the given major version or skips the test.
func Find(t testing.TB, major int) JDK {
	t.Helper()
	if testing.Short() {
		t.Skip("JDK-oracle tests do not run with -short")
	}
	j, ok := Lookup(major)
	if !ok {
		msg := fmt.Sprintf("no JDK %d found (set JFR_TEST_JDK%d to a JDK home, or put it on PATH / JAVA_HOME)", major, major)
		if os.Getenv("CI") != "" { // CI installs every JDK the tests use
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return j
}

// Spec describes a recording to make.
type Spec struct {
	Name     string   // unique name; also the file name
	JDK      JDK      // the JDK to record with
	Settings string   // "default" or "profile"
	Millis   int      // how long the workload runs
	Flags    []string // JVM flags, e.g. "-XX:+UseZGC"
	Rotate   bool     // start and stop a second recording midway: several chunks
	Env      []string // added to the JVM's environment, e.g. "TZ=Australia/Sydney"
}

var (
	dirOnce sync.Once
	dir     string
	dirErr  error

	mu    sync.Mutex
	made  = map[string]*recording{}
	slots = make(chan struct{}, jvmSlots())
)

type recording struct {
	once sync.Once
	path string
	err  error
}

func jvmSlots() int {
	if n, err := strconv.Atoi(os.Getenv("JFR_TEST_JVMS")); err == nil && n > 0 {
		return n
	}
	return 2
}

// Dir returns the folder where recordings are made, shared by the tests of
// one test binary; Cleanup removes it.
func Dir() (string, error) {
	dirOnce.Do(func() {
		dir, dirErr = os.MkdirTemp("", "jfrtest")
		if dirErr == nil {
			dirErr = os.WriteFile(filepath.Join(dir, "Workload.java"), workloadSource, 0o644)
		}
		if dirErr == nil {
			dirErr = os.WriteFile(filepath.Join(dir, "extra.jfc"), extraSettings, 0o644)
		}
	})
	return dir, dirErr
}

// Cleanup removes the recordings; call it from TestMain after m.Run.
func Cleanup() {
	if dir != "" {
		os.RemoveAll(dir)
	}
}

// Main is a TestMain for packages whose tests record with JDKs: it runs the
// tests, removes what Record and Workload made, fails the run when a
// goroutine outlived the tests, and exits.
func Main(m *testing.M) {
	code := m.Run()
	Cleanup()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// Record makes the recording once per test binary (at most JFR_TEST_JVMS,
// default 2, JVMs run at a time) and returns its path.
func Record(t testing.TB, s Spec) string {
	t.Helper()
	mu.Lock()
	r := made[s.Name]
	if r == nil {
		r = &recording{}
		made[s.Name] = r
	}
	mu.Unlock()
	r.once.Do(func() { r.path, r.err = record(s) })
	if r.err != nil {
		t.Fatalf("recording %s: %v", s.Name, r.err)
	}
	return r.path
}

// JVMFlags returns the command line that Record uses for s, without the
// java launcher; tests that run a JVM themselves (live streaming) use it.
func JVMFlags(s Spec, file string, extra ...string) ([]string, error) {
	d, err := Dir()
	if err != nil {
		return nil, err
	}
	rec := fmt.Sprintf("-XX:StartFlightRecording=filename=%s,settings=%s,settings=%s", file, s.Settings, filepath.Join(d, "extra.jfc"))
	for _, e := range extra {
		rec += "," + e
	}
	args := append([]string{"-Xmx256m"}, s.Flags...)
	args = append(args, "-Xlog:disable", rec, filepath.Join(d, "Workload.java"), strconv.Itoa(s.Millis))
	if s.Rotate {
		args = append(args, "rotate")
	}
	return args, nil
}

func record(s Spec) (string, error) {
	d, err := Dir()
	if err != nil {
		return "", err
	}
	path := filepath.Join(d, s.Name+".jfr")
	args, err := JVMFlags(s, path)
	if err != nil {
		return "", err
	}
	slots <- struct{}{}
	defer func() { <-slots }()
	cmd := exec.Command(s.JDK.Java(), args...)
	if len(s.Env) > 0 {
		cmd.Env = append(os.Environ(), s.Env...)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("%s %s: %w\n%s", s.JDK.Java(), strings.Join(args, " "), err, out)
	}
	return path, nil
}

// Tool runs the JDK's jfr tool and returns its standard output.
func Tool(t testing.TB, j JDK, args ...string) []byte {
	t.Helper()
	slots <- struct{}{}
	defer func() { <-slots }()
	var stderr bytes.Buffer
	cmd := exec.Command(j.JFR(), args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("jfr %s: %v\n%s", strings.Join(args, " "), err, stderr.Bytes())
	}
	return out
}

// Start starts cmd (a JVM, or a process a test stands in for one) and
// waits for it in the background: exited receives how it ended, once. The
// test's cleanup kills it and waits for it, whether or not exited was read.
func Start(t testing.TB, cmd *exec.Cmd) (exited chan error) {
	t.Helper()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited = make(chan error, 1)
	reaped := make(chan struct{})
	go func() {
		exited <- cmd.Wait()
		close(reaped)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-reaped
	})
	return exited
}

// TypeCount is one row of a `jfr summary` table.
type TypeCount struct {
	Count, Bytes int64
}

// ParseSummary reads the table of `jfr summary` output: event type name to
// count and size.
func ParseSummary(out []byte) (map[string]TypeCount, error) {
	rows := map[string]TypeCount{}
	inTable := false
	for _, line := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(line, "====") {
			inTable = true
			continue
		}
		if !inTable || strings.TrimSpace(line) == "" {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 3 {
			return nil, fmt.Errorf("summary row %q", line)
		}
		n, err1 := strconv.ParseInt(f[len(f)-2], 10, 64)
		b, err2 := strconv.ParseInt(f[len(f)-1], 10, 64)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("summary row %q", line)
		}
		rows[strings.Join(f[:len(f)-2], " ")] = TypeCount{Count: n, Bytes: b}
	}
	if !inTable {
		return nil, fmt.Errorf("no summary table in %q", out)
	}
	return rows, nil
}
