package attach

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

// OptOutKey is the pod annotation or label, or namespace label or
// annotation, that opts a pod's JVMs out of attaching when "false" (also
// "0", "no", "off").
const OptOutKey = "otelcol-ai.io/jfr-attach"

// How long a namespace's labels are kept, and how long the API is given
// to answer for one (asked on the receiver's poll loop).
const (
	namespaceTTL     = time.Minute
	namespaceTimeout = 2 * time.Second
	podUIDIndex      = "uid"
)

// PodWatcher is a PodPolicy from the Kubernetes API: an informer on the
// pods of one node (field selector spec.nodeName, so the API sends only
// those), each kept as its metadata only; a pod's namespace is fetched (get)
// when first needed and kept a minute. Needs RBAC: pods list and watch,
// namespaces get.
type PodWatcher struct {
	client  kubernetes.Interface
	factory informers.SharedInformerFactory
	pods    cache.SharedIndexInformer
	stop    chan struct{}
	logger  *zap.Logger

	mu         sync.Mutex
	namespaces map[string]namespaceEntry
	now        func() time.Time
}

type namespaceEntry struct {
	reason  string // what opts it out, "" for nothing; why not known when !ok
	ok      bool   // false: the API did not answer
	fetched time.Time
}

// NewPodWatcher returns a watcher of nodeName's pods ("" watches every
// pod) through the API server cfg names. Start starts it, Close stops it.
func NewPodWatcher(cfg *rest.Config, nodeName string, logger *zap.Logger) (*PodWatcher, error) {
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("attach: kubernetes client: %w", err)
	}
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		if nodeName != "" {
			o.FieldSelector = "spec.nodeName=" + nodeName
		}
	}))
	pods := factory.Core().V1().Pods().Informer()
	// Only what the policy reads is kept of each pod.
	if err := pods.SetTransform(func(obj any) (any, error) {
		if p, ok := obj.(*corev1.Pod); ok {
			return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
				Name: p.Name, Namespace: p.Namespace, UID: p.UID, ResourceVersion: p.ResourceVersion,
				Labels: p.Labels, Annotations: p.Annotations,
			}}, nil
		}
		return obj, nil
	}); err != nil {
		return nil, fmt.Errorf("attach: pod informer: %w", err)
	}
	if err := pods.AddIndexers(cache.Indexers{podUIDIndex: podUIDs}); err != nil {
		return nil, fmt.Errorf("attach: pod informer: %w", err)
	}
	if logger == nil {
		logger = zap.NewNop()
	}
	return &PodWatcher{client: client, factory: factory, pods: pods, stop: make(chan struct{}), logger: logger,
		namespaces: map[string]namespaceEntry{}, now: time.Now}, nil
}

// Start starts watching; it does not wait for the first list (OptOut says
// "not known" until then).
func (w *PodWatcher) Start() { w.factory.Start(w.stop) }

// Close stops watching and waits for the informer's goroutines.
func (w *PodWatcher) Close() {
	close(w.stop)
	w.factory.Shutdown()
}

// OptOut implements PodPolicy: the pod's annotation or label, else its
// namespace's. A pod UID comes from the cgroup of a process on this node,
// so a pod the informer does not have is one whose opt-out cannot be read
// yet (the watch lags, a relist is under way, K8S_NODE_NAME names another
// node): not known, so not attached, until it is in the list.
func (w *PodWatcher) OptOut(podUID string) (string, bool) {
	if !w.pods.HasSynced() {
		return "the pod list has not come from the Kubernetes API yet", false
	}
	objs, err := w.pods.GetIndexer().ByIndex(podUIDIndex, podUID)
	if err != nil || len(objs) == 0 {
		return "not in the pod list of this node (K8S_NODE_NAME) from the Kubernetes API", false
	}
	p, ok := objs[0].(*corev1.Pod)
	if !ok {
		return "not in the pod list of this node (K8S_NODE_NAME) from the Kubernetes API", false
	}
	if why := optOutIn("pod "+p.Namespace+"/"+p.Name, p.Annotations, p.Labels); why != "" {
		return why, true
	}
	return w.namespaceOptOut(p.Namespace)
}

// mirrorAnnotation is set by the kubelet on the mirror pod it makes in the
// API for a static pod (one from a manifest on the node): its value is the
// static pod's config hash, which the kubelet also uses as the static
// pod's UID, and so what its containers' cgroups name. The mirror pod has
// a UID of its own, and the static pod's annotations and labels.
const mirrorAnnotation = "kubernetes.io/config.mirror"

// podUIDs indexes a pod by its UID and, for a mirror pod, by the UID its
// static pod has on the node.
func podUIDs(obj any) ([]string, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return nil, nil
	}
	out := []string{string(p.UID)}
	if hash := p.Annotations[mirrorAnnotation]; hash != "" && hash != string(p.UID) {
		out = append(out, hash)
	}
	return out, nil
}

func (w *PodWatcher) namespaceOptOut(name string) (string, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := w.now()
	if e, ok := w.namespaces[name]; ok && now.Sub(e.fetched) < namespaceTTL {
		return e.reason, e.ok
	}
	ctx, cancel := context.WithTimeout(context.Background(), namespaceTimeout)
	defer cancel()
	ns, err := w.client.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
	e := namespaceEntry{fetched: now, reason: "namespace " + name + " cannot be read from the Kubernetes API"}
	if err != nil {
		if old, had := w.namespaces[name]; !had || old.ok {
			w.logger.Warn("reading a namespace for its JFR attach opt-out; its pods' JVMs wait", zap.String("namespace", name), zap.Error(err))
		}
	} else {
		e.ok = true
		e.reason = optOutIn("namespace "+name, ns.Annotations, ns.Labels)
	}
	// Kept small: namespaces of pods that come and go.
	if len(w.namespaces) > 1024 {
		clear(w.namespaces)
	}
	w.namespaces[name] = e
	return e.reason, e.ok
}

func optOutIn(what string, annotations, labels map[string]string) string {
	if v, ok := annotations[OptOutKey]; ok && isOff(v) {
		return what + " annotation " + OptOutKey + "=" + strings.TrimSpace(v)
	}
	if v, ok := labels[OptOutKey]; ok && isOff(v) {
		return what + " label " + OptOutKey + "=" + strings.TrimSpace(v)
	}
	return ""
}
