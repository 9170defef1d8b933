package xlog

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/otelcol-ai/otelcol-ai/internal/window"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/discovery"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/jvmevent"
)

// safepointLine is a JDK 17 safepoint line of the VM operation op.
func safepointLine(op string) string {
	return strings.Replace(g1Safepoint17, "G1CollectForAllocation", op, 1) + "\n"
}

// operations counts the windows of each VM operation, by the file that
// sent them.
type operations map[string]map[any]int

// pollGuarded polls once, failing the test if the poll does not return
// within 10 s (a blocked open or read would never return); it returns
// what arrived, the error, and how long the poll took.
func pollGuarded(t *testing.T, s *Source, got operations) (time.Duration, error) {
	t.Helper()
	type result struct {
		b   []jvmevent.Batch
		err error
		d   time.Duration
	}
	done := make(chan result, 1)
	go func() {
		var r result
		began := time.Now()
		r.err = s.Poll(context.Background(), func(b jvmevent.Batch) { r.b = append(r.b, b) })
		r.d = time.Since(began)
		done <- r
	}()
	select {
	case r := <-done:
		for _, b := range r.b {
			for _, w := range b.Windows {
				if got[b.JVM.Source] == nil {
					got[b.JVM.Source] = map[any]int{}
				}
				got[b.JVM.Source][w.Attributes[window.AttrJVMVMOperation]]++
			}
		}
		return r.d, r.err
	case <-time.After(10 * time.Second):
		t.Fatal("a poll blocked for 10 s")
		return 0, nil
	}
}

// TestRefusedFilesDoNotHoldTheOthers: a FIFO or a device matched where a
// log should be, or a FIFO renamed over a tailed log, is refused without
// blocking and reported once; the other files go on delivering their
// lines.
func TestRefusedFilesDoNotHoldTheOthers(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.log"), filepath.Join(dir, "b.log")
	appendFile(t, a, safepointLine("A1"))
	appendFile(t, b, safepointLine("B1"))
	if err := syscall.Mkfifo(filepath.Join(dir, "c.log"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/dev/zero", filepath.Join(dir, "z.log")); err != nil {
		t.Fatal(err)
	}
	refused := map[string]int{}
	s := NewSource(Config{Include: []string{filepath.Join(dir, "*.log")}, FromStart: true, DiscoveryInterval: 0, Clock: window.NewFixedClock(0),
		Refused: func(reason string) { refused[reason]++ }})
	defer s.Close()

	got := operations{}
	_, err := pollGuarded(t, s, got)
	for _, want := range []string{"c.log: not a regular file (FIFO)", "z.log: not a regular file (character device)"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("first poll: %v, want a refusal %q", err, want)
		}
	}
	if got[a]["A1"] != 1 || got[b]["B1"] != 1 {
		t.Errorf("first poll read %v", got)
	}

	// The JVM's file is swapped for a FIFO between two polls.
	fifo := filepath.Join(dir, "a.fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(fifo, a); err != nil {
		t.Fatal(err)
	}
	appendFile(t, b, safepointLine("B2"))
	took, err := pollGuarded(t, s, got)
	t.Logf("poll with a FIFO renamed over a tailed file: %v", took)
	if err == nil || !strings.Contains(err.Error(), "a.log: not a regular file (FIFO)") || strings.Contains(err.Error(), "c.log") {
		t.Errorf("poll after the swap: %v, want a.log refused and c.log not reported again", err)
	}
	if got[b]["B2"] != 1 {
		t.Errorf("b.log's line after the swap: %v", got)
	}

	appendFile(t, b, safepointLine("B3"))
	if _, err := pollGuarded(t, s, got); err != nil {
		t.Errorf("a refusal reported again: %v", err)
	}
	if got[b]["B3"] != 1 || got[a]["A1"] != 1 || len(got) != 2 {
		t.Errorf("later poll read %v", got)
	}
	if refused[RefusedNotRegular] != 3 || len(refused) != 1 {
		t.Errorf("refusals counted %v, want 3 not_regular (c.log, z.log, a.log)", refused)
	}

	// A log in place of the FIFO again is read from its start.
	if err := os.Remove(a); err != nil {
		t.Fatal(err)
	}
	appendFile(t, a, safepointLine("A2"))
	if _, err := pollGuarded(t, s, got); err != nil || got[a]["A2"] != 1 {
		t.Errorf("a.log a regular file again: %v, read %v", err, got)
	}
}

// fakeProc is a proc tree whose processes are JVMs in fake containers:
// each has a root folder the test shapes as a hostile container would.
type fakeProc struct {
	dir  string // the proc root
	host string // a host folder beside the containers, that an escape would reach
}

func newFakeProc(t *testing.T) fakeProc {
	t.Helper()
	base := t.TempDir()
	p := fakeProc{dir: filepath.Join(base, "proc"), host: filepath.Join(base, "host")}
	for _, d := range []string{p.dir, p.host} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

// jvm adds a JVM pid (1 in its container) working in /app, with args, and
// returns its root folder.
func (p fakeProc) jvm(t *testing.T, pid int, args ...string) string {
	t.Helper()
	dir := filepath.Join(p.dir, strconv.Itoa(pid))
	root := filepath.Join(filepath.Dir(p.dir), "rootfs-"+strconv.Itoa(pid))
	for _, d := range []string{dir, filepath.Join(root, "app"), filepath.Join(root, "tmp")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(name, s string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	link := func(target, name string) {
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	link("/usr/lib/jvm/java-17/bin/java", "exe")
	link(root, "root")
	link("/app", "cwd")
	write("stat", strconv.Itoa(pid)+" (java) S 1 1 1 0 -1 4194304 0 0 0 0 0 0 0 0 20 0 1 0 4242 0 0")
	write("cmdline", strings.Join(append([]string{"java"}, args...), "\x00")+"\x00")
	write("status", "Name:\tjava\nNSpid:\t"+strconv.Itoa(pid)+"\t1\n")
	return root
}

// TestDiscoveredLogsStayInsideTheContainer: a discovered JVM's -Xlog
// paths and the links in its container are resolved inside its root: a
// log named by `..`, by a host path, or through absolute or relative links
// to the host's log is never read, a FIFO is refused, and the JVM's own
// log is read.
func TestDiscoveredLogsStayInsideTheContainer(t *testing.T) {
	p := newFakeProc(t)
	hostLog := filepath.Join(p.host, "gc.log")
	appendFile(t, hostLog, safepointLine("HostOnly"))
	const deco = ":time,uptimenanos,timenanos,pid,level,tags"
	root := p.jvm(t, 4321,
		"-Xlog:safepoint:file=gc.log"+deco,
		"-Xlog:safepoint:file="+strings.Repeat("../", 12)+hostLog[1:]+deco,
		"-Xlog:safepoint:file="+hostLog+deco,
		"-Xlog:safepoint:file=/app/abs-link.log"+deco,
		"-Xlog:safepoint:file=/app/rel-link.log"+deco,
		"-Xlog:safepoint:file=/app/hostdir/gc.log"+deco,
		"-Xlog:safepoint:file=/app/fifo.log"+deco,
		"-jar", "app.jar")
	for link, target := range map[string]string{
		"abs-link.log": hostLog,
		"rel-link.log": strings.Repeat("../", 12) + hostLog[1:],
		"hostdir":      p.host,
	} {
		if err := os.Symlink(target, filepath.Join(root, "app", link)); err != nil {
			t.Fatal(err)
		}
	}
	if err := syscall.Mkfifo(filepath.Join(root, "app", "fifo.log"), 0o644); err != nil {
		t.Fatal(err)
	}
	own := filepath.Join(root, "app", "gc.log")
	appendFile(t, own, safepointLine("Container1"))

	refused := map[string]int{}
	s := NewSource(Config{Scanner: discovery.NewScanner(p.dir), FromStart: true, DiscoveryInterval: 0, Clock: window.NewFixedClock(0),
		Refused: func(reason string) { refused[reason]++ }})
	defer s.Close()
	got := operations{}
	_, err := pollGuarded(t, s, got)
	if err == nil || !strings.Contains(err.Error(), "/root/app/fifo.log: not a regular file") {
		t.Errorf("first poll: %v, want the FIFO refused", err)
	}
	appendFile(t, hostLog, safepointLine("HostOnly"))
	appendFile(t, own, safepointLine("Container2"))
	if _, err := pollGuarded(t, s, got); err != nil {
		t.Errorf("second poll: %v", err)
	}
	ownSource := filepath.Join(p.dir, "4321", "root", "app", "gc.log")
	if len(got) != 1 || got[ownSource]["Container1"] != 1 || got[ownSource]["Container2"] != 1 || len(got[ownSource]) != 2 {
		t.Errorf("read %v, want only the container's own log's two lines from %s", got, ownSource)
	}
	if refused[RefusedNotRegular] != 1 || len(refused) != 1 {
		t.Errorf("refusals counted %v, want the FIFO once", refused)
	}
}

// TestEndlessLineHeldBounded: a 100 MiB line without a newline (a sparse
// file) is read 4 MiB a poll and dropped, counted and reported once,
// without the heap growing by more than a few buffers; the line after it
// is read.
func TestEndlessLineHeldBounded(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "gc.log")
	const size = 100 << 20
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, size); err != nil {
		t.Fatal(err)
	}
	refused := map[string]int{}
	s := NewSource(Config{Include: []string{path}, FromStart: true, DiscoveryInterval: time.Hour, Clock: window.NewFixedClock(0),
		Refused: func(reason string) { refused[reason]++ }})
	defer s.Close()

	var before, now runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	peak := before.HeapAlloc
	got := operations{}
	reports := 0
	for polls := 0; s.files[path] == nil || s.files[path].offset < size; polls++ {
		if polls > size/maxReadPerPoll+2 {
			t.Fatalf("%d polls and the file is not read", polls)
		}
		if _, err := pollGuarded(t, s, got); err != nil {
			if !strings.Contains(err.Error(), "a line longer than 65536 bytes dropped") {
				t.Fatalf("poll: %v", err)
			}
			reports++
		}
		runtime.ReadMemStats(&now)
		peak = max(peak, now.HeapAlloc)
	}
	growth := int64(peak) - int64(before.HeapAlloc)
	t.Logf("heap growth while reading a 100 MiB line: %d KiB (peak %d KiB)", growth>>10, peak>>10)
	if growth > 64<<20 {
		t.Errorf("heap grew %d MiB reading the line", growth>>20)
	}
	appendFile(t, path, "\n"+safepointLine("After"))
	if _, err := pollGuarded(t, s, got); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[path]["After"] != 1 || len(got[path]) != 1 {
		t.Errorf("read %v, want the line after the long one", got)
	}
	if refused[RefusedLineTooLong] != 1 || len(refused) != 1 || reports != 1 {
		t.Errorf("refusals counted %v, the long line reported %d times; want one line_too_long, reported once", refused, reports)
	}
}

// TestLongLinesBetweenLines: a line over the cap, whether split across
// reads or whole in one, is dropped and its tail is not read as a line.
func TestLongLinesBetweenLines(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "gc.log")
	long := strings.Repeat("x", maxLine) + strings.TrimSuffix(safepointLine("Tail"), "\n")
	appendFile(t, path, safepointLine("One")+long+"\n"+safepointLine("Two")+long[:maxLine/2])
	refused := map[string]int{}
	s := NewSource(Config{Include: []string{path}, FromStart: true, DiscoveryInterval: time.Hour, Clock: window.NewFixedClock(0),
		Refused: func(reason string) { refused[reason]++ }})
	defer s.Close()
	got := operations{}
	if _, err := pollGuarded(t, s, got); err == nil {
		t.Error("a long line not reported")
	}
	appendFile(t, path, long[maxLine/2:]+"\n"+safepointLine("Three"))
	if _, err := pollGuarded(t, s, got); err != nil {
		t.Errorf("reported again: %v", err)
	}
	if got[path]["One"] != 1 || got[path]["Two"] != 1 || got[path]["Three"] != 1 || len(got[path]) != 3 {
		t.Errorf("read %v, want One, Two, Three and no Tail", got)
	}
	if refused[RefusedLineTooLong] != 2 {
		t.Errorf("refusals counted %v, want 2 line_too_long", refused)
	}
}

// TestTailsReleaseTheirRoots: tails of discovered JVMs and of patterns
// coming and going leave no descriptor open, and Close releases the rest.
func TestTailsReleaseTheirRoots(t *testing.T) {
	p := newFakeProc(t)
	patterns := t.TempDir()
	s := NewSource(Config{Include: []string{filepath.Join(patterns, "*.log")}, Scanner: discovery.NewScanner(p.dir),
		FromStart: true, DiscoveryInterval: 0, Clock: window.NewFixedClock(0)})
	defer s.Close()
	fds := func() int {
		entries, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			t.Fatal(err)
		}
		return len(entries)
	}
	baseline := 0
	for i := range 40 {
		pid := 5000 + i
		root := p.jvm(t, pid, "-Xlog:safepoint:file=gc.log:time,uptimenanos,timenanos,pid,level,tags", "-Xlog:safepoint:file=/tmp/second.log")
		appendFile(t, filepath.Join(root, "app", "gc.log"), safepointLine("JVM"))
		appendFile(t, filepath.Join(root, "tmp", "second.log"), safepointLine("Second"))
		pattern := filepath.Join(patterns, strconv.Itoa(i)+".log")
		appendFile(t, pattern, safepointLine("Pattern"))
		got := operations{}
		if _, err := pollGuarded(t, s, got); err != nil {
			t.Fatal(err)
		}
		if len(s.files) != 3 || len(s.roots) != 2 || got[pattern]["Pattern"] != 1 {
			t.Fatalf("round %d: %d files, %d roots, read %v; want 3 files in 2 roots", i, len(s.files), len(s.roots), got)
		}
		// The JVM exits, the pattern's file is deleted.
		if err := os.RemoveAll(filepath.Join(p.dir, strconv.Itoa(pid))); err != nil {
			t.Fatal(err)
		}
		if err := os.Remove(pattern); err != nil {
			t.Fatal(err)
		}
		if _, err := pollGuarded(t, s, got); err != nil {
			t.Fatal(err)
		}
		if len(s.files) != 0 || len(s.roots) != 0 {
			t.Fatalf("round %d: %d files, %d roots after they went", i, len(s.files), len(s.roots))
		}
		// The first round opens what the runtime keeps (its poller).
		if i == 0 {
			baseline = fds()
		} else if n := fds(); n != baseline {
			t.Fatalf("round %d: %d descriptors open, %d after the first round", i, n, baseline)
		}
	}
	appendFile(t, filepath.Join(patterns, "last.log"), safepointLine("Pattern"))
	if _, err := pollGuarded(t, s, operations{}); err != nil || len(s.roots) != 1 {
		t.Fatalf("poll: %v, %d roots", err, len(s.roots))
	}
	s.Close()
	if n := fds(); n != baseline || len(s.roots) != 0 || len(s.files) != 0 {
		t.Errorf("after Close: %d descriptors open, want %d; %d roots, %d files", n, baseline, len(s.roots), len(s.files))
	}
}
