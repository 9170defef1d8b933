package attach

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"

	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/attach/kubetest"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/discovery"
)

// TestPodWatcherOptOuts runs the real client-go informer against an API
// server made in the test: the pods of this node only (field selector),
// the pod's annotation or label, else its namespace's label or annotation,
// a pod created after the first list (a watch event), and "not known"
// until the first list is in.
func TestPodWatcherOptOuts(t *testing.T) {
	const node = "gpu-node-1"
	api := kubetest.Start(t, nil,
		kubetest.Namespace("quiet", map[string]string{OptOutKey: "false"}, nil),
		kubetest.Namespace("noisy", nil, nil),
		kubetest.Namespace("annotated", nil, map[string]string{OptOutKey: "off"}),
	)
	for _, p := range []struct {
		ns, name, uid, node string
		ann, labels         map[string]string
	}{
		{"noisy", "annotated", "11111111-1111-1111-1111-111111111111", node, map[string]string{OptOutKey: "false"}, nil},
		{"noisy", "labelled", "22222222-2222-2222-2222-222222222222", node, nil, map[string]string{OptOutKey: "0"}},
		{"noisy", "plain", "33333333-3333-3333-3333-333333333333", node, map[string]string{OptOutKey: "true"}, nil},
		{"quiet", "in-quiet", "44444444-4444-4444-4444-444444444444", node, nil, nil},
		{"annotated", "in-annotated", "55555555-5555-5555-5555-555555555555", node, nil, nil},
		{"noisy", "elsewhere", "66666666-6666-6666-6666-666666666666", "other-node", map[string]string{OptOutKey: "false"}, nil},
	} {
		api.AddPod(kubetest.Pod(p.ns, p.name, p.uid, p.node, p.ann, p.labels))
	}

	w, err := NewPodWatcher(&rest.Config{Host: api.URL}, node, nil)
	if err != nil {
		t.Fatal(err)
	}
	if why, known := w.OptOut("11111111-1111-1111-1111-111111111111"); known || why == "" {
		t.Errorf("before the informer started: %q, %v; want not known, and why", why, known)
	}
	w.Start()
	defer w.Close()
	deadline := time.Now().Add(10 * time.Second)
	for !w.pods.HasSynced() {
		if time.Now().After(deadline) {
			t.Fatal("informer not synced after 10 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, tc := range []struct {
		uid  string
		want string
	}{
		{"11111111-1111-1111-1111-111111111111", "pod noisy/annotated annotation otelcol-ai.io/jfr-attach=false"},
		{"22222222-2222-2222-2222-222222222222", "pod noisy/labelled label otelcol-ai.io/jfr-attach=0"},
		{"33333333-3333-3333-3333-333333333333", ""},
		{"44444444-4444-4444-4444-444444444444", "namespace quiet label otelcol-ai.io/jfr-attach=false"},
		{"55555555-5555-5555-5555-555555555555", "namespace annotated annotation otelcol-ai.io/jfr-attach=off"},
	} {
		got, known := w.OptOut(tc.uid)
		if !known || got != tc.want {
			t.Errorf("pod %s: %q, %v; want %q", tc.uid, got, known, tc.want)
		}
	}
	// A pod UID comes from a process on this node: one not in this node's
	// list (another node's pod, or one the watch has not brought yet) is
	// not known, so its JVMs wait.
	for _, uid := range []string{"66666666-6666-6666-6666-666666666666", "77777777-7777-7777-7777-777777777777"} {
		if got, known := w.OptOut(uid); known || !strings.Contains(got, "not in the pod list of this node") {
			t.Errorf("pod %s, not listed: %q, %v; want not known, and why", uid, got, known)
		}
	}
	t.Logf("API requests: %d pod lists, %d pod watches, %d namespace gets", api.Requests("list pods"), api.Requests("watch pods"), api.Requests("get namespace"))
	if n := api.Requests("get namespace"); n != 3 {
		t.Errorf("%d namespace gets, want 3 (each namespace once, then kept)", n)
	}

	// A pod made after the first list arrives by the watch.
	late := "88888888-8888-8888-8888-888888888888"
	api.AddPod(kubetest.Pod("noisy", "late", late, node, map[string]string{OptOutKey: "false"}, nil))
	for {
		if got, _ := w.OptOut(late); strings.Contains(got, "noisy/late") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a pod added after the list never arrived through the watch")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// syncedtest starts w and waits for its first pod list.
func syncedtest(t *testing.T, w *PodWatcher) {
	t.Helper()
	w.Start()
	t.Cleanup(w.Close)
	for deadline := time.Now().Add(10 * time.Second); !w.pods.HasSynced(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("informer not synced after 10 s")
		}
	}
}

// staticHash is a static pod's UID on its node: the kubelet's hash of its
// manifest (32 hex digits), which its mirror pod names in
// kubernetes.io/config.mirror.
const staticHash = "6d1f3bd3ab5d5c1e2c2b8a3e5f9a0b1c"

// TestPodWatcherMirrorPods: a static pod's opt-out is on its mirror pod,
// which has a UID of its own; asked by the UID the node gives the static
// pod (its config hash), the watcher answers from the mirror pod.
func TestPodWatcherMirrorPods(t *testing.T) {
	const node = "gpu-node-1"
	api := kubetest.Start(t, []corev1.Pod{
		kubetest.Pod("kube-system", "jvm-static-"+node, "aaaaaaaa-0000-0000-0000-000000000001", node,
			map[string]string{mirrorAnnotation: staticHash, "kubernetes.io/config.hash": staticHash, OptOutKey: "false"}, nil),
		kubetest.Pod("kube-system", "jvm-plain-"+node, "aaaaaaaa-0000-0000-0000-000000000002", node,
			map[string]string{mirrorAnnotation: "0123456789abcdef0123456789abcdef"}, nil),
	}, kubetest.Namespace("kube-system", nil, nil))
	w, err := NewPodWatcher(&rest.Config{Host: api.URL}, node, nil)
	if err != nil {
		t.Fatal(err)
	}
	syncedtest(t, w)
	if got, known := w.OptOut(staticHash); !known || got != "pod kube-system/jvm-static-gpu-node-1 annotation otelcol-ai.io/jfr-attach=false" {
		t.Errorf("static pod by its config hash: %q, %v; want its mirror pod's opt-out", got, known)
	}
	if got, known := w.OptOut("0123456789abcdef0123456789abcdef"); !known || got != "" {
		t.Errorf("static pod without an opt-out: %q, %v; want known, not opted out", got, known)
	}
	if got, known := w.OptOut("aaaaaaaa-0000-0000-0000-000000000001"); !known || got == "" {
		t.Errorf("mirror pod by its own UID: %q, %v; want its opt-out", got, known)
	}
}

// podContainertest is a fake container (attach_test.go) whose process is in
// the pod cgroup names (systemd driver, as the kubelet names it), ready to
// be attached, with an attach socket that answers every command with
// success and no recording.
func podContainertest(t *testing.T, cgroup string) (fakeContainer, *atomic.Int32) {
	t.Helper()
	c := newFakeContainer(t, "/app")
	must(t, os.MkdirAll(filepath.Join(c.root, "tmp", "hsperfdata_app"), 0o755))
	must(t, os.WriteFile(filepath.Join(c.root, "tmp", "hsperfdata_app", "1"), nil, 0o644))
	c.thread(t, 4322, "Signal Dispatch")
	must(t, os.WriteFile(filepath.Join(c.proc, strconv.Itoa(fakePID), "cgroup"), []byte(cgroup), 0o644))
	return c, listen(t, filepath.Join(c.root, "tmp", ".java_pid1"), "0\nNo available recordings.\n")
}

// kubepodstest is the cgroup of a container of the pod whose UID on the
// node is uid, as the kubelet's systemd driver names it.
func kubepodstest(uid string) string {
	return "0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" + strings.ReplaceAll(uid, "-", "_") +
		".slice/cri-containerd-" + strings.Repeat("ab", 32) + ".scope\n"
}

// TestUnreadableOptOutMeansNoAttach: a JVM whose pod the informer does not
// have (the watch lags, a relist) is not attached — no connection to its
// socket — and is opt_out_unknown, logged once however often it is looked
// at; once its pod comes without an opt-out, it is attached. A static
// pod's JVM (its cgroup names the pod by its config hash, which procresource
// does not read as a pod UID) is not attached either, though its mirror
// pod says nothing against it.
func TestUnreadableOptOutMeansNoAttach(t *testing.T) {
	const node, uid = "gpu-node-1", "99999999-9999-9999-9999-999999999999"
	api := kubetest.Start(t, []corev1.Pod{
		kubetest.Pod("kube-system", "jvm-static-"+node, "aaaaaaaa-0000-0000-0000-000000000001", node,
			map[string]string{mirrorAnnotation: staticHash}, nil),
	}, kubetest.Namespace("apps", nil, nil), kubetest.Namespace("kube-system", nil, nil))
	w, err := NewPodWatcher(&rest.Config{Host: api.URL}, node, nil)
	if err != nil {
		t.Fatal(err)
	}
	syncedtest(t, w)
	j := discovery.JVM{PID: fakePID, NSPID: 1, StartTicks: 4242}
	recorder := func(c fakeContainer) (*Recorder, *observer.ObservedLogs) {
		core, logs := observer.New(zap.InfoLevel)
		r := NewRecorder(RecorderConfig{ProcRoot: c.proc, Enabled: true, Timeout: 2 * time.Second, Pods: w, Logger: zap.New(core),
			Settings: func(discovery.JVM) (string, func(), error) { return "profile", func() {}, nil }})
		t.Cleanup(r.StopAll)
		return r, logs
	}
	statusLines := func(logs *observer.ObservedLogs, state State) int {
		return logs.FilterMessage("JVM status").FilterField(zap.String("state", string(state))).Len()
	}

	c, conns := podContainertest(t, kubepodstest(uid))
	r, logs := recorder(c)
	for range 5 {
		if err := r.Consider(j, false); err != nil {
			t.Fatal(err)
		}
	}
	s, _ := r.Status(j.PID, j.StartTicks)
	t.Logf("pod not in the informer's list: %s (%s)", s.State, s.Reason)
	if s.State != StateOptOutUnknown || !strings.Contains(s.Reason, uid) {
		t.Errorf("status %q (%q), want %s naming the pod", s.State, s.Reason, StateOptOutUnknown)
	}
	if n := r.Counts()[StateOptOutUnknown]; n != 1 {
		t.Errorf("%d JVMs counted %s, want 1", n, StateOptOutUnknown)
	}
	if n := statusLines(logs, StateOptOutUnknown); n != 1 {
		t.Errorf("%d status lines for %s after five discoveries, want 1", n, StateOptOutUnknown)
	}
	if conns.Load() != 0 {
		t.Errorf("its attach socket got %d connections before its opt-out could be read", conns.Load())
	}

	api.AddPod(kubetest.Pod("apps", "inference", uid, node, nil, nil))
	for deadline := time.Now().Add(10 * time.Second); s.State != StateRecordingOurs; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("status %q (%q) 10 s after its pod came, want %s", s.State, s.Reason, StateRecordingOurs)
		}
		if err := r.Consider(j, false); err != nil {
			t.Fatal(err)
		}
		s, _ = r.Status(j.PID, j.StartTicks)
	}
	if conns.Load() < 2 {
		t.Errorf("%d connections, want JFR.check and JFR.start", conns.Load())
	}

	static, staticConns := podContainertest(t, kubepodstest(staticHash))
	rs, _ := recorder(static)
	for range 3 {
		if err := rs.Consider(j, false); err != nil {
			t.Fatal(err)
		}
	}
	s, _ = rs.Status(j.PID, j.StartTicks)
	t.Logf("static pod: %s (%s)", s.State, s.Reason)
	if s.State != StateOptOutUnknown || !strings.Contains(s.Reason, "static pod") {
		t.Errorf("static pod: status %q (%q), want %s", s.State, s.Reason, StateOptOutUnknown)
	}
	if staticConns.Load() != 0 {
		t.Errorf("the static pod's attach socket got %d connections", staticConns.Load())
	}
}

// podsByUIDtest is a pod policy that knows the pods of a node by UID.
type podsByUIDtest map[string]string

func (p podsByUIDtest) OptOut(podUID string) (string, bool) {
	why, known := p[podUID]
	return why, known
}

// TestPodOptOutFromTheJVMsCgroup: the pod whose opt-out is looked up is
// the one the JVM's own cgroup names (read with its identity, by
// procresource); a cgroup that cannot be read, or one under kubepods that
// names no pod UID, leaves the opt-out unknown; a JVM outside any pod has
// none; one whose start ticks are another process's is gone.
func TestPodOptOutFromTheJVMsCgroup(t *testing.T) {
	const uid = "99999999-9999-9999-9999-999999999999"
	pods := podsByUIDtest{uid: "pod annotation " + uid}
	j := discovery.JVM{PID: fakePID, NSPID: 1, StartTicks: 4242}
	tests := []struct {
		name   string
		cgroup func(path string) error
		jvm    discovery.JVM
		state  State
		reason string
	}{
		{"its pod opted out", contenttest(kubepodstest(uid)), j, StateOptedOut, "pod annotation " + uid},
		{"a pod the policy does not know", contenttest(kubepodstest("11111111-1111-1111-1111-111111111111")), j, StateOptOutUnknown, "pod 11111111-1111-1111-1111-111111111111"},
		{"a static pod", contenttest(kubepodstest(staticHash)), j, StateOptOutUnknown, "static pod"},
		{"no pod", contenttest("0::/system.slice/app.service\n"), j, "", ""},
		{"an unreadable cgroup", func(p string) error { return os.Mkdir(p, 0o755) }, j, StateOptOutUnknown, "its cgroup cannot be read"},
		{"another process under the pid", contenttest(kubepodstest(uid)), discovery.JVM{PID: fakePID, NSPID: 1, StartTicks: 1}, StateFound, "process gone"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newFakeContainer(t, "/app")
			must(t, tt.cgroup(filepath.Join(c.proc, strconv.Itoa(fakePID), "cgroup")))
			r := NewRecorder(RecorderConfig{ProcRoot: c.proc, Enabled: true, Pods: pods, Logger: zap.NewNop()})
			t.Cleanup(r.StopAll)
			state, reason := r.podOptOut(tt.jvm)
			if state != tt.state || !strings.Contains(reason, tt.reason) || (tt.reason == "") != (reason == "") {
				t.Errorf("podOptOut: %q (%q), want %q with a reason containing %q", state, reason, tt.state, tt.reason)
			}
		})
	}
}

// contenttest writes s to a file at the path it is given.
func contenttest(s string) func(string) error {
	return func(p string) error { return os.WriteFile(p, []byte(s), 0o644) }
}
