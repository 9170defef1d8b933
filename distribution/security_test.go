package distribution_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"

	"github.com/otelcol-ai/otelcol-ai/distribution"
	"github.com/otelcol-ai/otelcol-ai/internal/e2etest"
)

// agentCapabilities is what the agent adds back after dropping ALL, each
// for the reason values.yaml gives.
var agentCapabilities = []corev1.Capability{
	"BPF",             // bpf(2): pythongil's eBPF programs and maps
	"PERFMON",         // perf_event_open(2): its uprobes
	"SYS_PTRACE",      // ptrace read access to other users' /proc/<pid>/...
	"DAC_READ_SEARCH", // JFR repositories and -Xlog files of other users
	"SYS_RESOURCE",    // RLIMIT_MEMLOCK for BPF maps before Linux 5.11
}

// attachCapabilities are added while agent.jfrAttach.enabled: what the jfr
// receiver's attach (receiver/jfrreceiver/internal/attach) needs to reach a
// JVM of another uid.
var attachCapabilities = []corev1.Capability{
	"KILL",         // SIGQUIT to the JVM
	"DAC_OVERRIDE", // connect to its 0600 attach socket; trigger in its cwd
	"CHOWN",        // the trigger file given to the JVM's uid and gid
}

// commandLineKeys are the resource attributes never exported by default.
var commandLineKeys = []string{"process.command_line", "process.command_args"}

const dropProcessor = "resource/drop_command_line"

func podSpecs(r rendered) map[string]corev1.PodSpec {
	pods := map[string]corev1.PodSpec{}
	for _, ds := range r.daemonSets {
		pods[ds.Spec.Template.Labels["app.kubernetes.io/component"]] = ds.Spec.Template.Spec
	}
	for _, d := range r.deployments {
		pods[d.Spec.Template.Labels["app.kubernetes.io/component"]] = d.Spec.Template.Spec
	}
	return pods
}

func TestPodsRunUnderTheRuntimeDefaultSeccompProfile(t *testing.T) {
	pods := podSpecs(render(t, nil))
	for _, component := range []string{"agent", "gateway"} {
		pod, ok := pods[component]
		if !ok {
			t.Fatalf("no %s pod rendered", component)
		}
		if sc := pod.SecurityContext; sc == nil || sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
			t.Errorf("%s pod seccomp profile %+v, want RuntimeDefault", component, pod.SecurityContext)
		}
	}

	// Older runtimes whose default profile lacks bpf/perf_event_open get a
	// profile of their own.
	profile := "profiles/otelcol-ai.json"
	pods = podSpecs(render(t, map[string]any{"agent": map[string]any{
		"seccompProfile": map[string]any{"type": "Localhost", "localhostProfile": profile},
	}}))
	got := pods["agent"].SecurityContext.SeccompProfile
	if got.Type != corev1.SeccompProfileTypeLocalhost || got.LocalhostProfile == nil || *got.LocalhostProfile != profile {
		t.Errorf("agent seccomp profile %+v, want Localhost %s", got, profile)
	}
	if gw := pods["gateway"].SecurityContext.SeccompProfile; gw.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("the agent's profile changed the gateway's to %+v", gw)
	}

	// type alone picks the chart's profile (files/seccomp/otelcol-ai.json,
	// placed on the nodes as values.yaml says); under RuntimeDefault the
	// default localhostProfile is not passed on (the API refuses it there).
	localhost := map[string]any{"agent": map[string]any{"seccompProfile": map[string]any{"type": "Localhost"}}}
	got = podSpecs(render(t, localhost))["agent"].SecurityContext.SeccompProfile
	if got.Type != corev1.SeccompProfileTypeLocalhost || got.LocalhostProfile == nil || *got.LocalhostProfile != "profiles/otelcol-ai.json" {
		t.Errorf("agent seccomp profile %+v, want Localhost profiles/otelcol-ai.json", got)
	}
	if got := podSpecs(render(t, nil))["agent"].SecurityContext.SeccompProfile; got.LocalhostProfile != nil {
		t.Errorf("RuntimeDefault with localhostProfile %q", *got.LocalhostProfile)
	}
	notes := renderNotes(t, localhost)
	for _, want := range []string{"/var/lib/kubelet/seccomp/profiles/otelcol-ai.json", "files/seccomp/otelcol-ai.json", "CreateContainerError"} {
		if !strings.Contains(notes, want) {
			t.Errorf("NOTES under a Localhost profile do not say %q:\n%s", want, notes)
		}
	}
}

func TestServiceAccountTokenIsMountedOnlyWhereAsked(t *testing.T) {
	k8sOff := map[string]any{"enabled": false}
	tests := []struct {
		name   string
		values map[string]any
		// want is each component's token mount, on its pod and on its own
		// ServiceAccount; a component absent from want is not rendered.
		want map[string]bool
	}{
		{
			name: "default: k8s_attributes needs the agent's",
			want: map[string]bool{"agent": true, "gateway": false},
		},
		{
			name:   "no k8s_attributes: the jfr receiver's pod opt-outs need the agent's",
			values: map[string]any{"agent": map[string]any{"k8sAttributes": k8sOff}},
			want:   map[string]bool{"agent": true, "gateway": false},
		},
		{
			name:   "neither k8s_attributes nor the jfr pod opt-outs",
			values: kubernetesAPIOff,
			want:   map[string]bool{"agent": false, "gateway": false},
		},
		{
			name: "agent asks without k8s_attributes or jfr pod opt-outs",
			values: map[string]any{"agent": map[string]any{
				"k8sAttributes": k8sOff, "jfrAttach": map[string]any{"podOptOut": false}, "automountServiceAccountToken": true,
			}},
			want: map[string]bool{"agent": true, "gateway": false},
		},
		{
			name:   "gateway asks",
			values: map[string]any{"gateway": map[string]any{"automountServiceAccountToken": true}},
			want:   map[string]bool{"agent": true, "gateway": true},
		},
		{
			name: "agent asks but is not deployed",
			values: map[string]any{"agent": map[string]any{
				"enabled": false, "automountServiceAccountToken": true,
			}},
			want: map[string]bool{"gateway": false},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := render(t, tt.values)
			accounts := map[string]corev1.ServiceAccount{}
			for _, sa := range r.accounts {
				accounts[sa.Labels["app.kubernetes.io/component"]] = sa
			}
			pods := podSpecs(r)
			if len(accounts) != len(tt.want) || len(pods) != len(tt.want) {
				t.Fatalf("%d ServiceAccounts and %d pods, want one each for %v", len(accounts), len(pods), tt.want)
			}
			for component, want := range tt.want {
				sa, ok := accounts[component]
				if !ok {
					t.Fatalf("no ServiceAccount for the %s", component)
				}
				if want := releaseName + "-" + component; sa.Name != want {
					t.Errorf("%s ServiceAccount %q, want %q", component, sa.Name, want)
				}
				if got := sa.AutomountServiceAccountToken; got == nil || *got != want {
					t.Errorf("%s ServiceAccount automountServiceAccountToken = %v, want %v", component, deref(got), want)
				}
				pod := pods[component]
				if pod.ServiceAccountName != sa.Name {
					t.Errorf("%s pod runs as ServiceAccount %q, not its own %q", component, pod.ServiceAccountName, sa.Name)
				}
				if got := pod.AutomountServiceAccountToken; got == nil || *got != want {
					t.Errorf("%s pod automountServiceAccountToken = %v, want %v", component, deref(got), want)
				}
			}
		})
	}
}

func deref(b *bool) any {
	if b == nil {
		return "unset"
	}
	return *b
}

func TestGatewayRunsAsNonRootWithNoCapabilities(t *testing.T) {
	pod := podSpecs(render(t, nil))["gateway"]
	psc := pod.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser == 0 {
		t.Errorf("gateway pod securityContext %+v: want runAsNonRoot and a non-zero runAsUser", psc)
	}
	if pod.HostPID || pod.HostNetwork || pod.HostIPC {
		t.Error("the gateway shares a host namespace")
	}
	for _, v := range pod.Volumes {
		if v.HostPath != nil {
			t.Errorf("the gateway mounts host path %s", v.HostPath.Path)
		}
	}
	for _, c := range pod.Containers {
		sc := c.SecurityContext
		if sc == nil || sc.Capabilities == nil {
			t.Fatalf("container %s: no securityContext capabilities", c.Name)
		}
		if !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) != 0 {
			t.Errorf("container %s: capabilities drop %v add %v, want drop [ALL], add none", c.Name, sc.Capabilities.Drop, sc.Capabilities.Add)
		}
		if sc.Privileged == nil || *sc.Privileged {
			t.Errorf("container %s: privileged %v, want false", c.Name, deref(sc.Privileged))
		}
		if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
			t.Errorf("container %s: allowPrivilegeEscalation %v, want false", c.Name, deref(sc.AllowPrivilegeEscalation))
		}
		if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
			t.Errorf("container %s: readOnlyRootFilesystem %v, want true", c.Name, deref(sc.ReadOnlyRootFilesystem))
		}
		if sc.RunAsUser != nil && *sc.RunAsUser == 0 {
			t.Errorf("container %s runs as root", c.Name)
		}
	}
}

func TestAgentCapabilitiesAreTheDocumentedOnes(t *testing.T) {
	for _, tc := range []struct {
		name   string
		values map[string]any
		want   []corev1.Capability
	}{
		{"default: jfr attach on", nil, slices.Concat(agentCapabilities, attachCapabilities)},
		{"jfr attach off", map[string]any{"agent": map[string]any{"jfrAttach": map[string]any{"enabled": false}}}, agentCapabilities},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := podSpecs(render(t, tc.values))["agent"]
			sc := pod.Containers[0].SecurityContext
			if sc == nil || sc.Capabilities == nil {
				t.Fatal("agent: no securityContext capabilities")
			}
			if !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
				t.Errorf("drop = %v, want [ALL]", sc.Capabilities.Drop)
			}
			if !slices.Equal(sc.Capabilities.Add, tc.want) {
				t.Errorf("add = %v, want %v", sc.Capabilities.Add, tc.want)
			}
			if sc.Privileged == nil || *sc.Privileged {
				t.Errorf("privileged %v, want false: the capabilities are enough", deref(sc.Privileged))
			}
			if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
				t.Errorf("allowPrivilegeEscalation %v, want false", deref(sc.AllowPrivilegeEscalation))
			}
			if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
				t.Errorf("readOnlyRootFilesystem %v, want true", deref(sc.ReadOnlyRootFilesystem))
			}
			notes := renderNotes(t, tc.values)
			want := "capabilities " + strings.Join(capabilityNames(tc.want), ", ") + " "
			if !strings.Contains(notes, want) {
				t.Errorf("NOTES do not say %q:\n%s", want, notes)
			}
		})
	}

	// values.yaml says what each one is for, in the comment table above
	// each list, and documents no capability that is not in it.
	if got := documentedCapabilities(t, "  capabilities:"); !slices.Equal(got, agentCapabilities) {
		t.Errorf("values.yaml documents %v above agent.capabilities, the agent adds %v", got, agentCapabilities)
	}
	if got := documentedCapabilities(t, "    capabilities:"); !slices.Equal(got, attachCapabilities) {
		t.Errorf("values.yaml documents %v above agent.jfrAttach.capabilities, the agent adds %v with attach", got, attachCapabilities)
	}
}

func capabilityNames(caps []corev1.Capability) []string {
	out := make([]string, len(caps))
	for i, c := range caps {
		out[i] = string(c)
	}
	return out
}

// documentedCapabilities reads the "#   NAME   purpose" table in the
// comment directly above the line key (its indentation included) in
// values.yaml.
func documentedCapabilities(t *testing.T, key string) []corev1.Capability {
	t.Helper()
	raw, err := os.ReadFile(chartDir + "/values.yaml")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(raw), "\n")
	at := slices.Index(lines, key)
	if at < 0 {
		t.Fatalf("values.yaml: no line %q", key)
	}
	indent := key[:len(key)-len(strings.TrimLeft(key, " "))]
	start := at
	for start > 0 && strings.HasPrefix(lines[start-1], indent+"#") {
		start--
	}
	row := regexp.MustCompile(`^` + indent + `#   ([A-Z_]+) +\S`)
	var caps []corev1.Capability
	for _, line := range lines[start:at] {
		if m := row.FindStringSubmatch(line); m != nil {
			caps = append(caps, corev1.Capability(m[1]))
		}
	}
	return caps
}

func TestHostPathsAreTheNeededOnesReadOnly(t *testing.T) {
	// Host paths each component needs and why; only the agent's storage
	// folder (the jfr receiver's checkpoints, agent.storageDir) is written.
	want := map[string]map[string]string{
		"agent": {
			"/var/lib/kubelet/pod-resources": "nvml: the kubelet's pod-resources socket",
			"/var/lib/otelcol-ai":            "file_storage: the jfr receiver's checkpoints",
			"/sys/kernel/tracing":            "pythongil: the futex tracepoints' ids (tracefs)",
		},
		"gateway": {},
	}
	writable := map[string]bool{"/var/lib/otelcol-ai": true}
	for component, pod := range podSpecs(render(t, nil)) {
		hostPaths := map[string]*corev1.HostPathVolumeSource{}
		for _, v := range pod.Volumes {
			if v.HostPath != nil {
				hostPaths[v.Name] = v.HostPath
			}
		}
		seen := map[string]bool{}
		for name, hp := range hostPaths {
			seen[hp.Path] = true
			if _, ok := want[component][hp.Path]; !ok {
				t.Errorf("%s mounts host path %s, which nothing in its configuration reads", component, hp.Path)
			}
			switch {
			case writable[hp.Path]:
				if hp.Type == nil || *hp.Type != corev1.HostPathDirectoryOrCreate {
					t.Errorf("%s: host path %s has type %v, want DirectoryOrCreate (a folder the agent owns)", component, hp.Path, hp.Type)
				}
			case hp.Type == nil || (*hp.Type != corev1.HostPathDirectory && *hp.Type != corev1.HostPathSocket && *hp.Type != corev1.HostPathFile):
				t.Errorf("%s: host path %s has type %v, which may create it on the host", component, hp.Path, hp.Type)
			}
			mounts := 0
			for _, c := range pod.Containers {
				for _, m := range c.VolumeMounts {
					if m.Name != name {
						continue
					}
					mounts++
					if !m.ReadOnly && !writable[hp.Path] {
						t.Errorf("%s: host path %s is mounted read-write at %s", component, hp.Path, m.MountPath)
					}
				}
			}
			if mounts == 0 {
				t.Errorf("%s: host path volume %s (%s) is mounted by no container", component, name, hp.Path)
			}
		}
		for path, why := range want[component] {
			if !seen[path] {
				t.Errorf("%s: host path %s (%s) not mounted", component, path, why)
			}
		}
		// The host's /proc is not needed: with hostPID the container's own
		// /proc is the host's pid namespace, and every receiver's proc_root
		// stays /proc.
		if seen["/proc"] {
			t.Errorf("%s mounts the host's /proc", component)
		}
	}
}

// effectiveConfig merges a workload's --config arguments as the collector
// does (maps merge, lists replace), leaving ${env:...} unexpanded.
func effectiveConfig(t *testing.T, configs []configArg) *confmap.Conf {
	t.Helper()
	conf := confmap.New()
	for _, c := range configs {
		raw := []byte(c.data)
		if name, ok := strings.CutPrefix(c.uri, "embedded:"); ok {
			var err error
			if raw, err = distribution.Config(name); err != nil {
				t.Fatal(err)
			}
		}
		ret, err := confmap.NewRetrievedFromYAML(raw)
		if err != nil {
			t.Fatalf("%s: %v", c.uri, err)
		}
		part, err := ret.AsConf()
		if err != nil {
			t.Fatalf("%s: %v", c.uri, err)
		}
		if err := conf.Merge(part); err != nil {
			t.Fatalf("%s: %v", c.uri, err)
		}
	}
	return conf
}

// unmarshalAt decodes the part of conf under key into v, ignoring the keys v
// does not name.
func unmarshalAt(t *testing.T, conf *confmap.Conf, key string, v any) {
	t.Helper()
	sub, err := conf.Sub(key)
	if err != nil {
		t.Fatalf("%s: %v", key, err)
	}
	if err := sub.Unmarshal(v, confmap.WithIgnoreUnused()); err != nil {
		t.Fatalf("%s: %v", key, err)
	}
}

// pipelineProcessors returns each pipeline's processors.
func pipelineProcessors(t *testing.T, conf *confmap.Conf) map[string][]string {
	t.Helper()
	var cfg struct {
		Pipelines map[string]struct {
			Processors []string `mapstructure:"processors"`
		} `mapstructure:"pipelines"`
	}
	unmarshalAt(t, conf, "service", &cfg)
	out := map[string][]string{}
	for name, p := range cfg.Pipelines {
		out[name] = p.Processors
	}
	return out
}

// deletesCommandLine reports whether the processor drops every command-line
// key from the resource.
func deletesCommandLine(t *testing.T, conf *confmap.Conf, processor string) bool {
	t.Helper()
	var cfg struct {
		Attributes []attributeAction `mapstructure:"attributes"`
	}
	unmarshalAt(t, conf, "processors::"+processor, &cfg)
	for _, key := range commandLineKeys {
		if !slices.Contains(cfg.Attributes, attributeAction{Key: key, Action: "delete"}) {
			return false
		}
	}
	return true
}

// attributeAction is one entry of a resource processor's attributes.
type attributeAction struct {
	Key    string `mapstructure:"key"`
	Action string `mapstructure:"action"`
}

// TestCommandLineIsDroppedBeforeEveryExporter checks, in the embedded
// configurations alone and in what each pod runs, that every pipeline runs
// resource/drop_command_line (a resource processor deleting the command-line
// attributes) before it exports; and that exportProcessCommandLine takes it
// out of exactly those pipelines, keeping the rest of their processors.
func TestCommandLineIsDroppedBeforeEveryExporter(t *testing.T) {
	embeddedOnly := map[string]podConfig{}
	for _, name := range distribution.Names() {
		embeddedOnly[name] = podConfig{component: "embedded:" + name, configs: []configArg{{uri: "embedded:" + name}}}
	}
	check := func(w podConfig) map[string][]string {
		conf := effectiveConfig(t, w.configs)
		if !deletesCommandLine(t, conf, dropProcessor) {
			t.Errorf("%s: %s does not delete %v", w.component, dropProcessor, commandLineKeys)
		}
		pipelines := pipelineProcessors(t, conf)
		if len(pipelines) == 0 {
			t.Errorf("%s: no pipelines", w.component)
		}
		for name, processors := range pipelines {
			if !slices.Contains(processors, dropProcessor) {
				t.Errorf("%s: pipeline %s exports without %s: processors %v", w.component, name, dropProcessor, processors)
			}
		}
		return pipelines
	}
	embedded := map[string]map[string][]string{}
	for name, w := range embeddedOnly {
		embedded["embedded:"+name] = check(w)
	}
	for _, values := range []map[string]any{nil, {"gateway": map[string]any{"enabled": false}}} {
		for _, w := range podConfigs(t, render(t, values)) {
			check(w)
		}
	}

	// exportProcessCommandLine: the same processors as without it (the
	// agent's with k8s_attributes, agentPipelineProcessors), less the drop.
	for _, k8s := range []bool{true, false} {
		values := map[string]any{
			"exportProcessCommandLine": true,
			"agent":                    map[string]any{"k8sAttributes": map[string]any{"enabled": k8s}},
		}
		for _, w := range podConfigs(t, render(t, values)) {
			base := embedded[w.configs[0].uri]
			for name, processors := range pipelineProcessors(t, effectiveConfig(t, w.configs)) {
				want := base[name]
				if w.component == "agent" {
					want = agentPipelineProcessors(want, k8s)
				}
				want = slices.DeleteFunc(slices.Clone(want), func(p string) bool { return p == dropProcessor })
				if !slices.Equal(processors, want) {
					t.Errorf("%s with exportProcessCommandLine (k8sAttributes %v): pipeline %s processors %v, want %v", w.component, k8s, name, processors, want)
				}
			}
		}
	}
}

// TestDefaultConfigExportsNoCommandLine runs the built binary on
// embedded:default, sends every signal over OTLP from a resource carrying a
// command line with a secret in it, and reads what the file exporters wrote
// and what the Prometheus endpoint serves: the data arrives, the command line
// does not.
func TestDefaultConfigExportsNoCommandLine(t *testing.T) {
	const secret = "hunter2"
	resource := func(res pcommon.Resource) {
		res.Attributes().PutStr("service.name", "redaction-e2e")
		res.Attributes().PutStr("process.command_line", "java -Ddb.password="+secret+" -jar infer.jar")
		args := res.Attributes().PutEmptySlice("process.command_args")
		for _, a := range []string{"java", "-Ddb.password=" + secret, "-jar", "infer.jar"} {
			args.AppendEmpty().SetStr(a)
		}
		res.Attributes().PutInt("process.pid", 4321)
	}
	now := pcommon.NewTimestampFromTime(time.Now())
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	resource(rs.Resource())
	span := rs.ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	span.SetName("redaction-span")
	span.SetTraceID(pcommon.TraceID{0xc1, 1})
	span.SetSpanID(pcommon.SpanID{0xc1, 1})
	span.SetStartTimestamp(now - 1e6)
	span.SetEndTimestamp(now)
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	resource(rm.Resource())
	m := rm.ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
	m.SetName("redaction.probe")
	dp := m.SetEmptyGauge().DataPoints().AppendEmpty()
	dp.SetTimestamp(now)
	dp.SetIntValue(7)
	ld := plog.NewLogs()
	rl := ld.ResourceLogs().AppendEmpty()
	resource(rl.Resource())
	lr := rl.ScopeLogs().AppendEmpty().LogRecords().AppendEmpty()
	lr.SetTimestamp(now)
	lr.Body().SetStr("redaction-log")

	c := e2etest.Start(t, e2etest.Options{Configs: []string{"embedded:default"}})
	if err := c.WaitHealthy(60 * time.Second); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.SendTraces(ctx, td); err != nil {
		t.Fatal(err)
	}
	if err := c.SendMetrics(ctx, md); err != nil {
		t.Fatal(err)
	}
	if err := c.SendLogs(ctx, ld); err != nil {
		t.Fatal(err)
	}

	// Wait for our resource in every signal's file, then check each copy:
	// process.pid kept, both command-line keys gone.
	var exported map[string][]pcommon.Resource
	if err := c.Eventually(20*time.Second, func() bool {
		exported = map[string][]pcommon.Resource{}
		traces, err := c.Traces("traces.jsonl")
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range traces {
			for i := 0; i < b.ResourceSpans().Len(); i++ {
				exported["traces"] = appendOurs(exported["traces"], b.ResourceSpans().At(i).Resource())
			}
		}
		metrics, err := c.Metrics("metrics.jsonl")
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range metrics {
			for i := 0; i < b.ResourceMetrics().Len(); i++ {
				exported["metrics"] = appendOurs(exported["metrics"], b.ResourceMetrics().At(i).Resource())
			}
		}
		logs, err := c.Logs("logs.jsonl")
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range logs {
			for i := 0; i < b.ResourceLogs().Len(); i++ {
				exported["logs"] = appendOurs(exported["logs"], b.ResourceLogs().At(i).Resource())
			}
		}
		return len(exported["traces"]) > 0 && len(exported["metrics"]) > 0 && len(exported["logs"]) > 0
	}); err != nil {
		t.Fatalf("exported resources of ours: %d traces, %d metrics, %d logs: %v",
			len(exported["traces"]), len(exported["metrics"]), len(exported["logs"]), err)
	}
	for signal, resources := range exported {
		for _, res := range resources {
			attrs := res.Attributes()
			// The rest of the resource is intact.
			if pid, ok := attrs.Get("process.pid"); !ok {
				t.Errorf("%s: process.pid dropped too: %v", signal, attrs.AsRaw())
			} else if pid.Int() != 4321 {
				t.Errorf("%s: process.pid %d, want 4321", signal, pid.Int())
			}
			for _, key := range commandLineKeys {
				if v, ok := attrs.Get(key); ok {
					t.Errorf("%s: exported %s = %v", signal, key, v.AsRaw())
				}
			}
		}
	}

	// The Prometheus endpoint serves the gauge, labelled with the resource's
	// attributes but no command line.
	var body string
	if err := c.Eventually(20*time.Second, func() bool {
		var err error
		body, err = e2etest.Get("http://" + c.Endpoints.Prometheus + "/metrics")
		return err == nil && strings.Contains(body, "redaction_probe")
	}); err != nil {
		t.Fatalf("prometheus endpoint has no redaction_probe: %v\n%s", err, body)
	}
	for line := range strings.Lines(body) {
		if !strings.HasPrefix(line, "redaction_probe") {
			continue
		}
		if !strings.Contains(line, `process_pid="4321"`) {
			t.Errorf("resource attributes are not labels here, the check proves nothing: %s", line)
		}
		if strings.Contains(line, "process_command") || strings.Contains(line, secret) {
			t.Errorf("prometheus series carries the command line: %s", line)
		}
	}
}

// appendOurs appends res when it is the test's resource (service.name
// redaction-e2e), not the collector's own host metrics and the like.
func appendOurs(resources []pcommon.Resource, res pcommon.Resource) []pcommon.Resource {
	if v, _ := res.Attributes().Get("service.name"); v.Str() == "redaction-e2e" {
		return append(resources, res)
	}
	return resources
}

// seccompRule is one entry of an OCI runtime-spec seccomp profile
// (LinuxSeccomp.syscalls), the format containerd and CRI-O read a Localhost
// profile in.
type seccompRule struct {
	Names    []string `json:"names"`
	Action   string   `json:"action"`
	ErrnoRet *uint    `json:"errnoRet,omitempty"`
	Args     []struct {
		Index    uint   `json:"index"`
		Value    uint64 `json:"value"`
		ValueTwo uint64 `json:"valueTwo"`
		Op       string `json:"op"`
	} `json:"args,omitempty"`
}

const seccompFile = chartDir + "/files/seccomp/otelcol-ai.json"

// TestLocalhostSeccompProfile: the profile agent.seccompProfile.type
// Localhost names is a default-deny OCI profile that allows what the
// agent's receivers call (bpf and perf_event_open above all, which older
// runtimes' default profiles refuse without CAP_SYS_ADMIN), keeps refusing
// what escapes a container, names only real syscalls, and answers clone3
// with ENOSYS so that glibc falls back to clone, whose namespace flags it
// refuses.
func TestLocalhostSeccompProfile(t *testing.T) {
	raw, err := os.ReadFile(seccompFile)
	if err != nil {
		t.Fatal(err)
	}
	var profile struct {
		DefaultAction string        `json:"defaultAction"`
		Syscalls      []seccompRule `json:"syscalls"`
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&profile); err != nil {
		t.Fatalf("%s: %v", seccompFile, err)
	}
	if profile.DefaultAction != "SCMP_ACT_ERRNO" {
		t.Errorf("defaultAction %q, want SCMP_ACT_ERRNO: a call not listed fails with EPERM", profile.DefaultAction)
	}
	// unconditional: allowed whatever the arguments; rules: every rule per name.
	unconditional := map[string]bool{}
	rules := map[string][]seccompRule{}
	known := syscallNames(t)
	for _, r := range profile.Syscalls {
		for _, name := range r.Names {
			if !known[name] {
				t.Errorf("%s names %q, a syscall of neither linux/amd64 nor linux/arm64", seccompFile, name)
			}
			rules[name] = append(rules[name], r)
			if r.Action == "SCMP_ACT_ALLOW" && len(r.Args) == 0 {
				if unconditional[name] {
					t.Errorf("%s allows %q twice", seccompFile, name)
				}
				unconditional[name] = true
			}
		}
	}

	// What the agent calls beyond a plain Go program, and who calls it.
	for name, who := range map[string]string{
		"bpf":               "pythongil's and procevents' eBPF programs and maps",
		"perf_event_open":   "pythongil's uprobes and futex tracepoints",
		"ioctl":             "perf event enable and BPF attach; NVML",
		"mmap":              "BPF ring buffers",
		"epoll_pwait":       "the ring buffer readers; the Go runtime",
		"prlimit64":         "RLIMIT_MEMLOCK before 5.11",
		"openat2":           "procroot: files inside a process's root",
		"pidfd_send_signal": "jfr attach: SIGQUIT to the pinned JVM",
		"kill":              "jfr attach before Linux 5.1",
		"fchown":            "jfr attach: the trigger file's owner",
		"unlinkat":          "jfr attach: the trigger and settings files",
		"connect":           "jfr attach socket; OTLP and the Kubernetes API",
		"inotify_init1":     "jfr repositories",
		"inotify_add_watch": "jfr repositories",
		"socket":            "netlink proc connector; TCP",
		"readlinkat":        "/proc/<pid>/{root,cwd,exe}",
		"statx":             "file checks",
		"flock":             "file_storage (bbolt)",
		"fdatasync":         "file_storage (bbolt)",
		"rseq":              "glibc threads (ONNX Runtime, NVML)",
		"futex":             "the Go runtime",
	} {
		if !unconditional[name] {
			t.Errorf("%s does not allow %s (%s)", seccompFile, name, who)
		}
	}
	for _, name := range []string{
		"ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "open_by_handle_at", "name_to_handle_at",
		"mount", "umount2", "pivot_root", "chroot", "unshare", "setns", "move_mount", "open_tree", "fsopen",
		"keyctl", "add_key", "request_key", "init_module", "finit_module", "delete_module",
		"kexec_load", "kexec_file_load", "reboot", "swapon", "swapoff", "syslog", "userfaultfd",
		"io_uring_setup", "io_uring_enter", "settimeofday", "clock_settime", "acct", "quotactl",
	} {
		if !known[name] {
			continue
		}
		for _, r := range rules[name] {
			if r.Action == "SCMP_ACT_ALLOW" {
				t.Errorf("%s allows %s, which the agent never calls", seccompFile, name)
			}
		}
	}

	const enosys = 38
	if c3 := rules["clone3"]; len(c3) != 1 || c3[0].Action != "SCMP_ACT_ERRNO" || c3[0].ErrnoRet == nil || *c3[0].ErrnoRet != enosys {
		t.Errorf("clone3 rules %+v: want ERRNO with errnoRet ENOSYS (38), so that glibc's pthread_create falls back to clone", c3)
	}
	const newNamespaces = unix.CLONE_NEWNS | unix.CLONE_NEWUTS | unix.CLONE_NEWIPC | unix.CLONE_NEWUSER |
		unix.CLONE_NEWPID | unix.CLONE_NEWNET | unix.CLONE_NEWCGROUP
	clone := rules["clone"]
	if len(clone) != 1 || clone[0].Action != "SCMP_ACT_ALLOW" || len(clone[0].Args) != 1 ||
		clone[0].Args[0].Index != 0 || clone[0].Args[0].Op != "SCMP_CMP_MASKED_EQ" ||
		clone[0].Args[0].Value != newNamespaces || clone[0].Args[0].ValueTwo != 0 {
		t.Errorf("clone rules %+v: want allowed only when flags (argument 0) & %#x == 0", clone, newNamespaces)
	}
}

// syscallNames are the syscall names of linux/amd64 and linux/arm64, read
// from golang.org/x/sys's tables (zsysnum_linux_*.go: SYS_OPENAT2 = 437).
func syscallNames(t *testing.T) map[string]bool {
	t.Helper()
	dir, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "golang.org/x/sys").Output()
	if err != nil {
		t.Fatalf("go list golang.org/x/sys: %v", err)
	}
	names := map[string]bool{}
	constant := regexp.MustCompile(`(?m)^\s+SYS_([A-Z0-9_]+)\s+= \d+`)
	for _, arch := range []string{"amd64", "arm64"} {
		src, err := os.ReadFile(filepath.Join(strings.TrimSpace(string(dir)), "unix", "zsysnum_linux_"+arch+".go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range constant.FindAllSubmatch(src, -1) {
			names[strings.ToLower(string(m[1]))] = true
		}
	}
	if len(names) < 300 {
		t.Fatalf("read only %d syscall names", len(names))
	}
	return names
}

// seccompProbe is a program run under the Localhost profile: each line is a
// call and what came of it ("ok" or the errno's number). Built statically
// with cgo, so that pthread_create is glibc's (which tries clone3 first).
const seccompProbe = `package main

/*
#include <pthread.h>
static void *run(void *arg) { return arg; }
static int start_pthread(void) {
	pthread_t t;
	int err = pthread_create(&t, 0, run, 0);
	return err ? err : pthread_join(t, 0);
}
*/
import "C"

import (
	"fmt"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

func report(name string, err error) {
	if err == nil {
		fmt.Println(name, "ok")
		return
	}
	fmt.Println(name, int(err.(unix.Errno)))
}

func errno(_, _ uintptr, e unix.Errno) error {
	if e != 0 {
		return e
	}
	return nil
}

func main() {
	if rc := C.start_pthread(); rc != 0 {
		report("pthread_create", unix.Errno(rc))
	} else {
		report("pthread_create", nil)
	}
	how := unix.OpenHow{Flags: unix.O_RDONLY | unix.O_DIRECTORY, Resolve: unix.RESOLVE_IN_ROOT}
	_, err := unix.Openat2(unix.AT_FDCWD, "/", &how)
	report("openat2", err)
	pfd, err := unix.PidfdOpen(os.Getpid(), 0)
	report("pidfd_open", err)
	report("pidfd_send_signal", unix.PidfdSendSignal(pfd, 0, nil, 0))
	mapAttr := struct{ typ, keySize, valueSize, maxEntries uint32 }{2, 4, 4, 1} // BPF_MAP_TYPE_ARRAY
	report("bpf", errno(unix.Syscall(unix.SYS_BPF, 0, uintptr(unsafe.Pointer(&mapAttr)), unsafe.Sizeof(mapAttr)))) // BPF_MAP_CREATE
	perf := unix.PerfEventAttr{Type: unix.PERF_TYPE_SOFTWARE, Config: unix.PERF_COUNT_SW_CPU_CLOCK, Size: uint32(unsafe.Sizeof(unix.PerfEventAttr{}))}
	_, err = unix.PerfEventOpen(&perf, 0, -1, -1, 0)
	report("perf_event_open", err)
	_, err = unix.InotifyInit1(0)
	report("inotify_init1", err)
	_, err = unix.Socket(unix.AF_NETLINK, unix.SOCK_DGRAM, unix.NETLINK_CONNECTOR)
	report("socket", err)
	report("ptrace", errno(unix.Syscall(unix.SYS_PTRACE, unix.PTRACE_TRACEME, 0, 0)))
	report("unshare", unix.Unshare(unix.CLONE_NEWNS))
	report("clone3", errno(unix.RawSyscall(unix.SYS_CLONE3, 0, 0, 0)))
	r, _, e := unix.RawSyscall6(unix.SYS_CLONE, unix.CLONE_NEWUTS|uintptr(unix.SIGCHLD), 0, 0, 0, 0, 0)
	if e == 0 && r == 0 {
		os.Exit(0)
	}
	report("clone_newuts", errno(r, 0, e))
	report("mount", unix.Mount("none", "/tmp", "tmpfs", 0, ""))
}
`

// TestLocalhostSeccompProfileUnderRunc runs seccompProbe under runc with the
// chart's Localhost profile and the agent's capabilities plus SYS_ADMIN and
// SYS_PTRACE (so that a refused unshare, mount or ptrace is the filter's
// doing, not the kernel's): the runtime takes the profile, glibc threads
// start (clone3 answered ENOSYS, clone without namespaces allowed), bpf,
// perf_event_open, openat2 and the pidfd calls pass; ptrace, unshare,
// mount and a namespaced clone do not. Needs root, runc (Debian 12's 1.1.5
// with libseccomp 2.5.4: what a Debian 12 node's containerd 1.6 runs) and
// gcc with a static glibc; skipped without them. About 5 s.
func TestLocalhostSeccompProfileUnderRunc(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("not root: runc needs it")
	}
	runc, err := exec.LookPath("runc")
	if err != nil {
		t.Skip("runc not installed (apt-get install runc)")
	}
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Skip("gcc not installed: the probe is built with cgo")
	}
	bundle := t.TempDir()
	rootfs := filepath.Join(bundle, "rootfs")
	if err := os.MkdirAll(rootfs, 0o755); err != nil {
		t.Fatal(err)
	}
	buildSeccompProbe(t, filepath.Join(rootfs, "probe"))

	spec := exec.Command(runc, "spec")
	spec.Dir = bundle
	if out, err := spec.CombinedOutput(); err != nil {
		t.Fatalf("runc spec: %v\n%s", err, out)
	}
	var config map[string]any
	raw, err := os.ReadFile(filepath.Join(bundle, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &config); err != nil {
		t.Fatal(err)
	}
	profile, err := os.ReadFile(seccompFile)
	if err != nil {
		t.Fatal(err)
	}
	var seccomp map[string]any
	if err := json.Unmarshal(profile, &seccomp); err != nil {
		t.Fatal(err)
	}
	granted := grantableCapabilities(t, slices.Concat(agentCapabilities, attachCapabilities, []corev1.Capability{"SYS_ADMIN"}))
	process := config["process"].(map[string]any)
	process["terminal"] = false
	process["args"] = []string{"/probe"}
	process["noNewPrivileges"] = true
	process["capabilities"] = map[string]any{"bounding": granted, "effective": granted, "permitted": granted}
	config["linux"].(map[string]any)["seccomp"] = seccomp
	config["root"] = map[string]any{"path": "rootfs", "readonly": true}
	if raw, err = json.Marshal(config); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bundle, "config.json"), raw, 0o644); err != nil {
		t.Fatal(err)
	}

	id := fmt.Sprintf("otelcol-ai-seccomp-%d", os.Getpid())
	run := exec.Command(runc, "run", "--bundle", bundle, id)
	var stdout, stderr bytes.Buffer
	run.Stdout, run.Stderr = &stdout, &stderr
	err = run.Run()
	_ = exec.Command(runc, "delete", "--force", id).Run()
	if err != nil {
		t.Fatalf("runc run under %s: %v\n%s%s", seccompFile, err, stdout.String(), stderr.String())
	}
	got := map[string]string{}
	for line := range strings.Lines(stdout.String()) {
		if name, result, ok := strings.Cut(strings.TrimSpace(line), " "); ok {
			got[name] = result
		}
	}
	want := map[string]string{
		"pthread_create": "ok", "openat2": "ok", "pidfd_open": "ok", "pidfd_send_signal": "ok",
		"bpf": "ok", "perf_event_open": "ok", "inotify_init1": "ok", "socket": "ok",
		"ptrace": "1", "unshare": "1", "clone_newuts": "1", "mount": "1", // EPERM
		"clone3": "38", // ENOSYS
	}
	for _, c := range []struct {
		capability corev1.Capability
		calls      []string
	}{{"BPF", []string{"bpf"}}, {"PERFMON", []string{"perf_event_open"}}, {"SYS_ADMIN", []string{"unshare", "clone_newuts", "mount"}}, {"SYS_PTRACE", []string{"ptrace"}}} {
		if !slices.Contains(granted, "CAP_"+string(c.capability)) {
			t.Logf("CAP_%s not in this test's bounding set: %v not checked", c.capability, c.calls)
			for _, call := range c.calls {
				delete(want, call)
			}
		}
	}
	for call, result := range want {
		if got[call] != result {
			t.Errorf("%s under the profile: %q, want %q (ok, or the errno)", call, got[call], result)
		}
	}
}

// buildSeccompProbe builds seccompProbe, statically linked, into out, with
// this module's golang.org/x/sys (from the module cache).
func buildSeccompProbe(t *testing.T, out string) {
	t.Helper()
	src := t.TempDir()
	version, err := exec.Command("go", "list", "-m", "-f", "{{.Version}}", "golang.org/x/sys").Output()
	if err != nil {
		t.Fatalf("go list golang.org/x/sys: %v", err)
	}
	sums, err := os.ReadFile("../go.sum")
	if err != nil {
		t.Fatal(err)
	}
	var sum strings.Builder
	for line := range strings.Lines(string(sums)) {
		if strings.HasPrefix(line, "golang.org/x/sys "+strings.TrimSpace(string(version))) {
			sum.WriteString(line)
		}
	}
	files := map[string]string{
		"main.go": seccompProbe,
		"go.mod":  "module seccompprobe\n\ngo 1.24\n\nrequire golang.org/x/sys " + strings.TrimSpace(string(version)) + "\n",
		"go.sum":  sum.String(),
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(src, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	build := exec.Command("go", "build", "-o", out, "-ldflags", "-linkmode external -extldflags -static", ".")
	build.Dir = src
	build.Env = append(os.Environ(), "CGO_ENABLED=1", "GOWORK=off", "GOFLAGS=-mod=mod")
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the probe: %v\n%s", err, b)
	}
}

// grantableCapabilities returns caps as runc names them (CAP_...), less
// those this process's bounding set lacks (runc cannot grant them).
func grantableCapabilities(t *testing.T, caps []corev1.Capability) []string {
	t.Helper()
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	var bounding uint64
	for line := range strings.Lines(string(status)) {
		if v, ok := strings.CutPrefix(line, "CapBnd:"); ok {
			if bounding, err = strconv.ParseUint(strings.TrimSpace(v), 16, 64); err != nil {
				t.Fatal(err)
			}
		}
	}
	bits := map[corev1.Capability]uint{
		"CHOWN": unix.CAP_CHOWN, "DAC_OVERRIDE": unix.CAP_DAC_OVERRIDE, "DAC_READ_SEARCH": unix.CAP_DAC_READ_SEARCH,
		"KILL": unix.CAP_KILL, "SYS_PTRACE": unix.CAP_SYS_PTRACE, "SYS_ADMIN": unix.CAP_SYS_ADMIN,
		"SYS_RESOURCE": unix.CAP_SYS_RESOURCE, "PERFMON": unix.CAP_PERFMON, "BPF": unix.CAP_BPF,
	}
	var out []string
	for _, c := range caps {
		bit, ok := bits[c]
		if !ok {
			t.Fatalf("capability %s: add its number to grantableCapabilities", c)
		}
		if bounding&(1<<bit) == 0 {
			t.Logf("CAP_%s is not in this test's bounding set: not granted", c)
			continue
		}
		out = append(out, "CAP_"+string(c))
	}
	return out
}
