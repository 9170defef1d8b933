package distribution_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
	"helm.sh/helm/v3/pkg/releaseutil"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"go.opentelemetry.io/collector/confmap"

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
	policies    []networkingv1.NetworkPolicy
	// text is the manifests in a stable order, as kubectl apply takes them.
	text string
}

// render renders the chart folder with the Helm SDK and decodes every
// manifest into its Kubernetes API type, failing on unknown fields and
// unknown kinds.
func render(t *testing.T, values map[string]any) rendered {
	t.Helper()
	return renderChart(t, loadChartDir(t), values).rendered
}

// renderDir renders the chart folder with values and returns every file it
// renders, by name.
func renderDir(t *testing.T, values map[string]any) map[string]string {
	t.Helper()
	files, err := renderFiles(loadChartDir(t), values)
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	return files
}

// renderNotes renders the chart with values and returns NOTES.txt, what
// helm install prints.
func renderNotes(t *testing.T, values map[string]any) string {
	t.Helper()
	notes, ok := renderDir(t, values)["otelcol-ai/templates/NOTES.txt"]
	if !ok {
		t.Fatal("no NOTES.txt rendered")
	}
	return notes
}

// manifests splits a rendered file into its manifests, in the order
// kubectl apply takes them, leaving out empty ones.
func manifests(file string) []string {
	docs := releaseutil.SplitManifests(file)
	keys := make([]string, 0, len(docs))
	for k := range docs {
		keys = append(keys, k)
	}
	sort.Sort(releaseutil.BySplitManifestsOrder(keys))
	var out []string
	for _, k := range keys {
		if doc := strings.TrimSpace(docs[k]); doc != "" {
			out = append(out, doc)
		}
	}
	return out
}

// decodeManifest returns a manifest's apiVersion/kind and a function that
// decodes it into a value, failing on unknown fields.
func decodeManifest(t *testing.T, name, doc string) (string, func(any)) {
	t.Helper()
	js, err := yaml.YAMLToJSONStrict([]byte(doc))
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	var meta struct{ APIVersion, Kind string }
	if err := json.Unmarshal(js, &meta); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return meta.APIVersion + "/" + meta.Kind, func(v any) {
		dec := json.NewDecoder(bytes.NewReader(js))
		dec.DisallowUnknownFields()
		if err := dec.Decode(v); err != nil {
			t.Fatalf("%s: %s %s: %v", name, meta.APIVersion, meta.Kind, err)
		}
	}
}

// appendDecoded decodes a manifest with strict and appends it to list.
func appendDecoded[T any](strict func(any), list *[]T) {
	var v T
	strict(&v)
	*list = append(*list, v)
}

// decodeStrict decodes a manifest of a Kubernetes API kind into out,
// failing on any other kind.
func decodeStrict(t *testing.T, name, kind string, strict func(any), out *rendered) {
	t.Helper()
	switch kind {
	case "apps/v1/DaemonSet":
		appendDecoded(strict, &out.daemonSets)
	case "apps/v1/Deployment":
		appendDecoded(strict, &out.deployments)
	case "v1/Service":
		appendDecoded(strict, &out.services)
	case "v1/ConfigMap":
		appendDecoded(strict, &out.configMaps)
	case "v1/ServiceAccount":
		appendDecoded(strict, &out.accounts)
	case "rbac.authorization.k8s.io/v1/ClusterRole":
		appendDecoded(strict, &out.roles)
	case "rbac.authorization.k8s.io/v1/ClusterRoleBinding":
		appendDecoded(strict, &out.bindings)
	case "networking.k8s.io/v1/NetworkPolicy":
		appendDecoded(strict, &out.policies)
	default:
		t.Fatalf("%s: unexpected kind %s", name, kind)
	}
}

func TestChartLints(t *testing.T) {
	for _, values := range []map[string]any{
		nil,
		withMonitors(),
		{"agent": map[string]any{
			"seccompProfile": map[string]any{"type": "Localhost"},
			"nodeSelector":   map[string]any{"nvidia.com/gpu.present": "true"},
			"jfrAttach":      map[string]any{"enabled": false},
		}},
		{"networkPolicy": map[string]any{"enabled": false}, "agent": map[string]any{"metricsListen": "podIP"}},
		{"alerts": map[string]any{"prometheusRule": map[string]any{"enabled": true, "runbookBaseURL": "", "alerts": map[string]any{"OtelcolAIJVMsWithoutJFR": false}}}, "dashboards": map[string]any{"enabled": true}},
	} {
		linter := lint.All(chartDir, values, namespace, false)
		for _, msg := range linter.Messages {
			if msg.Severity >= support.WarningSev {
				t.Errorf("helm lint (values %v): %s", values, msg)
			}
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
	// No node label marks a GPU node everywhere (GPU Feature Discovery's
	// nvidia.com/gpu.present exists only where it runs): by default the
	// agent selects none (TestNodeSelectorIsOptInAndWarned).
	if len(pod.NodeSelector) != 0 {
		t.Errorf("nodeSelector %v by default: a label the nodes lack leaves the DaemonSet at 0 pods", pod.NodeSelector)
	}
	if pod.HostNetwork {
		t.Error("hostNetwork: the agent's loopback would be the node's (TestEndpointsListenWhereIntended)")
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

	// Probes reach the health_check extension on the pod IP
	// (TestEndpointsListenWhereIntended).
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
		{"clusterName": "gpu-east", "agent": map[string]any{"metricsListen": "podIP"}},
		{"clusterName": "gpu-east", "agent": map[string]any{"k8sAttributes": map[string]any{"enabled": false}}},
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

// privilegedNamespace is the release namespace as the plain manifests
// create it: Pod Security Admission's privileged level, which the agent
// needs (helm install users label it themselves, as the NOTES say).
const privilegedNamespace = `apiVersion: v1
kind: Namespace
metadata:
  name: ` + namespace + `
  labels:
    pod-security.kubernetes.io/enforce: privileged`

// TestManifestsMatchChart keeps the plain manifests in kubernetes/ equal to
// the chart rendered with its defaults; -update rewrites them.
func TestManifestsMatchChart(t *testing.T) {
	r := render(t, nil)
	want := "# otelcol-ai for kubectl apply: the Helm chart in distribution/helm/otelcol-ai rendered with\n" +
		"# its default values (release \"otelcol-ai\", namespace \"otelcol-ai\"), after the namespace\n" +
		"# itself, labelled so that Pod Security Admission admits the agent (hostPID, host ports,\n" +
		"# host paths, added capabilities). Regenerate with\n" +
		"#   go test ./distribution -run TestManifestsMatchChart -update\n" +
		"---\n" + privilegedNamespace + "\n" + r.text
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

// TestNodeSelectorIsOptInAndWarned: the NOTES warn, naming the label and the
// command that lists the nodes carrying it, whenever agent.nodeSelector is
// set (a label no node has leaves the DaemonSet at 0/0 with no error), and
// always say how to let Pod Security Admission admit the agent.
func TestNodeSelectorIsOptInAndWarned(t *testing.T) {
	psa := "kubectl label namespace " + namespace + " pod-security.kubernetes.io/enforce=privileged"
	notes := renderNotes(t, nil)
	if strings.Contains(notes, "WARNING: agent.nodeSelector") {
		t.Errorf("NOTES warn of a node selector that is not set:\n%s", notes)
	}
	if !strings.Contains(notes, "every node its tolerations admit") || !strings.Contains(notes, psa) {
		t.Errorf("NOTES with no node selector do not say where the agent runs or %q:\n%s", psa, notes)
	}

	values := map[string]any{"agent": map[string]any{"nodeSelector": map[string]any{"nvidia.com/gpu.present": "true"}}}
	if sel := render(t, values).daemonSets[0].Spec.Template.Spec.NodeSelector; sel["nvidia.com/gpu.present"] != "true" || len(sel) != 1 {
		t.Errorf("nodeSelector %v, want the one set", sel)
	}
	notes = renderNotes(t, values)
	for _, want := range []string{
		"WARNING: agent.nodeSelector is set: the agent runs only on nodes labelled nvidia.com/gpu.present=true",
		"stays at 0 pods",
		"kubectl get nodes -l nvidia.com/gpu.present=true",
		psa,
	} {
		if !strings.Contains(notes, want) {
			t.Errorf("NOTES with a node selector do not say %q:\n%s", want, notes)
		}
	}
	if notes := renderNotes(t, map[string]any{"agent": map[string]any{"enabled": false}}); strings.Contains(notes, "pod-security") {
		t.Errorf("NOTES without the agent ask for a privileged namespace:\n%s", notes)
	}
}

// listener is one endpoint the collector listens on, as its effective
// configuration says after the container's environment is applied.
type listener struct {
	what, key string
}

// envDefault is ${env:NAME} or ${env:NAME:-default} in a config value.
var envDefault = regexp.MustCompile(`\$\{env:([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}`)

// expandEnv resolves ${env:...} in v from env as the collector does.
func expandEnv(v string, env map[string]string) string {
	return envDefault.ReplaceAllStringFunc(v, func(ref string) string {
		m := envDefault.FindStringSubmatch(ref)
		if val, ok := env[m[1]]; ok {
			return val
		}
		return m[2]
	})
}

// podListeners returns where each of component's listeners binds: the
// effective configuration (embedded, chart and user files merged) under
// the container's environment.
func podListeners(t *testing.T, r rendered, component string) map[string]string {
	t.Helper()
	for _, w := range podConfigs(t, r) {
		if w.component != component {
			continue
		}
		conf := effectiveConfig(t, w.configs)
		out := map[string]string{}
		for _, l := range []listener{
			{"otlp-grpc", "receivers::otlp::protocols::grpc::endpoint"},
			{"otlp-http", "receivers::otlp::protocols::http::endpoint"},
			{"prometheus", "exporters::prometheus::endpoint"},
			{"health", "extensions::health_check::endpoint"},
			{"timeline", "extensions::timeline::endpoint"},
		} {
			if v, ok := conf.Get(l.key).(string); ok {
				out[l.what] = expandEnv(v, w.env)
			}
		}
		var readers []struct {
			Pull struct {
				Exporter struct {
					Prometheus struct {
						Host string `mapstructure:"host"`
						Port string `mapstructure:"port"`
					} `mapstructure:"prometheus"`
				} `mapstructure:"exporter"`
			} `mapstructure:"pull"`
		}
		if sub, err := conf.Sub("service::telemetry::metrics"); err == nil {
			var m struct {
				Readers any `mapstructure:"readers"`
			}
			_ = sub.Unmarshal(&m, confmap.WithIgnoreUnused())
			raw, _ := json.Marshal(m.Readers)
			_ = json.Unmarshal(raw, &readers)
		}
		for _, rd := range readers {
			p := rd.Pull.Exporter.Prometheus
			out["telemetry"] = expandEnv(p.Host, w.env) + ":" + expandEnv(p.Port, w.env)
		}
		// Every extension or receiver endpoint is one of the above: a new
		// listener must be placed on purpose.
		for _, section := range []string{"extensions", "receivers"} {
			sub, err := conf.Sub(section)
			if err != nil {
				continue
			}
			for key, v := range sub.ToStringMap() {
				for _, ep := range findEndpoints(key, v) {
					// unix:// endpoints are clients (nvml's pod-resources socket).
					if ep = expandEnv(ep, w.env); !strings.HasPrefix(ep, "unix://") && !slices.Contains(slices.Collect(maps.Values(out)), ep) {
						t.Errorf("%s: %s::%s listens on %s, which the test does not place", component, section, key, ep)
					}
				}
			}
		}
		return out
	}
	t.Fatalf("no %s pod rendered", component)
	return nil
}

// findEndpoints returns the values of every "endpoint" key under v.
func findEndpoints(key string, v any) []string {
	switch v := v.(type) {
	case map[string]any:
		var out []string
		for k, sub := range v {
			out = append(out, findEndpoints(k, sub)...)
		}
		return out
	case string:
		if key == "endpoint" {
			return []string{v}
		}
	}
	return nil
}

// TestEndpointsListenWhereIntended: tenants' pods reach the node's IP and
// every pod IP, so the agent listens beyond its own loopback only where it
// must: OTLP on every address (the host ports forward to it), health on the
// pod IP (the kubelet's probes come from the node), and its Prometheus
// endpoints (container ids, pod UIDs and host pids as labels) and its own
// telemetry on the pod's loopback unless agent.metricsListen is podIP; the
// timeline page always on loopback. The agent has no hostNetwork, so its
// loopback is its pod's alone. The gateway's own metrics likewise follow
// its ServiceMonitor.
func TestEndpointsListenWhereIntended(t *testing.T) {
	podIP := downwardValues["status.podIP"]
	for _, tc := range []struct {
		name   string
		values map[string]any
		agent  map[string]string
		ports  []string // the agent container's named ports
	}{
		{"default: metrics on loopback", nil, map[string]string{
			"otlp-grpc": "0.0.0.0:4317", "otlp-http": "0.0.0.0:4318", "health": podIP + ":13133",
			"prometheus": "127.0.0.1:8889", "telemetry": "127.0.0.1:8888", "timeline": "127.0.0.1:55690",
		}, []string{"otlp-grpc", "otlp-http", "health"}},
		{"metricsListen podIP", map[string]any{"agent": map[string]any{"metricsListen": "podIP"}}, map[string]string{
			"otlp-grpc": "0.0.0.0:4317", "otlp-http": "0.0.0.0:4318", "health": podIP + ":13133",
			"prometheus": podIP + ":8889", "telemetry": podIP + ":8888", "timeline": "127.0.0.1:55690",
		}, []string{"otlp-grpc", "otlp-http", "prometheus", "telemetry", "health"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := render(t, tc.values)
			if got := podListeners(t, r, "agent"); !maps.Equal(got, tc.agent) {
				t.Errorf("agent listens on %v, want %v", got, tc.agent)
			}
			c := r.daemonSets[0].Spec.Template.Spec.Containers[0]
			var ports []string
			for _, p := range c.Ports {
				ports = append(ports, p.Name)
				if p.HostPort != 0 && p.Name != "otlp-grpc" && p.Name != "otlp-http" {
					t.Errorf("port %s (%d) is a host port: only OTLP is on the node's IP", p.Name, p.ContainerPort)
				}
			}
			if !slices.Equal(ports, tc.ports) {
				t.Errorf("agent container ports %v, want %v", ports, tc.ports)
			}
			for name, probe := range map[string]*corev1.Probe{"liveness": c.LivenessProbe, "readiness": c.ReadinessProbe} {
				if probe == nil || probe.HTTPGet == nil || probe.HTTPGet.Port.String() != "health" || probe.HTTPGet.Host != "" {
					t.Errorf("%s probe %+v: want an HTTP GET of the health port at the pod IP", name, probe)
				}
			}
		})
	}
	for _, tc := range []struct {
		monitor   bool
		telemetry string
	}{{false, "127.0.0.1:8888"}, {true, podIP + ":8888"}} {
		r := renderChart(t, loadChartDir(t), map[string]any{"gateway": map[string]any{"serviceMonitor": map[string]any{"enabled": tc.monitor}}}).rendered
		want := map[string]string{"otlp-grpc": "0.0.0.0:4317", "otlp-http": "0.0.0.0:4318", "health": podIP + ":13133", "telemetry": tc.telemetry}
		if got := podListeners(t, r, "gateway"); !maps.Equal(got, want) {
			t.Errorf("gateway (serviceMonitor %v) listens on %v, want %v", tc.monitor, got, want)
		}
	}
}

// TestNetworkPolicyAdmitsOnlyOTLPAndTheScraper: each collector's
// NetworkPolicy selects its pods alone and admits OTLP from anywhere, the
// metrics ports only from networkPolicy.scrapeFrom and only while they
// listen beyond loopback, and nothing else (health: the kubelet, from the
// node, which a NetworkPolicy does not filter).
func TestNetworkPolicyAdmitsOnlyOTLPAndTheScraper(t *testing.T) {
	scraper := networkingv1.NetworkPolicyPeer{
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "monitoring"}},
		PodSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/name": "prometheus"}},
	}
	for _, tc := range []struct {
		name    string
		values  map[string]any
		scraped map[string][]int32 // component: metrics ports admitted to the scraper
	}{
		{"default", nil, map[string][]int32{"agent": nil, "gateway": nil}},
		{"metrics scraped", map[string]any{
			"agent":   map[string]any{"metricsListen": "podIP"},
			"gateway": map[string]any{"serviceMonitor": map[string]any{"enabled": true}},
		}, map[string][]int32{"agent": {8889, 8888}, "gateway": {8888}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := renderChart(t, loadChartDir(t), tc.values).rendered
			if len(r.policies) != 2 {
				t.Fatalf("%d NetworkPolicies, want one per component", len(r.policies))
			}
			pods := map[string]map[string]string{
				"agent":   r.daemonSets[0].Spec.Template.Labels,
				"gateway": r.deployments[0].Spec.Template.Labels,
			}
			for _, np := range r.policies {
				component := np.Labels["app.kubernetes.io/component"]
				for other, labels := range pods {
					if got := selects(np.Spec.PodSelector, labels); got != (other == component) {
						t.Errorf("NetworkPolicy %s selects the %s pods: %v", np.Name, other, got)
					}
				}
				if !slices.Equal(np.Spec.PolicyTypes, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}) {
					t.Errorf("%s policyTypes %v, want [Ingress]", np.Name, np.Spec.PolicyTypes)
				}
				var otlp, metrics []int32
				for _, rule := range np.Spec.Ingress {
					var ports []int32
					for _, p := range rule.Ports {
						if p.Protocol == nil || *p.Protocol != corev1.ProtocolTCP || p.Port == nil || p.EndPort != nil {
							t.Errorf("%s: port %+v, want one TCP port", np.Name, p)
							continue
						}
						ports = append(ports, p.Port.IntVal)
					}
					switch {
					case len(rule.From) == 0:
						otlp = append(otlp, ports...)
					case len(rule.From) == 1 && reflect.DeepEqual(rule.From[0], scraper):
						metrics = append(metrics, ports...)
					default:
						t.Errorf("%s: rule from %+v", np.Name, rule.From)
					}
				}
				if !slices.Equal(otlp, []int32{4317, 4318}) {
					t.Errorf("%s admits %v from anywhere, want OTLP 4317, 4318 only", np.Name, otlp)
				}
				if !slices.Equal(metrics, tc.scraped[component]) {
					t.Errorf("%s admits %v to the scraper, want %v", np.Name, metrics, tc.scraped[component])
				}
			}
		})
	}

	r := render(t, map[string]any{"networkPolicy": map[string]any{"enabled": false}, "agent": map[string]any{"metricsListen": "podIP"}})
	if len(r.policies) != 0 {
		t.Errorf("networkPolicy.enabled false renders %d NetworkPolicies", len(r.policies))
	}
	if notes := renderNotes(t, map[string]any{"networkPolicy": map[string]any{"enabled": false}, "agent": map[string]any{"metricsListen": "podIP"}}); !strings.Contains(notes, "WARNING: networkPolicy.enabled is false") || !strings.Contains(notes, "host pids") {
		t.Errorf("NOTES without a NetworkPolicy do not warn that the agent's metrics are open:\n%s", notes)
	}
	if _, err := renderFiles(loadChartDir(t), map[string]any{"agent": map[string]any{"metricsListen": "podIP"}, "networkPolicy": map[string]any{"scrapeFrom": nil}}); err == nil || !strings.Contains(err.Error(), "networkPolicy.scrapeFrom") {
		t.Errorf("metrics on the pod IP with no scraper admitted: err %v, want one naming networkPolicy.scrapeFrom", err)
	}
}

// TestExtraVolumes: extraVolumes and extraVolumeMounts reach each
// component's pod and container as given, after the chart's own.
func TestExtraVolumes(t *testing.T) {
	extra := map[string]any{
		"extraVolumes":      []any{map[string]any{"name": "jfc", "configMap": map[string]any{"name": "my-jfc"}}},
		"extraVolumeMounts": []any{map[string]any{"name": "jfc", "mountPath": "/etc/jfc", "readOnly": true}},
	}
	r := render(t, map[string]any{"agent": extra, "gateway": extra})
	for component, pod := range podSpecs(r) {
		vols, mounts := pod.Volumes, pod.Containers[0].VolumeMounts
		last, lastMount := vols[len(vols)-1], mounts[len(mounts)-1]
		if last.Name != "jfc" || last.ConfigMap == nil || last.ConfigMap.Name != "my-jfc" {
			t.Errorf("%s: last volume %+v, want the extra one", component, last)
		}
		if lastMount.Name != "jfc" || lastMount.MountPath != "/etc/jfc" || !lastMount.ReadOnly {
			t.Errorf("%s: last mount %+v, want the extra one", component, lastMount)
		}
	}
	for component, pod := range podSpecs(render(t, nil)) {
		for _, v := range pod.Volumes {
			if v.Name == "jfc" {
				t.Errorf("%s has the extra volume by default", component)
			}
		}
	}
}

// TestClusterNameFeedsTheDashboards: clusterName becomes k8s.cluster.name on
// every resource the agent exports (an upsert: a sender cannot name another
// cluster), in every pipeline before the export, so that the dashboards'
// $cluster variable (label_values(..., k8s_cluster_name)) lists it; unset,
// the chart adds nothing.
func TestClusterNameFeedsTheDashboards(t *testing.T) {
	for _, values := range []map[string]any{
		{"clusterName": "gpu-east"},
		{"clusterName": "gpu-east", "agent": map[string]any{"k8sAttributes": map[string]any{"enabled": false}}},
	} {
		for _, w := range podConfigs(t, render(t, values)) {
			if w.component != "agent" {
				continue
			}
			conf := effectiveConfig(t, w.configs)
			var cfg struct {
				Attributes []struct {
					Key    string `mapstructure:"key"`
					Value  string `mapstructure:"value"`
					Action string `mapstructure:"action"`
				} `mapstructure:"attributes"`
			}
			unmarshalAt(t, conf, "processors::resource/cluster", &cfg)
			if len(cfg.Attributes) != 1 || cfg.Attributes[0].Key != "k8s.cluster.name" || cfg.Attributes[0].Value != "gpu-east" || cfg.Attributes[0].Action != "upsert" {
				t.Errorf("values %v: resource/cluster %+v, want an upsert of k8s.cluster.name=gpu-east", values, cfg.Attributes)
			}
			for name, processors := range pipelineProcessors(t, conf) {
				at := slices.Index(processors, "resource/cluster")
				if at < 0 || at > slices.Index(processors, "batch") || slices.Index(processors, "memory_limiter") != 0 {
					t.Errorf("values %v: pipeline %s processors %v: resource/cluster not between memory_limiter and batch", values, name, processors)
				}
			}
		}
		if notes := renderNotes(t, values); !strings.Contains(notes, "k8s.cluster.name=gpu-east") {
			t.Errorf("NOTES do not name the cluster:\n%s", notes)
		}
	}
	if strings.Contains(agentOverlay(t, render(t, nil)), "resource/cluster") {
		t.Error("resource/cluster without clusterName")
	}
}
