// Package jfrreceiver implements the jfr receiver: JVM GC, safepoint,
// memory and direct-buffer telemetry, and the jvm.safepoint / jvm.gc.pause
// windows of the project's window model, read from the JFR disk
// repositories of running JVMs (found through /proc, also inside
// containers), from finished recording files and from -Xlog:gc*,safepoint
// files.
package jfrreceiver // import "github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver"

import (
	"context"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/receiver"

	"github.com/otelcol-ai/otelcol-ai/internal/procresource"
	"github.com/otelcol-ai/otelcol-ai/internal/sharedcomponent"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/jvmmetrics"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/metadata"
)

// Defaults, as documented in README.md.
const (
	defaultPollInterval       = time.Second
	defaultCollectionInterval = 10 * time.Second
	defaultDiscoveryInterval  = 5 * time.Second
	defaultAttachTimeout      = 5 * time.Second
	// HotSpot rotates chunks at maxchunksize, 12 MB by default; 64 MiB
	// leaves room for JVMs configured larger and refuses the up to 2 GiB a
	// hostile header may claim.
	defaultMaxChunkSizeMiB = 64
	// About twenty JVMs writing default-sized chunks at once, with the
	// slack of the chunk buffers' doubling.
	defaultMaxMemoryMiB = 256
)

// defaultAccountsConfig: a thread dump at most once a minute, none of a
// JVM above 500 threads (its pause grows with the threads; see README for
// the measured cost); the leak thresholds and window of the nvml
// receiver's GPU memory (16 KiB/s, 32 MiB over 15 minutes), and for JNI
// references 0.2/s (720 an hour) and 200. The fast tier: a minute, four
// readings (a collection every 10 s), and thresholds above what the JVM
// start-ups measured here reached over a minute (README, Accounts and
// leaks): 4 MiB/s and 128 MiB.
func defaultAccountsConfig() AccountsConfig {
	return AccountsConfig{
		JNIReferences: JNIReferencesConfig{Enabled: true, Interval: time.Minute, MaxThreads: 500, Timeout: defaultAttachTimeout},
		LeakDetection: AccountLeakConfig{
			Enabled: true, Window: 15 * time.Minute, MinSamples: 5,
			Bytes:      LeakThresholds{MinGrowthRate: 16 << 10, MinGrowth: 32 << 20},
			References: LeakThresholds{MinGrowthRate: 0.2, MinGrowth: 200},
			Fast: FastLeakConfig{
				Enabled: true, Window: time.Minute, MinSamples: 4,
				Bytes: LeakThresholds{MinGrowthRate: 4 << 20, MinGrowth: 128 << 20},
			},
		},
	}
}

// NewFactory returns the factory for the jfr receiver.
func NewFactory() receiver.Factory {
	f := &factory{}
	return receiver.NewFactory(
		metadata.Type,
		createDefaultConfig,
		receiver.WithMetrics(f.createMetrics, metadata.MetricsStability),
		receiver.WithLogs(f.createLogs, metadata.LogsStability),
	)
}

func createDefaultConfig() component.Config {
	return &Config{
		PollInterval:       defaultPollInterval,
		CollectionInterval: defaultCollectionInterval,
		ProcRoot:           procresource.DefaultProcRoot,
		Repositories: RepositoriesConfig{
			Enabled:           true,
			Discover:          true,
			DiscoveryInterval: defaultDiscoveryInterval,
			Attach:            AttachConfig{Timeout: defaultAttachTimeout, KubernetesAuth: kubernetesAuthServiceAccount, SafepointLog: true},
			MaxChunkSizeMiB:   defaultMaxChunkSizeMiB,
			MaxMemoryMiB:      defaultMaxMemoryMiB,
		},
		XLog: XLogConfig{
			StartAt:           "end",
			DiscoveryInterval: defaultDiscoveryInterval,
			PreferJFR:         true,
		},
		Recordings: RecordingsConfig{
			DiscoveryInterval: defaultDiscoveryInterval,
		},
		Metrics:            jvmmetrics.DefaultMetricsConfig(),
		ResourceAttributes: metadata.DefaultResourceAttributesConfig(),
		Accounts:           defaultAccountsConfig(),
		Events:             metadata.DefaultEventsConfig(),
	}
}

// factory shares one receiver between the logs and metrics pipelines of a
// component ID, so that each JVM is read once.
type factory struct {
	receivers sharedcomponent.Cores[component.ID, *jfrReceiver]
}

// lifecycle runs a shared receiver while any of its pipelines runs.
var lifecycle = sharedcomponent.Lifecycle[*jfrReceiver]{Start: (*jfrReceiver).start, Stop: (*jfrReceiver).shutdown}

func (f *factory) createMetrics(_ context.Context, set receiver.Settings, cfg component.Config, next consumer.Metrics) (receiver.Metrics, error) {
	return f.receivers.Share(set.ID, func() (*jfrReceiver, error) { return newReceiver(set, cfg.(*Config)), nil }, lifecycle, func(r *jfrReceiver) sharedcomponent.Hooks {
		return sharedcomponent.Hooks{Open: func() { r.metrics.Open(next) }, Final: r.final, Close: r.metrics.Close}
	})
}

func (f *factory) createLogs(_ context.Context, set receiver.Settings, cfg component.Config, next consumer.Logs) (receiver.Logs, error) {
	return f.receivers.Share(set.ID, func() (*jfrReceiver, error) { return newReceiver(set, cfg.(*Config)), nil }, lifecycle, func(r *jfrReceiver) sharedcomponent.Hooks {
		return sharedcomponent.Hooks{Open: func() { r.logs.Open(next) }, Final: r.final, Close: r.logs.Close}
	})
}
