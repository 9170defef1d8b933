// Package jfrreceiver implements the jfr receiver: JVM GC, safepoint,
// memory and direct-buffer telemetry, and the jvm.safepoint / jvm.gc.pause
// windows of the project's window model, read from the JFR disk
// repositories of running JVMs (found through /proc, also inside
// containers), from finished recording files and from -Xlog:gc*,safepoint
// files.
package jfrreceiver // import "github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver"

import (
	"context"
	"sync"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/receiver"

	"github.com/otelcol-ai/otelcol-ai/internal/procresource"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/metadata"
)

// Defaults, as documented in README.md.
const (
	defaultPollInterval       = time.Second
	defaultCollectionInterval = 10 * time.Second
	defaultDiscoveryInterval  = 5 * time.Second
	defaultAttachTimeout      = 5 * time.Second
)

// NewFactory returns the factory for the jfr receiver.
func NewFactory() receiver.Factory {
	f := &factory{receivers: map[component.ID]*jfrReceiver{}}
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
			Attach:            AttachConfig{Timeout: defaultAttachTimeout},
		},
		XLog: XLogConfig{
			StartAt:           "end",
			DiscoveryInterval: defaultDiscoveryInterval,
			PreferJFR:         true,
		},
		Recordings: RecordingsConfig{
			DiscoveryInterval: defaultDiscoveryInterval,
		},
	}
}

// factory shares one receiver between the logs and metrics pipelines of a
// component ID, so that each JVM is read once.
type factory struct {
	mu        sync.Mutex
	receivers map[component.ID]*jfrReceiver
}

func (f *factory) get(set receiver.Settings, cfg *Config) *shared {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.receivers[set.ID]
	if r == nil {
		r = newReceiver(set, cfg)
		f.receivers[set.ID] = r
	}
	return &shared{core: r, release: func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.receivers[set.ID] == r && !r.running() {
			delete(f.receivers, set.ID)
		}
	}}
}

func (f *factory) createMetrics(_ context.Context, set receiver.Settings, cfg component.Config, next consumer.Metrics) (receiver.Metrics, error) {
	s := f.get(set, cfg.(*Config))
	s.open, s.close = func() { s.core.metrics.Open(next) }, s.core.metrics.Close
	return s, nil
}

func (f *factory) createLogs(_ context.Context, set receiver.Settings, cfg component.Config, next consumer.Logs) (receiver.Logs, error) {
	s := f.get(set, cfg.(*Config))
	s.open, s.close = func() { s.core.logs.Open(next) }, s.core.logs.Close
	return s, nil
}

// shared is one pipeline's face of the shared receiver.
type shared struct {
	core    *jfrReceiver
	release func()
	// open connects this face's pipeline; close disconnects it.
	open, close func()
	mu          sync.Mutex
	started     bool
}

// Start starts the shared receiver (its first face to start starts it).
func (s *shared) Start(ctx context.Context, host component.Host) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started {
		return nil
	}
	s.open()
	if err := s.core.start(ctx, host); err != nil {
		s.close()
		return err
	}
	s.started = true
	return nil
}

// Shutdown stops this face; the last face to stop stops the receiver. It
// is safe without Start and when called twice.
func (s *shared) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var err error
	if s.started {
		s.started = false
		err = s.core.shutdown(ctx)
		s.close()
	}
	s.release()
	return err
}
