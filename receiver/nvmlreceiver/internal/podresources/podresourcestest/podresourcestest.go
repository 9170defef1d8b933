// Package podresourcestest serves a fake kubelet pod-resources API on a UNIX
// socket, for tests.
package podresourcestest // import "github.com/otelcol-ai/otelcol-ai/receiver/nvmlreceiver/internal/podresources/podresourcestest"

import (
	"context"
	"net"
	"path/filepath"
	"testing"

	"google.golang.org/grpc"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
)

type kubelet struct {
	podresourcesv1.UnimplementedPodResourcesListerServer
	pods []*podresourcesv1.PodResources
}

func (k *kubelet) List(context.Context, *podresourcesv1.ListPodResourcesRequest) (*podresourcesv1.ListPodResourcesResponse, error) {
	return &podresourcesv1.ListPodResourcesResponse{PodResources: k.pods}, nil
}

// Serve answers List with pods on a socket in a temp dir until the test
// ends, and returns its endpoint (unix://…).
func Serve(t testing.TB, pods []*podresourcesv1.PodResources) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "kubelet.sock")
	lis, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatalf("podresourcestest: listen: %v", err)
	}
	srv := grpc.NewServer()
	podresourcesv1.RegisterPodResourcesListerServer(srv, &kubelet{pods: pods})
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(lis)
	}()
	t.Cleanup(func() {
		srv.Stop()
		<-done
	})
	return "unix://" + sock
}

// Pod is one pod whose single container holds devices of one resource.
func Pod(namespace, name, container, resource string, deviceIDs ...string) *podresourcesv1.PodResources {
	return &podresourcesv1.PodResources{Namespace: namespace, Name: name, Containers: []*podresourcesv1.ContainerResources{{
		Name:    container,
		Devices: []*podresourcesv1.ContainerDevices{{ResourceName: resource, DeviceIds: deviceIDs}},
	}}}
}
