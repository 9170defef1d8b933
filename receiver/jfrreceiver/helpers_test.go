package jfrreceiver

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/receiver"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/otelcol-ai/otelcol-ai/internal/window"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/metadatatest"
)

// eachRecord calls f with every log record in batches, and its resource.
func eachRecord(batches []plog.Logs, f func(res pcommon.Resource, lr plog.LogRecord)) {
	for _, ld := range batches {
		for _, rl := range ld.ResourceLogs().All() {
			for _, sl := range rl.ScopeLogs().All() {
				for _, lr := range sl.LogRecords().All() {
					f(rl.Resource(), lr)
				}
			}
		}
	}
}

// windowsOf returns the windows of pid in batches, in the order they
// came; a record of pid that is not a window fails the test.
func windowsOf(t *testing.T, batches []plog.Logs, pid int64) []window.Window {
	t.Helper()
	var out []window.Window
	eachRecord(batches, func(res pcommon.Resource, lr plog.LogRecord) {
		if pidOf(res) != pid {
			return
		}
		w, err := window.Decode(lr)
		if err != nil {
			t.Fatalf("a record of pid %d is not a window: %v", pid, err)
		}
		out = append(out, w)
	})
	return out
}

// allLogs is every batch the sinks received, sink by sink.
func allLogs(sinks ...*consumertest.LogsSink) []plog.Logs {
	var out []plog.Logs
	for _, s := range sinks {
		out = append(out, s.AllLogs()...)
	}
	return out
}

// observedReceiver is the receiver's logs face started for a test, with
// what it sent, what it logged (info and above) and its telemetry.
type observedReceiver struct {
	receiver.Logs
	sink     *consumertest.LogsSink
	observed *observer.ObservedLogs
	tel      *componenttest.Telemetry
	stopped  bool
}

// startObserved starts the logs face on cfg. The test's cleanup shuts it
// down unless stop did.
func startObserved(tb testing.TB, cfg *Config) *observedReceiver {
	tb.Helper()
	tel := componenttest.NewTelemetry()
	tb.Cleanup(func() { _ = tel.Shutdown(context.Background()) })
	set := metadatatest.NewSettings(tel)
	core, observed := observer.New(zap.InfoLevel)
	set.Logger = zap.New(core)
	o := &observedReceiver{sink: new(consumertest.LogsSink), observed: observed, tel: tel}
	r, err := NewFactory().CreateLogs(context.Background(), set, cfg, o.sink)
	if err != nil {
		tb.Fatal(err)
	}
	if err := r.Start(context.Background(), componenttest.NewNopHost()); err != nil {
		tb.Fatal(err)
	}
	o.Logs = r
	tb.Cleanup(func() {
		if !o.stopped {
			_ = o.stop()
		}
	})
	return o
}

// stop shuts the receiver down.
func (o *observedReceiver) stop() error {
	o.stopped = true
	return o.Shutdown(context.Background())
}

// attachConfig is the default config with attach on, as
// distribution/config.yaml has it, polling and discovering every 200 ms.
func attachConfig() *Config {
	cfg := createDefaultConfig().(*Config)
	cfg.Repositories.Attach.Enabled = true
	cfg.PollInterval = 200 * time.Millisecond
	cfg.Repositories.DiscoveryInterval = 200 * time.Millisecond
	return cfg
}
