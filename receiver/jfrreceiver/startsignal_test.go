package jfrreceiver

import (
	"context"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/receiver/receivertest"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/metadata"
)

// A SIGTERM that comes after the receiver started and before the
// collector handles signals itself (it installs its handler only once
// every component has started) does not kill the collector, which would
// leave the recordings the receiver started running in other JVMs: the
// receiver sends the signal again until it is shut down, so that the
// collector's handler, once installed (here the test's, installed after
// the first signal), gets one. It reports no fatal status event: the core
// sends those on a channel its main loop stops reading when it got the
// signal itself, under the lock every status report takes, and the
// collector's shutdown then hangs. (Were the signal not taken, this test
// binary would die of it.)
func TestSignalWhileStartingIsSentAgain(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	cfg.Repositories.Discover = false
	cfg.Repositories.Include = []string{filepath.Join(t.TempDir(), "2*_*")}
	cfg.XLog.Discover = false
	set := receivertest.NewNopSettings(metadata.Type)
	core, logs := observer.New(zap.WarnLevel)
	set.Logger = zap.New(core)
	r, err := NewFactory().CreateLogs(context.Background(), set, cfg, new(consumertest.LogsSink))
	if err != nil {
		t.Fatal(err)
	}
	host := &statusHost{Host: componenttest.NewNopHost()}
	if err := r.Start(context.Background(), host); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(syscall.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(15 * time.Second); logs.FilterMessageSnippet("sent again until the collector shuts down").Len() == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the receiver did not say it sends the signal again; logged %v", logs.All())
		}
	}
	// The collector's handler, installed late, gets the signal.
	late := make(chan os.Signal, 1)
	signal.Notify(late, syscall.SIGTERM)
	defer signal.Stop(late)
	select {
	case <-late:
	case <-time.After(15 * time.Second):
		t.Fatal("the signal was not sent again")
	}
	if err := r.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := host.fatals(); n != 0 {
		t.Errorf("%d fatal status events reported: %v", n, host.errors())
	}
}
