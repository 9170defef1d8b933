// Package podresources asks the kubelet which pod and container each GPU was
// allocated to, through the pod-resources gRPC API (v1) on its UNIX socket.
//
// The NVIDIA device plugin reports devices by UUID: "GPU-…" for whole GPUs,
// "MIG-…" for MIG devices, and "GPU-…::<n>" for the n-th replica of a
// time-sliced GPU. Replicas are folded onto their GPU, so that a shared GPU
// lists every pod that holds a share of it.
package podresources // import "github.com/otelcol-ai/otelcol-ai/receiver/nvmlreceiver/internal/podresources"

import (
	"context"
	"fmt"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
)

// DefaultEndpoint is where the kubelet serves the API on a standard node.
const DefaultEndpoint = "unix:///var/lib/kubelet/pod-resources/kubelet.sock"

// maxMessageSize bounds a List answer; a node with hundreds of pods stays
// well under it.
const maxMessageSize = 16 << 20

// Owner is one container that a device is allocated to.
type Owner struct {
	Namespace string
	Pod       string
	Container string
}

// Index maps a device UUID to the containers it is allocated to, in the
// order the kubelet listed them.
type Index map[string][]Owner

// Lookup returns the owners of a device UUID (replica suffixes ignored).
func (ix Index) Lookup(deviceUUID string) []Owner {
	return ix[baseDeviceID(deviceUUID)]
}

// Client lists pod resources from one kubelet.
type Client struct {
	conn   *grpc.ClientConn
	lister podresourcesv1.PodResourcesListerClient
}

// NewClient prepares a client for endpoint ("unix:///path/kubelet.sock").
// It does not connect: the first List does, so a kubelet that starts after
// the collector is picked up.
func NewClient(endpoint string) (*Client, error) {
	if !strings.HasPrefix(endpoint, "unix://") {
		return nil, fmt.Errorf("podresources: endpoint %q: only unix:// sockets are served by the kubelet", endpoint)
	}
	conn, err := grpc.NewClient(endpoint,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxMessageSize)),
	)
	if err != nil {
		return nil, fmt.Errorf("podresources: endpoint %q: %w", endpoint, err)
	}
	return &Client{conn: conn, lister: podresourcesv1.NewPodResourcesListerClient(conn)}, nil
}

// List asks the kubelet for every pod's devices and indexes them by device.
// Only devices whose resource name is in vendor's namespace (e.g.
// "nvidia.com/") are kept.
func (c *Client) List(ctx context.Context, vendor string) (Index, error) {
	resp, err := c.lister.List(ctx, &podresourcesv1.ListPodResourcesRequest{})
	if err != nil {
		return nil, fmt.Errorf("podresources: List: %w", err)
	}
	ix := Index{}
	for _, pod := range resp.GetPodResources() {
		for _, ctr := range pod.GetContainers() {
			owner := Owner{Namespace: pod.GetNamespace(), Pod: pod.GetName(), Container: ctr.GetName()}
			for _, dev := range ctr.GetDevices() {
				if !strings.HasPrefix(dev.GetResourceName(), vendor) {
					continue
				}
				for _, id := range dev.GetDeviceIds() {
					id = baseDeviceID(id)
					if !contains(ix[id], owner) {
						ix[id] = append(ix[id], owner)
					}
				}
			}
		}
	}
	return ix, nil
}

// Close releases the connection.
func (c *Client) Close() error {
	if err := c.conn.Close(); err != nil {
		return fmt.Errorf("podresources: close: %w", err)
	}
	return nil
}

// baseDeviceID folds a time-slicing replica "GPU-…::3" onto its GPU.
func baseDeviceID(id string) string {
	if i := strings.Index(id, "::"); i >= 0 {
		return id[:i]
	}
	return id
}

func contains(owners []Owner, o Owner) bool {
	for _, x := range owners {
		if x == o {
			return true
		}
	}
	return false
}
