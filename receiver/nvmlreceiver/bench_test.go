package nvmlreceiver

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh100"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/receiver/receivertest"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/otelcol-ai/otelcol-ai/receiver/nvmlreceiver/internal/metadata"
)

// benchmarkScrape measures one scrape of the 8-GPU DGX H100 mock with 200
// processes (25 per GPU), each with a fake /proc entry in a container. The
// mock answers instantly, so the figure is the receiver's own cost: the
// parallel device reads, building metrics, process resolution, leak
// tracking and (with pods) one pod-resources List over a UNIX socket.
func benchmarkScrape(b *testing.B, withPods bool) {
	srv := dgxh100.New()
	node := newFakeNode(b, srv)
	cfg := createDefaultConfig().(*Config)
	cfg.LibraryPath = "mock://" + b.Name()
	cfg.Processes.ProcRoot = b.TempDir()
	cfg.PodResources.Endpoint = ""
	var pods []*podresourcesv1.PodResources
	for g := range 8 {
		for k := range 25 {
			pid := 10000 + g*100 + k
			writeProc(b, cfg.Processes.ProcRoot, fakeProc{
				pid:     pid,
				exe:     "/usr/lib/jvm/java-21/bin/java",
				cmdline: "java\x00-Xmx16g\x00-cp\x00/app/lib/*\x00com.example.inference.Server\x00--port=8080\x00",
				cgroup:  "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + podUIDUnder + ".slice/cri-containerd-" + containerID + ".scope\n",
				environ: "HOSTNAME=inference-" + string(rune('a'+k%26)) + "\x00",
			})
			node.setProcess(g, uint32(pid), uint64(512+k)*mib)
		}
		pods = append(pods, pod("inference", "inference-"+string(rune('a'+g)), "server", uuidOf(srv, g)))
	}
	if withPods {
		cfg.PodResources.Endpoint = serveKubelet(b, pods)
	}
	set := receivertest.NewNopSettings(metadata.Type)
	set.ID = component.NewIDWithName(metadata.Type, strings.ReplaceAll(b.Name(), "/", "_"))
	r, err := newNVMLReceiver(set, cfg, node.open)
	if err != nil {
		b.Fatalf("newNVMLReceiver: %v", err)
	}
	r.setLogsConsumer(consumertest.NewNop())
	if err := r.start(context.Background(), &statusHost{}); err != nil {
		b.Fatalf("r.start: %v", err)
	}
	b.Cleanup(func() {
		if err := r.shutdown(context.Background()); err != nil {
			b.Fatalf("r.shutdown: %v", err)
		}
	})

	ctx := context.Background()
	// Warm the process cache, as every scrape after the first finds it.
	md, err := r.scrape(ctx)
	if err != nil {
		b.Fatalf("r.scrape: %v", err)
	}
	if got := md.ResourceMetrics().Len(); got != 8+200 {
		b.Fatalf("md.ResourceMetrics().Len(): got %v, want %v", got, 8+200)
	}

	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := processCPU(b)
	for b.Loop() {
		if _, err := r.scrape(ctx); err != nil {
			b.Fatal(err)
		}
	}
	cpu := processCPU(b) - cpu0
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N)/8, "cpu-ns/gpu")
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N)/200, "cpu-ns/process")
}

// processCPU is the user+system CPU time the test process has used, so the
// figures stay meaningful on a machine shared with other work (wall time
// would count the time spent waiting for a core).
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func BenchmarkScrape8GPUs200Processes(b *testing.B) {
	b.Run("without_pods", func(b *testing.B) { benchmarkScrape(b, false) })
	b.Run("with_pods", func(b *testing.B) { benchmarkScrape(b, true) })
}

func BenchmarkScrape8GPUsDevicesOnly(b *testing.B) {
	srv := dgxh100.New()
	node := newFakeNode(b, srv)
	cfg := createDefaultConfig().(*Config)
	cfg.LibraryPath = "mock://" + b.Name()
	cfg.Processes.Enabled = false
	cfg.PodResources.Endpoint = ""
	set := receivertest.NewNopSettings(metadata.Type)
	r, err := newNVMLReceiver(set, cfg, node.open)
	if err != nil {
		b.Fatalf("newNVMLReceiver: %v", err)
	}
	if err := r.start(context.Background(), &statusHost{}); err != nil {
		b.Fatalf("r.start: %v", err)
	}
	b.Cleanup(func() {
		if err := r.shutdown(context.Background()); err != nil {
			b.Fatalf("r.shutdown: %v", err)
		}
	})
	ctx := context.Background()
	b.ReportAllocs()
	cpu0 := processCPU(b)
	for b.Loop() {
		if _, err := r.scrape(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64((processCPU(b)-cpu0).Nanoseconds())/float64(b.N)/8, "cpu-ns/gpu")
}
