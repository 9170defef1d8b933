package repository

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/otelcol-ai/otelcol-ai/internal/procroot"

	"github.com/otelcol-ai/otelcol-ai/internal/window"
	"github.com/otelcol-ai/otelcol-ai/pkg/jfr/jfrtest"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/attach"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/discovery"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/jvmevent"
)

// TestStartsRecordingWhereNoneRuns: a real JDK 17 JVM started without JFR
// gets a recording with the project's settings through the attach
// protocol; its GC pauses and safepoints then arrive like any other JVM's,
// and closing the source stops the recording it started.
func TestStartsRecordingWhereNoneRuns(t *testing.T) {
	j := jfrtest.Find(t, 17)
	src, _, err := jfrtest.Workload()
	if err != nil {
		t.Fatal(err)
	}
	// It runs a minute (killed at the end): on a busy host, JFR's start
	// in the JVM (the first JFR command initializes it) can take many
	// seconds.
	cmd := exec.Command(j.Java(), "-Xmx64m", src, "60000")
	cmd.Dir = t.TempDir()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	jfrtest.Start(t, cmd)
	pid := cmd.Process.Pid

	s := New(Config{Discover: true, ProcRoot: "/proc", DiscoveryInterval: 100 * time.Millisecond,
		Attach: AttachConfig{Enabled: true, Timeout: 10 * time.Second}})
	s.starter.only = func(j discovery.JVM) bool { return j.PID == pid }
	closed := false
	defer func() {
		if !closed {
			s.Close()
		}
	}()
	kinds := map[window.Kind]int{}
	deadline := time.Now().Add(60 * time.Second)
	for kinds[window.KindJVMGCPause] == 0 || kinds[window.KindJVMSafepoint] == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("windows %v after a minute\n%s", kinds, out.String())
		}
		if err := s.Poll(context.Background(), func(b jvmevent.Batch) {
			if b.JVM.PID != pid {
				return
			}
			for _, w := range b.Windows {
				kinds[w.Kind]++
				if w.Kind == window.KindJVMSafepoint && w.Attributes["jvm.safepoint.end_source"] != "jdk.SafepointEnd" {
					t.Errorf("the project's settings record SafepointEnd; window %+v", w)
				}
			}
		}); err != nil {
			t.Logf("poll: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	s.Close()
	closed = true
	check, err := attach.Target{ProcRoot: "/proc", PID: pid, Timeout: 10 * time.Second}.Jcmd("JFR.check")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(check, RecordingName) {
		t.Errorf("the recording the source started still runs after Close:\n%s", check)
	}
}

// fakeJVM is a JVM found in a fake proc tree (pid 4321, 1 in its own
// namespace) whose root is a folder the test shapes as a hostile
// container would; host is a folder beside it that an escape would reach.
func fakeJVM(t *testing.T) (j discovery.JVM, root, host string) {
	t.Helper()
	base := t.TempDir()
	proc, root, host := filepath.Join(base, "proc"), filepath.Join(base, "rootfs"), filepath.Join(base, "host")
	for _, d := range []string{filepath.Join(proc, "4321"), root, host} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(root, filepath.Join(proc, "4321", "root")); err != nil {
		t.Fatal(err)
	}
	return discovery.JVM{PID: 4321, NSPID: 1, StartTicks: 4242, ProcRoot: proc}, root, host
}

// TestSettingsWrittenOnlyInsideTheJVMsRoot: the settings file lands in
// the JVM's own /tmp as a new regular file and is removed after; a /tmp
// that links out of the container, or a file of that name planted as a
// link to a host file, never makes it written on the host.
func TestSettingsWrittenOnlyInsideTheJVMsRoot(t *testing.T) {
	s := newStarter(AttachConfig{}, "", zap.NewNop(), nil)

	j, root, host := fakeJVM(t)
	if err := os.MkdirAll(filepath.Join(root, "tmp"), 0o755); err != nil {
		t.Fatal(err)
	}
	hostFile := filepath.Join(host, "authorized_keys")
	if err := os.WriteFile(hostFile, []byte("ssh-ed25519 AAAA host\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	planted := filepath.Join(root, "tmp", "otelcol-ai-1.jfc")
	if err := os.Symlink(hostFile, planted); err != nil {
		t.Fatal(err)
	}
	name, cleanup, err := s.settingsFor(j)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Lstat(planted)
	if err != nil || !fi.Mode().IsRegular() || name != "/tmp/otelcol-ai-1.jfc" {
		t.Fatalf("settings %q: %v, %v; want a regular file in the container's /tmp", name, fi, err)
	}
	if got, _ := os.ReadFile(planted); !bytes.Equal(got, Settings) {
		t.Errorf("settings file holds %d bytes, want the project's %d", len(got), len(Settings))
	}
	if got, _ := os.ReadFile(hostFile); string(got) != "ssh-ed25519 AAAA host\n" {
		t.Errorf("host file written through the planted link: %q", got)
	}
	cleanup()
	if _, err := os.Lstat(planted); !os.IsNotExist(err) {
		t.Errorf("settings file not removed: %v", err)
	}

	for _, link := range []string{host, strings.Repeat("../", 12) + host[1:]} {
		j, root, host := fakeJVM(t)
		if err := os.Symlink(link, filepath.Join(root, "tmp")); err != nil {
			t.Fatal(err)
		}
		if _, _, err := s.settingsFor(j); err == nil || !strings.Contains(err.Error(), "writing settings for pid 4321") {
			t.Errorf("/tmp -> %s: %v, want a failure to write the settings", link, err)
		}
		if entries, _ := os.ReadDir(host); len(entries) != 0 {
			t.Errorf("/tmp -> %s: files made on the host: %v", link, entries)
		}
	}
}

// TestConfiguredSettingsReadCapped: the operator's .jfc is read only if
// it is a regular file of at most 1 MiB; a FIFO or a device in its place
// fails at once instead of blocking the poll loop or reading forever.
func TestConfiguredSettingsReadCapped(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo.jfc")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big.jfc")
	if err := os.WriteFile(big, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(big, maxSettings+1); err != nil {
		t.Fatal(err)
	}
	ok := filepath.Join(dir, "ok.jfc")
	if err := os.WriteFile(ok, []byte("<configuration/>"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path string
		want error
	}{{fifo, procroot.ErrNotRegular}, {"/dev/zero", procroot.ErrNotRegular}, {big, procroot.ErrTooLarge}, {ok, nil}} {
		done := make(chan error, 1)
		go func() {
			_, err := readSettings(tc.path)
			done <- err
		}()
		select {
		case err := <-done:
			if !errors.Is(err, tc.want) || (tc.want == nil && err != nil) {
				t.Errorf("%s: %v, want %v", tc.path, err, tc.want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: reading the settings blocks", tc.path)
		}
	}
	if data, err := readSettings(ok); err != nil || string(data) != "<configuration/>" {
		t.Errorf("regular settings: %q, %v", data, err)
	}
}
