// Package e2etest drives the built otelcol-ai binary the way a user does: start it
// on a configuration with free loopback ports, send OTLP traces, logs and
// metrics, read what the file exporter wrote, probe the health endpoint, stop
// it with SIGTERM and check the exit.
//
// The binary is $OTELCOL_AI_BIN (what `make test` sets), otherwise the module's
// dist/otelcol-ai, built with `make build` once per test process. Every
// collector started here gets its own endpoints and output folder through the
// environment variables that the embedded configurations read (see
// distribution/config.yaml), so a test can run the shipped default
// configuration unchanged, or a configuration of its own that uses the same
// ${env:...} names.
package e2etest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/otelcol-ai/otelcol-ai/internal/window"
)

// EnvBinary names the variable holding the path of the binary under test.
const EnvBinary = "OTELCOL_AI_BIN"

// The environment variables through which the embedded configurations take
// their endpoints and output folder.
const (
	EnvOTLPGRPC      = "OTELCOL_AI_OTLP_GRPC_ENDPOINT"
	EnvOTLPHTTP      = "OTELCOL_AI_OTLP_HTTP_ENDPOINT"
	EnvPrometheus    = "OTELCOL_AI_PROMETHEUS_ENDPOINT"
	EnvHealth        = "OTELCOL_AI_HEALTH_ENDPOINT"
	EnvTimeline      = "OTELCOL_AI_TIMELINE_ENDPOINT"
	EnvTelemetryHost = "OTELCOL_AI_TELEMETRY_HOST"
	EnvTelemetryPort = "OTELCOL_AI_TELEMETRY_PORT"
	EnvOutputDir     = "OTELCOL_AI_OUTPUT_DIR"
	// EnvJFRAttach turns the default config's zero-touch attach on or
	// off. The harness turns it off unless a test sets it: a collector on
	// the default config would otherwise start recordings in the JVMs of
	// every other test running beside it.
	EnvJFRAttach = "OTELCOL_AI_JFR_ATTACH_ENABLED"
)

var (
	buildOnce sync.Once
	buildPath string
	buildErr  error
)

// Binary returns the path of the otelcol-ai binary, building it once per test
// process when $OTELCOL_AI_BIN is unset. It fails the test when no binary
// can be had.
func Binary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() { buildPath, buildErr = locateBinary() })
	if buildErr != nil {
		t.Fatalf("e2e: %v", buildErr)
	}
	return buildPath
}

func locateBinary() (string, error) {
	if p := os.Getenv(EnvBinary); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("%s=%s: %w", EnvBinary, p, err)
		}
		return p, nil
	}
	root, err := ModuleRoot()
	if err != nil {
		return "", err
	}
	cmd := exec.Command("make", "--no-print-directory", "build")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("make build in %s: %w\n%s", root, err, out)
	}
	return filepath.Join(root, "dist", "otelcol-ai"), nil
}

// ModuleRoot returns the directory of this module's go.mod, found by walking
// up from the working directory.
func ModuleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && bytes.HasPrefix(data, []byte("module github.com/otelcol-ai/otelcol-ai\n")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("e2e: not inside the otelcol-ai module")
		}
		dir = parent
	}
}

var (
	componentsOnce sync.Once
	componentsOut  string
)

// RequireComponents fails the test unless the binary under test was built
// with every named component (a config type name, e.g. "jfr"), as
// `otelcol-ai components` lists them. A component missing from the build is a
// broken build, not a reason to skip.
func RequireComponents(t testing.TB, names ...string) {
	t.Helper()
	componentsOnce.Do(func() {
		res := Run(t, nil, "components")
		if res.ExitCode == 0 {
			componentsOut = res.Stdout
		}
	})
	for _, name := range names {
		if !strings.Contains(componentsOut, "name: "+name+"\n") {
			t.Fatalf("e2e: %s was built without the %q component", Binary(t), name)
		}
	}
}

// Result is what a one-shot command printed and how it exited.
type Result struct {
	Stdout, Stderr string
	ExitCode       int
}

// Run runs the binary with args to completion (for `components`, `validate`,
// `--version`), with a one-minute limit.
func Run(t testing.TB, env map[string]string, args ...string) Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, Binary(t), args...)
	cmd.Env = environ(env)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	res := Result{Stdout: stdout.String(), Stderr: stderr.String()}
	var exitErr *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exitErr):
		res.ExitCode = exitErr.ExitCode()
	default:
		t.Fatalf("e2e: run %v: %v", args, err)
	}
	return res
}

// Options says how to start a collector.
type Options struct {
	// Configs are --config values in order: "embedded:default", file paths,
	// "yaml:..." snippets. Later ones are merged over earlier ones.
	Configs []string
	// ConfigYAML, when set, is written to a file and passed as the last
	// --config.
	ConfigYAML string
	// Env adds to (and overrides) the environment the harness prepares.
	Env map[string]string
}

// Endpoints are the loopback addresses the harness gave the collector.
type Endpoints struct {
	OTLPGRPC, OTLPHTTP, Prometheus, Health, Telemetry, Timeline string
}

// Collector is a running otelcol-ai process.
type Collector struct {
	t         testing.TB
	cmd       *exec.Cmd
	Endpoints Endpoints
	// OutputDir is where the file exporters of the embedded configurations
	// write traces.jsonl, metrics.jsonl and logs.jsonl.
	OutputDir string

	log     *lockedBuffer
	done    chan struct{}
	waitErr error
	conn    *grpc.ClientConn
}

// Start starts the binary and registers a cleanup that kills it if the test
// did not stop it, printing its log when the test failed.
func Start(t testing.TB, opts Options) *Collector {
	t.Helper()
	bin := Binary(t)
	ports := FreePorts(t, 6)
	c := &Collector{
		t: t,
		Endpoints: Endpoints{
			OTLPGRPC:   fmt.Sprintf("127.0.0.1:%d", ports[0]),
			OTLPHTTP:   fmt.Sprintf("127.0.0.1:%d", ports[1]),
			Prometheus: fmt.Sprintf("127.0.0.1:%d", ports[2]),
			Health:     fmt.Sprintf("127.0.0.1:%d", ports[3]),
			Telemetry:  fmt.Sprintf("127.0.0.1:%d", ports[4]),
			Timeline:   fmt.Sprintf("127.0.0.1:%d", ports[5]),
		},
		OutputDir: t.TempDir(),
		log:       &lockedBuffer{},
		done:      make(chan struct{}),
	}
	env := map[string]string{
		EnvOTLPGRPC:      c.Endpoints.OTLPGRPC,
		EnvOTLPHTTP:      c.Endpoints.OTLPHTTP,
		EnvPrometheus:    c.Endpoints.Prometheus,
		EnvHealth:        c.Endpoints.Health,
		EnvTimeline:      c.Endpoints.Timeline,
		EnvTelemetryHost: "127.0.0.1",
		EnvTelemetryPort: strconv.Itoa(ports[4]),
		EnvOutputDir:     c.OutputDir,
		EnvJFRAttach:     "false",
	}
	for k, v := range opts.Env {
		env[k] = v
	}
	var args []string
	for _, cfg := range opts.Configs {
		args = append(args, "--config", cfg)
	}
	if opts.ConfigYAML != "" {
		path := filepath.Join(t.TempDir(), "config.yaml")
		if err := os.WriteFile(path, []byte(opts.ConfigYAML), 0o600); err != nil {
			t.Fatal(err)
		}
		args = append(args, "--config", path)
	}
	c.cmd = exec.Command(bin, args...)
	c.cmd.Env = environ(env)
	c.cmd.Dir = t.TempDir()
	c.cmd.Stdout, c.cmd.Stderr = c.log, c.log
	if err := c.cmd.Start(); err != nil {
		t.Fatalf("e2e: start %s: %v", bin, err)
	}
	go func() {
		c.waitErr = c.cmd.Wait()
		close(c.done)
	}()
	t.Cleanup(func() {
		if c.conn != nil {
			_ = c.conn.Close()
		}
		select {
		case <-c.done:
		default:
			_ = c.cmd.Process.Kill()
			<-c.done
		}
		if t.Failed() {
			t.Logf("collector log:\n%s", c.Log())
		}
	})
	return c
}

// Log returns everything the collector printed so far.
func (c *Collector) Log() string { return c.log.String() }

// Pid returns the collector's process id.
func (c *Collector) Pid() int { return c.cmd.Process.Pid }

// Exited reports whether the process has ended.
func (c *Collector) Exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// WaitHealthy polls the health_check endpoint until it answers 200, the
// process exits, or timeout passes.
func (c *Collector) WaitHealthy(timeout time.Duration) error {
	url := "http://" + c.Endpoints.Health + "/"
	return c.poll(timeout, func() (bool, error) {
		resp, err := http.Get(url) //nolint:gosec // loopback URL built by the harness
		if err != nil {
			return false, nil
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
}

// Eventually polls cond every 100 ms until it holds, the process exits, or
// timeout passes.
func (c *Collector) Eventually(timeout time.Duration, cond func() bool) error {
	return c.poll(timeout, func() (bool, error) { return cond(), nil })
}

func (c *Collector) poll(timeout time.Duration, cond func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	for {
		ok, err := cond()
		if err != nil || ok {
			return err
		}
		if c.Exited() {
			return fmt.Errorf("e2e: collector exited while waiting: %w", c.waitErr)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("e2e: condition not met within %s", timeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Stop sends SIGTERM and waits up to timeout for the process to exit,
// returning its exit code.
func (c *Collector) Stop(timeout time.Duration) (int, error) {
	if c.conn != nil {
		_ = c.conn.Close()
		c.conn = nil
	}
	if !c.Exited() {
		if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			return -1, fmt.Errorf("e2e: SIGTERM: %w", err)
		}
	}
	select {
	case <-c.done:
	case <-time.After(timeout):
		// SIGQUIT makes the Go runtime write every goroutine's stack to
		// the collector's log before it exits: what held the shutdown.
		_ = c.cmd.Process.Signal(syscall.SIGQUIT)
		select {
		case <-c.done:
		case <-time.After(5 * time.Second):
			_ = c.cmd.Process.Kill()
			<-c.done
		}
		return -1, fmt.Errorf("e2e: collector did not exit within %s of SIGTERM (goroutines dumped by SIGQUIT in its log)", timeout)
	}
	return c.cmd.ProcessState.ExitCode(), nil
}

// StopCleanly stops the collector as Stop does and fails the test unless
// it exits with 0 within timeout.
func (c *Collector) StopCleanly(t testing.TB, timeout time.Duration) {
	t.Helper()
	code, err := c.Stop(timeout)
	if err != nil {
		t.Fatalf("c.Stop: %v", err)
	}
	if code != 0 {
		t.Errorf("c.Stop: got %v, want %v", code, 0)
	}
}

// RSS returns the collector's resident set size in bytes, from /proc.
func (c *Collector) RSS() (int64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", c.Pid()))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb * 1024, err
		}
	}
	return 0, errors.New("e2e: no VmRSS in /proc status")
}

func (c *Collector) grpcConn() (*grpc.ClientConn, error) {
	if c.conn != nil {
		return c.conn, nil
	}
	conn, err := grpc.NewClient(c.Endpoints.OTLPGRPC, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, err
	}
	c.conn = conn
	return conn, nil
}

// SendTraces exports td over OTLP/gRPC and returns once the collector
// accepted it.
func (c *Collector) SendTraces(ctx context.Context, td ptrace.Traces) error {
	conn, err := c.grpcConn()
	if err != nil {
		return err
	}
	_, err = ptraceotlp.NewGRPCClient(conn).Export(ctx, ptraceotlp.NewExportRequestFromTraces(td))
	return err
}

// SendLogs exports ld over OTLP/gRPC.
func (c *Collector) SendLogs(ctx context.Context, ld plog.Logs) error {
	conn, err := c.grpcConn()
	if err != nil {
		return err
	}
	_, err = plogotlp.NewGRPCClient(conn).Export(ctx, plogotlp.NewExportRequestFromLogs(ld))
	return err
}

// SendMetrics exports md over OTLP/gRPC.
func (c *Collector) SendMetrics(ctx context.Context, md pmetric.Metrics) error {
	conn, err := c.grpcConn()
	if err != nil {
		return err
	}
	_, err = pmetricotlp.NewGRPCClient(conn).Export(ctx, pmetricotlp.NewExportRequestFromMetrics(md))
	return err
}

// SendLogsHTTP exports ld over OTLP/HTTP (protobuf).
func (c *Collector) SendLogsHTTP(ctx context.Context, ld plog.Logs) error {
	body, err := plogotlp.NewExportRequestFromLogs(ld).MarshalProto()
	if err != nil {
		return err
	}
	return c.postHTTP(ctx, "/v1/logs", body)
}

// SendTracesHTTP exports td over OTLP/HTTP (protobuf).
func (c *Collector) SendTracesHTTP(ctx context.Context, td ptrace.Traces) error {
	body, err := ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
	if err != nil {
		return err
	}
	return c.postHTTP(ctx, "/v1/traces", body)
}

func (c *Collector) postHTTP(ctx context.Context, path string, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+c.Endpoints.OTLPHTTP+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-protobuf")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("e2e: POST %s: %s", path, resp.Status)
	}
	return nil
}

// Get fetches a URL (e.g. the Prometheus endpoint) and returns its body.
func Get(url string) (string, error) {
	resp, err := http.Get(url) //nolint:gosec // test URLs on loopback
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(resp.Body); err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return buf.String(), fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return buf.String(), nil
}

// Traces reads every batch the file exporter wrote to file (relative to
// OutputDir, e.g. "traces.jsonl"). A missing file reads as no batches.
func (c *Collector) Traces(file string) ([]ptrace.Traces, error) {
	var u ptrace.JSONUnmarshaler
	return ReadJSONLines(filepath.Join(c.OutputDir, file), u.UnmarshalTraces)
}

// Logs reads every batch the file exporter wrote to file.
func (c *Collector) Logs(file string) ([]plog.Logs, error) {
	var u plog.JSONUnmarshaler
	return ReadJSONLines(filepath.Join(c.OutputDir, file), u.UnmarshalLogs)
}

// Metrics reads every batch the file exporter wrote to file.
func (c *Collector) Metrics(file string) ([]pmetric.Metrics, error) {
	var u pmetric.JSONUnmarshaler
	return ReadJSONLines(filepath.Join(c.OutputDir, file), u.UnmarshalMetrics)
}

// FileExportConfig is a configuration in which the one receiver named
// receiver, configured by settings (its YAML, indented below its name),
// feeds a metrics and a logs pipeline whose file exporters write OTLP JSON
// lines to metrics.jsonl and logs.jsonl in the output folder. The
// collector's own metrics are off.
func FileExportConfig(receiver, settings string) string {
	return `receivers:
  ` + receiver + `:
` + settings + `exporters:
  file/metrics:
    path: ${env:` + EnvOutputDir + `}/metrics.jsonl
    flush_interval: 100ms
  file/logs:
    path: ${env:` + EnvOutputDir + `}/logs.jsonl
    flush_interval: 100ms
service:
  telemetry:
    metrics:
      level: none
  pipelines:
    metrics:
      receivers: [` + receiver + `]
      exporters: [file/metrics]
    logs:
      receivers: [` + receiver + `]
      exporters: [file/logs]
`
}

// FileContains reports whether the file at path (a file exporter's
// output) holds s; a file that cannot be read holds nothing.
func FileContains(path, s string) bool {
	b, err := os.ReadFile(path)
	return err == nil && bytes.Contains(b, []byte(s))
}

// ReadJSONLines decodes one OTLP/JSON document per line of a file exporter's
// output at path; a missing file reads as none. A last line without its
// newline may still be being written and is left for the next read.
func ReadJSONLines[T any](path string, decode func([]byte) (T, error)) ([]T, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if i := bytes.LastIndexByte(data, '\n'); i >= 0 {
		data = data[:i+1]
	} else {
		return nil, nil
	}
	var out []T
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 1<<20), 64<<20)
	for line := 1; sc.Scan(); line++ {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		v, err := decode(sc.Bytes())
		if err != nil {
			return out, fmt.Errorf("e2e: %s line %d: %w", path, line, err)
		}
		out = append(out, v)
	}
	return out, sc.Err()
}

// WindowsOf decodes the runtime windows (internal/window) of process pid's
// resources in batches; other records are skipped.
func WindowsOf(batches []plog.Logs, pid int64) []window.Window {
	var out []window.Window
	for _, ld := range batches {
		for _, rl := range ld.ResourceLogs().All() {
			if v, ok := rl.Resource().Attributes().Get(window.ResourcePID); !ok || v.Int() != pid {
				continue
			}
			for _, sl := range rl.ScopeLogs().All() {
				for _, lr := range sl.LogRecords().All() {
					if w, err := window.Decode(lr); err == nil {
						out = append(out, w)
					}
				}
			}
		}
	}
	return out
}

// FreePorts returns n distinct loopback TCP ports that were free a moment ago.
func FreePorts(t testing.TB, n int) []int {
	t.Helper()
	ports := make([]int, 0, n)
	var listeners []net.Listener
	defer func() {
		for _, l := range listeners {
			_ = l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("e2e: free port: %v", err)
		}
		listeners = append(listeners, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports
}

func environ(extra map[string]string) []string {
	env := os.Environ()
	for k, v := range extra {
		env = append(env, k+"="+v)
	}
	return env
}

type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
