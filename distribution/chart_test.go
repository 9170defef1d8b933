package distribution_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
	"helm.sh/helm/v3/pkg/releaseutil"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"

	"github.com/otelcol-ai/otelcol-ai/internal/e2etest"
)

var update = flag.Bool("update", false, "rewrite kubernetes/otelcol-ai.yaml from the chart")

const (
	chartDir      = "helm/otelcol-ai"
	manifestsFile = "kubernetes/otelcol-ai.yaml"
	releaseName   = "otelcol-ai"
	namespace     = "otelcol-ai"
)

// rendered is the chart's output: every manifest, strictly decoded.
type rendered struct {
	daemonSets  []appsv1.DaemonSet
	deployments []appsv1.Deployment
	services    []corev1.Service
	configMaps  []corev1.ConfigMap
	accounts    []corev1.ServiceAccount
	roles       []rbacv1.ClusterRole
	bindings    []rbacv1.ClusterRoleBinding
	// text is the manifests in a stable order, as kubectl apply takes them.
	text string
}

// render renders the chart with the Helm SDK and decodes every manifest into
// its Kubernetes API type, failing on unknown fields and unknown kinds.
func render(t *testing.T, values map[string]any) rendered {
	t.Helper()
	ch, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	vals, err := chartutil.ToRenderValues(ch, values, chartutil.ReleaseOptions{
		Name: releaseName, Namespace: namespace, IsInstall: true, Revision: 1,
	}, chartutil.DefaultCapabilities)
	if err != nil {
		t.Fatal(err)
	}
	files, err := engine.Render(ch, vals)
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	names := make([]string, 0, len(files))
	for name := range files {
		if strings.HasSuffix(name, ".yaml") {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	var out rendered
	var text strings.Builder
	for _, name := range names {
		docs := releaseutil.SplitManifests(files[name])
		keys := make([]string, 0, len(docs))
		for k := range docs {
			keys = append(keys, k)
		}
		sort.Sort(releaseutil.BySplitManifestsOrder(keys))
		for _, k := range keys {
			doc := strings.TrimSpace(docs[k])
			if doc == "" {
				continue
			}
			fmt.Fprintf(&text, "---\n# Source: %s\n%s\n", strings.TrimPrefix(name, "otelcol-ai/"), doc)
			decodeStrict(t, name, doc, &out)
		}
	}
	out.text = text.String()
	return out
}

// renderNotes renders the chart with values and returns NOTES.txt, what
// helm install prints.
func renderNotes(t *testing.T, values map[string]any) string {
	t.Helper()
	ch, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	vals, err := chartutil.ToRenderValues(ch, values, chartutil.ReleaseOptions{
		Name: releaseName, Namespace: namespace, IsInstall: true, Revision: 1,
	}, chartutil.DefaultCapabilities)
	if err != nil {
		t.Fatal(err)
	}
	files, err := engine.Render(ch, vals)
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	notes, ok := files["otelcol-ai/templates/NOTES.txt"]
	if !ok {
		t.Fatal("no NOTES.txt rendered")
	}
	return notes
}

func decodeStrict(t *testing.T, name, doc string, out *rendered) {
	t.Helper()
	js, err := yaml.YAMLToJSONStrict([]byte(doc))
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	var meta struct{ APIVersion, Kind string }
	if err := json.Unmarshal(js, &meta); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	strict := func(v any) {
		dec := json.NewDecoder(bytes.NewReader(js))
		dec.DisallowUnknownFields()
		if err := dec.Decode(v); err != nil {
			t.Fatalf("%s: %s %s: %v", name, meta.APIVersion, meta.Kind, err)
		}
	}
	switch meta.APIVersion + "/" + meta.Kind {
	case "apps/v1/DaemonSet":
		var v appsv1.DaemonSet
		strict(&v)
		out.daemonSets = append(out.daemonSets, v)
	case "apps/v1/Deployment":
		var v appsv1.Deployment
		strict(&v)
		out.deployments = append(out.deployments, v)
	case "v1/Service":
		var v corev1.Service
		strict(&v)
		out.services = append(out.services, v)
	case "v1/ConfigMap":
		var v corev1.ConfigMap
		strict(&v)
		out.configMaps = append(out.configMaps, v)
	case "v1/ServiceAccount":
		var v corev1.ServiceAccount
		strict(&v)
		out.accounts = append(out.accounts, v)
	case "rbac.authorization.k8s.io/v1/ClusterRole":
		var v rbacv1.ClusterRole
		strict(&v)
		out.roles = append(out.roles, v)
	case "rbac.authorization.k8s.io/v1/ClusterRoleBinding":
		var v rbacv1.ClusterRoleBinding
		strict(&v)
		out.bindings = append(out.bindings, v)
	default:
		t.Fatalf("%s: unexpected kind %s %s", name, meta.APIVersion, meta.Kind)
	}
}

func TestChartLints(t *testing.T) {
	linter := lint.All(chartDir, nil, namespace, false)
	for _, msg := range linter.Messages {
		if msg.Severity >= support.WarningSev {
			t.Errorf("helm lint: %s", msg)
		}
	}
}

func TestDaemonSetEssentials(t *testing.T) {
	r := render(t, nil)
	if len(r.daemonSets) != 1 {
		t.Fatalf("%d DaemonSets, want 1", len(r.daemonSets))
	}
	ds := r.daemonSets[0]
	pod := ds.Spec.Template.Spec
	if !pod.HostPID {
		t.Error("hostPID is off: pids from NVML and /proc would not match the host's")
	}
	if pod.NodeSelector["nvidia.com/gpu.present"] != "true" {
		t.Errorf("nodeSelector %v does not select GPU nodes", pod.NodeSelector)
	}
	if !slices.ContainsFunc(pod.Tolerations, func(tl corev1.Toleration) bool {
		return tl.Key == "nvidia.com/gpu" && tl.Operator == corev1.TolerationOpExists
	}) {
		t.Errorf("no toleration for nvidia.com/gpu taints: %v", pod.Tolerations)
	}
	if len(pod.Containers) != 1 {
		t.Fatalf("%d containers", len(pod.Containers))
	}
	// Its securityContext: TestAgentCapabilitiesAreTheDocumentedOnes.
	c := pod.Containers[0]

	// The kubelet's pod-resources folder is mounted where the nvml
	// receiver's default endpoint looks (TestHostPathsAreTheNeededOnesReadOnly
	// checks every host mount).
	mounted := false
	for _, m := range c.VolumeMounts {
		for _, v := range pod.Volumes {
			if v.Name == m.Name && v.HostPath != nil && v.HostPath.Path == "/var/lib/kubelet/pod-resources" {
				mounted = m.MountPath == "/var/lib/kubelet/pod-resources"
			}
		}
	}
	if !mounted {
		t.Error("the kubelet's pod-resources folder is not mounted at /var/lib/kubelet/pod-resources")
	}

	env := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		env[e.Name] = e
	}
	if e := env["K8S_NODE_NAME"]; e.ValueFrom == nil || e.ValueFrom.FieldRef == nil || e.ValueFrom.FieldRef.FieldPath != "spec.nodeName" {
		t.Errorf("K8S_NODE_NAME not from the downward API: %+v", e)
	}
	// 80% of the 512Mi limit.
	if got := env["GOMEMLIMIT"].Value; got != "409MiB" {
		t.Errorf("GOMEMLIMIT = %q, want 409MiB", got)
	}

	// Probes reach the health_check extension on the pod IP.
	ports := map[string]int32{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	if ports["health"] != 13133 {
		t.Errorf("health port %d", ports["health"])
	}
	if !strings.HasSuffix(env["OTELCOL_AI_HEALTH_ENDPOINT"].Value, ":13133") {
		t.Errorf("health_check endpoint %q does not listen where the probes look", env["OTELCOL_AI_HEALTH_ENDPOINT"].Value)
	}
	for name, probe := range map[string]*corev1.Probe{"liveness": c.LivenessProbe, "readiness": c.ReadinessProbe} {
		if probe == nil || probe.HTTPGet == nil || probe.HTTPGet.Port.String() != "health" {
			t.Errorf("%s probe does not GET the health port: %+v", name, probe)
		}
	}
	if !slices.Contains(c.Args, "--config=embedded:default") {
		t.Errorf("agent args %v do not start from the embedded default", c.Args)
	}
}

func TestGoMemLimitFollowsTheLimit(t *testing.T) {
	tests := []struct {
		limit string
		want  string
	}{
		{"1Gi", "819MiB"},
		{"2000Mi", "1600MiB"},
		{"", ""},
	}
	for _, tt := range tests {
		t.Run(tt.limit, func(t *testing.T) {
			// A null value removes the chart's default limit.
			limits := map[string]any{"memory": nil}
			if tt.limit != "" {
				limits["memory"] = tt.limit
			}
			r := render(t, map[string]any{"agent": map[string]any{"resources": map[string]any{"limits": limits}}})
			got := ""
			for _, e := range r.daemonSets[0].Spec.Template.Spec.Containers[0].Env {
				if e.Name == "GOMEMLIMIT" {
					got = e.Value
				}
			}
			if got != tt.want {
				t.Errorf("GOMEMLIMIT = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestGatewayTier(t *testing.T) {
	r := render(t, nil)
	if len(r.deployments) != 1 || *r.deployments[0].Spec.Replicas != 2 {
		t.Fatalf("want one gateway Deployment with 2 replicas, got %d", len(r.deployments))
	}
	var headless *corev1.Service
	for i := range r.services {
		if r.services[i].Spec.ClusterIP == corev1.ClusterIPNone {
			headless = &r.services[i]
		}
	}
	if headless == nil {
		t.Fatal("no headless Service for the loadbalancing exporter's DNS resolver")
	}
	node := agentOverlay(t, r)
	var cfg struct {
		Exporters map[string]struct {
			RoutingKey string `json:"routing_key"`
			Resolver   struct {
				DNS struct {
					Hostname string `json:"hostname"`
					Port     string `json:"port"`
				} `json:"dns"`
			} `json:"resolver"`
		} `json:"exporters"`
		Service struct {
			Pipelines map[string]struct {
				Exporters []string `json:"exporters"`
			} `json:"pipelines"`
		} `json:"service"`
	}
	if err := yaml.Unmarshal([]byte(node), &cfg); err != nil {
		t.Fatal(err)
	}
	lb := cfg.Exporters["load_balancing"]
	if lb.RoutingKey != "traceID" {
		t.Errorf("routing_key %q, want traceID", lb.RoutingKey)
	}
	wantHost := headless.Name + "." + namespace + ".svc.cluster.local"
	if lb.Resolver.DNS.Hostname != wantHost || lb.Resolver.DNS.Port != "4317" {
		t.Errorf("resolver %s:%s, want %s:4317", lb.Resolver.DNS.Hostname, lb.Resolver.DNS.Port, wantHost)
	}
	if !slices.Contains(cfg.Service.Pipelines["traces"].Exporters, "load_balancing") {
		t.Errorf("traces pipeline exporters %v: traces do not reach the gateway", cfg.Service.Pipelines["traces"].Exporters)
	}

	// Without the gateway, no Deployment and no loadbalancing exporter.
	r = render(t, map[string]any{"gateway": map[string]any{"enabled": false}})
	if len(r.deployments) != 0 || len(r.services) != 0 {
		t.Errorf("gateway disabled but %d Deployments, %d Services rendered", len(r.deployments), len(r.services))
	}
	if strings.Contains(agentOverlay(t, r), "load_balancing") {
		t.Error("gateway disabled but agents still route to it")
	}
}

func agentOverlay(t *testing.T, r rendered) string {
	t.Helper()
	for _, cm := range r.configMaps {
		if strings.HasSuffix(cm.Name, "-agent") {
			return cm.Data["chart.yaml"]
		}
	}
	t.Fatal("no agent ConfigMap")
	return ""
}

// TestRenderedConfigsValidate runs the binary's validate on what the pods
// run: their --config arguments, the chart's ConfigMap files written out,
// under the container's environment.
func TestRenderedConfigsValidate(t *testing.T) {
	for _, values := range []map[string]any{
		nil,
		{"gateway": map[string]any{"enabled": false}},
		{"exportProcessCommandLine": true},
		{"agent": map[string]any{"k8sAttributes": map[string]any{"enabled": false}}},
	} {
		for _, w := range podConfigs(t, render(t, values)) {
			// The container's environment: k8s_attributes' node filter
			// fails validation when its variable is unset.
			if res := e2etest.Run(t, w.env, validateArgs(t, w)...); res.ExitCode != 0 {
				t.Errorf("%s (values %v): validate failed:\n%s%s", w.component, values, res.Stdout, res.Stderr)
			}
		}
	}
}

// validateArgs is the binary's validate command for w, its ConfigMap files
// written to a temporary folder.
func validateArgs(t *testing.T, w podConfig) []string {
	t.Helper()
	dir := t.TempDir()
	args := []string{"validate"}
	for _, c := range w.configs {
		uri := c.uri
		if c.file != "" {
			uri = filepath.Join(dir, w.component+"-"+c.file)
			if err := os.WriteFile(uri, []byte(c.data), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		args = append(args, "--config", uri)
	}
	return args
}

// podConfig is one workload's collector configuration as its container
// runs it: the --config arguments in order.
type podConfig struct {
	component string
	configs   []configArg
	// env is the container's environment as the kubelet would set it
	// (containerEnv).
	env map[string]string
}

// configArg is one --config argument: an embedded: URI, or a file from the
// workload's ConfigMap (its name there and its content).
type configArg struct {
	uri        string
	file, data string
}

// podConfigs resolves the --config arguments of every collector container
// the chart renders against the ConfigMap mounted at /etc/otelcol-ai.
func podConfigs(t *testing.T, r rendered) []podConfig {
	t.Helper()
	cms := map[string]corev1.ConfigMap{}
	for _, cm := range r.configMaps {
		cms[cm.Name] = cm
	}
	var pods []corev1.PodTemplateSpec
	for _, ds := range r.daemonSets {
		pods = append(pods, ds.Spec.Template)
	}
	for _, d := range r.deployments {
		pods = append(pods, d.Spec.Template)
	}
	var out []podConfig
	for _, pod := range pods {
		c := pod.Spec.Containers[0]
		volumes := map[string]corev1.Volume{}
		for _, v := range pod.Spec.Volumes {
			volumes[v.Name] = v
		}
		var cm corev1.ConfigMap
		for _, m := range c.VolumeMounts {
			if v := volumes[m.Name]; m.MountPath == "/etc/otelcol-ai" && v.ConfigMap != nil {
				cm = cms[v.ConfigMap.Name]
			}
		}
		w := podConfig{component: pod.Labels["app.kubernetes.io/component"], env: containerEnv(t, c)}
		for _, arg := range c.Args {
			uri, ok := strings.CutPrefix(arg, "--config=")
			if !ok {
				continue
			}
			if file, ok := strings.CutPrefix(uri, "/etc/otelcol-ai/"); ok {
				data, found := cm.Data[file]
				if !found {
					t.Fatalf("%s: --config %s is not in ConfigMap %q", w.component, uri, cm.Name)
				}
				w.configs = append(w.configs, configArg{uri: uri, file: file, data: data})
				continue
			}
			w.configs = append(w.configs, configArg{uri: uri})
		}
		out = append(out, w)
	}
	return out
}

// downwardValues stands in for the downward API's fields in containerEnv.
var downwardValues = map[string]string{
	"spec.nodeName":      "gpu-node-0",
	"metadata.name":      "otelcol-ai-agent-x7k2p",
	"metadata.namespace": namespace,
	"status.podIP":       "10.42.0.7",
}

// envReference is a $(VAR) reference in an env value, which the kubelet
// expands from the variables defined before it.
var envReference = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

// containerEnv is the environment the kubelet gives c: fieldRefs resolved
// from downwardValues, $(VAR) references to earlier variables expanded.
func containerEnv(t *testing.T, c corev1.Container) map[string]string {
	t.Helper()
	env := map[string]string{}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			env[e.Name] = envReference.ReplaceAllStringFunc(e.Value, func(ref string) string {
				if v, ok := env[ref[2:len(ref)-1]]; ok {
					return v
				}
				return ref
			})
		case e.ValueFrom.FieldRef != nil:
			v, ok := downwardValues[e.ValueFrom.FieldRef.FieldPath]
			if !ok {
				t.Fatalf("container %s: env %s from field %s, which the test does not stand in for", c.Name, e.Name, e.ValueFrom.FieldRef.FieldPath)
			}
			env[e.Name] = v
		default:
			t.Fatalf("container %s: env %s from %+v, which the test does not resolve", c.Name, e.Name, e.ValueFrom)
		}
	}
	return env
}

// TestManifestsMatchChart keeps the plain manifests in kubernetes/ equal to
// the chart rendered with its defaults; -update rewrites them.
func TestManifestsMatchChart(t *testing.T) {
	r := render(t, nil)
	want := "# otelcol-ai for kubectl apply: the Helm chart in distribution/helm/otelcol-ai rendered with\n" +
		"# its default values (release \"otelcol-ai\", namespace \"otelcol-ai\"). Regenerate with\n" +
		"#   go test ./distribution -run TestManifestsMatchChart -update\n" + r.text
	if *update {
		if err := os.WriteFile(manifestsFile, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(manifestsFile)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Errorf("%s differs from the chart's rendering: run go test ./distribution -run TestManifestsMatchChart -update", manifestsFile)
	}
}
