package jfrreceiver

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/receiver/receivertest"

	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/metadata"
)

// A SIGTERM that comes after the receiver started and before the
// collector handles signals itself (it installs its handler only once
// every component has started) does not kill the collector, which would
// leave the recordings the receiver started running in other JVMs: the
// receiver asks for the shutdown through its status, which the collector
// acts on once it runs. (Were the signal not taken, this test binary would
// die of it.)
func TestSignalWhileStartingAsksForShutdown(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	cfg.Repositories.Discover = false
	cfg.Repositories.Include = []string{filepath.Join(t.TempDir(), "2*_*")}
	cfg.XLog.Discover = false
	r, err := NewFactory().CreateLogs(context.Background(), receivertest.NewNopSettings(metadata.Type), cfg, new(consumertest.LogsSink))
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
	reported := func() error { return errors.Join(host.errors()...) }
	for deadline := time.Now().Add(15 * time.Second); !strings.Contains(fmt.Sprint(reported()), "terminated received while the collector was starting"); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no shutdown asked for after a SIGTERM; reported %v", reported())
		}
	}
	if err := r.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
}
