package xlog

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/otelcol-ai/otelcol-ai/internal/window"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/discovery"
)

// openDescriptors counts this process's open descriptors.
func openDescriptors(t *testing.T) int {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(entries)
}

// heapAfterGC is the live heap, collected.
func heapAfterGC() uint64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// sparseFiles makes n files of size bytes in dir, without a newline (sparse:
// no disk spent).
func sparseFiles(t *testing.T, dir string, n int, size int64) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		name := filepath.Join(dir, fmt.Sprintf("f%05d", i))
		if err := os.WriteFile(name, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(name, size); err != nil {
			t.Fatal(err)
		}
	}
}

// inPod writes the fake JVM pid's cgroup file: a container of pod uid.
func (p fakeProc) inPod(t *testing.T, pid int, uid string) {
	t.Helper()
	cgroup := "0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" + strings.ReplaceAll(uid, "-", "_") +
		".slice/cri-containerd-" + strings.Repeat(strconv.Itoa(pid%10), 64) + ".scope\n"
	if err := os.WriteFile(filepath.Join(p.dir, strconv.Itoa(pid), "cgroup"), []byte(cgroup), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestTenThousandMatchesAreBounded: a JVM whose -Xlog output is a pattern
// matching 10,000 files, each 16 KiB without a newline, makes the source
// follow maxTailsPerJVM of them: that many descriptors, no line buffer held
// per file, as many positions to checkpoint, one too_many counted however
// many polls; another JVM's log is read at every poll.
func TestTenThousandMatchesAreBounded(t *testing.T) {
	p := newFakeProc(t)
	const files, size = 10000, 16 << 10
	attacker := p.jvm(t, 7001, "-Xlog:gc:/tmp/g/*", "-jar", "app.jar")
	sparseFiles(t, filepath.Join(attacker, "tmp", "g"), files, size)
	victim := p.jvm(t, 7002, "-Xlog:safepoint:file=gc.log:time,uptimenanos,timenanos,pid,level,tags", "-jar", "app.jar")
	victimLog := filepath.Join(victim, "app", "gc.log")
	appendFile(t, victimLog, safepointLine("Victim0"))

	refused := map[string]int{}
	s := NewSource(Config{Scanner: discovery.NewScanner(p.dir), FromStart: true, DiscoveryInterval: 0, Clock: window.NewFixedClock(0),
		Refused: func(reason string) { refused[reason]++ }})
	defer s.Close()

	fdsBefore, heapBefore := openDescriptors(t), heapAfterGC()
	got := operations{}
	victimSource := filepath.Join(p.dir, "7002", "root", "app", "gc.log")
	const polls = 4
	for i := range polls {
		if i > 0 {
			appendFile(t, victimLog, safepointLine("Victim"+strconv.Itoa(i)))
		}
		_, err := pollGuarded(t, s, got)
		if i == 0 && (err == nil || !strings.Contains(err.Error(), "more -Xlog files than the bounds allow")) {
			t.Errorf("first poll: %v, want the surplus reported", err)
		}
		if i > 0 && err != nil {
			t.Errorf("poll %d: %v (the surplus reported again?)", i, err)
		}
		if n := got[victimSource]["Victim"+strconv.Itoa(i)]; n != 1 {
			t.Errorf("poll %d: the other JVM's line read %d times, want 1 (read %v)", i, n, got[victimSource])
		}
	}
	fds := openDescriptors(t) - fdsBefore
	heap := int64(heapAfterGC()) - int64(heapBefore)
	positions := s.Positions()
	t.Logf("10,000 matching files: %d files followed, %d descriptors and %d KiB of heap held, %d positions to checkpoint", len(s.files), fds, heap>>10, len(positions))
	// The victim's file and its root, the attacker's files and its root.
	if want := maxTailsPerJVM + 1; len(s.files) != want || len(positions) != want {
		t.Errorf("%d files followed, %d positions; want %d", len(s.files), len(positions), want)
	}
	if limit := maxTailsPerJVM + 1 + 2; fds > limit {
		t.Errorf("%d descriptors held, want at most %d", fds, limit)
	}
	if heap > 4<<20 {
		t.Errorf("heap grew %d KiB following the files, want under 4 MiB", heap>>10)
	}
	attackerFiles := filepath.Join(p.dir, "7001", "root", "tmp", "g") + "/"
	for path := range positions {
		if path != victimSource && !strings.HasPrefix(path, attackerFiles) {
			t.Errorf("a position for %s, not a followed file", path)
		}
	}
	if refused[RefusedTooMany] != 1 || len(refused) != 1 {
		t.Errorf("refusals counted %v, want too_many once", refused)
	}
}

// TestPodBound: the JVMs of one pod together follow at most maxTailsPerPod
// files, whatever each may; a JVM of another pod is not held back.
func TestPodBound(t *testing.T) {
	p := newFakeProc(t)
	const pod, other = "0b6e6c2e-3f4a-4b7e-9d9a-6f1e2a3b4c5d", "1c7f7d3f-4a5b-4c8f-8eab-7a2f3b4c5d6e"
	var roots []string
	for i := range 3 {
		pid := 7100 + i
		roots = append(roots, p.jvm(t, pid, "-Xlog:gc:/tmp/g/*", "-jar", "app.jar"))
		p.inPod(t, pid, pod)
		sparseFiles(t, filepath.Join(roots[i], "tmp", "g"), maxTailsPerJVM, 10)
	}
	lone := p.jvm(t, 7200, "-Xlog:gc:/tmp/g/*", "-jar", "app.jar")
	p.inPod(t, 7200, other)
	sparseFiles(t, filepath.Join(lone, "tmp", "g"), maxTailsPerJVM, 10)

	refused := map[string]int{}
	s := NewSource(Config{Scanner: discovery.NewScanner(p.dir), FromStart: true, DiscoveryInterval: 0, Clock: window.NewFixedClock(0),
		Refused: func(reason string) { refused[reason]++ }})
	defer s.Close()
	for range 3 {
		pollGuarded(t, s, operations{})
	}
	byPID := map[int]int{}
	for _, tl := range s.files {
		byPID[tl.jvm.PID]++
	}
	inPod := byPID[7100] + byPID[7101] + byPID[7102]
	if inPod != maxTailsPerPod || byPID[7200] != maxTailsPerJVM {
		t.Errorf("followed %v: %d in the pod, want %d; %d for the other pod's JVM, want %d", byPID, inPod, maxTailsPerPod, byPID[7200], maxTailsPerJVM)
	}
	if refused[RefusedTooMany] != 1 {
		t.Errorf("refusals counted %v, want too_many once (the JVM that found its pod full)", refused)
	}
}

// TestIncludePatternBound: an xlog::include pattern matching more files than
// maxMatches follows the last maxMatches names, holding a descriptor for
// each and the host root only, and counts too_many once however many polls.
func TestIncludePatternBound(t *testing.T) {
	dir := t.TempDir()
	const extra = 44
	for i := range maxMatches + extra {
		appendFile(t, filepath.Join(dir, fmt.Sprintf("gc-%04d.log", i)), safepointLine("Op"+strconv.Itoa(i)))
	}
	refused := map[string]int{}
	s := NewSource(Config{Include: []string{filepath.Join(dir, "*.log")}, FromStart: true, DiscoveryInterval: 0, Clock: window.NewFixedClock(0),
		Refused: func(reason string) { refused[reason]++ }})
	defer s.Close()
	fdsBefore := openDescriptors(t)
	got := operations{}
	for i := range 3 {
		if _, err := pollGuarded(t, s, got); (err != nil) != (i == 0) {
			t.Errorf("poll %d: %v; want the surplus reported at the first poll only", i, err)
		}
	}
	if fds := openDescriptors(t) - fdsBefore; len(s.files) != maxMatches || len(s.Positions()) != maxMatches || fds > maxMatches+1 {
		t.Errorf("%d files followed, %d positions, %d descriptors; want %d, %d, at most %d", len(s.files), len(s.Positions()), fds, maxMatches, maxMatches, maxMatches+1)
	}
	if first, last := filepath.Join(dir, fmt.Sprintf("gc-%04d.log", extra-1)), filepath.Join(dir, fmt.Sprintf("gc-%04d.log", extra)); got[first] != nil || got[last]["Op"+strconv.Itoa(extra)] != 1 {
		t.Errorf("read %v from the first name left out, %v from the first kept; want nothing, then its line", got[first], got[last])
	}
	if refused[RefusedTooMany] != 1 || len(refused) != 1 {
		t.Errorf("refusals counted %v, want too_many once", refused)
	}
}
