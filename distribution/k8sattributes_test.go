package distribution_test

import (
	"maps"
	"os"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/otelcol-ai/otelcol-ai/internal/e2etest"
)

const k8sProcessor = "k8s_attributes"

// k8sAttributesOff is the values that turn the chart's k8s_attributes off.
var k8sAttributesOff = map[string]any{"agent": map[string]any{"k8sAttributes": map[string]any{"enabled": false}}}

// kubernetesAPIOff is the values that leave the agent nothing to ask the
// API for: k8s_attributes off, and the jfr receiver's pod and namespace
// opt-outs (agent.jfrAttach.podOptOut) off.
var kubernetesAPIOff = map[string]any{"agent": map[string]any{
	"k8sAttributes": map[string]any{"enabled": false},
	"jfrAttach":     map[string]any{"podOptOut": false},
}}

// agentPipelineProcessors is what the chart makes of one of
// embedded:default's processor lists: k8s_attributes right after
// memory_limiter when it is on, the rest unchanged.
func agentPipelineProcessors(embedded []string, k8s bool) []string {
	out := slices.Clone(embedded)
	if k8s {
		at := slices.Index(out, "memory_limiter") + 1
		out = slices.Insert(out, at, k8sProcessor)
	}
	return out
}

// k8sAttributesConfig is the part of the processor's configuration the
// chart sets.
type k8sAttributesConfig struct {
	AuthType    string `mapstructure:"auth_type"`
	Passthrough bool   `mapstructure:"passthrough"`
	Filter      struct {
		NodeFromEnvVar string `mapstructure:"node_from_env_var"`
	} `mapstructure:"filter"`
	PodAssociation []struct {
		Sources []associationSource `mapstructure:"sources"`
	} `mapstructure:"pod_association"`
	Extract struct {
		Metadata []string `mapstructure:"metadata"`
	} `mapstructure:"extract"`
}

// associationSource is one source of a pod_association rule.
type associationSource struct {
	From string `mapstructure:"from"`
	Name string `mapstructure:"name"`
}

// agentConfig is the agent's podConfig as the chart renders it with values.
func agentConfig(t *testing.T, values map[string]any) podConfig {
	t.Helper()
	for _, w := range podConfigs(t, render(t, values)) {
		if w.component == "agent" {
			return w
		}
	}
	t.Fatal("no agent pod rendered")
	return podConfig{}
}

func TestAgentPipelinesAreTheEmbeddedOnesWithK8sAttributes(t *testing.T) {
	embedded := pipelineProcessors(t, effectiveConfig(t, []configArg{{uri: "embedded:default"}}))
	for _, k8s := range []bool{true, false} {
		var values map[string]any
		if !k8s {
			values = k8sAttributesOff
		}
		got := pipelineProcessors(t, effectiveConfig(t, agentConfig(t, values).configs))
		if len(got) != len(embedded) {
			t.Errorf("k8sAttributes %v: pipelines %v, embedded:default has %v", k8s, got, embedded)
		}
		for name, base := range embedded {
			if want := agentPipelineProcessors(base, k8s); !slices.Equal(got[name], want) {
				t.Errorf("k8sAttributes %v: pipeline %s processors %v, want %v", k8s, name, got[name], want)
			}
		}
	}

	// Where it sits, said directly: before the correlator (which matches
	// spans by k8s.pod.uid) and before batch (which drops the connection
	// the association reads).
	for name, processors := range pipelineProcessors(t, effectiveConfig(t, agentConfig(t, nil).configs)) {
		at := slices.Index(processors, k8sProcessor)
		if at < 0 {
			t.Errorf("pipeline %s does not run %s: %v", name, k8sProcessor, processors)
			continue
		}
		for _, later := range []string{"runtimecorrelation", "batch"} {
			if i := slices.Index(processors, later); i < at {
				t.Errorf("pipeline %s: %s at %d, after %s at %d: %v", name, k8sProcessor, at, later, i, processors)
			}
		}
	}
}

func TestK8sAttributesAssociatesOnlyThisNodesPods(t *testing.T) {
	w := agentConfig(t, nil)
	conf := effectiveConfig(t, w.configs)
	var cfg k8sAttributesConfig
	unmarshalAt(t, conf, "processors::"+k8sProcessor, &cfg)
	if cfg.AuthType != "serviceAccount" || cfg.Passthrough {
		t.Errorf("auth_type %q passthrough %v, want serviceAccount and false", cfg.AuthType, cfg.Passthrough)
	}

	// k8s.pod.uid when the resource has it (the workload's downward API, the
	// receivers' cgroups), else the OTLP connection, else container.id (the
	// receivers' windows, which come over no connection). A rule whose
	// attributes are present decides, so container.id from an SDK (maybe the
	// sandbox's) must not come before the connection.
	want := [][]associationSource{
		{{From: "resource_attribute", Name: "k8s.pod.uid"}},
		{{From: "connection"}},
		{{From: "resource_attribute", Name: "container.id"}},
	}
	var got [][]associationSource
	for _, a := range cfg.PodAssociation {
		got = append(got, a.Sources)
	}
	if !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("pod_association %v, want %v", got, want)
	}

	// Every pipeline runs this one configuration: spans associate by
	// connection, windows and metrics by k8s.pod.uid.
	for name, processors := range pipelineProcessors(t, conf) {
		if !slices.Contains(processors, k8sProcessor) {
			t.Errorf("pipeline %s has no %s", name, k8sProcessor)
		}
	}

	for _, key := range []string{
		"k8s.namespace.name", "k8s.pod.name", "k8s.pod.uid", "k8s.node.name",
		"k8s.deployment.name", "k8s.statefulset.name", "k8s.daemonset.name",
		"k8s.job.name", "k8s.cronjob.name", "k8s.container.name", "container.image.name", "container.id",
	} {
		if !slices.Contains(cfg.Extract.Metadata, key) {
			t.Errorf("extract::metadata %v lacks %s", cfg.Extract.Metadata, key)
		}
	}
	// These start informers on replicasets, jobs, nodes and namespaces,
	// which the ClusterRole does not allow
	// (TestK8sAttributesRBACIsListWatchOnPods).
	for _, key := range []string{"k8s.deployment.uid", "k8s.cronjob.uid", "k8s.node.uid", "k8s.cluster.uid"} {
		if slices.Contains(cfg.Extract.Metadata, key) {
			t.Errorf("extract::metadata has %s, which needs more than pods", key)
		}
	}

	// The node filter reads a variable the agent container gets from the
	// downward API's spec.nodeName, not from the pod's hostname.
	if cfg.Filter.NodeFromEnvVar != "K8S_NODE_NAME" {
		t.Fatalf("filter::node_from_env_var %q, want K8S_NODE_NAME", cfg.Filter.NodeFromEnvVar)
	}
	ds := render(t, nil).daemonSets[0]
	var nodeEnv *corev1.EnvVar
	for i, e := range ds.Spec.Template.Spec.Containers[0].Env {
		if e.Name == cfg.Filter.NodeFromEnvVar {
			nodeEnv = &ds.Spec.Template.Spec.Containers[0].Env[i]
		}
	}
	if nodeEnv == nil || nodeEnv.Value != "" || nodeEnv.ValueFrom == nil || nodeEnv.ValueFrom.FieldRef == nil || nodeEnv.ValueFrom.FieldRef.FieldPath != "spec.nodeName" {
		t.Errorf("agent env %s = %+v, want a fieldRef to spec.nodeName", cfg.Filter.NodeFromEnvVar, nodeEnv)
	}
	if got := w.env[cfg.Filter.NodeFromEnvVar]; got != downwardValues["spec.nodeName"] {
		t.Errorf("agent's %s resolves to %q, want the node's name %q", cfg.Filter.NodeFromEnvVar, got, downwardValues["spec.nodeName"])
	}
}

// TestValidateChecksTheNodeFilterVariable shows that the binary's validate
// (TestRenderedConfigsValidate) reads the agent's environment: without
// K8S_NODE_NAME the rendered agent configuration is refused, naming it.
func TestValidateChecksTheNodeFilterVariable(t *testing.T) {
	w := agentConfig(t, nil)
	env := maps.Clone(w.env)
	delete(env, "K8S_NODE_NAME")
	// Nor inherited from the test's own environment.
	t.Setenv("K8S_NODE_NAME", "")
	if err := os.Unsetenv("K8S_NODE_NAME"); err != nil {
		t.Fatal(err)
	}
	res := e2etest.Run(t, env, validateArgs(t, w)...)
	if res.ExitCode == 0 || !strings.Contains(res.Stderr, `"K8S_NODE_NAME" is not set`) {
		t.Errorf("validate without K8S_NODE_NAME: exit %d, stderr:\n%s", res.ExitCode, res.Stderr)
	}
}

// writeVerbs are the verbs that change objects; "*" is every verb.
var writeVerbs = []string{"create", "update", "patch", "delete", "deletecollection", "escalate", "bind", "impersonate", "approve", "sign", "*"}

func TestK8sAttributesRBACIsListWatchOnPods(t *testing.T) {
	r := render(t, nil)
	if len(r.roles) != 1 || len(r.bindings) != 1 {
		t.Fatalf("%d ClusterRoles and %d ClusterRoleBindings, want one each", len(r.roles), len(r.bindings))
	}
	role, binding := r.roles[0], r.bindings[0]
	if role.Name != releaseName+"-agent" {
		t.Errorf("ClusterRole %q, want %s-agent", role.Name, releaseName)
	}
	// The processor's only informer, for the metadata the chart extracts,
	// lists and watches pods, as does the jfr receiver's for its attach
	// opt-outs, which also gets the namespace of a JVM's pod by name.
	want := []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list", "watch"}},
		{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get"}},
	}
	if !slices.EqualFunc(role.Rules, want, policyRuleEqual) {
		t.Errorf("ClusterRole rules %+v, want %+v", role.Rules, want)
	}
	if role.AggregationRule != nil {
		t.Errorf("ClusterRole aggregates %+v", role.AggregationRule)
	}

	if binding.RoleRef != (rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role.Name}) {
		t.Errorf("ClusterRoleBinding roleRef %+v, want ClusterRole %s", binding.RoleRef, role.Name)
	}
	pods := podSpecs(r)
	agentSA := pods["agent"].ServiceAccountName
	wantSubjects := []rbacv1.Subject{{Kind: "ServiceAccount", Name: agentSA, Namespace: namespace}}
	if !slices.Equal(binding.Subjects, wantSubjects) {
		t.Errorf("ClusterRoleBinding subjects %+v, want %+v", binding.Subjects, wantSubjects)
	}
	if gw := pods["gateway"].ServiceAccountName; gw == agentSA || slices.ContainsFunc(binding.Subjects, func(s rbacv1.Subject) bool { return s.Name == gw }) {
		t.Errorf("the gateway's ServiceAccount %q gets the agent's role (agent: %q)", gw, agentSA)
	}

	// Extra rules for what agent.config adds go after the chart's.
	extra := rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"list", "watch"}}
	r = render(t, map[string]any{"agent": map[string]any{"k8sAttributes": map[string]any{"extraRules": []any{
		map[string]any{"apiGroups": []any{""}, "resources": []any{"namespaces"}, "verbs": []any{"list", "watch"}},
	}}}})
	if got := r.roles[0].Rules; !slices.EqualFunc(got, append(slices.Clone(want), extra), policyRuleEqual) {
		t.Errorf("with extraRules: rules %+v, want %+v then %+v", got, want, extra)
	}
}

func policyRuleEqual(a, b rbacv1.PolicyRule) bool {
	return slices.Equal(a.APIGroups, b.APIGroups) && slices.Equal(a.Resources, b.Resources) &&
		slices.Equal(a.Verbs, b.Verbs) && slices.Equal(a.ResourceNames, b.ResourceNames) &&
		slices.Equal(a.NonResourceURLs, b.NonResourceURLs)
}

// TestRenderedRBACGrantsNoWriteOrSecrets holds for every values set the
// chart's tests render: no wildcard, no verb that changes anything, nothing
// about secrets.
func TestRenderedRBACGrantsNoWriteOrSecrets(t *testing.T) {
	for _, values := range []map[string]any{nil, {"gateway": map[string]any{"enabled": false}}, {"exportProcessCommandLine": true}} {
		for _, role := range render(t, values).roles {
			for _, rule := range role.Rules {
				for _, v := range rule.Verbs {
					if slices.Contains(writeVerbs, v) {
						t.Errorf("%s: verb %q in %+v", role.Name, v, rule)
					}
				}
				for _, res := range rule.Resources {
					if res == "*" || strings.HasPrefix(res, "secrets") || strings.Contains(res, "/") {
						t.Errorf("%s: resource %q in %+v", role.Name, res, rule)
					}
				}
				if slices.Contains(rule.APIGroups, "*") || len(rule.NonResourceURLs) > 0 {
					t.Errorf("%s: rule %+v reaches beyond named API groups", role.Name, rule)
				}
			}
		}
	}
}

func TestK8sAttributesOffRendersNoneOfIt(t *testing.T) {
	for name, values := range map[string]map[string]any{
		"k8sAttributes and jfr pod opt-outs off": kubernetesAPIOff,
		"agent off":                              {"agent": map[string]any{"enabled": false}},
	} {
		t.Run(name, func(t *testing.T) {
			r := render(t, values)
			if len(r.roles) != 0 || len(r.bindings) != 0 {
				t.Errorf("%d ClusterRoles and %d ClusterRoleBindings rendered", len(r.roles), len(r.bindings))
			}
			for component, pod := range podSpecs(r) {
				if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
					t.Errorf("%s pod automountServiceAccountToken = %v, want false", component, deref(pod.AutomountServiceAccountToken))
				}
			}
			for _, w := range podConfigs(t, r) {
				conf := effectiveConfig(t, w.configs)
				if conf.IsSet("processors::" + k8sProcessor) {
					t.Errorf("%s configures %s", w.component, k8sProcessor)
				}
				for pipeline, processors := range pipelineProcessors(t, conf) {
					if slices.Contains(processors, k8sProcessor) {
						t.Errorf("%s pipeline %s runs %s", w.component, pipeline, k8sProcessor)
					}
				}
			}
		})
	}
}

// TestChartSetsNoCorrelationScope leaves runtimecorrelation's matching to
// its default, which works on a bare host and in pods alike.
func TestChartSetsNoCorrelationScope(t *testing.T) {
	for _, values := range []map[string]any{nil, k8sAttributesOff} {
		for _, w := range podConfigs(t, render(t, values)) {
			for _, c := range w.configs {
				if strings.Contains(c.data, "match_scope") {
					t.Errorf("%s: %s sets match_scope", w.component, c.uri)
				}
			}
		}
	}
}
