// Command gpucheck runs the nvml receiver on its own, outside a collector,
// and writes what it reports as OTLP JSON lines (the file exporter's format):
// metrics.jsonl, logs.jsonl, and nvml-calls.txt with the time spent in each
// NVML call. gpu-check.sh runs it next to nvidia-smi and a workload and
// compares the two; it is small enough to copy to a GPU machine that cannot
// build the whole distribution.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componentstatus"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/receiver"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
	"go.uber.org/zap"

	"github.com/otelcol-ai/otelcol-ai/receiver/nvmlreceiver"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "gpucheck:", err)
		os.Exit(1)
	}
}

func run() error {
	duration := flag.Duration("duration", time.Minute, "how long to run the receiver")
	interval := flag.Duration("interval", 2*time.Second, "collection_interval")
	out := flag.String("out", "gpucheck-out", "directory for metrics.jsonl, logs.jsonl, nvml-calls.txt")
	library := flag.String("library", "", "library_path (empty: libnvidia-ml.so.1 from the loader path)")
	procRoot := flag.String("proc-root", "/proc", "processes.proc_root")
	leakWindow := flag.Duration("leak-window", 40*time.Second, "leak_detection.window (short, so a one-minute run can see a leak)")
	flag.Parse()

	if err := os.MkdirAll(*out, 0o755); err != nil {
		return fmt.Errorf("output directory: %w", err)
	}
	metricsFile, err := os.Create(filepath.Join(*out, "metrics.jsonl"))
	if err != nil {
		return err
	}
	defer func() { _ = metricsFile.Close() }()
	logsFile, err := os.Create(filepath.Join(*out, "logs.jsonl"))
	if err != nil {
		return err
	}
	defer func() { _ = logsFile.Close() }()

	logger, err := zap.NewDevelopment(zap.AddStacktrace(zap.ErrorLevel))
	if err != nil {
		return err
	}
	defer func() { _ = logger.Sync() }()
	reader := sdkmetric.NewManualReader()
	meters := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer func() { _ = meters.Shutdown(context.Background()) }()

	factory := nvmlreceiver.NewFactory()
	cfg := factory.CreateDefaultConfig().(*nvmlreceiver.Config)
	cfg.CollectionInterval = *interval
	cfg.InitialDelay = 0
	cfg.LibraryPath = *library
	cfg.Processes.ProcRoot = *procRoot
	cfg.LeakDetection.Window = *leakWindow
	cfg.LeakDetection.MinSamples = 5
	cfg.LeakDetection.MinGrowth = 64 << 20
	cfg.LeakDetection.MinGrowthRate = 1 << 20
	if err := cfg.Validate(); err != nil {
		return err
	}

	set := receiver.Settings{
		ID: component.NewID(factory.Type()),
		TelemetrySettings: component.TelemetrySettings{
			Logger:         logger,
			MeterProvider:  meters,
			TracerProvider: tracenoop.NewTracerProvider(),
			Resource:       pcommon.NewResource(),
		},
		BuildInfo: component.NewDefaultBuildInfo(),
	}
	var mu sync.Mutex
	metricsOut, err := consumer.NewMetrics(func(_ context.Context, md pmetric.Metrics) error {
		if md.ResourceMetrics().Len() == 0 {
			return nil // NVML not up yet
		}
		b, err := (&pmetric.JSONMarshaler{}).MarshalMetrics(md)
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		_, err = metricsFile.Write(append(b, '\n'))
		return err
	})
	if err != nil {
		return err
	}
	logsOut, err := consumer.NewLogs(func(_ context.Context, ld plog.Logs) error {
		b, err := (&plog.JSONMarshaler{}).MarshalLogs(ld)
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		_, err = logsFile.Write(append(b, '\n'))
		return err
	})
	if err != nil {
		return err
	}

	ctx := context.Background()
	m, err := factory.CreateMetrics(ctx, set, cfg, metricsOut)
	if err != nil {
		return err
	}
	l, err := factory.CreateLogs(ctx, set, cfg, logsOut)
	if err != nil {
		return err
	}
	host := &printingHost{}
	if err := m.Start(ctx, host); err != nil {
		return err
	}
	if err := l.Start(ctx, host); err != nil {
		return err
	}

	stop := make(chan os.Signal, 1)
	signal.Notify(stop, os.Interrupt, syscall.SIGTERM)
	select {
	case <-time.After(*duration):
	case <-stop:
	}
	errs := errors.Join(m.Shutdown(ctx), l.Shutdown(ctx))
	return errors.Join(errs, writeCallTimes(ctx, reader, filepath.Join(*out, "nvml-calls.txt")))
}

// writeCallTimes summarises otelcol_receiver_nvml_call_duration by function.
func writeCallTimes(ctx context.Context, reader *sdkmetric.ManualReader, path string) error {
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		return err
	}
	type row struct {
		fn         string
		count      uint64
		sum, maxed float64
	}
	var rows []row
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != "otelcol_receiver_nvml_call_duration" {
				continue
			}
			h, ok := m.Data.(metricdata.Histogram[float64])
			if !ok {
				continue
			}
			for _, dp := range h.DataPoints {
				fn, _ := dp.Attributes.Value("nvml.function")
				mx, _ := dp.Max.Value()
				rows = append(rows, row{fn.AsString(), dp.Count, dp.Sum, mx})
			}
		}
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].sum > rows[j].sum })
	var b strings.Builder
	fmt.Fprintf(&b, "%-48s %8s %12s %12s %12s\n", "function", "calls", "total_ms", "mean_us", "max_us")
	for _, r := range rows {
		fmt.Fprintf(&b, "%-48s %8d %12.3f %12.1f %12.1f\n", r.fn, r.count, r.sum*1e3, r.sum/float64(max(r.count, 1))*1e6, r.maxed*1e6)
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

// printingHost prints component status changes.
type printingHost struct{}

func (printingHost) GetExtensions() map[component.ID]component.Component { return nil }

func (printingHost) Report(e *componentstatus.Event) {
	if e.Err() != nil {
		fmt.Fprintf(os.Stderr, "status: %s: %v\n", e.Status(), e.Err())
		return
	}
	fmt.Fprintf(os.Stderr, "status: %s\n", e.Status())
}
