package e2etest

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/otelcol-ai/otelcol-ai/internal/e2etest/containertest"
)

// TestPodScopeClaimsAreChecked runs runtimecorrelation with match_scope:
// pod, where a span is compared with every window of its pod: a Python
// service in one pod, and a hostile tenant in another whose spans claim the
// service's k8s.pod.uid (and container.id and pid 1) and who sends GC pauses
// forged as the agent's for the service's process. The service's spans
// carry no forged pause; every attacker span is a mismatch carrying no
// window.
func TestPodScopeClaimsAreChecked(t *testing.T) {
	RequireComponents(t, "pythongil", "runtimecorrelation")
	if why := containertest.Supported(); why != "" {
		t.Skip(why)
	}
	deps := prepareContainerDeps(t)
	grpcPort := FreePorts(t, 1)[0]
	c := Start(t, Options{
		Configs: []string{"embedded:default", "yaml:processors::runtimecorrelation::match_scope: pod",
			"yaml:receivers::pythongil::overhead::budget: 0"},
		Env: map[string]string{EnvOTLPGRPC: fmt.Sprintf("0.0.0.0:%d", grpcPort)},
	})
	if err := c.WaitHealthy(60 * time.Second); err != nil {
		t.Fatal(err)
	}
	node, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	endpoint := func(pod *containertest.Pod) string { return fmt.Sprintf("http://%s:%d", pod.HostIP, grpcPort) }

	pyPod := containertest.StartPod(t, containertest.PodSpec{QoS: containertest.BestEffort, Hostname: "inference-py-pod"})
	py := startContainerWorkload(t, pyPod, "e2e-python-service", []string{deps.python, deps.service}, []string{
		"OTEL_SERVICE_NAME=e2e-python-service", "OTEL_EXPORTER_OTLP_ENDPOINT=" + endpoint(pyPod),
		"OTEL_RESOURCE_ATTRIBUTES=k8s.pod.uid=" + pyPod.UID, "OTEL_BSP_SCHEDULE_DELAY=200",
	})
	attackerPod := containertest.StartPod(t, containertest.PodSpec{QoS: containertest.BestEffort, Hostname: "tenant-x-pod"})
	attacker := startContainerWorkload(t, attackerPod, "e2e-attacker", []string{deps.python, deps.attacker}, []string{
		"OTEL_EXPORTER_OTLP_ENDPOINT=" + endpoint(attackerPod), "OTEL_BSP_SCHEDULE_DELAY=200",
		"VICTIM_CONTAINER_ID=" + py.container.ID, "VICTIM_POD_UID=" + pyPod.UID,
		fmt.Sprintf("VICTIM_HOST_PID=%d", py.hostPID), "NODE_NAME=" + node,
	})
	for _, w := range []*workload{py, attacker} {
		w.readyPID(t, 60*time.Second)
	}
	if err := c.Eventually(60*time.Second, func() bool {
		logs, err := c.Logs("logs.jsonl")
		if err != nil {
			t.Fatal(err)
		}
		return len(WindowsOf(logs, int64(py.hostPID))) > 0
	}); err != nil {
		t.Fatalf("windows of the service: %v", err)
	}
	for _, w := range []*workload{py, attacker} {
		w.tell(t, "serve")
	}
	time.Sleep(8 * time.Second)
	for _, w := range []*workload{py, attacker} {
		w.tell(t, "stop")
	}
	var served struct{ Spans int }
	py.line(t, 30*time.Second, 1, &served)
	var attacks struct{ Spans, Pauses int }
	attacker.line(t, 30*time.Second, 1, &attacks)
	t.Logf("service: %d spans; attacker: %d spans claiming the service's pod, %d forged pauses", served.Spans, attacks.Spans, attacks.Pauses)
	if served.Spans == 0 || attacks.Spans == 0 || attacks.Pauses == 0 {
		t.Fatalf("service sent %d spans; attacker %d spans, %d pauses", served.Spans, attacks.Spans, attacks.Pauses)
	}
	var spans map[string][]serviceSpan
	if err := c.Eventually(30*time.Second, func() bool {
		traces, err := c.Traces("traces.jsonl")
		if err != nil {
			t.Fatal(err)
		}
		spans = spansByService(traces)
		return len(spans[py.name]) >= served.Spans && len(spans[attacker.name]) >= attacks.Spans
	}); err != nil {
		t.Fatalf("spans: %d of %d of the service, %d of %d of the attacker: %v",
			len(spans[py.name]), served.Spans, len(spans[attacker.name]), attacks.Spans, err)
	}
	checkAttackerSpans(t, spans[attacker.name])
	annotated, forged := 0, 0
	for _, s := range spans[py.name] {
		if v, ok := s.attrs.Get(attrUnmatched); ok {
			t.Errorf("service span unmatched: %s", v.Str())
			continue
		}
		for k := range s.attrs.All() {
			if strings.HasPrefix(k, "runtime.overlap.") {
				annotated++
				break
			}
		}
		if _, ok := s.attrs.Get("runtime.overlap.jvm.gc.pause.duration"); ok {
			forged++
		}
	}
	t.Logf("service: %d of %d spans annotated with its pod's windows, %d with a forged pause", annotated, len(spans[py.name]), forged)
	if forged != 0 {
		t.Errorf("%d service spans carry the forged GC pauses", forged)
	}
	if annotated == 0 {
		t.Error("no service span carries its pod's windows")
	}
}
