package podresources

import (
	"context"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"go.uber.org/goleak"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/otelcol-ai/otelcol-ai/receiver/nvmlreceiver/internal/podresources/podresourcestest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func gpu(resource string, ids ...string) *podresourcesv1.ContainerDevices {
	return &podresourcesv1.ContainerDevices{ResourceName: resource, DeviceIds: ids}
}

func TestList(t *testing.T) {
	endpoint := podresourcestest.Serve(t, []*podresourcesv1.PodResources{
		{Name: "triton-0", Namespace: "inference", Containers: []*podresourcesv1.ContainerResources{
			{Name: "triton", Devices: []*podresourcesv1.ContainerDevices{gpu("nvidia.com/gpu", "GPU-aaaa")}},
			{Name: "sidecar"},
		}},
		// Time-sliced GPU: two pods each hold a replica of GPU-bbbb.
		{Name: "jvm-a", Namespace: "batch", Containers: []*podresourcesv1.ContainerResources{
			{Name: "app", Devices: []*podresourcesv1.ContainerDevices{gpu("nvidia.com/gpu", "GPU-bbbb::0", "GPU-bbbb::1")}},
		}},
		{Name: "jvm-b", Namespace: "batch", Containers: []*podresourcesv1.ContainerResources{
			{Name: "app", Devices: []*podresourcesv1.ContainerDevices{gpu("nvidia.com/gpu", "GPU-bbbb::2")}},
		}},
		{Name: "mig-user", Namespace: "inference", Containers: []*podresourcesv1.ContainerResources{
			{Name: "onnx", Devices: []*podresourcesv1.ContainerDevices{gpu("nvidia.com/mig-1g.10gb", "MIG-cccc")}},
		}},
		{Name: "sriov", Namespace: "net", Containers: []*podresourcesv1.ContainerResources{
			{Name: "nic", Devices: []*podresourcesv1.ContainerDevices{gpu("intel.com/sriov", "0000:3b:00.1")}},
		}},
	})
	c, err := NewClient(endpoint)
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	defer func() {
		if err := c.Close(); err != nil {
			t.Fatalf("c.Close: %v", err)
		}
	}()

	ix, err := c.List(context.Background(), "nvidia.com/")
	if err != nil {
		t.Fatalf("c.List: %v", err)
	}

	if got := ix.Lookup("GPU-aaaa"); !reflect.DeepEqual(got, []Owner{{"inference", "triton-0", "triton"}}) {
		t.Errorf("ix.Lookup(\"GPU-aaaa\"): got %v, want %v", got, []Owner{{"inference", "triton-0", "triton"}})
	}
	if got := ix.Lookup("GPU-bbbb"); !reflect.DeepEqual(got, []Owner{{"batch", "jvm-a", "app"}, {"batch", "jvm-b", "app"}}) {
		t.Errorf("replicas fold onto the GPU and each pod is listed once: got %v, want %v", got, []Owner{{"batch", "jvm-a", "app"}, {"batch", "jvm-b", "app"}})
	}
	if got := ix.Lookup("MIG-cccc"); !reflect.DeepEqual(got, []Owner{{"inference", "mig-user", "onnx"}}) {
		t.Errorf("ix.Lookup(\"MIG-cccc\"): got %v, want %v", got, []Owner{{"inference", "mig-user", "onnx"}})
	}
	if ix.Lookup("0000:3b:00.1") != nil {
		t.Errorf("other vendors' devices are ignored: got %v, want nil", ix.Lookup("0000:3b:00.1"))
	}
	if ix.Lookup("GPU-unallocated") != nil {
		t.Errorf("ix.Lookup(\"GPU-unallocated\"): got %v, want nil", ix.Lookup("GPU-unallocated"))
	}
	if got := len(ix); got != 3 {
		t.Errorf("len(c.List): got %d, want %d", got, 3)
	}
}

func TestListWithoutKubelet(t *testing.T) {
	c, err := NewClient("unix://" + filepath.Join(t.TempDir(), "absent.sock"))
	if err != nil {
		t.Fatalf("creating a client does not connect: %v", err)
	}
	defer func() {
		if err := c.Close(); err != nil {
			t.Fatalf("c.Close: %v", err)
		}
	}()
	_, err = c.List(context.Background(), "nvidia.com/")
	if err == nil || !strings.Contains(err.Error(), "podresources: List") {
		t.Errorf("c.List: got error %v, want one containing %q", err, "podresources: List")
	}
}

func TestNewClientRejectsTCP(t *testing.T) {
	_, err := NewClient("localhost:10250")
	if err == nil || !strings.Contains(err.Error(), "unix://") {
		t.Errorf("NewClient: got error %v, want one containing %q", err, "unix://")
	}
}
