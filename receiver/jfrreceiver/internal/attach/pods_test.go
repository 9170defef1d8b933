package attach

import (
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/attach/kubetest"
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
	if _, known := w.OptOut("11111111-1111-1111-1111-111111111111"); known {
		t.Error("known before the informer started")
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
		// Another node's pod is not listed here (and its processes are
		// not on this node).
		{"66666666-6666-6666-6666-666666666666", ""},
		{"77777777-7777-7777-7777-777777777777", ""},
	} {
		got, known := w.OptOut(tc.uid)
		if !known || got != tc.want {
			t.Errorf("pod %s: %q, %v; want %q", tc.uid, got, known, tc.want)
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
