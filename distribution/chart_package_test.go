package distribution_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// The prometheus-operator kinds the chart renders (monitoring.coreos.com/v1),
// with the fields it sets: decoding is strict, so a misspelt field fails.
type podMonitor struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		monitorSelectors    `json:",inline"`
		PodMetricsEndpoints []monitorEndpoint `json:"podMetricsEndpoints"`
	} `json:"spec"`
}

type serviceMonitor struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		monitorSelectors `json:",inline"`
		Endpoints        []monitorEndpoint `json:"endpoints"`
	} `json:"spec"`
}

// monitorSelectors are the namespaces and labels both monitor kinds
// select their targets by.
type monitorSelectors struct {
	NamespaceSelector struct {
		MatchNames []string `json:"matchNames"`
	} `json:"namespaceSelector"`
	Selector metav1.LabelSelector `json:"selector"`
}

type monitorEndpoint struct {
	Port              string          `json:"port"`
	Path              string          `json:"path"`
	Interval          string          `json:"interval"`
	Relabelings       []relabelConfig `json:"relabelings"`
	MetricRelabelings []relabelConfig `json:"metricRelabelings"`
}

// relabelConfig is prometheus-operator's RelabelConfig, the fields the
// tests set.
type relabelConfig struct {
	Action       string   `json:"action,omitempty"`
	SourceLabels []string `json:"sourceLabels,omitempty"`
	Regex        string   `json:"regex,omitempty"`
	TargetLabel  string   `json:"targetLabel,omitempty"`
	Replacement  string   `json:"replacement,omitempty"`
}

type renderedPackage struct {
	rendered
	podMonitors     []podMonitor
	serviceMonitors []serviceMonitor
}

// renderChart renders a loaded chart (a folder or a package) with values,
// through the values schema, and strictly decodes every manifest.
func renderChart(t *testing.T, ch *chart.Chart, values map[string]any) renderedPackage {
	t.Helper()
	files, err := renderFiles(ch, values)
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	var out renderedPackage
	names := make([]string, 0, len(files))
	for name := range files {
		if strings.HasSuffix(name, ".yaml") {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	var text strings.Builder
	for _, name := range names {
		for _, doc := range manifests(files[name]) {
			fmt.Fprintf(&text, "---\n# Source: %s\n%s\n", strings.TrimPrefix(name, "otelcol-ai/"), doc)
			kind, strict := decodeManifest(t, name, doc)
			switch kind {
			case "monitoring.coreos.com/v1/PodMonitor":
				appendDecoded(strict, &out.podMonitors)
			case "monitoring.coreos.com/v1/ServiceMonitor":
				appendDecoded(strict, &out.serviceMonitors)
			default:
				decodeStrict(t, name, kind, strict, &out.rendered)
			}
		}
	}
	out.text = text.String()
	return out
}

// packagedFile returns the chart's file name (outside templates/), or nil.
func packagedFile(ch *chart.Chart, name string) *chart.File {
	for _, f := range ch.Files {
		if f.Name == name {
			return f
		}
	}
	return nil
}

func renderFiles(ch *chart.Chart, values map[string]any) (map[string]string, error) {
	vals, err := chartutil.ToRenderValues(ch, values, chartutil.ReleaseOptions{
		Name: releaseName, Namespace: namespace, IsInstall: true, Revision: 1,
	}, chartutil.DefaultCapabilities)
	if err != nil {
		return nil, err
	}
	return engine.Render(ch, vals)
}

func loadChartDir(t *testing.T) *chart.Chart {
	t.Helper()
	ch, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	return ch
}

// packageChart runs `imagetool chart`, what `make chart` runs, into a
// temporary folder and returns that folder.
func packageChart(t *testing.T, version string) string {
	t.Helper()
	tool := filepath.Join(t.TempDir(), "imagetool")
	build := exec.Command("go", "build", "-o", tool, "./image/imagetool")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build imagetool: %v\n%s", err, out)
	}
	dir := t.TempDir()
	cmd := exec.Command(tool, "chart", "-chart", chartDir, "-version", version, "-o", dir)
	cmd.Env = append(os.Environ(), "SOURCE_DATE_EPOCH=1764547200")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("imagetool chart: %v\n%s", err, out)
	}
	if got, want := strings.TrimSpace(string(out)), filepath.Join(dir, "otelcol-ai-"+version+".tgz"); got != want {
		t.Fatalf("imagetool chart printed %q, want %q", got, want)
	}
	return dir
}

const testDigest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// The relabelings withMonitors gives both monitors.
var (
	testRelabeling       = map[string]any{"action": "replace", "sourceLabels": []any{"__meta_kubernetes_pod_node_name"}, "targetLabel": "node"}
	testMetricRelabeling = map[string]any{"action": "labeldrop", "regex": "container_id"}
)

// withMonitors is every new option on: both monitors (the agent's metrics
// on its pod IP, which the PodMonitor needs) with relabelings, a cluster
// name, the image by digest.
func withMonitors() map[string]any {
	monitor := func(interval string, labels map[string]any) map[string]any {
		m := map[string]any{
			"enabled": true, "interval": interval,
			"relabelings": []any{testRelabeling}, "metricRelabelings": []any{testMetricRelabeling},
		}
		if labels != nil {
			m["labels"] = labels
		}
		return m
	}
	return map[string]any{
		"image":       map[string]any{"tag": "9.9.9", "digest": testDigest},
		"clusterName": "gpu-east",
		"agent": map[string]any{
			"metricsListen": "podIP",
			"podMonitor":    monitor("15s", map[string]any{"release": "kube-prometheus"}),
		},
		"gateway": map[string]any{"serviceMonitor": monitor("1m", nil)},
	}
}

// wantRelabelings are withMonitors' relabelings as every endpoint carries
// them: the chart's cluster label first, then the monitor's own.
var wantRelabelings = []relabelConfig{
	{Action: "replace", TargetLabel: "cluster", Replacement: "gpu-east"},
	{Action: "replace", SourceLabels: []string{"__meta_kubernetes_pod_node_name"}, TargetLabel: "node"},
}

func checkRelabelings(t *testing.T, what string, ep monitorEndpoint) {
	t.Helper()
	if !slices.EqualFunc(ep.Relabelings, wantRelabelings, relabelEqual) {
		t.Errorf("%s endpoint %s: relabelings %+v, want %+v", what, ep.Port, ep.Relabelings, wantRelabelings)
	}
	if want := []relabelConfig{{Action: "labeldrop", Regex: "container_id"}}; !slices.EqualFunc(ep.MetricRelabelings, want, relabelEqual) {
		t.Errorf("%s endpoint %s: metricRelabelings %+v, want %+v", what, ep.Port, ep.MetricRelabelings, want)
	}
}

func relabelEqual(a, b relabelConfig) bool {
	return a.Action == b.Action && slices.Equal(a.SourceLabels, b.SourceLabels) && a.Regex == b.Regex &&
		a.TargetLabel == b.TargetLabel && a.Replacement == b.Replacement
}

// TestChartPackage builds the package and index as `make chart` does, lints
// the unpacked package with the new options, renders the package and
// strictly decodes what it renders. About 10 s (most of it building
// imagetool, once per run when cached).
func TestChartPackage(t *testing.T) {
	const version = "1.2.3-4-gabcdef0"
	dir := packageChart(t, version)
	tgz := filepath.Join(dir, "otelcol-ai-"+version+".tgz")

	ch, err := loader.Load(tgz)
	if err != nil {
		t.Fatal(err)
	}
	if ch.Metadata.Version != version || ch.Metadata.AppVersion != version {
		t.Errorf("package version %q appVersion %q, want both %q", ch.Metadata.Version, ch.Metadata.AppVersion, version)
	}
	if ch.Schema == nil {
		t.Error("the package has no values.schema.json")
	}
	// The README travels in the package (`helm show readme`), as it is.
	readme, err := os.ReadFile(filepath.Join(chartDir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if f := packagedFile(ch, "README.md"); f == nil || !bytes.Equal(f.Data, readme) {
		t.Errorf("the package's README.md is missing or not %s/README.md", chartDir)
	}
	// Its default image is the one `make image` tags: the version both take.
	if got, want := renderChart(t, ch, nil).daemonSets[0].Spec.Template.Spec.Containers[0].Image, "otelcol-ai/otelcol-ai:"+version; got != want {
		t.Errorf("the package's default agent image %q, want %q (the tag `make image` gives the index)", got, want)
	}

	data, err := os.ReadFile(filepath.Join(dir, "index.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var index struct {
		APIVersion string `json:"apiVersion"`
		Entries    map[string][]struct {
			Name       string   `json:"name"`
			Version    string   `json:"version"`
			AppVersion string   `json:"appVersion"`
			URLs       []string `json:"urls"`
			Digest     string   `json:"digest"`
			Created    string   `json:"created"`
		} `json:"entries"`
	}
	if err := yaml.Unmarshal(data, &index); err != nil {
		t.Fatalf("index.yaml: %v", err)
	}
	pkg, err := os.ReadFile(tgz)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(pkg)
	entries := index.Entries["otelcol-ai"]
	if index.APIVersion != "v1" || len(index.Entries) != 1 || len(entries) != 1 {
		t.Fatalf("index.yaml: apiVersion %q, entries %v", index.APIVersion, index.Entries)
	}
	e := entries[0]
	if e.Name != "otelcol-ai" || e.Version != version || e.AppVersion != version ||
		len(e.URLs) != 1 || e.URLs[0] != filepath.Base(tgz) || e.Digest != hex.EncodeToString(sum[:]) ||
		e.Created != "2025-12-01T00:00:00Z" {
		t.Errorf("index.yaml entry %+v, want version %s, url %s, digest %x, created from SOURCE_DATE_EPOCH", e, version, filepath.Base(tgz), sum)
	}

	// helm lint on the package, as a user runs it on a downloaded chart.
	unpacked := t.TempDir()
	if err := chartutil.ExpandFile(unpacked, tgz); err != nil {
		t.Fatal(err)
	}
	for _, values := range []map[string]any{nil, withMonitors()} {
		linter := lint.All(filepath.Join(unpacked, "otelcol-ai"), values, namespace, false)
		for _, msg := range linter.Messages {
			if msg.Severity >= support.WarningSev {
				t.Errorf("helm lint of the package (values %v): %s", values, msg)
			}
		}
	}

	r := renderChart(t, ch, withMonitors())
	if len(r.daemonSets) != 1 || len(r.deployments) != 1 {
		t.Fatalf("%d DaemonSets, %d Deployments", len(r.daemonSets), len(r.deployments))
	}
	for _, ds := range r.daemonSets {
		if got := ds.Labels["app.kubernetes.io/version"]; got != version {
			t.Errorf("DaemonSet app.kubernetes.io/version %q, want %q", got, version)
		}
	}
	checkMonitors(t, r)
}

// checkMonitors: the PodMonitor selects the agent pods (not the gateway's)
// on ports they declare; the ServiceMonitor selects the gateway's ClusterIP
// Service (not the headless one), whose telemetry port targets the gateway
// container's.
func checkMonitors(t *testing.T, r renderedPackage) {
	t.Helper()
	if len(r.podMonitors) != 1 || len(r.serviceMonitors) != 1 {
		t.Fatalf("%d PodMonitors, %d ServiceMonitors, want 1 each", len(r.podMonitors), len(r.serviceMonitors))
	}
	pm := r.podMonitors[0]
	if pm.Namespace != namespace || pm.Labels["release"] != "kube-prometheus" ||
		len(pm.Spec.NamespaceSelector.MatchNames) != 1 || pm.Spec.NamespaceSelector.MatchNames[0] != namespace {
		t.Errorf("PodMonitor namespace %q labels %v namespaceSelector %v", pm.Namespace, pm.Labels, pm.Spec.NamespaceSelector)
	}
	agentPod := r.daemonSets[0].Spec.Template
	gatewayPod := r.deployments[0].Spec.Template
	if !selects(pm.Spec.Selector, agentPod.Labels) || selects(pm.Spec.Selector, gatewayPod.Labels) {
		t.Errorf("PodMonitor selector %v: agent pod labels %v, gateway pod labels %v", pm.Spec.Selector.MatchLabels, agentPod.Labels, gatewayPod.Labels)
	}
	ports := map[string]int32{}
	for _, p := range agentPod.Spec.Containers[0].Ports {
		ports[p.Name] = p.ContainerPort
	}
	var scraped []string
	for _, ep := range pm.Spec.PodMetricsEndpoints {
		if _, ok := ports[ep.Port]; !ok || ep.Path != "/metrics" || ep.Interval != "15s" {
			t.Errorf("PodMonitor endpoint %+v: agent ports %v", ep, ports)
		}
		checkRelabelings(t, "PodMonitor", ep)
		scraped = append(scraped, ep.Port)
	}
	sort.Strings(scraped)
	if strings.Join(scraped, ",") != "prometheus,telemetry" {
		t.Errorf("PodMonitor scrapes %v, want prometheus (8889) and telemetry (8888)", scraped)
	}

	sm := r.serviceMonitors[0]
	var picked []corev1.Service
	for _, s := range r.services {
		if selects(sm.Spec.Selector, s.Labels) {
			picked = append(picked, s)
		}
	}
	if len(picked) != 1 || picked[0].Spec.ClusterIP == corev1.ClusterIPNone {
		t.Fatalf("ServiceMonitor selector %v picks %d Services (want the gateway's ClusterIP one)", sm.Spec.Selector.MatchLabels, len(picked))
	}
	gatewayPorts := map[string]bool{}
	for _, p := range gatewayPod.Spec.Containers[0].Ports {
		gatewayPorts[p.Name] = true
	}
	if len(sm.Spec.Endpoints) != 1 || sm.Spec.Endpoints[0].Port != "telemetry" || sm.Spec.Endpoints[0].Interval != "1m" {
		t.Fatalf("ServiceMonitor endpoints %+v", sm.Spec.Endpoints)
	}
	checkRelabelings(t, "ServiceMonitor", sm.Spec.Endpoints[0])
	found := false
	for _, p := range picked[0].Spec.Ports {
		if p.Name == "telemetry" {
			found = p.Port == 8888 && gatewayPorts[p.TargetPort.String()]
		}
	}
	if !found {
		t.Errorf("gateway Service ports %v: no telemetry port 8888 targeting a gateway container port %v", picked[0].Spec.Ports, gatewayPorts)
	}
}

func selects(sel metav1.LabelSelector, labels map[string]string) bool {
	if len(sel.MatchLabels) == 0 || len(sel.MatchExpressions) != 0 {
		return false
	}
	for k, v := range sel.MatchLabels {
		if labels[k] != v {
			return false
		}
	}
	return true
}

func TestMonitorsAreOffByDefault(t *testing.T) {
	r := renderChart(t, loadChartDir(t), nil)
	if len(r.podMonitors) != 0 || len(r.serviceMonitors) != 0 {
		t.Errorf("defaults render %d PodMonitors and %d ServiceMonitors, want none", len(r.podMonitors), len(r.serviceMonitors))
	}
	for _, s := range r.services {
		for _, p := range s.Spec.Ports {
			if p.Name == "telemetry" {
				t.Errorf("Service %s has a telemetry port without gateway.serviceMonitor", s.Name)
			}
		}
	}
	r = renderChart(t, loadChartDir(t), withMonitors())
	checkMonitors(t, r)

	// Without clusterName or relabelings of their own, the monitors carry
	// none.
	r = renderChart(t, loadChartDir(t), map[string]any{
		"agent":   map[string]any{"metricsListen": "podIP", "podMonitor": map[string]any{"enabled": true}},
		"gateway": map[string]any{"serviceMonitor": map[string]any{"enabled": true}},
	})
	for _, ep := range append(slices.Clone(r.podMonitors[0].Spec.PodMetricsEndpoints), r.serviceMonitors[0].Spec.Endpoints...) {
		if len(ep.Relabelings) != 0 || len(ep.MetricRelabelings) != 0 {
			t.Errorf("endpoint %s: relabelings %+v, metricRelabelings %+v, want none", ep.Port, ep.Relabelings, ep.MetricRelabelings)
		}
	}

	// A PodMonitor cannot scrape metrics on the agent's loopback: the chart
	// refuses the combination, naming the value that fixes it.
	_, err := renderFiles(loadChartDir(t), map[string]any{"agent": map[string]any{"podMonitor": map[string]any{"enabled": true}}})
	if err == nil || !strings.Contains(err.Error(), "agent.metricsListen: podIP") {
		t.Errorf("podMonitor with metrics on loopback: err %v, want one naming agent.metricsListen: podIP", err)
	}
}

func TestImageDigestWinsOverTag(t *testing.T) {
	ch := loadChartDir(t)
	for _, tc := range []struct {
		image map[string]any
		want  string
	}{
		{nil, "otelcol-ai/otelcol-ai:" + ch.Metadata.AppVersion},
		{map[string]any{"tag": "9.9.9"}, "otelcol-ai/otelcol-ai:9.9.9"},
		{map[string]any{"tag": "9.9.9", "digest": testDigest}, "otelcol-ai/otelcol-ai@" + testDigest},
		{map[string]any{"repository": "registry.example/otelcol-ai", "digest": testDigest}, "registry.example/otelcol-ai@" + testDigest},
	} {
		var values map[string]any
		if tc.image != nil {
			values = map[string]any{"image": tc.image}
		}
		r := renderChart(t, ch, values)
		var images []string
		for _, ds := range r.daemonSets {
			images = append(images, ds.Spec.Template.Spec.Containers[0].Image)
		}
		for _, d := range r.deployments {
			images = append(images, d.Spec.Template.Spec.Containers[0].Image)
		}
		if len(images) != 2 {
			t.Fatalf("image %v: %d workloads", tc.image, len(images))
		}
		for _, got := range images {
			if got != tc.want {
				t.Errorf("image values %v: workload image %q, want %q", tc.image, got, tc.want)
			}
		}
	}
}

// TestValuesSchemaRejectsWrongTypes: a value of the wrong type or form fails
// rendering (helm install/template) and helm lint, naming the key; the
// defaults and every new option pass.
func TestValuesSchemaRejectsWrongTypes(t *testing.T) {
	ch := loadChartDir(t)
	if ch.Schema == nil {
		t.Fatal("the chart has no values.schema.json")
	}
	if _, err := renderFiles(ch, withMonitors()); err != nil {
		t.Fatalf("the new options fail the schema: %v", err)
	}
	for _, tc := range []struct {
		values map[string]any
		key    string
	}{
		{map[string]any{"agent": map[string]any{"goMemLimitPercent": "eighty"}}, "goMemLimitPercent"},
		{map[string]any{"agent": map[string]any{"goMemLimitPercent": 150}}, "goMemLimitPercent"},
		{map[string]any{"agent": map[string]any{"enabled": "yes"}}, "enabled"},
		{map[string]any{"agent": map[string]any{"capabilities": "BPF"}}, "capabilities"},
		{map[string]any{"agent": map[string]any{"capabilities": []any{"CAP_BPF", "bpf"}}}, "capabilities"},
		{map[string]any{"agent": map[string]any{"hostPorts": map[string]any{"otlpGrpc": 70000}}}, "otlpGrpc"},
		{map[string]any{"agent": map[string]any{"seccompProfile": map[string]any{"type": "Default"}}}, "type"},
		{map[string]any{"agent": map[string]any{"podMonitor": map[string]any{"enabled": true, "interval": "often"}}}, "interval"},
		{map[string]any{"agent": map[string]any{"podMonitor": map[string]any{"enable": true}}}, "enable"},
		{map[string]any{"gateway": map[string]any{"replicas": "two"}}, "replicas"},
		{map[string]any{"gateway": map[string]any{"serviceMonitor": map[string]any{"labels": []any{"a"}}}}, "labels"},
		{map[string]any{"image": map[string]any{"digest": "sha256:abc"}}, "digest"},
		{map[string]any{"image": map[string]any{"digest": 12}}, "digest"},
		{map[string]any{"image": map[string]any{"pullPolicy": "Sometimes"}}, "pullPolicy"},
		{map[string]any{"image": map[string]any{"tags": "1.0"}}, "tags"},
		{map[string]any{"exportProcessCommandLine": "true"}, "exportProcessCommandLine"},
		{map[string]any{"agent": map[string]any{"metricsListen": "0.0.0.0"}}, "metricsListen"},
		{map[string]any{"agent": map[string]any{"podMonitor": map[string]any{"relabelings": map[string]any{}}}}, "relabelings"},
		{map[string]any{"agent": map[string]any{"extraVolumeMounts": []any{map[string]any{"name": "x"}}}}, "mountPath"},
		{map[string]any{"gateway": map[string]any{"extraVolumes": []any{map[string]any{"emptyDir": map[string]any{}}}}}, "name"},
		{map[string]any{"networkPolicy": map[string]any{"scrapeForm": []any{}}}, "scrapeForm"},
		{map[string]any{"alerts": map[string]any{"prometheusRule": map[string]any{"alerts": map[string]any{"OtelcolAIGPUMemoryLeak": false}}}}, "OtelcolAIGPUMemoryLeak"},
		{map[string]any{"alerts": map[string]any{"prometheusRule": map[string]any{"runbookBaseURL": "RUNBOOKS.md"}}}, "runbookBaseURL"},
	} {
		_, err := renderFiles(ch, tc.values)
		if err == nil {
			t.Errorf("values %v render; the schema should refuse them", tc.values)
			continue
		}
		if !strings.Contains(err.Error(), tc.key) {
			t.Errorf("values %v: error does not name %q: %v", tc.values, tc.key, err)
		}
		linter := lint.All(chartDir, tc.values, namespace, false)
		failed := false
		for _, msg := range linter.Messages {
			failed = failed || msg.Severity >= support.ErrorSev
		}
		if !failed {
			t.Errorf("helm lint passes values %v", tc.values)
		}
	}
}

// TestImageTagIsTheChartsAppVersion: the chart's default image tag is its
// appVersion, which `make chart` sets to $(VERSION), the tag `make image`
// gives the image index; so a packaged chart pulls the image built from the
// same commit. On a release commit (HEAD tagged vX.Y.Z) the chart in the
// tree says X.Y.Z too, so that installing it from the checkout agrees.
func TestImageTagIsTheChartsAppVersion(t *testing.T) {
	makefile, err := os.ReadFile("../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	imageTag := regexp.MustCompile(`(?m)^\t\$\(IMAGETOOL\) index .*-tag \$\(VERSION\) `)
	chartVersion := regexp.MustCompile(`(?m)^\t\$\(IMAGETOOL\) chart -chart distribution/helm/otelcol-ai -version \$\(VERSION\) `)
	if !imageTag.Match(makefile) || !chartVersion.Match(makefile) {
		t.Errorf("Makefile: the image index tag and the chart version are not both $(VERSION) (%v, %v)", imageTag.Match(makefile), chartVersion.Match(makefile))
	}

	ch := loadChartDir(t)
	if got, want := renderChart(t, ch, nil).daemonSets[0].Spec.Template.Spec.Containers[0].Image, "otelcol-ai/otelcol-ai:"+ch.Metadata.AppVersion; got != want {
		t.Errorf("default agent image %q, want %q", got, want)
	}
	out, err := exec.Command("git", "describe", "--tags", "--exact-match", "--match", "v[0-9]*", "HEAD").Output()
	if err != nil {
		t.Logf("HEAD is no release tag (%v): the tree's chart says %s, `make chart` stamps the build's version", err, ch.Metadata.AppVersion)
		return
	}
	release := strings.TrimPrefix(strings.TrimSpace(string(out)), "v")
	if ch.Metadata.AppVersion != release || ch.Metadata.Version != release {
		t.Errorf("HEAD is tagged v%s but Chart.yaml says version %s appVersion %s (CHANGELOG.md: cutting a release)", release, ch.Metadata.Version, ch.Metadata.AppVersion)
	}
}
