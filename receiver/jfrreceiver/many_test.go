package jfrreceiver

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/receiver/receivertest"

	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/metadata"
)

// TestManyRepositoriesAtOnce: twelve JVM repositories (real JDK 17 chunk
// bytes) appear while the receiver runs, and one is corrupt; every healthy
// one is read once with its pid on the resource, the corrupt one is
// reported, and after shutdown no file descriptor is left open.
func TestManyRepositoriesAtOnce(t *testing.T) {
	chunk, err := os.ReadFile(filepath.Join("..", "..", "pkg", "jfr", "testdata", "g1-default-jdk17.jfr"))
	if err != nil {
		t.Fatal(err)
	}
	fdsBefore := openFDs(t)
	base := t.TempDir()

	f := NewFactory()
	cfg := f.CreateDefaultConfig().(*Config)
	cfg.PollInterval = 50 * time.Millisecond
	cfg.CollectionInterval = time.Hour
	cfg.Repositories.Discover = false
	cfg.Repositories.Include = []string{filepath.Join(base, "2*_*")}
	cfg.Repositories.DiscoveryInterval = 50 * time.Millisecond
	logs := new(consumertest.LogsSink)
	set := receivertest.NewNopSettings(metadata.Type)
	r, err := f.CreateLogs(context.Background(), set, cfg, logs)
	if err != nil {
		t.Fatal(err)
	}
	host := &statusHost{Host: componenttest.NewNopHost()}
	if err := r.Start(context.Background(), host); err != nil {
		t.Fatal(err)
	}

	const jvms = 12
	for i := range jvms {
		data := append([]byte(nil), chunk...)
		if i == jvms-1 {
			binary.BigEndian.PutUint64(data[24:], uint64(len(data)+10)) // metadata past the end
		}
		dir := filepath.Join(base, fmt.Sprintf("2026_11_29_10_00_00_%d", 5000+i))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "2026_11_29_10_00_00.jfr"), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	// Each healthy repository is one chunk marked final: read once, then
	// ended. Wait until all eleven delivered their windows.
	perPID := map[int64]int{}
	deadline := time.Now().Add(30 * time.Second)
	for len(perPID) < jvms-1 {
		if time.Now().After(deadline) {
			t.Fatalf("windows from %d repositories, want %d", len(perPID), jvms-1)
		}
		time.Sleep(50 * time.Millisecond)
		clear(perPID)
		for _, ld := range logs.AllLogs() {
			for i := range ld.ResourceLogs().Len() {
				rl := ld.ResourceLogs().At(i)
				perPID[pidOf(rl.Resource())] += rl.ScopeLogs().At(0).LogRecords().Len()
			}
		}
	}
	if err := r.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	first := -1
	for pid, n := range perPID {
		if pid < 5000 || pid >= 5000+jvms-1 {
			t.Errorf("windows for pid %d", pid)
		}
		if first < 0 {
			first = n
		}
		if n != first {
			t.Errorf("pid %d: %d windows, others %d: a repository was read twice or partly", pid, n, first)
		}
	}
	if errs := host.errors(); len(errs) != 1 {
		t.Errorf("component status errors %v, want one for the corrupt repository", errs)
	}
	if after := openFDs(t); after > fdsBefore {
		t.Errorf("%d file descriptors open before, %d after", fdsBefore, after)
	}
}

// TestUnreadableProcRootReportedOnce: a proc root that does not exist is
// reported once through component status, not at every discovery.
func TestUnreadableProcRootReportedOnce(t *testing.T) {
	f := NewFactory()
	cfg := f.CreateDefaultConfig().(*Config)
	cfg.ProcRoot = filepath.Join(t.TempDir(), "no-proc")
	cfg.PollInterval = 10 * time.Millisecond
	cfg.Repositories.DiscoveryInterval = 10 * time.Millisecond
	r, err := f.CreateLogs(context.Background(), receivertest.NewNopSettings(metadata.Type), cfg, consumertest.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	host := &statusHost{Host: componenttest.NewNopHost()}
	if err := r.Start(context.Background(), host); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(host.errors()) == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond) // about twenty more discoveries
	if err := r.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if errs := host.errors(); len(errs) != 1 || !strings.Contains(errs[0].Error(), "no-proc") {
		t.Fatalf("status errors %v, want one naming the proc root", errs)
	}
}
