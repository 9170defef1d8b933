// Package kubetest serves the part of the Kubernetes API that the jfr
// receiver's pod watcher reads, as the real API server does, for tests:
// pods listed and watched (JSON, chunked watch events, field selector
// spec.nodeName, the streaming list client-go asks for first with
// sendInitialEvents) and namespaces by name. It holds what the test gives
// it; AddPod sends a watch event as a pod created later would.
package kubetest // import "github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/attach/kubetest"

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
)

// Server is a fake API server on loopback.
type Server struct {
	*httptest.Server

	mu         sync.Mutex
	version    int
	pods       []corev1.Pod
	namespaces map[string]corev1.Namespace
	watchers   map[chan watchEvent]fields.Selector
	requests   map[string]int // by kind: "list pods", "watch pods", "get namespace"
}

type watchEvent struct {
	Type   string          `json:"type"`
	Object json.RawMessage `json:"object"`
}

// Pod returns a pod on node with the given UID, annotations and labels.
func Pod(namespace, name, uid, node string, annotations, labels map[string]string) corev1.Pod {
	return corev1.Pod{
		TypeMeta: metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, UID: types.UID(uid),
			Annotations: annotations, Labels: labels},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "app", Image: "jvm"}}},
	}
}

// Namespace returns a namespace with the given labels and annotations.
func Namespace(name string, labels, annotations map[string]string) corev1.Namespace {
	return corev1.Namespace{
		TypeMeta:   metav1.TypeMeta{Kind: "Namespace", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, Annotations: annotations},
	}
}

// Start serves pods and namespaces until the test ends.
func Start(t testing.TB, pods []corev1.Pod, namespaces ...corev1.Namespace) *Server {
	t.Helper()
	s := &Server{version: 100, namespaces: map[string]corev1.Namespace{}, watchers: map[chan watchEvent]fields.Selector{}, requests: map[string]int{}}
	for _, p := range pods {
		s.addLocked(p)
	}
	for _, ns := range namespaces {
		s.namespaces[ns.Name] = ns
	}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(func() {
		s.CloseClientConnections()
		s.Close()
	})
	return s
}

// Requests returns how many requests of a kind were served.
func (s *Server) Requests(kind string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests[kind]
}

// AddPod adds a pod and tells the watchers whose selector it matches.
func (s *Server) AddPod(p corev1.Pod) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p = s.addLocked(p)
	raw, _ := json.Marshal(p)
	for ch, sel := range s.watchers {
		if sel.Matches(podFields(p)) {
			ch <- watchEvent{Type: "ADDED", Object: raw}
		}
	}
}

func (s *Server) addLocked(p corev1.Pod) corev1.Pod {
	s.version++
	p.ResourceVersion = strconv.Itoa(s.version)
	s.pods = append(s.pods, p)
	return p
}

func podFields(p corev1.Pod) fields.Set {
	return fields.Set{"spec.nodeName": p.Spec.NodeName, "metadata.name": p.Name, "metadata.namespace": p.Namespace}
}

// Kubeconfig writes a kubeconfig naming the server and returns its path.
func (s *Server) Kubeconfig(t testing.TB) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "kubeconfig")
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: test
  cluster:
    server: %s
contexts:
- name: test
  context:
    cluster: test
    user: test
current-context: test
users:
- name: test
  user:
    token: test-token
`, s.URL)
	if err := os.WriteFile(p, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	switch {
	case r.URL.Path == "/api/v1/pods" && q.Get("watch") == "true":
		s.watchPods(w, r)
	case r.URL.Path == "/api/v1/pods":
		s.listPods(w, r)
	case strings.HasPrefix(r.URL.Path, "/api/v1/namespaces/") && !strings.Contains(strings.TrimPrefix(r.URL.Path, "/api/v1/namespaces/"), "/"):
		s.getNamespace(w, strings.TrimPrefix(r.URL.Path, "/api/v1/namespaces/"))
	default:
		status(w, http.StatusNotFound, "NotFound", "the server could not find the requested resource")
	}
}

func (s *Server) selector(w http.ResponseWriter, r *http.Request) (fields.Selector, bool) {
	sel, err := fields.ParseSelector(r.URL.Query().Get("fieldSelector"))
	if err != nil {
		status(w, http.StatusBadRequest, "BadRequest", err.Error())
		return nil, false
	}
	return sel, true
}

func (s *Server) listPods(w http.ResponseWriter, r *http.Request) {
	sel, ok := s.selector(w, r)
	if !ok {
		return
	}
	s.mu.Lock()
	s.requests["list pods"]++
	list := corev1.PodList{TypeMeta: metav1.TypeMeta{Kind: "PodList", APIVersion: "v1"},
		ListMeta: metav1.ListMeta{ResourceVersion: strconv.Itoa(s.version)}}
	for _, p := range s.pods {
		if sel.Matches(podFields(p)) {
			list.Items = append(list.Items, p)
		}
	}
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(list)
}

// watchPods streams watch events: with sendInitialEvents, every matching
// pod as ADDED then a BOOKMARK marking the initial events' end, as the API
// server does for client-go's streaming list; then pods added later.
func (s *Server) watchPods(w http.ResponseWriter, r *http.Request) {
	sel, ok := s.selector(w, r)
	if !ok {
		return
	}
	ch := make(chan watchEvent, 64)
	s.mu.Lock()
	s.requests["watch pods"]++
	var initial []watchEvent
	if r.URL.Query().Get("sendInitialEvents") == "true" {
		for _, p := range s.pods {
			if sel.Matches(podFields(p)) {
				raw, _ := json.Marshal(p)
				initial = append(initial, watchEvent{Type: "ADDED", Object: raw})
			}
		}
		bookmark, _ := json.Marshal(corev1.Pod{TypeMeta: metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"},
			ObjectMeta: metav1.ObjectMeta{ResourceVersion: strconv.Itoa(s.version),
				Annotations: map[string]string{metav1.InitialEventsAnnotationKey: "true"}}})
		initial = append(initial, watchEvent{Type: "BOOKMARK", Object: bookmark})
	}
	s.watchers[ch] = sel
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.watchers, ch)
		s.mu.Unlock()
	}()
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Transfer-Encoding", "chunked")
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	enc := json.NewEncoder(w)
	for _, e := range initial {
		_ = enc.Encode(e)
	}
	if flusher != nil {
		flusher.Flush()
	}
	for {
		select {
		case <-r.Context().Done():
			return
		case e := <-ch:
			if err := enc.Encode(e); err != nil {
				return
			}
			if flusher != nil {
				flusher.Flush()
			}
		}
	}
}

func (s *Server) getNamespace(w http.ResponseWriter, name string) {
	s.mu.Lock()
	s.requests["get namespace"]++
	ns, ok := s.namespaces[name]
	s.mu.Unlock()
	if !ok {
		status(w, http.StatusNotFound, "NotFound", fmt.Sprintf("namespaces %q not found", name))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(ns)
}

func status(w http.ResponseWriter, code int, reason, message string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status: metav1.StatusFailure, Reason: metav1.StatusReason(reason), Message: message, Code: int32(code)})
}
