//go:build imagetest

// The image `make image` built under runc, as the
// chart's DaemonSet runs it: read-only root filesystem, every capability
// dropped but the chart's agent.capabilities, no privilege escalation, a
// seccomp filter, the host's pid namespace, an emptyDir-like /tmp. It checks
// that the collector starts, serves health, accepts OTLP over loopback and
// writes what it got, and reports the version the image was built with.
//
// Run by `make image-test` (it sets OTELCOL_AI_IMAGE_LAYOUT, _REF, _VERSION);
// needs root, runc and umoci. Built only with -tags imagetest, so plain
// `go test ./...` does not compile it.

package imagetest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"
)

func need(t *testing.T, what string, ok bool) {
	t.Helper()
	if ok {
		return
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("%s (CI is set: this test must not skip)", what)
	}
	t.Skip(what)
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// chartCapabilities reads agent.capabilities from the chart's values.yaml,
// and agent.jfrAttach.capabilities when attach is on by default, so the
// test grants what the DaemonSet grants.
func chartCapabilities(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile("../../helm/otelcol-ai/values.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Agent struct {
			Capabilities []string `json:"capabilities"`
			JFRAttach    struct {
				Enabled      bool     `json:"enabled"`
				Capabilities []string `json:"capabilities"`
			} `json:"jfrAttach"`
		} `json:"agent"`
	}
	if err := yaml.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	if len(v.Agent.Capabilities) == 0 {
		t.Fatal("values.yaml: no agent.capabilities")
	}
	names := v.Agent.Capabilities
	if v.Agent.JFRAttach.Enabled {
		if len(v.Agent.JFRAttach.Capabilities) == 0 {
			t.Fatal("values.yaml: attach on, no agent.jfrAttach.capabilities")
		}
		names = append(append([]string{}, names...), v.Agent.JFRAttach.Capabilities...)
	}
	caps := make([]string, len(names))
	for i, c := range names {
		caps[i] = "CAP_" + c
	}
	return caps
}

// grantable drops from caps what this test's own bounding set lacks (runc
// cannot grant it: "unable to apply caps"), saying so. A sandbox without
// CAP_SYS_RESOURCE is common; the chart needs it on kernels before 5.11 only.
func grantable(t *testing.T, caps []string) []string {
	t.Helper()
	bnd, err := strconv.ParseUint(procStatus(t, os.Getpid())["CapBnd"], 16, 64)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, c := range caps {
		bit, ok := capBits[c]
		if !ok {
			t.Fatalf("capability %s: add its number to capBits", c)
		}
		if bnd&(1<<bit) == 0 {
			t.Logf("%s: not in this test's bounding set (%016x), so not granted to the container", c, bnd)
			continue
		}
		out = append(out, c)
	}
	return out
}

// capBits are the capability numbers (linux/capability.h) of the names used.
var capBits = map[string]uint{
	"CAP_DAC_READ_SEARCH": 2, "CAP_KILL": 5, "CAP_SYS_PTRACE": 19, "CAP_SYS_ADMIN": 21,
	"CAP_SYS_RESOURCE": 24, "CAP_CHOWN": 0, "CAP_DAC_OVERRIDE": 1, "CAP_PERFMON": 38, "CAP_BPF": 39,
}

// seccompProfile approximates the runtimes' RuntimeDefault for a container
// holding the chart's capabilities: everything allowed but what containerd's
// and Docker's default profiles refuse to a container without CAP_SYS_ADMIN
// (mount, namespaces, kernel modules, keyrings, clock, reboot, ...). bpf,
// perf_event_open, ptrace and process_vm_readv stay allowed, as those
// profiles allow them to holders of CAP_BPF, CAP_PERFMON, CAP_SYS_PTRACE.
func seccompProfile() map[string]any {
	denied := []string{
		"acct", "add_key", "clock_adjtime", "clock_settime", "create_module", "delete_module",
		"finit_module", "get_kernel_syms", "get_mempolicy", "init_module", "ioperm", "iopl",
		"kcmp", "kexec_file_load", "kexec_load", "keyctl", "lookup_dcookie", "mbind", "mount",
		"mount_setattr", "move_mount", "move_pages", "name_to_handle_at", "nfsservctl",
		"open_by_handle_at", "open_tree", "fsopen", "fsconfig", "fsmount", "fspick", "pivot_root",
		"quotactl", "reboot", "request_key", "set_mempolicy", "setns", "settimeofday", "swapoff",
		"swapon", "sysfs", "_sysctl", "umount2", "unshare", "uselib", "userfaultfd", "ustat",
		"vhangup",
	}
	return map[string]any{
		"defaultAction": "SCMP_ACT_ALLOW",
		"architectures": map[string][]string{"amd64": {"SCMP_ARCH_X86_64", "SCMP_ARCH_X86", "SCMP_ARCH_X32"}, "arm64": {"SCMP_ARCH_AARCH64", "SCMP_ARCH_ARM"}}[runtime.GOARCH],
		"syscalls": []map[string]any{{
			"names": denied, "action": "SCMP_ACT_ERRNO", "errnoRet": 1,
		}},
	}
}

func TestImageRunsAsTheDaemonSet(t *testing.T) {
	layout, ref, version := os.Getenv("OTELCOL_AI_IMAGE_LAYOUT"), os.Getenv("OTELCOL_AI_IMAGE_REF"), os.Getenv("OTELCOL_AI_IMAGE_VERSION")
	need(t, "OTELCOL_AI_IMAGE_LAYOUT/_REF/_VERSION unset: run `make image-test`", layout != "" && ref != "" && version != "")
	need(t, "not root: runc and umoci unpack need it", os.Geteuid() == 0)
	runc, err := exec.LookPath("runc")
	need(t, "runc not installed (apt-get install runc)", err == nil)
	umoci, err := exec.LookPath("umoci")
	need(t, "umoci not installed (apt-get install umoci)", err == nil)

	work := t.TempDir()
	bundle := filepath.Join(work, "bundle")
	start := time.Now()
	if out, err := exec.Command(umoci, "unpack", "--image", layout+":"+ref, bundle).CombinedOutput(); err != nil {
		t.Fatalf("umoci unpack %s:%s: %v\n%s", layout, ref, err, out)
	}
	t.Logf("unpacked %s:%s in %v", layout, ref, time.Since(start).Round(time.Millisecond))

	outDir := filepath.Join(work, "out")
	if err := os.MkdirAll(outDir, 0o777); err != nil {
		t.Fatal(err)
	}
	grpcPort, httpPort, promPort, healthPort, telPort, timelinePort := freePort(t), freePort(t), freePort(t), freePort(t), freePort(t), freePort(t)
	caps := grantable(t, chartCapabilities(t))

	specPath := filepath.Join(bundle, "config.json")
	data, err := os.ReadFile(specPath)
	if err != nil {
		t.Fatal(err)
	}
	var spec map[string]any
	if err := json.Unmarshal(data, &spec); err != nil {
		t.Fatal(err)
	}
	process := spec["process"].(map[string]any)
	if args := fmt.Sprint(process["args"]); args != "[/otelcol-ai/otelcol-ai --config=embedded:default]" {
		t.Errorf("the image's entrypoint and command are %s", args)
	}
	process["terminal"] = false
	process["noNewPrivileges"] = true // allowPrivilegeEscalation: false
	process["user"] = map[string]any{"uid": 0, "gid": 0}
	process["capabilities"] = map[string]any{
		"bounding": caps, "effective": caps, "permitted": caps, "inheritable": []string{}, "ambient": []string{},
	}
	env, _ := process["env"].([]any)
	for _, kv := range []string{
		fmt.Sprintf("OTELCOL_AI_OTLP_GRPC_ENDPOINT=127.0.0.1:%d", grpcPort),
		fmt.Sprintf("OTELCOL_AI_OTLP_HTTP_ENDPOINT=127.0.0.1:%d", httpPort),
		fmt.Sprintf("OTELCOL_AI_PROMETHEUS_ENDPOINT=127.0.0.1:%d", promPort),
		fmt.Sprintf("OTELCOL_AI_HEALTH_ENDPOINT=127.0.0.1:%d", healthPort),
		"OTELCOL_AI_TELEMETRY_HOST=127.0.0.1",
		fmt.Sprintf("OTELCOL_AI_TELEMETRY_PORT=%d", telPort),
		fmt.Sprintf("OTELCOL_AI_TIMELINE_ENDPOINT=127.0.0.1:%d", timelinePort),
		"OTELCOL_AI_OUTPUT_DIR=/out",
		"K8S_NODE_NAME=image-test-node",
		"GOMEMLIMIT=409MiB",
	} {
		env = append(env, kv)
	}
	process["env"] = env
	spec["root"] = map[string]any{"path": "rootfs", "readonly": true}
	spec["hostname"] = "otelcol-ai-image-test"
	mounts, _ := spec["mounts"].([]any)
	mounts = append(mounts,
		map[string]any{"destination": "/tmp", "type": "tmpfs", "source": "tmpfs", "options": []string{"nosuid", "nodev", "mode=1777", "size=64m"}},
		map[string]any{"destination": "/out", "type": "bind", "source": outDir, "options": []string{"rbind", "rw"}},
	)
	spec["mounts"] = mounts
	linux := spec["linux"].(map[string]any)
	// hostPID, and the host's network for its loopback (the chart's pods
	// have their own; loopback is what this test can reach).
	var namespaces []any
	for _, ns := range linux["namespaces"].([]any) {
		switch ns.(map[string]any)["type"] {
		case "pid", "network":
		default:
			namespaces = append(namespaces, ns)
		}
	}
	linux["namespaces"] = namespaces
	linux["seccomp"] = seccompProfile()
	if data, err = json.MarshalIndent(spec, "", "  "); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(specPath, data, 0o644); err != nil {
		t.Fatal(err)
	}

	id := fmt.Sprintf("otelcol-ai-image-test-%d", os.Getpid())
	var logs bytes.Buffer
	cmd := exec.Command(runc, "run", "--bundle", bundle, id)
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = exec.Command(runc, "kill", id, "KILL").Run()
			<-exited
		}
		_ = exec.Command(runc, "delete", "--force", id).Run()
		if t.Failed() {
			t.Logf("collector output:\n%s", logs.String())
		}
	})

	// Healthy: the health_check extension answers 200 once every pipeline runs.
	start = time.Now()
	healthy := false
	for deadline := time.Now().Add(90 * time.Second); time.Now().Before(deadline); time.Sleep(250 * time.Millisecond) {
		select {
		case err := <-exited:
			stopped = true
			t.Fatalf("the collector exited before it was healthy: %v", err)
		default:
		}
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/", healthPort))
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				healthy = true
				break
			}
		}
	}
	if !healthy {
		t.Fatalf("no healthy answer on 127.0.0.1:%d within 90 s", healthPort)
	}
	t.Logf("healthy %v after runc run", time.Since(start).Round(time.Millisecond))

	// It runs as the DaemonSet's container would.
	st, err := exec.Command(runc, "state", id).Output()
	if err != nil {
		t.Fatal(err)
	}
	var state struct {
		Pid int `json:"pid"`
	}
	if err := json.Unmarshal(st, &state); err != nil || state.Pid <= 0 {
		t.Fatalf("runc state: %v %s", err, st)
	}
	status := procStatus(t, state.Pid)
	var want uint64
	for _, c := range caps {
		bit, ok := capBits[c]
		if !ok {
			t.Fatalf("capability %s: add its number to capBits", c)
		}
		want |= 1 << bit
	}
	for _, f := range []string{"CapEff", "CapPrm", "CapBnd"} {
		got, err := strconv.ParseUint(status[f], 16, 64)
		if err != nil || got != want {
			t.Errorf("%s %s, want %016x (%v)", f, status[f], want, caps)
		}
	}
	if status["NoNewPrivs"] != "1" || status["Seccomp"] != "2" {
		t.Errorf("NoNewPrivs %s, Seccomp %s: want 1 and 2 (filter)", status["NoNewPrivs"], status["Seccomp"])
	}
	if mi, err := os.ReadFile(fmt.Sprintf("/proc/%d/mountinfo", state.Pid)); err != nil || !rootReadOnly(string(mi)) {
		t.Errorf("the container's / is not mounted read-only (%v)", err)
	}

	// One span and one metric over OTLP/HTTP on loopback.
	span := `{"resourceSpans":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"image-test"}}]},
		"scopeSpans":[{"spans":[{"traceId":"5b8efff798038103d269b633813fc60c","spanId":"eee19b7ec3c1b174",
		"name":"image-test-span","kind":2,"startTimeUnixNano":"1764547200000000000","endTimeUnixNano":"1764547200250000000"}]}]}]}`
	metric := `{"resourceMetrics":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"image-test"}}]},
		"scopeMetrics":[{"metrics":[{"name":"image_test_gauge","gauge":{"dataPoints":[
		{"asInt":"4242","timeUnixNano":"1764547200000000000"}]}}]}]}]}`
	for path, body := range map[string]string{"/v1/traces": span, "/v1/metrics": metric} {
		resp, err := http.Post(fmt.Sprintf("http://127.0.0.1:%d%s", httpPort, path), "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatalf("POST %s: %v", path, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("POST %s: %s", path, resp.Status)
		}
	}
	waitFor(t, filepath.Join(outDir, "traces.jsonl"), `"name":"image-test-span"`, `"traceId":"5b8efff798038103d269b633813fc60c"`)
	waitFor(t, filepath.Join(outDir, "metrics.jsonl"), `"name":"image_test_gauge"`, `"asInt":"4242"`)

	// Its own telemetry names the version the image was built from.
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", telPort))
	if err != nil {
		t.Fatal(err)
	}
	body := new(bytes.Buffer)
	_, _ = body.ReadFrom(resp.Body)
	resp.Body.Close()
	if !strings.Contains(body.String(), `service_version="`+version+`"`) {
		t.Errorf("the collector's own metrics do not carry service_version=%q", version)
	}

	// SIGTERM, as the kubelet stops it: a clean exit.
	if out, err := exec.Command(runc, "kill", id, "TERM").CombinedOutput(); err != nil {
		t.Fatalf("runc kill TERM: %v %s", err, out)
	}
	select {
	case err := <-exited:
		stopped = true
		if err != nil {
			t.Errorf("the collector exited with %v after SIGTERM", err)
		}
	case <-time.After(30 * time.Second):
		t.Error("the collector did not exit within 30 s of SIGTERM")
	}
}

func procStatus(t *testing.T, pid int) map[string]string {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, line := range strings.Split(string(data), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			out[k] = strings.TrimSpace(v)
		}
	}
	return out
}

// rootReadOnly: the mount at / in a mountinfo has the ro option.
func rootReadOnly(mountinfo string) bool {
	for _, line := range strings.Split(mountinfo, "\n") {
		f := strings.Fields(line)
		if len(f) > 5 && f[4] == "/" {
			return strings.Split(f[5], ",")[0] == "ro"
		}
	}
	return false
}

func waitFor(t *testing.T, path string, wants ...string) {
	t.Helper()
	var data []byte
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(250 * time.Millisecond) {
		data, _ = os.ReadFile(path)
		ok := true
		for _, w := range wants {
			ok = ok && bytes.Contains(data, []byte(w))
		}
		if ok {
			return
		}
	}
	t.Fatalf("%s: %v not written within 30 s (%d bytes there)", path, wants, len(data))
}
