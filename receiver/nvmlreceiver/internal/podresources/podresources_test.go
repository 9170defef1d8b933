package podresources

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
	require.NoError(t, err)
	defer func() { require.NoError(t, c.Close()) }()

	ix, err := c.List(context.Background(), "nvidia.com/")
	require.NoError(t, err)

	assert.Equal(t, []Owner{{"inference", "triton-0", "triton"}}, ix.Lookup("GPU-aaaa"))
	assert.Equal(t, []Owner{{"batch", "jvm-a", "app"}, {"batch", "jvm-b", "app"}}, ix.Lookup("GPU-bbbb"),
		"replicas fold onto the GPU and each pod is listed once")
	assert.Equal(t, []Owner{{"inference", "mig-user", "onnx"}}, ix.Lookup("MIG-cccc"))
	assert.Nil(t, ix.Lookup("0000:3b:00.1"), "other vendors' devices are ignored")
	assert.Nil(t, ix.Lookup("GPU-unallocated"))
	assert.Len(t, ix, 3)
}

func TestListWithoutKubelet(t *testing.T) {
	c, err := NewClient("unix://" + filepath.Join(t.TempDir(), "absent.sock"))
	require.NoError(t, err, "creating a client does not connect")
	defer func() { require.NoError(t, c.Close()) }()
	_, err = c.List(context.Background(), "nvidia.com/")
	assert.ErrorContains(t, err, "podresources: List")
}

func TestNewClientRejectsTCP(t *testing.T) {
	_, err := NewClient("localhost:10250")
	assert.ErrorContains(t, err, "unix://")
}
