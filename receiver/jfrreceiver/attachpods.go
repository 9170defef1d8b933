package jfrreceiver

import (
	"errors"
	"fmt"
	"os"

	"go.uber.org/zap"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/attach"
)

// repositories::attach::kubernetes_auth values.
const (
	kubernetesAuthServiceAccount = "serviceAccount"
	kubernetesAuthKubeConfig     = "kubeConfig"
	kubernetesAuthNone           = "none"
)

// attachOnly, when set (tests), limits attaching to the pids it accepts, so
// that a test never starts a recording in a JVM it did not start.
var attachOnly func(pid int) bool

// newPodWatcher returns the watcher of this node's pods (K8S_NODE_NAME)
// that the pod and namespace opt-outs are read from, started; nil when
// they are not checked (attach off, kubernetes_auth none, or a service
// account off a cluster, said once).
func newPodWatcher(cfg AttachConfig, logger *zap.Logger) (*attach.PodWatcher, error) {
	if !cfg.Enabled || cfg.KubernetesAuth == kubernetesAuthNone {
		return nil, nil
	}
	var rc *rest.Config
	var err error
	switch cfg.KubernetesAuth {
	case kubernetesAuthKubeConfig:
		rc, err = clientcmd.NewNonInteractiveDeferredLoadingClientConfig(clientcmd.NewDefaultClientConfigLoadingRules(), &clientcmd.ConfigOverrides{}).ClientConfig()
	default:
		rc, err = rest.InClusterConfig()
		if errors.Is(err, rest.ErrNotInCluster) {
			logger.Info("not in a Kubernetes cluster: JVMs' pod and namespace opt-outs (" + attach.OptOutKey + ") are not checked; their own (-D" + attach.OptOutProperty + ", " + attach.OptOutEnv + ") are")
			return nil, nil
		}
	}
	if err != nil {
		return nil, fmt.Errorf("jfr receiver: repositories::attach::kubernetes_auth %s: %w", cfg.KubernetesAuth, err)
	}
	node := os.Getenv("K8S_NODE_NAME")
	if node == "" {
		logger.Warn("K8S_NODE_NAME is not set: the JFR attach opt-outs watch every pod of the cluster")
	}
	w, err := attach.NewPodWatcher(rc, node, logger)
	if err != nil {
		return nil, fmt.Errorf("jfr receiver: %w", err)
	}
	w.Start()
	return w, nil
}

// podPolicy is r.pods as a PodPolicy (nil when there is none).
func (r *jfrReceiver) podPolicy() attach.PodPolicy {
	if r.pods == nil {
		return nil
	}
	return r.pods
}

// closePods stops the pod watcher.
func (r *jfrReceiver) closePods() {
	if r.pods != nil {
		r.pods.Close()
		r.pods = nil
	}
}
