package e2etest

import (
	"github.com/otelcol-ai/otelcol-ai/receiver/nvmlreceiver/nvmlstubtest"

	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.yaml.in/yaml/v3"
)

// The dashboards test runs the built collector on the embedded default
// configuration against real work (a JVM recording JFR, a CPython process
// whose threads fight for the GIL, the stub NVML library, OTLP spans from
// the Python process scored by the shipped model, a model repository that
// gains a good and a bad version), lets a real Prometheus (Debian's
// `prometheus`, `make test-deps`) scrape both of its metrics endpoints, and
// then runs every panel query of distribution/dashboards through
// Prometheus's HTTP API, with the dashboard's variables set to values their
// own queries return. A panel whose query returns no series, or whose series
// lack a label its legend names, fails the test naming the panel.
//
// Outside Kubernetes nothing sets k8s.* attributes, so the test's config
// upserts k8s.cluster.name, k8s.namespace.name, k8s.pod.name and
// k8s.container.name on every metric resource (as k8s_attributes does in the
// chart), and its scrape config adds cluster/namespace/pod target labels to
// the collector's own telemetry (as a PodMonitor and an external label do).
// It takes about 90 s.

const dashboardsOverrides = `
receivers:
  nvml:
    library_path: %s
    collection_interval: 2s
    leak_detection:
      window: 20s
  host_metrics:
    collection_interval: 5s
  jfr:
    collection_interval: 2s
    accounts:
      jni_references:
        interval: 2s
      leak_detection:
        window: 20s
extensions:
  onnxinference:
    repository: %s
    poll_interval: 2s
processors:
  runtimecorrelation:
    match_scope: host
    # This test sends the Python service's spans itself, as a forwarding
    # collector would: loopback is a trusted peer, whose spans are matched by
    # their resource attributes.
    identity:
      trusted_peers: [127.0.0.1, "::1"]
    # As distribution/config.yaml sets it (TestDefaultConfigPlacesSpanEvents
    # in distribution/ checks the default); restated so that a binary built
    # before that default still shows what it does.
    spans:
      events: true
    metrics:
      interval: 2s
  resource/k8s:
    attributes:
      - {key: k8s.cluster.name, value: test-cluster, action: upsert}
      - {key: k8s.namespace.name, value: dashboards, action: upsert}
      - {key: k8s.pod.name, value: workload-0, action: upsert}
      - {key: k8s.container.name, value: main, action: upsert}
service:
  pipelines:
    metrics:
      processors: [memory_limiter, runtimecorrelation, resource/k8s, resource/drop_command_line, batch]
`

const dashboardsJava = `public class Alloc {
  public static void main(String[] a) throws Exception {
    java.util.List<byte[]> keep = new java.util.ArrayList<>();
    long end = System.currentTimeMillis() + Long.parseLong(a[0]) * 1000;
    while (System.currentTimeMillis() < end) {
      for (int i = 0; i < 2000; i++) keep.add(new byte[1024]);
      if (keep.size() > 200000) keep.clear();
      Thread.sleep(1);
    }
  }
}
`

const dashboardsPython = `import gc, sys, threading, time
end = time.time() + float(sys.argv[1])
def spin():
    while time.time() < end:
        x = [object() for _ in range(2000)]
        sum(i * i for i in range(20000))
def collect():
    while time.time() < end:
        gc.collect()
        time.sleep(0.05)
ts = [threading.Thread(target=spin) for _ in range(3)] + [threading.Thread(target=collect)]
for t in ts: t.start()
for t in ts: t.join()
`

func needForDashboards(t *testing.T, what string, ok bool) {
	t.Helper()
	if ok {
		return
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("dashboards: %s (CI must have it: make test-deps)", what)
	}
	t.Skipf("dashboards: %s", what)
}

type dashboard struct {
	Title      string `json:"title"`
	Templating struct {
		List []struct {
			Name  string `json:"name"`
			Type  string `json:"type"`
			Query any    `json:"query"`
		} `json:"list"`
	} `json:"templating"`
	Panels []struct {
		ID      int    `json:"id"`
		Title   string `json:"title"`
		Targets []struct {
			Expr         string `json:"expr"`
			LegendFormat string `json:"legendFormat"`
		} `json:"targets"`
	} `json:"panels"`
}

func loadDashboards(t *testing.T) map[string]dashboard {
	t.Helper()
	root, err := ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(root, "distribution", "dashboards", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no dashboards found: %v", err)
	}
	out := map[string]dashboard{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var d dashboard
		if err := json.Unmarshal(b, &d); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		out[filepath.Base(f)] = d
	}
	return out
}

type promClient struct{ base string }

func (p promClient) get(path string, q url.Values, into any) error {
	resp, err := http.Get(p.base + path + "?" + q.Encode())
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	var env struct {
		Status string          `json:"status"`
		Error  string          `json:"error"`
		Data   json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(body, &env); err != nil {
		return fmt.Errorf("%s: %w: %s", path, err, body)
	}
	if env.Status != "success" {
		return fmt.Errorf("%s: %s", path, env.Error)
	}
	return json.Unmarshal(env.Data, into)
}

func (p promClient) query(expr string) ([]map[string]string, error) {
	var data struct {
		Result []struct {
			Metric map[string]string `json:"metric"`
		} `json:"result"`
	}
	if err := p.get("/api/v1/query", url.Values{"query": {expr}}, &data); err != nil {
		return nil, err
	}
	out := make([]map[string]string, 0, len(data.Result))
	for _, r := range data.Result {
		out = append(out, r.Metric)
	}
	return out, nil
}

var labelValuesRe = regexp.MustCompile(`^label_values\((.+),\s*([a-zA-Z_][a-zA-Z0-9_]*)\)$`)

// substitute replaces the dashboard's variables with values and Grafana's
// $__rate_interval with a window that holds several scrapes.
func substitute(expr string, vars map[string]string) string {
	expr = strings.ReplaceAll(expr, "$__rate_interval", "30s")
	for k, v := range vars {
		expr = strings.ReplaceAll(expr, "$"+k, regexp.QuoteMeta(v))
	}
	return expr
}

// resolveVariables runs each query variable in order (each may use the ones
// before it) and picks the first value it returns.
func resolveVariables(p promClient, d dashboard) (map[string]string, error) {
	vars := map[string]string{}
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		q, _ := v.Query.(map[string]any)
		qs, _ := q["query"].(string)
		m := labelValuesRe.FindStringSubmatch(qs)
		if m == nil {
			return nil, fmt.Errorf("variable %s: query %q is not label_values(selector, label)", v.Name, qs)
		}
		var values []string
		if err := p.get("/api/v1/label/"+m[2]+"/values", url.Values{"match[]": {substitute(m[1], vars)}}, &values); err != nil {
			return nil, fmt.Errorf("variable %s: %w", v.Name, err)
		}
		if len(values) == 0 {
			return nil, fmt.Errorf("variable %s: %s returned no values", v.Name, qs)
		}
		sort.Strings(values)
		vars[v.Name] = values[0]
	}
	return vars, nil
}

var promLabelRe = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"`)

var legendLabelRe = regexp.MustCompile(`\{\{\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\}\}`)

// emptyWhenHealthy names, by dashboard file and panel title ("gpu-node.json:
// GPU memory errors (ECC)"), the panels that may have no data on a healthy
// node, and why (only a failure or a GPU fault makes them). Every other
// panel must have data on a healthy node, so that an operator tells "none"
// from "not collected". None needs to be named now: the failure counters
// start at 0 (increase() is 0, not absent), and the GPU panels have data
// from the stub NVML library, which is a GPU with ECC counters at 0.
var emptyWhenHealthy = map[string]string{}

// withoutAttach names, as emptyWhenHealthy does, the panels whose metrics
// the collector reads by attaching to a JVM (a thread dump for its JNI
// reference count), and those metrics: the harness turns attach off
// (EnvJFRAttach) so as not to touch the JVMs of tests running beside, so
// they have no data here, in either phase. TestAccountLeaks
// (receiver/jfrreceiver) checks them against real JVMs.
var withoutAttach = map[string]string{
	"runtimes.json: JNI global references": "JNI counts need attach, off in the e2e harness",
	"jvm_jni_reference_count":              "JNI counts need attach, off in the e2e harness",
}

// merged returns the entries of both maps.
func merged(a, b map[string]string) map[string]string {
	out := make(map[string]string, len(a)+len(b))
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}

func emptyWhenHealthyNames() []string {
	var out []string
	for k, why := range emptyWhenHealthy {
		out = append(out, k+" ("+why+")")
	}
	sort.Strings(out)
	return out
}

// checkPanels returns one line per panel whose query fails; a panel named
// in empty must have no series (a panel that has data is taken off that
// list).
func checkPanels(p promClient, dashboards map[string]dashboard, empty map[string]string) (problems []string, checked int) {
	names := make([]string, 0, len(dashboards))
	for n := range dashboards {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		d := dashboards[name]
		vars, err := resolveVariables(p, d)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", name, err))
			continue
		}
		for _, panel := range d.Panels {
			for _, target := range panel.Targets {
				checked++
				expr := substitute(target.Expr, vars)
				series, err := p.query(expr)
				switch {
				case err != nil:
					problems = append(problems, fmt.Sprintf("%s: panel %d %q: %v", name, panel.ID, panel.Title, err))
					continue
				case empty[name+": "+panel.Title] != "":
					if len(series) > 0 {
						problems = append(problems, fmt.Sprintf("%s: panel %d %q has data on a healthy node: take it off emptyWhenHealthy", name, panel.ID, panel.Title))
					}
					continue
				case len(series) == 0:
					problems = append(problems, fmt.Sprintf("%s: panel %d %q: no series for %s", name, panel.ID, panel.Title, expr))
					continue
				}
				for _, l := range legendLabelRe.FindAllStringSubmatch(target.LegendFormat, -1) {
					found := false
					for _, s := range series {
						if s[l[1]] != "" {
							found = true
							break
						}
					}
					if !found {
						problems = append(problems, fmt.Sprintf("%s: panel %d %q: no series has label %s its legend uses (%s)", name, panel.ID, panel.Title, l[1], expr))
					}
				}
			}
		}
	}
	return problems, checked
}

func startWorkload(t *testing.T, ctx context.Context, name string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return cmd
}

func copyTree(t *testing.T, from, to string) {
	t.Helper()
	out, err := exec.Command("cp", "-a", from+"/.", to).CombinedOutput()
	if err != nil {
		t.Fatalf("cp %s: %v: %s", from, err, out)
	}
}

func TestDashboardPanelsAgainstRealPrometheus(t *testing.T) {
	RequireComponents(t, "nvml", "jfr", "pythongil", "runtimecorrelation", "inference", "onnxinference", "resource")
	prometheus, err := exec.LookPath("prometheus")
	needForDashboards(t, "prometheus not installed", err == nil)
	needForDashboards(t, "the pythongil receiver's probes need root", os.Geteuid() == 0)
	for _, tool := range []string{"java", "python3", "gcc"} {
		_, err := exec.LookPath(tool)
		needForDashboards(t, tool+" not found", err == nil)
	}
	root, err := ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	dashboards := loadDashboards(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir := t.TempDir()

	// The stub NVML library the nvml receiver's tests use.
	lib := nvmlstubtest.Build(t)

	// A model repository the test can add versions to: the shipped model.
	bin := Binary(t)
	models := filepath.Join(dir, "models")
	if err := os.MkdirAll(models, 0o755); err != nil {
		t.Fatal(err)
	}
	copyTree(t, filepath.Join(filepath.Dir(bin), "models"), models)

	// The workloads: a JVM recording JFR, a CPython process with contended
	// threads and GC.
	javaSrc, pySrc := filepath.Join(dir, "Alloc.java"), filepath.Join(dir, "gil.py")
	for path, body := range map[string]string{javaSrc: dashboardsJava, pySrc: dashboardsPython} {
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	startWorkload(t, ctx, "java", "-Xmx256m", "-XX:StartFlightRecording=filename="+filepath.Join(dir, "alloc.jfr"), javaSrc, "240")
	python := startWorkload(t, ctx, "python3", pySrc, "240")

	c := Start(t, Options{
		Configs:    []string{"embedded:default"},
		ConfigYAML: fmt.Sprintf(dashboardsOverrides, lib, models),
	})
	if err := c.WaitHealthy(time.Minute); err != nil {
		t.Fatalf("collector not healthy: %v", err)
	}

	// A real Prometheus scraping both endpoints every second.
	port := FreePorts(t, 1)[0]
	promCfg := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(promCfg, []byte(fmt.Sprintf(`global: {scrape_interval: 1s, evaluation_interval: 1s}
scrape_configs:
  - job_name: otelcol-ai-metrics
    static_configs: [{targets: [%q]}]
  - job_name: otelcol-ai-telemetry
    static_configs: [{targets: [%q], labels: {cluster: test-cluster, namespace: otelcol-ai, pod: agent-0}}]
`, c.Endpoints.Prometheus, c.Endpoints.Telemetry)), 0o644); err != nil {
		t.Fatal(err)
	}
	prom := exec.CommandContext(ctx, prometheus, "--config.file="+promCfg, "--storage.tsdb.path="+filepath.Join(dir, "tsdb"),
		"--web.listen-address=127.0.0.1:"+strconv.Itoa(port))
	promLog := &lockedBuffer{}
	prom.Stdout, prom.Stderr = promLog, promLog
	if err := prom.Start(); err != nil {
		t.Fatalf("start prometheus: %v", err)
	}
	t.Cleanup(func() {
		_ = prom.Process.Kill()
		_ = prom.Wait()
		if t.Failed() {
			t.Logf("prometheus log:\n%s", promLog.String())
		}
	})
	p := promClient{base: "http://127.0.0.1:" + strconv.Itoa(port)}

	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	pyPid := int64(python.Process.Pid)
	send := func(i int) {
		td := ptrace.NewTraces()
		rs := td.ResourceSpans().AppendEmpty()
		rs.Resource().Attributes().PutStr("service.name", "dashboards-python")
		rs.Resource().Attributes().PutStr("host.name", host)
		rs.Resource().Attributes().PutInt("process.pid", pyPid)
		spans := rs.ScopeSpans().AppendEmpty().Spans()
		end := time.Now()
		for j := 0; j < 5; j++ {
			s := spans.AppendEmpty()
			s.SetName("request")
			s.SetTraceID(pcommon.TraceID([16]byte{1, byte(i), byte(i >> 8), byte(j), 9}))
			s.SetSpanID(pcommon.SpanID([8]byte{2, byte(i), byte(i >> 8), byte(j)}))
			s.SetStartTimestamp(pcommon.NewTimestampFromTime(end.Add(-800 * time.Millisecond)))
			s.SetEndTimestamp(pcommon.NewTimestampFromTime(end))
		}
		if err := c.SendTraces(ctx, td); err != nil {
			t.Logf("send traces: %v", err)
		}
	}

	// New model versions once the first one serves: a good one, later
	// replaced in place by a new file with other content (the same model
	// with a doc_string field appended: ONNX's ModelProto field 6; a reload),
	// and a broken one (a load failure).
	rewrite := func() {
		target := filepath.Join(models, "runtime_overlap", "7", "model.onnx")
		b, err := os.ReadFile(target)
		if err != nil {
			t.Fatal(err)
		}
		b = append(b, 0x32, 6, 'r', 'e', 'l', 'o', 'a', 'd')
		if err := os.WriteFile(target+".tmp", b, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(target+".tmp", target); err != nil {
			t.Fatal(err)
		}
	}
	addVersions := func() {
		versions, _ := filepath.Glob(filepath.Join(models, "runtime_overlap", "*", "model.onnx"))
		if len(versions) == 0 {
			t.Fatalf("no shipped model under %s", models)
		}
		good := filepath.Join(models, "runtime_overlap", "7")
		bad := filepath.Join(models, "runtime_overlap", "8")
		for _, d := range []string{good, bad} {
			if err := os.MkdirAll(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		sort.Strings(versions)
		copyTree(t, filepath.Dir(versions[len(versions)-1]), good)
		if err := os.WriteFile(filepath.Join(bad, "model.onnx"), []byte("not an onnx model"), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	// A healthy node first: every panel has data but those that need a
	// failure or a GPU fault, each named with why.
	var problems []string
	checked := 0
	healthyBy := time.Now().Add(100 * time.Second)
	i := 0
	for ; ; i++ {
		send(i)
		time.Sleep(time.Second)
		if i < 30 || i%5 != 0 {
			continue
		}
		problems, checked = checkPanels(p, dashboards, merged(emptyWhenHealthy, withoutAttach))
		if len(problems) == 0 || time.Now().After(healthyBy) {
			break
		}
	}
	for _, pr := range problems {
		t.Errorf("healthy node: %s", pr)
	}
	noAttach := 0
	for k := range withoutAttach {
		if strings.Contains(k, ".json: ") {
			noAttach++
		}
	}
	t.Logf("figure: healthy node: %d panel queries checked, %d with data, %d empty as named (%v), %d without attach, %d failing",
		checked, checked-len(emptyWhenHealthy)-noAttach-len(problems), len(emptyWhenHealthy), emptyWhenHealthyNames(), noAttach, len(problems))
	exported := exportedNames(t, c)
	for _, pr := range unexportedNames(t, root, dashboards, exported) {
		if name, _, _ := strings.Cut(pr, " "); withoutAttach[name] != "" {
			t.Logf("%s (%s)", pr, withoutAttach[name])
			continue
		}
		t.Error(pr)
	}

	// Then a good version, a reload and a load failure: every panel has
	// data.
	addVersions()
	deadline := time.Now().Add(120 * time.Second)
	for j := 0; ; i, j = i+1, j+1 {
		send(i)
		if j == 10 {
			rewrite()
		}
		time.Sleep(time.Second)
		if j < 20 || j%5 != 0 {
			continue
		}
		problems, checked = checkPanels(p, dashboards, withoutAttach)
		if len(problems) == 0 || time.Now().After(deadline) {
			break
		}
	}
	for _, pr := range problems {
		t.Error(pr)
	}
	t.Logf("%d panel queries checked against Prometheus after a reload and a load failure, %d failing", checked, len(problems))

	// Where traces are looked at: the windows that overlapped each span are
	// placed on it as span events named for their kind.
	traces, err := c.Traces("traces.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	events := map[string]int{}
	forEachSpan(traces, func(s ptrace.Span) {
		for k := 0; k < s.Events().Len(); k++ {
			events[s.Events().At(k).Name()]++
		}
	})
	if events["python.gil.wait"] == 0 && events["python.gil.released"] == 0 && events["jvm.safepoint"] == 0 {
		t.Errorf("the default config placed no runtime window on the spans as span events: %v", events)
	}
	t.Logf("span events by name: %v", events)

	// The cardinality a user pays for: one node agent's scrape.
	for _, ep := range []string{c.Endpoints.Prometheus, c.Endpoints.Telemetry} {
		body, err := Get("http://" + ep + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		series := 0
		perProcess := map[string]int{}
		values := map[string]map[string]bool{}
		for _, line := range strings.Split(body, "\n") {
			if line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			series++
			runtime, pid := "", ""
			for _, m := range promLabelRe.FindAllStringSubmatch(line, -1) {
				if values[m[1]] == nil {
					values[m[1]] = map[string]bool{}
				}
				values[m[1]][m[2]] = true
				switch m[1] {
				case "process_runtime_name":
					runtime = m[2]
				case "process_pid":
					pid = m[2]
				}
			}
			if runtime != "" {
				perProcess[runtime+" "+pid]++
			}
		}
		var distinct []string
		for k, v := range values {
			if len(v) > 1 {
				distinct = append(distinct, fmt.Sprintf("%s=%d", k, len(v)))
			}
		}
		sort.Strings(distinct)
		t.Logf("scrape of %s: %d bytes, %d series; series per runtime process %v; labels with more than one value: %v", ep, len(body), series, perProcess, distinct)
	}
}

// exportedNames returns the metric names of both of the collector's
// Prometheus endpoints (its metrics and its own telemetry), series by
// series as scraped (histograms' _bucket, _sum and _count included).
func exportedNames(t *testing.T, c *Collector) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	for _, ep := range []string{c.Endpoints.Prometheus, c.Endpoints.Telemetry} {
		body, err := Get("http://" + ep + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(body, "\n") {
			if line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			if i := strings.IndexAny(line, "{ "); i > 0 {
				names[line[:i]] = true
			}
		}
	}
	return names
}

var (
	promStrings   = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
	promMatchers  = regexp.MustCompile(`\{[^}]*\}|\[[^\]]*\]`)
	promGroupings = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	promNumbers   = regexp.MustCompile(`(^|[^a-zA-Z0-9_:])[0-9][0-9a-zA-Z_.]*`) // 0.5, 1e3, offset 10m
	promIdent     = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*(\s*\()?`)
	promKeywords  = map[string]bool{"by": true, "without": true, "on": true, "ignoring": true, "group_left": true,
		"group_right": true, "bool": true, "and": true, "or": true, "unless": true, "offset": true, "inf": true, "nan": true}
)

// promMetricNames returns the metric names a PromQL expression selects:
// its identifiers that are neither functions, nor labels of matchers and
// groupings, nor keywords.
func promMetricNames(expr string) []string {
	expr = promStrings.ReplaceAllString(expr, `""`)
	expr = promMatchers.ReplaceAllString(expr, " ")
	expr = promGroupings.ReplaceAllString(expr, " ")
	expr = promNumbers.ReplaceAllString(expr, "$1 ")
	var out []string
	for _, m := range promIdent.FindAllStringSubmatch(expr, -1) {
		name := strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(m[0]), "("))
		if m[1] != "" || promKeywords[strings.ToLower(name)] {
			continue
		}
		out = append(out, name)
	}
	return out
}

// unexportedNames reports each metric name a dashboard panel or an alert
// rule selects that the collector, scraped now, does not export.
func unexportedNames(t *testing.T, root string, dashboards map[string]dashboard, exported map[string]bool) []string {
	t.Helper()
	uses := map[string][]string{}
	for file, d := range dashboards {
		for _, panel := range d.Panels {
			for _, target := range panel.Targets {
				for _, n := range promMetricNames(target.Expr) {
					uses[n] = append(uses[n], fmt.Sprintf("%s panel %q", file, panel.Title))
				}
			}
		}
	}
	var rules struct {
		Groups []struct {
			Rules []struct {
				Alert string `yaml:"alert"`
				Expr  string `yaml:"expr"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	b, err := os.ReadFile(filepath.Join(root, "distribution", "alerts", "otelcol-ai.rules.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, &rules); err != nil {
		t.Fatal(err)
	}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			for _, n := range promMetricNames(r.Expr) {
				uses[n] = append(uses[n], "alert "+r.Alert)
			}
		}
	}
	var problems []string
	for n, where := range uses {
		if !exported[n] {
			problems = append(problems, fmt.Sprintf("%s is not exported by the collector, but %s use it", n, strings.Join(where, ", ")))
		}
	}
	sort.Strings(problems)
	t.Logf("%d metric names used by dashboards and alerts, all checked against the collector's two endpoints", len(uses))
	return problems
}

// TestPromMetricNames: what the dashboards test checks against the
// collector's endpoints is the metric names of an expression, not its
// functions, labels or keywords.
func TestPromMetricNames(t *testing.T) {
	for expr, want := range map[string]string{
		`sum by (pod,instance,model) (increase(otelcol_onnxinference_model_load_failures{cluster=~"$cluster",pod=~"$pod"}[$__rate_interval]))`:             "otelcol_onnxinference_model_load_failures",
		`max by (host_name,hw_id) (hw_gpu_memory_usage_bytes{k8s_cluster_name=~"$cluster"}) / max by (host_name,hw_id) (hw_gpu_memory_limit_bytes{a="b"})`: "hw_gpu_memory_usage_bytes hw_gpu_memory_limit_bytes",
		`otelcol_receiver_nvml_available == 0`:                                                                        "otelcol_receiver_nvml_available",
		`rate(runtime_overlap_count_total[1h] offset 10m) > 1e3 unless up offset 15m`:                                 "runtime_overlap_count_total up",
		`histogram_quantile(0.99, sum by (le) (rate(jvm_gc_duration_seconds_bucket[5m]))) > bool 0.5 and on (pod) up`: "jvm_gc_duration_seconds_bucket up",
	} {
		if got := strings.Join(promMetricNames(expr), " "); got != want {
			t.Errorf("promMetricNames(%s) = %q, want %q", expr, got, want)
		}
	}
}
