package e2etest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otelcol-ai/otelcol-ai/internal/e2etest/containertest"
	"github.com/otelcol-ai/otelcol-ai/internal/window"
	"github.com/otelcol-ai/otelcol-ai/pkg/jfr"
)

// The cluster scenario (issue #26) runs against the one-node Kubernetes that
// `make cluster-up` starts and with the chart it installs
// (distribution/cluster): `make cluster-test` sets OTELCOL_AI_CLUSTER to the
// cluster's folder (.cache/cluster) and runs TestCluster alone.
const (
	envCluster    = "OTELCOL_AI_CLUSTER"
	clusterAgentN = "otelcol-ai"         // the chart's namespace and release (lib.sh)
	clusterAppsNS = "otelcol-ai-tenants" // the workloads' namespace, PSA baseline
	workloadImage = "otelcol-ai-workload:dev"
	// Where the agent's file exporters write on the node (distribution/
	// cluster/values.yaml): the cluster's /var/lib is the folder ns/varlib.
	clusterExportDir = "ns/varlib/otelcol-ai-export"
)

// kube runs the cluster's kubectl (or helm) and returns its output.
type kube struct{ dir string }

func (k kube) cmd(bin string, args ...string) *exec.Cmd {
	if bin == "helm" {
		args = append([]string{"--kubeconfig", filepath.Join(k.dir, "kubeconfig")}, args...)
	} else {
		args = append([]string{"--kubeconfig", filepath.Join(k.dir, "kubeconfig"), "--cache-dir", filepath.Join(k.dir, "kubectl-cache")}, args...)
	}
	c := exec.Command(filepath.Join(k.dir, "bin", bin), args...)
	c.Env = append(os.Environ(), "HELM_CACHE_HOME="+filepath.Join(k.dir, "helm/cache"),
		"HELM_CONFIG_HOME="+filepath.Join(k.dir, "helm/config"), "HELM_DATA_HOME="+filepath.Join(k.dir, "helm/data"))
	return c
}

func (k kube) run(t *testing.T, bin string, stdin string, args ...string) string {
	t.Helper()
	c := k.cmd(bin, args...)
	if stdin != "" {
		c.Stdin = strings.NewReader(stdin)
	}
	out, err := c.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", bin, strings.Join(args, " "), err, out)
	}
	return string(out)
}

func (k kube) kubectl(t *testing.T, args ...string) string {
	t.Helper()
	return k.run(t, "kubectl", "", args...)
}

// clusterWorkload is one Deployment of the scenario.
type clusterWorkload struct {
	name, service string // Deployment (and container) name; service.name
	optOut        bool   // annotated otelcol-ai.io/jfr-attach: "false"
	command       string // sh -c
	env           map[string]string
	*workload     // its process, once found
	podName       string
	podIP         string
}

// clusterWorkloads: the traced Java service (uid 1000, no JFR flag: the
// agent attaches), the hybrid example (a JVM embedding CPython through Jep,
// recording JFR itself), the traced CPython service on the Python SDK's
// defaults, and an opted-out JVM. The Java and Python services read their
// commands (serve, stop) from stdin, here a file the test appends to with
// kubectl exec.
func clusterWorkloads() []*clusterWorkload {
	const site = "/opt/venv/lib/python3.11/site-packages"
	// tail ends when its reader does (coreutils 9 watches its output), so
	// the container then sleeps on: its logs and pod stay for the checks.
	feed := func(cmd string) string {
		return "touch /tmp/ctl && tail -f /tmp/ctl | " + cmd + "; exec sleep 1000000"
	}
	return []*clusterWorkload{{
		name: "java-service", service: "cluster-java-service",
		command: feed("exec java -javaagent:/opt/workload/opentelemetry-javaagent.jar -Xmx64m -XX:+UseG1GC -cp '/opt/workload/classes:/opt/workload/lib/*' Service"),
		env: map[string]string{"OTEL_SERVICE_NAME": "cluster-java-service", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://$(HOST_IP):4318",
			"OTEL_METRICS_EXPORTER": "none", "OTEL_LOGS_EXPORTER": "none"},
	}, {
		name: "python-service", service: "cluster-python-service",
		command: feed("exec python /opt/workload/service.py"),
		env:     map[string]string{"OTEL_SERVICE_NAME": "cluster-python-service", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://$(HOST_IP):4317"},
	}, {
		name: "hybrid", service: "hybrid-inference",
		command: "java -Xmx256m -XX:+UseG1GC -XX:StartFlightRecording:settings=profile -cp '/opt/hybrid/classes:/opt/hybrid/dependency/*' ai.otelcol.hybrid.HybridService; exec sleep 100000",
		env: map[string]string{"HYBRID_MODE": "embedded", "HYBRID_REQUESTS": "100000000", "HYBRID_WORKERS": "2", "HYBRID_ALLOCATORS": "1",
			"HYBRID_JEP_LIBRARY": site + "/jep/libjep.so", "HYBRID_PYTHON_PATH": "/opt/hybrid/python:" + site,
			"HYBRID_MODEL": "/opt/hybrid/models/runtime_overlap/1/model.onnx", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://$(HOST_IP):4317"},
	}, {
		name: "opted-out-jvm", optOut: true,
		command: feed("exec java -Xmx32m -cp '/opt/workload/classes:/opt/workload/lib/*' Service"),
	}, {
		// Never told to stop: its recording, started by the agent, is the
		// one helm uninstall must stop.
		name:    "idle-jvm",
		command: feed("exec java -Xmx32m -cp '/opt/workload/classes:/opt/workload/lib/*' Service"),
	}, {
		// Records JFR itself on the default settings, which leave short
		// safepoints out: the agent adds a safepoint log to it.
		name:    "default-jfr-jvm",
		command: feed("exec java -Xmx32m -XX:StartFlightRecording -cp '/opt/workload/classes:/opt/workload/lib/*' Service"),
	}}
}

// traced: the workload sends spans.
func (w *clusterWorkload) traced() bool { return w.service != "" }

func (w *clusterWorkload) manifest() string {
	var b strings.Builder
	annotations := ""
	if w.optOut {
		annotations = "\n      annotations:\n        otelcol-ai.io/jfr-attach: \"false\""
	}
	fmt.Fprintf(&b, `apiVersion: apps/v1
kind: Deployment
metadata:
  name: %[1]s
  namespace: %[2]s
spec:
  replicas: 1
  selector:
    matchLabels: {app: %[1]s}
  template:
    metadata:
      labels: {app: %[1]s}%[3]s
    spec:
      terminationGracePeriodSeconds: 2
      securityContext:
        runAsUser: 1000
        runAsGroup: 1000
        runAsNonRoot: true
      containers:
        - name: %[1]s
          image: %[4]s
          imagePullPolicy: Never
          command: [sh, -c, %[5]q]
          resources:
            limits: {memory: 768Mi}
          env:
            - name: HOST_IP
              valueFrom: {fieldRef: {fieldPath: status.hostIP}}
`, w.name, clusterAppsNS, annotations, workloadImage, w.command)
	keys := make([]string, 0, len(w.env))
	for k := range w.env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "            - {name: %s, value: %q}\n", k, w.env[k])
	}
	return b.String()
}

// TestCluster: the issue #26 scenario in real pods, against the chart as
// `make cluster-up` installed it.
func TestCluster(t *testing.T) {
	dir := os.Getenv(envCluster)
	if dir == "" {
		t.Skipf("%s is unset: `make cluster-test` runs this against the one-node cluster", envCluster)
	}
	k := kube{dir}
	export := filepath.Join(dir, clusterExportDir)
	begin := time.Now()

	k.kubectl(t, "create", "namespace", clusterAppsNS)
	t.Cleanup(func() { _, _ = k.cmd("kubectl", "delete", "namespace", clusterAppsNS, "--wait=false").CombinedOutput() })
	k.kubectl(t, "label", "namespace", clusterAppsNS, "pod-security.kubernetes.io/enforce=baseline")
	agentPID := clusterAgentPID(t, k)
	cpu0 := procCPU(t, agentPID)

	workloads := clusterWorkloads()
	for _, w := range workloads {
		k.run(t, "kubectl", w.manifest(), "apply", "-f", "-")
	}
	// On failure, each workload's output and the agent's log are kept in
	// the cluster's log folder (cluster-down removes the pods' own).
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		for _, w := range workloads {
			out, _ := k.cmd("kubectl", "-n", clusterAppsNS, "logs", "deploy/"+w.name, "--tail=-1").CombinedOutput()
			desc, _ := k.cmd("kubectl", "-n", clusterAppsNS, "describe", "pods", "-l", "app="+w.name).CombinedOutput()
			_ = os.WriteFile(filepath.Join(dir, "log", "workload-"+w.name+".log"), append(out, desc...), 0o644)
		}
		keepAgentLog(t, k, "agent-at-failure.log")
	})
	for _, w := range workloads {
		k.kubectl(t, "-n", clusterAppsNS, "rollout", "status", "deployment/"+w.name, "--timeout=240s")
		w.podName = strings.TrimSpace(k.kubectl(t, "-n", clusterAppsNS, "get", "pods", "-l", "app="+w.name, "-o", "jsonpath={.items[0].metadata.name}"))
		var pod struct {
			Metadata struct{ UID string }
			Status   struct {
				PodIP             string
				ContainerStatuses []struct{ ContainerID string }
			}
		}
		if err := json.Unmarshal([]byte(k.kubectl(t, "-n", clusterAppsNS, "get", "pod", w.podName, "-o", "json")), &pod); err != nil {
			t.Fatal(err)
		}
		cid := strings.TrimPrefix(pod.Status.ContainerStatuses[0].ContainerID, "containerd://")
		w.podIP = pod.Status.PodIP
		binary := "java"
		if w.name == "python-service" {
			binary = "python"
		}
		pid := waitContainerProcess(t, cid, binary, 120*time.Second)
		w.workload = &workload{name: w.service, hostPID: pid,
			container: &containertest.Container{ID: cid, PodUID: pod.Metadata.UID},
			pod:       &containertest.Pod{UID: pod.Metadata.UID, Hostname: w.podName}}
		if w.service == "" {
			w.workload.name = w.name
		}
		w.vpid = nsPID(t, pid)
		t.Logf("%s: pod %s (%s), container %.12s, host pid %d, pid %d inside, uid %d", w.name, w.podName, w.podIP, cid, pid, w.vpid, procUID(t, pid))
	}
	byName := map[string]*clusterWorkload{}
	var recorded []*workload // every workload whose windows are expected
	for _, w := range workloads {
		byName[w.name] = w
		if !w.optOut {
			recorded = append(recorded, w.workload)
		}
	}

	// Requests begin once the agent follows every recorded workload: the
	// non-root Java service through the agent's own attach.
	logs := func() []plog.Logs {
		return readExport(t, export, "logs.jsonl", (&plog.JSONUnmarshaler{}).UnmarshalLogs)
	}
	waitFor(t, 180*time.Second, "windows of every traced workload", func() bool {
		l := logs()
		for _, w := range workloads {
			if !w.traced() {
				continue
			}
			if len(WindowsOf(l, int64(w.hostPID))) == 0 {
				return false
			}
		}
		return true
	})
	servingFrom := time.Now()
	t.Logf("windows of the traced workloads flowing %s after the pods were applied; serving 20 s", time.Since(begin).Round(time.Second))
	tell := func(w *clusterWorkload, what string) {
		k.kubectl(t, "-n", clusterAppsNS, "exec", w.podName, "--", "sh", "-c", "echo "+what+" >> /tmp/ctl")
	}
	for _, name := range []string{"java-service", "python-service"} {
		tell(byName[name], "serve")
	}
	// The non-root JVMs are recorded by the agent's attach; the opted-out
	// one by nothing.
	checkRecordings(t, k, byName["java-service"], true)
	checkRecordings(t, k, byName["idle-jvm"], true)
	checkRecordings(t, k, byName["opted-out-jvm"], false)
	checkSafepointLog(t, k, byName["default-jfr-jvm"], logs)
	time.Sleep(20 * time.Second)
	sent := map[string]int{}
	for _, name := range []string{"java-service", "python-service"} {
		w := byName[name]
		tell(w, "stop")
		var res struct{ Spans int }
		waitFor(t, 60*time.Second, name+"'s span count", func() bool {
			return podLine(k, w.podName, "spans", &res)
		})
		sent[w.service] = res.Spans
	}
	traces := func() []ptrace.Traces {
		return readExport(t, export, "traces.jsonl", (&ptrace.JSONUnmarshaler{}).UnmarshalTraces)
	}
	waitFor(t, 60*time.Second, "every span sent", func() bool {
		got := clusterSpans(traces())
		for svc, n := range sent {
			if len(got[svc]) < n {
				return false
			}
		}
		return len(got["hybrid-inference"]) > 0
	})
	servedUntil := time.Now()
	// The hybrid example serves on: its spans up to now are the scenario's.
	time.Sleep(5 * time.Second)

	allLogs := logs()
	spans := clusterSpans(traces())
	windows := processWindows(t, allLogs, recorded)
	metrics := readExport(t, export, "metrics.jsonl", (&pmetric.JSONUnmarshaler{}).UnmarshalMetrics)
	for _, name := range []string{"java-service", "python-service", "hybrid"} {
		w := byName[name]
		got := spans[w.service]
		if n, ok := sent[w.service]; ok {
			t.Logf("FIGURES %s: %d spans sent, %d arrived", w.service, n, len(got))
			if len(got) != n || n < 50 {
				t.Errorf("%s: %d spans arrived, %d sent (want at least 50)", w.service, len(got), n)
			}
		} else {
			// The hybrid example serves from its start, before the agent
			// follows it: its spans from the first window seen on are the
			// ones that can have every window of their time.
			from := int64(0)
			for _, win := range windows[w.hostPID] {
				if from == 0 || win.observed < from {
					from = win.observed
				}
			}
			var kept []serviceSpan
			for _, s := range got {
				if s.start >= from+int64(2*time.Second) && s.end <= servedUntil.UnixNano() {
					kept = append(kept, s)
				}
			}
			t.Logf("FIGURES %s: %d spans arrived, %d from 2 s after its first window to the end of the scenario", w.service, len(got), len(kept))
			got = kept
		}
		// Within bounds is enough here: on a node shared with the
		// cluster's control plane the Python windows of a span's last
		// second arrive later than the containers test's (the split is in
		// the FIGURES line); none may be missing or foreign.
		checkSpanTotals(t, w.workload, got, windows, recorded, 0)
		checkClusterNames(t, w, "span", got[0].resource)
	}
	// Windows never carry another pod's: processWindows checked each window
	// resource's identity (host pid, pid inside, container, pod); here the
	// names on windows and metrics.
	for _, w := range workloads {
		if w.optOut {
			if n := len(WindowsOf(allLogs, int64(w.hostPID))); n != 0 {
				t.Errorf("%s: %d windows of the opted-out JVM", w.name, n)
			}
			continue
		}
		if !w.traced() {
			continue // the idle JVM may not have collected yet
		}
		checkClusterNames(t, w, "window", windowResource(allLogs, w.hostPID))
		if res, ok := metricResource(metrics, w.hostPID); ok {
			checkClusterNames(t, w, "metric", res)
		} else {
			t.Errorf("%s: no metrics of host pid %d", w.name, w.hostPID)
		}
	}
	t.Logf("serving %s", servedUntil.Sub(servingFrom).Round(time.Second))

	// No container restarted: each process checked is the one started.
	for _, w := range workloads {
		if n := strings.TrimSpace(k.kubectl(t, "-n", clusterAppsNS, "get", "pod", w.podName, "-o", "jsonpath={.status.containerStatuses[0].restartCount}")); n != "0" {
			t.Errorf("%s: container restarted %s times", w.name, n)
		}
	}

	// What the agent cost during the scenario.
	cpu1 := procCPU(t, agentPID)
	elapsed := time.Since(begin)
	t.Logf("FIGURES agent pod: %.2f s of CPU over %s (%.1f%% of a CPU), peak RSS %d MiB, RSS now %d MiB",
		(cpu1 - cpu0).Seconds(), elapsed.Round(time.Second), 100*(cpu1-cpu0).Seconds()/elapsed.Seconds(),
		procStatusKiB(t, agentPID, "VmHWM")>>10, procStatusKiB(t, agentPID, "VmRSS")>>10)

	checkAgentAccess(t, k)
	checkUpgradeKeepsCheckpoints(t, k, export, byName["hybrid"])
	checkUninstallStopsRecordings(t, k, byName["idle-jvm"])
	if list := safepointOutputs(k, byName["default-jfr-jvm"]); strings.Contains(list, "otelcol-ai-safepoints") {
		t.Errorf("default-jfr-jvm: the agent's safepoint log is still configured after helm uninstall: %s", list)
	}
	t.Logf("whole scenario: %s", time.Since(begin).Round(time.Second))
}

// readExport reads what the agent's file exporter wrote to name.
func readExport[T any](t *testing.T, export, name string, decode func([]byte) (T, error)) []T {
	t.Helper()
	out, err := ReadJSONLines(filepath.Join(export, name), decode)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// waitFor polls cond every half second up to timeout.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, timeout)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// podLine decodes the pod's first log line holding key into v.
func podLine(k kube, pod, key string, v any) bool {
	out, err := k.cmd("kubectl", "-n", clusterAppsNS, "logs", pod).Output()
	if err != nil {
		return false
	}
	for _, l := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(l, "{") && strings.Contains(l, `"`+key+`"`) {
			return json.Unmarshal([]byte(l), v) == nil
		}
	}
	return false
}

// clusterSpans: every span by its service.name (the hybrid example's
// "infer", the services' "request").
func clusterSpans(batches []ptrace.Traces) map[string][]serviceSpan {
	out := map[string][]serviceSpan{}
	for _, td := range batches {
		for _, rs := range td.ResourceSpans().All() {
			svc, _ := rs.Resource().Attributes().Get(attrServiceName)
			for _, ss := range rs.ScopeSpans().All() {
				for _, s := range ss.Spans().All() {
					if s.Name() != "request" && s.Name() != "infer" {
						continue
					}
					out[svc.Str()] = append(out[svc.Str()], serviceSpan{resource: rs.Resource().Attributes(),
						start: int64(s.StartTimestamp()), end: int64(s.EndTimestamp()), attrs: s.Attributes()})
				}
			}
		}
	}
	return out
}

// checkClusterNames: a resource about w's process carries its namespace,
// pod, container and Deployment names, as the k8s_attributes processor
// reads them from the API server.
func checkClusterNames(t *testing.T, w *clusterWorkload, what string, res pcommon.Map) {
	t.Helper()
	want := map[string]string{
		"k8s.namespace.name": clusterAppsNS, "k8s.pod.name": w.podName, "k8s.container.name": w.name,
		"k8s.deployment.name": w.name, "k8s.node.name": "otelcol-ai-node", "k8s.cluster.name": "otelcol-ai-local",
	}
	var problems []string
	for key, v := range want {
		if got, _ := res.Get(key); got.Str() != v {
			problems = append(problems, fmt.Sprintf("%s %q, want %q", key, got.Str(), v))
		}
	}
	if len(problems) > 0 {
		t.Errorf("%s: %s resource: %s (whole: %v)", w.name, what, strings.Join(problems, "; "), res.AsRaw())
	}
}

// windowResource: the last exported resource of process pid's windows. (A
// pod's first windows can come before the API server's pod object lists
// its container: then k8s_attributes finds the pod by its UID but no
// container name yet.)
func windowResource(batches []plog.Logs, pid int) pcommon.Map {
	out := pcommon.NewMap()
	for _, ld := range batches {
		for _, rl := range ld.ResourceLogs().All() {
			if v, ok := rl.Resource().Attributes().Get(window.ResourcePID); ok && v.Int() == int64(pid) {
				out = rl.Resource().Attributes()
			}
		}
	}
	return out
}

// metricResource: the last exported resource of process pid's metrics.
func metricResource(batches []pmetric.Metrics, pid int) (pcommon.Map, bool) {
	out, found := pcommon.NewMap(), false
	for _, md := range batches {
		for _, rm := range md.ResourceMetrics().All() {
			if v, ok := rm.Resource().Attributes().Get(window.ResourcePID); ok && v.Int() == int64(pid) {
				out, found = rm.Resource().Attributes(), true
			}
		}
	}
	return out, found
}

// checkRecordings: JFR.check in the pod, as the JVM's own user, lists a
// recording named otelcol-ai exactly when want. The JVM is found by jcmd -l
// there (its pid inside) and must be the process the test follows.
func checkRecordings(t *testing.T, k kube, w *clusterWorkload, want bool) {
	t.Helper()
	var last string
	for try := 0; try < 20; try++ {
		if try > 0 {
			time.Sleep(3 * time.Second)
		}
		out, err := k.cmd("kubectl", "-n", clusterAppsNS, "exec", w.podName, "--", "sh", "-c",
			"for p in $(jcmd -l | awk '$2 == \"Service\" || $2 ~ /HybridService/ {print $1}'); do echo \"pid $p\"; jcmd $p JFR.check; done").CombinedOutput()
		last = strings.Join(strings.Fields(string(out)), " ")
		if err != nil || !strings.Contains(last, fmt.Sprintf("pid %d ", w.vpid)) {
			continue // the JVM not found, or it did not answer (yet)
		}
		has := strings.Contains(last, "name=otelcol-ai ")
		if has == want {
			t.Logf("%s: JFR.check: %s", w.name, last)
			return
		}
	}
	t.Errorf("%s (pid %d inside): a recording named otelcol-ai should be %v; JFR.check said: %s", w.name, w.vpid, want, last)
}

// safepointOutputs is a JVM's VM.log list, "" when it does not answer.
func safepointOutputs(k kube, w *clusterWorkload) string {
	out, err := k.cmd("kubectl", "-n", clusterAppsNS, "exec", w.podName, "--", "jcmd", strconv.Itoa(w.vpid), "VM.log", "list").CombinedOutput()
	if err != nil {
		return ""
	}
	return string(out)
}

// checkSafepointLog: the non-root JVM recording with JFR's default
// settings gets the agent's safepoint log (repositories::attach::safepoint_log,
// on in the chart), in its own /tmp; the safepoints of five jcmd
// Thread.print (PrintThreads among them, well under 10 ms: its recording
// leaves them out) then arrive as windows from the log, with the pod's
// names.
func checkSafepointLog(t *testing.T, k kube, w *clusterWorkload, logs func() []plog.Logs) {
	t.Helper()
	file := fmt.Sprintf("/tmp/otelcol-ai-safepoints-%d.log", w.vpid)
	waitFor(t, 120*time.Second, w.name+"'s safepoint log", func() bool {
		return strings.Contains(safepointOutputs(k, w), "file="+file+" all=off,safepoint=info")
	})
	printed := func() (n int) {
		for _, win := range WindowsOf(logs(), int64(w.hostPID)) {
			if win.Kind == window.KindJVMSafepoint && win.Attributes[window.AttrJVMVMOperation] == "PrintThreads" &&
				win.Attributes["jvm.window.source"] == "xlog" {
				n++
			}
		}
		return n
	}
	before := printed()
	for range 5 {
		k.kubectl(t, "-n", clusterAppsNS, "exec", w.podName, "--", "jcmd", strconv.Itoa(w.vpid), "Thread.print")
	}
	waitFor(t, 60*time.Second, w.name+"'s Thread.print safepoints from its log", func() bool { return printed()-before >= 5 })
	checkClusterNames(t, w, "window", windowResource(logs(), w.hostPID))
	t.Logf("%s: %s written by the JVM (uid %d), %d PrintThreads safepoints from it", w.name, file, procUID(t, w.hostPID), printed())
}

// checkAgentAccess: the agent's ServiceAccount can do what the chart's RBAC
// says (pods list and watch, namespaces get) beyond what every
// authenticated ServiceAccount can, and nothing more. The baseline is a
// ServiceAccount with no binding of its own.
func checkAgentAccess(t *testing.T, k kube) {
	t.Helper()
	k.kubectl(t, "-n", clusterAppsNS, "create", "serviceaccount", "nobody")
	canI := func(sa string) map[string]string {
		out := k.kubectl(t, "auth", "can-i", "--list", "--as=system:serviceaccount:"+sa)
		rows := map[string]string{}
		sc := bufio.NewScanner(strings.NewReader(out))
		for sc.Scan() {
			// Resources, Non-Resource URLs, Resource Names, Verbs: the
			// last column is the bracketed verb list, which holds spaces.
			line := sc.Text()
			i := strings.LastIndex(line, "[")
			if i < 0 || strings.HasPrefix(line, "Resources") {
				continue
			}
			rows[strings.Join(strings.Fields(line[:i]), " ")] = line[i:]
		}
		return rows
	}
	base, agent := canI(clusterAppsNS+":nobody"), canI(clusterAgentN+":"+clusterAgentN+"-agent")
	extra := map[string]string{}
	for row, verbs := range agent {
		if base[row] != verbs {
			extra[strings.Fields(row)[0]] = verbs
		}
	}
	want := map[string]string{"pods": "[list watch]", "namespaces": "[get]"}
	t.Logf("FIGURES agent ServiceAccount beyond a bare one: %v", extra)
	if fmt.Sprint(extra) != fmt.Sprint(want) {
		t.Errorf("agent ServiceAccount can, beyond a bare ServiceAccount: %v; the chart says %v", extra, want)
	}
}

// checkUpgradeKeepsCheckpoints: `helm upgrade` with a changed value makes a
// new agent pod, which resumes from the checkpoints the last one kept on
// the node: no window exported by both pods, and the hybrid JVM's GC ids
// without a gap across the upgrade.
func checkUpgradeKeepsCheckpoints(t *testing.T, k kube, export string, hybrid *clusterWorkload) {
	t.Helper()
	before := clusterAgentPID(t, k)
	chart := os.Getenv("OTELCOL_AI_CHART")
	if chart == "" {
		t.Fatal("OTELCOL_AI_CHART is unset (make cluster-test sets it)")
	}
	// The old pod's log to its end, shutdown included.
	follow := k.cmd("kubectl", "-n", clusterAgentN, "logs", "-f", "-l", "app.kubernetes.io/component=agent", "--tail=-1")
	if f, err := os.Create(filepath.Join(k.dir, "log", "agent-before-upgrade.log")); err == nil {
		follow.Stdout, follow.Stderr = f, f
		if follow.Start() == nil {
			t.Cleanup(func() { _ = follow.Process.Kill(); _ = follow.Wait(); f.Close() })
		}
	}
	upgradeAt := time.Now()
	// The old agent must end on its SIGTERM well within the pod's 30 s
	// grace period; one that is still there after 10 s is asked for its
	// goroutines (SIGQUIT: Go prints them to the followed log and exits).
	go func() {
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			if _, err := os.Stat(fmt.Sprintf("/proc/%d", before)); err != nil {
				return
			}
			time.Sleep(200 * time.Millisecond)
		}
		if p, err := os.FindProcess(before); err == nil && p.Signal(syscall.SIGQUIT) == nil {
			t.Errorf("the old agent (pid %d) had not ended 10 s after helm upgrade: sent SIGQUIT; its goroutines are in %s",
				before, filepath.Join(k.dir, "log", "agent-before-upgrade.log"))
		}
	}()
	k.run(t, "helm", "", "upgrade", clusterAgentN, chart, "-n", clusterAgentN, "--reuse-values",
		"--set", "agent.podAnnotations.otelcol-ai\\.io/scenario=upgraded")
	k.kubectl(t, "-n", clusterAgentN, "rollout", "status", "daemonset/"+clusterAgentN+"-agent", "--timeout=180s")
	after := clusterAgentPID(t, k)
	if after == before {
		t.Fatalf("helm upgrade left the agent process %d running", before)
	}
	readyAt := time.Now()
	t.Logf("old agent pod gone and the new one ready %s after helm upgrade", readyAt.Sub(upgradeAt).Round(time.Second))
	// Collections of the hybrid JVM after the new pod has followed it.
	logs := func() []plog.Logs {
		return readExport(t, export, "logs.jsonl", (&plog.JSONUnmarshaler{}).UnmarshalLogs)
	}
	waitFor(t, 120*time.Second, "hybrid windows from the new agent pod", func() bool {
		for _, ld := range logs() {
			for _, rl := range ld.ResourceLogs().All() {
				if v, _ := rl.Resource().Attributes().Get(window.ResourcePID); v.Int() != int64(hybrid.hostPID) {
					continue
				}
				for _, sl := range rl.ScopeLogs().All() {
					for _, lr := range sl.LogRecords().All() {
						if lr.ObservedTimestamp().AsTime().After(readyAt.Add(10 * time.Second)) {
							return true
						}
					}
				}
			}
		}
		return false
	})
	// Each window by what it is, and the agent pods that exported it (told
	// apart by when the record was observed: the old pod stopped before
	// upgradeAt+rollout, the new one started after).
	type key struct {
		kind        window.Kind
		start       int64
		dur         time.Duration
		thread, pid int64
	}
	old, recent := map[key]int{}, map[key]int{}
	gcIDs := map[int64]int64{} // id: start
	for _, ld := range logs() {
		for _, rl := range ld.ResourceLogs().All() {
			pid, _ := rl.Resource().Attributes().Get(window.ResourcePID)
			for _, sl := range rl.ScopeLogs().All() {
				for _, lr := range sl.LogRecords().All() {
					win, err := window.Decode(lr)
					if err != nil {
						continue
					}
					kk := key{win.Kind, win.Start, win.Duration, win.ThreadID, pid.Int()}
					if lr.ObservedTimestamp().AsTime().Before(upgradeAt) {
						old[kk]++
					} else {
						recent[kk]++
					}
					if pid.Int() == int64(hybrid.hostPID) && win.Kind == window.KindJVMGCPause {
						if id, ok := win.Attributes[window.AttrJVMGCID].(int64); ok {
							gcIDs[id] = win.Start
						}
					}
				}
			}
		}
	}
	twice := 0
	for kk := range recent {
		if old[kk] > 0 {
			if twice++; twice <= 3 {
				t.Errorf("window %+v exported before and after the upgrade", kk)
			}
		}
	}
	keepAgentLog(t, k, "agent-after-upgrade.log")
	if out, err := exec.Command("ls", "-la", filepath.Join(k.dir, "ns/varlib/otelcol-ai/storage")).CombinedOutput(); err == nil {
		t.Logf("the agent's storage on the node after the upgrade:\n%s", out)
	}
	// The collections with a pause that the JVM recorded, from its first
	// exported one to those that began 10 s before the last read (a
	// collection still going on has no window yet), each exported: a GC id
	// without a pause (G1's concurrent undo cycle) is no gap.
	recorded := recordedPauses(t, k, hybrid)
	ids := make([]int64, 0, len(gcIDs))
	for id := range gcIDs {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	var missing []int64
	if len(ids) > 0 {
		for id, started := range recorded {
			if _, seen := gcIDs[id]; !seen && id > ids[0] && started < time.Now().Add(-10*time.Second).UnixNano() {
				missing = append(missing, id)
			}
		}
	}
	sort.Slice(missing, func(i, j int) bool { return missing[i] < missing[j] })
	var gaps []string
	for i := 0; i < len(missing); {
		j := i
		for j+1 < len(missing) && missing[j+1] == missing[j]+1 {
			j++
		}
		gaps = append(gaps, fmt.Sprintf("%d..%d", missing[i], missing[j]))
		i = j + 1
	}
	t.Logf("FIGURES helm upgrade: agent pid %d -> %d, ready %s after the upgrade; %d windows before, %d after, %d exported twice; hybrid GC ids %d..%d (%d exported, %d with a pause in its recording), not exported %v",
		before, after, readyAt.Sub(upgradeAt).Round(time.Second), len(old), len(recent), twice, first(ids), last(ids), len(ids), len(recorded), gaps)
	if twice > 0 {
		t.Errorf("%d windows exported by both agent pods", twice)
	}
	if len(gaps) > 0 {
		t.Errorf("hybrid JVM collections recorded with a pause and not exported: %v", gaps)
	}
}

// recordedPauses dumps the hybrid JVM's own recording (JFR.dump, as the
// JVM's user, in its pod) and returns the GC ids of its jdk.GCPhasePause
// events, with the start of each id's first pause.
func recordedPauses(t *testing.T, k kube, w *clusterWorkload) map[int64]int64 {
	t.Helper()
	const file = "/tmp/otelcol-ai-scenario-dump.jfr"
	out, err := k.cmd("kubectl", "-n", clusterAppsNS, "exec", w.podName, "--",
		"jcmd", strconv.Itoa(w.vpid), "JFR.dump", "filename="+file).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: JFR.dump: %v\n%s", w.name, err, out)
	}
	// The pod's /tmp, through the process's root on the node.
	r, err := jfr.Open(fmt.Sprintf("/proc/%d/root%s", w.hostPID, file))
	if err != nil {
		t.Fatalf("%s: the dump: %v", w.name, err)
	}
	defer r.Close()
	ids := map[int64]int64{}
	for i := range r.Chunks() {
		c, err := r.Chunk(i)
		if err != nil {
			t.Fatal(err)
		}
		er := c.Events()
		for er.Next() {
			ev := er.Event()
			if ev.Type.Name != "jdk.GCPhasePause" {
				continue
			}
			id, start := ev.Value("gcId").Int(), ev.StartNanos()
			if prev, ok := ids[id]; !ok || start < prev {
				ids[id] = start
			}
		}
		if err := er.Err(); err != nil {
			t.Fatal(err)
		}
	}
	return ids
}

func first(s []int64) int64 {
	if len(s) == 0 {
		return -1
	}
	return s[0]
}

func last(s []int64) int64 {
	if len(s) == 0 {
		return -1
	}
	return s[len(s)-1]
}

// checkUninstallStopsRecordings: `helm uninstall` stops the agent, which
// stops the recording it started in the non-root JVM.
func checkUninstallStopsRecordings(t *testing.T, k kube, java *clusterWorkload) {
	t.Helper()
	k.run(t, "helm", "", "uninstall", clusterAgentN, "-n", clusterAgentN, "--wait", "--timeout", "120s")
	waitFor(t, 120*time.Second, "the agent pod gone", func() bool {
		out, _ := k.cmd("kubectl", "-n", clusterAgentN, "get", "pods", "-o", "name").Output()
		return strings.TrimSpace(string(out)) == ""
	})
	checkRecordings(t, k, java, false)
}

// keepAgentLog writes the agent pod's log to the cluster's log folder.
func keepAgentLog(t *testing.T, k kube, name string) {
	out, err := k.cmd("kubectl", "-n", clusterAgentN, "logs", "-l", "app.kubernetes.io/component=agent", "--tail=-1").CombinedOutput()
	if err != nil {
		t.Logf("agent log: %v", err)
	}
	_ = os.WriteFile(filepath.Join(k.dir, "log", name), out, 0o644)
}

// clusterAgentPID is the host pid of the otelcol-ai process of the agent
// pod on the node.
func clusterAgentPID(t *testing.T, k kube) int {
	t.Helper()
	var cid string
	waitFor(t, 120*time.Second, "a running agent pod", func() bool {
		out, err := k.cmd("kubectl", "-n", clusterAgentN, "get", "pods", "-l", "app.kubernetes.io/component=agent",
			"-o", "jsonpath={range .items[*]}{.metadata.deletionTimestamp}|{.status.containerStatuses[0].ready}|{.status.containerStatuses[0].containerID}{\"\\n\"}{end}").Output()
		if err != nil {
			return false
		}
		for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			f := strings.Split(l, "|")
			if len(f) == 3 && f[0] == "" && f[1] == "true" {
				cid = strings.TrimPrefix(f[2], "containerd://")
				return true
			}
		}
		return false
	})
	return waitContainerProcess(t, cid, "otelcol-ai", 60*time.Second)
}

// waitContainerProcess finds the host pid of the process named binary (its
// command's base name) in container cid's cgroup.
func waitContainerProcess(t *testing.T, cid, binary string, timeout time.Duration) int {
	t.Helper()
	var found int
	waitFor(t, timeout, fmt.Sprintf("a %s process in container %.12s", binary, cid), func() bool {
		entries, _ := os.ReadDir("/proc")
		for _, e := range entries {
			pid, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			cg, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
			if err != nil || !strings.Contains(string(cg), cid) {
				continue
			}
			cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
			if argv0, _, _ := strings.Cut(string(cmd), "\x00"); filepath.Base(argv0) == binary {
				found = pid
				return true
			}
		}
		return false
	})
	return found
}

// nsPID: the pid a process sees itself as (the last NSpid field).
func nsPID(t *testing.T, pid int) int {
	t.Helper()
	f := strings.Fields(procStatus(t, pid, "NSpid"))
	n, _ := strconv.Atoi(f[len(f)-1])
	return n
}

func procUID(t *testing.T, pid int) int {
	t.Helper()
	n, _ := strconv.Atoi(strings.Fields(procStatus(t, pid, "Uid"))[0])
	return n
}

func procStatusKiB(t *testing.T, pid int, field string) int64 {
	t.Helper()
	n, _ := strconv.ParseInt(strings.Fields(procStatus(t, pid, field))[0], 10, 64)
	return n
}

func procStatus(t *testing.T, pid int, field string) string {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(l, field+":"); ok {
			return strings.TrimSpace(v)
		}
	}
	t.Fatalf("/proc/%d/status: no %s", pid, field)
	return ""
}

// procCPU: user + system time of a process so far (clock ticks of 10 ms).
func procCPU(t *testing.T, pid int) time.Duration {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(data[bytes.LastIndexByte(data, ')')+2:]))
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * 10 * time.Millisecond
}
