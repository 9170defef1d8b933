package jfrreceiver

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/receiver"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"
	"go.uber.org/zap"

	"github.com/otelcol-ai/otelcol-ai/internal/fsdeadline"
	"github.com/otelcol-ai/otelcol-ai/internal/procevents"
	"github.com/otelcol-ai/otelcol-ai/internal/stallfs"
	"github.com/otelcol-ai/otelcol-ai/internal/window"
	"github.com/otelcol-ai/otelcol-ai/pkg/jfr/jfrtest"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/metadatatest"
)

// xlogDecorationstest are the decorators the -Xlog lines of these tests
// carry (safepointLinetest).
const xlogDecorationstest = ":time,uptimenanos,timenanos,pid,level,tags"

// safepointLinetest is a JDK 17 safepoint line, the i-th of its log.
func safepointLinetest(i int) string {
	const sec = int64(time.Second)
	return fmt.Sprintf("[2026-11-29T10:26:%02d.724+0000][%dns][%dns][13177][13184][info][safepoint   ] Safepoint \"G1CollectForAllocation\", Time since last: 605579759 ns, Reaching safepoint: 6559 ns, Cleanup: 66509 ns, At safepoint: 17116858 ns, Total: 17189926 ns\n",
		i%60, 2759442805832+int64(i)*sec, 655043291+int64(i)*sec)
}

func appendLinetest(t *testing.T, path string, i int) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(safepointLinetest(i)); err != nil {
		t.Fatal(err)
	}
}

// xlogJVMtest adds to the fake proc root proc a JVM pid (1 in its
// container, whose root is root) running the JDK at /jdk with
// -Xlog:safepoint to /app/gc-<pid>.log, and returns that log's path.
func xlogJVMtest(t *testing.T, proc string, pid int, root string) string {
	t.Helper()
	dir := filepath.Join(proc, strconv.Itoa(pid))
	for _, d := range []string{dir, filepath.Join(root, "app"), filepath.Join(root, "tmp")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	log := "/app/gc-" + strconv.Itoa(pid) + ".log"
	files := map[string]string{
		"stat":    strconv.Itoa(pid) + " (java) S 1 1 1 0 -1 4194304 0 0 0 0 0 0 0 0 20 0 1 0 4242 0 0",
		"status":  "Name:\tjava\nNSpid:\t" + strconv.Itoa(pid) + "\t1\n",
		"cgroup":  "0::/\n",
		"cmdline": "java\x00-Xlog:safepoint:file=" + log + xlogDecorationstest + "\x00-jar\x00app.jar\x00",
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for name, target := range map[string]string{"exe": "/jdk/bin/java", "root": root, "cwd": "/app"} {
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(root, log)
}

// windowstest counts the windows the sink holds for pid, by the runtime
// version on their resource ("" without one).
func windowstest(logs *consumertest.LogsSink, pid int64) map[string]int {
	out := map[string]int{}
	eachRecord(logs.AllLogs(), func(res pcommon.Resource, _ plog.LogRecord) {
		if pidOf(res) != pid {
			return
		}
		version := ""
		if v, ok := res.Attributes().Get(window.ResourceRuntimeVersion); ok {
			version = v.Str()
		}
		out[version]++
	})
	return out
}

func totaltest(byVersion map[string]int) int {
	n := 0
	for _, c := range byVersion {
		n += c
	}
	return n
}

// waitFortest polls cond every 20 ms until it holds, failing the test
// with what after 10 s; it returns how long it took.
func waitFortest(t *testing.T, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for deadline := start.Add(10 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("after 10 s: %s", what)
		}
	}
	return time.Since(start)
}

// shutdownGuardedtest shuts r down under a 10 s deadline and returns how
// long it took, failing the test if it did not complete.
func shutdownGuardedtest(t *testing.T, r receiver.Logs) time.Duration {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	if err := r.Shutdown(ctx); err != nil {
		t.Fatalf("shutdown did not complete within 10 s while a call hangs: %v", err)
	}
	return time.Since(start)
}

// TestStalledReleaseFileHoldsOnlyItsJVM: the JDK of one containerised JVM
// lies on a mount that stops answering (stallfs: calls block until
// released, as a hard NFS mount's do once its server is gone), so reading
// its release file (process.runtime.version) hangs; the JVM's -Xlog file
// and another JVM lie on a local disk. The other JVM's windows arrive at
// every poll (the first poll of the stall held fsdeadline.Timeout once),
// the stalled JVM's too, without a version; the stall is counted once
// (refused{source=xlog, reason=stalled}). Once the mount answers, its
// version comes with its next windows. With a read hanging again, the
// receiver shuts down within its timeout.
func TestStalledReleaseFileHoldsOnlyItsJVM(t *testing.T) {
	base := t.TempDir()
	proc := filepath.Join(base, "proc")
	stalledRoot, otherRoot := filepath.Join(base, "rootfs-4500"), filepath.Join(base, "rootfs-4600")
	for _, d := range []string{filepath.Join(stalledRoot, "stalled"), filepath.Join(otherRoot, "jdk")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	mount := stallfs.MountAt(t, filepath.Join(stalledRoot, "stalled"))
	mount.WriteFile("jdk/release", []byte("JAVA_VERSION=\"17.0.99\"\nJAVA_RUNTIME_VERSION=\"17.0.99+1\"\n"))
	// A link inside the root resolves inside it: /jdk is the mount's.
	if err := os.Symlink("/stalled/jdk", filepath.Join(stalledRoot, "jdk")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(otherRoot, "jdk", "release"), []byte("JAVA_RUNTIME_VERSION=\"21.0.99+1\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	stalledLog, otherLog := xlogJVMtest(t, proc, 4500, stalledRoot), xlogJVMtest(t, proc, 4600, otherRoot)
	appendLinetest(t, stalledLog, 0)
	appendLinetest(t, otherLog, 0)

	cfg := createDefaultConfig().(*Config)
	cfg.ProcRoot = proc
	cfg.PollInterval = 50 * time.Millisecond
	cfg.CollectionInterval = time.Hour
	cfg.Repositories.Enabled = false
	cfg.XLog.Discover = true
	cfg.XLog.StartAt = "beginning"
	cfg.XLog.DiscoveryInterval = 50 * time.Millisecond
	tel := componenttest.NewTelemetry()
	defer tel.Shutdown(context.Background())
	logs := new(consumertest.LogsSink)
	r, err := NewFactory().CreateLogs(context.Background(), metadatatest.NewSettings(tel), cfg, logs)
	if err != nil {
		t.Fatal(err)
	}
	mount.Stall()
	if err := r.Start(context.Background(), componenttest.NewNopHost()); err != nil {
		t.Fatal(err)
	}
	stopped := false
	defer func() {
		if !stopped {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = r.Shutdown(ctx)
		}
	}()

	var took []time.Duration
	for i := 1; i <= 5; i++ {
		appendLinetest(t, otherLog, i)
		took = append(took, waitFortest(t, fmt.Sprintf("the other JVM's line %d not read while its neighbour's release file hangs", i),
			func() bool { return totaltest(windowstest(logs, 4600)) >= i+1 }))
	}
	t.Logf("the other JVM's lines, each read after: %v (the first poll of the stall holds fsdeadline.Timeout, once)", took)
	// Waiting for the release file again would take fsdeadline.Timeout.
	if slowest := max(took[1], took[2], took[3], took[4]); slowest > fsdeadline.Timeout*3/4 {
		t.Errorf("a line of the other JVM took %v to be read after the stall was reported: a poll waited for the release file again", slowest)
	}
	// Its first windows came in the poll whose deadline the stalled read
	// took: its own read was not waited for then, and taken at the next.
	if got := windowstest(logs, 4600); got["21.0.99+1"] < 4 {
		t.Errorf("the other JVM's windows by version: %v, want its version on those of every poll after the first", got)
	}
	if got := windowstest(logs, 4500); got[""] != 1 || len(got) != 1 {
		t.Errorf("the stalled JVM's windows by version: %v, want its one window, without a version", got)
	}
	if mount.Blocked() == 0 {
		t.Fatal("no call blocked on the stalled mount: the test stalls nothing")
	}
	stalledCount := func(n int64) []metricdata.DataPoint[int64] {
		return []metricdata.DataPoint[int64]{{Value: n, Attributes: attribute.NewSet(attribute.String("source", "xlog"), attribute.String("reason", "stalled"))}}
	}
	metadatatest.AssertEqualReceiverJfrRefused(t, tel, stalledCount(1), metricdatatest.IgnoreTimestamp())

	mount.Release()
	appendLinetest(t, stalledLog, 1)
	waitFortest(t, "the stalled JVM's version not taken once its mount answers", func() bool { return windowstest(logs, 4500)["17.0.99+1"] >= 1 })

	// Another JVM of the same container starts while the mount hangs again.
	mount.Stall()
	thirdLog := xlogJVMtest(t, proc, 4700, stalledRoot)
	appendLinetest(t, thirdLog, 0)
	waitFortest(t, "the third JVM's window not sent", func() bool { return totaltest(windowstest(logs, 4700)) >= 1 })
	metadatatest.AssertEqualReceiverJfrRefused(t, tel, stalledCount(2), metricdatatest.IgnoreTimestamp())
	stopped = true
	shutdown := shutdownGuardedtest(t, r)
	t.Logf("shutdown with a release file read hanging: %v", shutdown)
	if shutdown > fsdeadline.Timeout+time.Second {
		t.Errorf("shutdown took %v with a release file read hanging, want no wait for it", shutdown)
	}
	if mount.Blocked() == 0 {
		t.Error("no call blocked on the stalled mount at shutdown: the test proved nothing")
	}
}

// fakeJavatest copies /bin/sh to a java launcher of its own, outside /tmp
// (which the tests cover with a mount in a process's namespace), and
// returns its path; run as `java -c 'read x' …` it is a process named
// java that waits on its standard input.
func fakeJavatest(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("/var/tmp", "stall")
	if err != nil {
		t.Skipf("no /var/tmp: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sh, err := os.ReadFile("/bin/sh")
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "jdk", "bin", "java")
	if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, sh, 0o755); err != nil {
		t.Fatal(err)
	}
	return bin
}

// startWaitingtest starts cmd with a pipe for its standard input, which
// the test holds open, and kills it when the test ends (before the mounts
// made before it are unmounted).
func startWaitingtest(t *testing.T, cmd *exec.Cmd) io.Writer {
	t.Helper()
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	jfrtest.Start(t, cmd)
	return in
}

// TestStalledTmpAtExecHoldsOnlyItsJVM: a process named java starts in a
// mount namespace of its own whose /tmp is a mount that stops answering
// (stallfs bound over /tmp), as a container's on a hung NFS server. Its
// exec makes discovery watch its /tmp, which hangs: discovery gives up on
// it at the deadline (fsdeadline.Timeout), counts it (refused{reason=
// stalled}), and another JVM exec'd during the stall, its -Xlog file on a
// local disk, is found from its exec and read (discovery by events only:
// the periodic scan runs hourly here). The receiver shuts down within its
// timeout while the watch's call still hangs.
func TestStalledTmpAtExecHoldsOnlyItsJVM(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("a mount namespace and a FUSE mount need root")
	}
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("no unshare(1)")
	}
	sub := procevents.Subscribe(zap.NewNop())
	mechanism := sub.Mechanism()
	sub.Close()
	if mechanism == procevents.MechanismNone {
		if os.Getenv("CI") != "" {
			t.Fatal("no process events in CI")
		}
		t.Skip("no process events here")
	}
	java := fakeJavatest(t)
	mount := stallfs.Mount(t)
	mount.WriteFile("hsperfdata_app/1", nil)

	cfg := createDefaultConfig().(*Config)
	cfg.PollInterval = 50 * time.Millisecond
	cfg.CollectionInterval = time.Hour
	cfg.Repositories.Enabled = false
	cfg.XLog.Discover = true
	cfg.XLog.StartAt = "beginning"
	cfg.XLog.DiscoveryInterval = time.Hour
	tel := componenttest.NewTelemetry()
	defer tel.Shutdown(context.Background())
	logs := new(consumertest.LogsSink)
	r, err := NewFactory().CreateLogs(context.Background(), metadatatest.NewSettings(tel), cfg, logs)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(context.Background(), componenttest.NewNopHost()); err != nil {
		t.Fatal(err)
	}
	stopped := false
	defer func() {
		if !stopped {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = r.Shutdown(ctx)
		}
	}()

	tenant := exec.Command("unshare", "-m", "--propagation", "private", "/bin/sh", "-c",
		`mount --bind "$1" /tmp && echo mounted && read go && exec "$2" -c 'read never'`, "sh", mount.Dir(), java)
	out, err := tenant.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	in := startWaitingtest(t, tenant)
	// Cleanups run last first: the mount answers again before the tenant
	// is killed, or its java, blocked on the stalled /tmp in a call that
	// ignores signals (as on a hard NFS mount), is never reaped and the
	// test never ends (a CI run hung there).
	t.Cleanup(mount.Release)
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "mounted\n" {
		t.Fatalf("the tenant's namespace: %q, %v", line, err)
	}
	mount.Stall()
	if _, err := io.WriteString(in, "go\n"); err != nil {
		t.Fatal(err)
	}
	// Its java runs (its exec did not hang: the launcher lies outside the
	// tenant's /tmp), so what blocks on the mount is discovery's look.
	comm := filepath.Join("/proc", strconv.Itoa(tenant.Process.Pid), "comm")
	waitFortest(t, "the tenant's java never ran", func() bool {
		b, err := os.ReadFile(comm)
		return err == nil && string(b) == "java\n"
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := mount.WaitBlocked(ctx); err != nil {
		t.Fatalf("discovery never looked at the tenant's /tmp: %v", err)
	}

	log := filepath.Join(t.TempDir(), "gc.log")
	appendLinetest(t, log, 0)
	other := exec.Command(java, "-c", "read never", "-Xlog:safepoint:file="+log+xlogDecorationstest)
	startWaitingtest(t, other)
	found := waitFortest(t, "the JVM exec'd during the stall not read", func() bool { return totaltest(windowstest(logs, int64(other.Process.Pid))) >= 1 })
	t.Logf("a JVM exec'd while another's /tmp hangs: read %v after its exec", found)
	if found > fsdeadline.Timeout+2*time.Second {
		t.Errorf("the JVM exec'd during the stall was read %v after its exec, want within fsdeadline.Timeout (%v) and a poll", found, fsdeadline.Timeout)
	}
	metadatatest.AssertEqualReceiverJfrRefused(t, tel, []metricdata.DataPoint[int64]{
		{Value: 1, Attributes: attribute.NewSet(attribute.String("source", "xlog"), attribute.String("reason", "stalled"))},
	}, metricdatatest.IgnoreTimestamp())

	if mount.Blocked() == 0 {
		t.Fatal("no call blocked on the tenant's /tmp: the test proved nothing")
	}
	stopped = true
	shutdown := shutdownGuardedtest(t, r)
	t.Logf("shutdown with the watch of the tenant's /tmp hanging: %v", shutdown)
	if shutdown > fsdeadline.Timeout+time.Second {
		t.Errorf("shutdown took %v with a watch hanging, want no wait for it", shutdown)
	}
}
