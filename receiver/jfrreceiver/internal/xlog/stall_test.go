package xlog

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/otelcol-ai/otelcol-ai/internal/stallfs"
	"github.com/otelcol-ai/otelcol-ai/internal/window"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/discovery"
)

// TestStalledMountIsolatesItsJVM: one JVM's -Xlog file lies on a mount
// that stops answering (a FUSE file system whose calls block, as a hung
// NFS server's do), another JVM's on a local disk. The local JVM's lines
// arrive at every poll; the stall is reported and counted once and not
// waited for again; once the mount answers, the stalled JVM's lines
// arrive; Close returns while the mount hangs again, and the calls left
// hanging close what they opened once released (no descriptor, no
// goroutine left: goleak in TestMain).
func TestStalledMountIsolatesItsJVM(t *testing.T) {
	p := newFakeProc(t)
	const deco = ":time,uptimenanos,timenanos,pid,level,tags"
	stalledRoot := p.jvm(t, 8001, "-Xlog:safepoint:file=/mnt/gc.log"+deco, "-jar", "app.jar")
	mnt := filepath.Join(stalledRoot, "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	sfs := stallfs.MountAt(t, mnt)
	stalledLog := safepointLine("Stalled1")
	sfs.WriteFile("gc.log", []byte(stalledLog))
	localRoot := p.jvm(t, 8002, "-Xlog:safepoint:file=gc.log"+deco, "-jar", "app.jar")
	localLog := filepath.Join(localRoot, "app", "gc.log")
	appendFile(t, localLog, safepointLine("Local0"))
	stalledSource := filepath.Join(p.dir, "8001", "root", "mnt", "gc.log")
	localSource := filepath.Join(p.dir, "8002", "root", "app", "gc.log")

	refused := map[string]int{}
	s := NewSource(Config{Scanner: discovery.NewScanner(p.dir), FromStart: true, DiscoveryInterval: 0, Clock: window.NewFixedClock(0),
		Refused: func(reason string) { refused[reason]++ }})
	closed := false
	defer func() {
		if !closed {
			s.Close()
		}
	}()

	got := operations{}
	if _, err := pollGuarded(t, s, got); err != nil {
		t.Fatal(err)
	}
	if got[stalledSource]["Stalled1"] != 1 || got[localSource]["Local0"] != 1 {
		t.Fatalf("before the stall, read %v", got)
	}

	sfs.Stall()
	stalledLog += safepointLine("Stalled2")
	sfs.WriteFile("gc.log", []byte(stalledLog))
	var took []time.Duration
	for i := 1; i <= 4; i++ {
		appendFile(t, localLog, safepointLine("Local"+strconv.Itoa(i)))
		d, err := pollGuarded(t, s, got)
		took = append(took, d)
		if i == 1 && (err == nil || !strings.Contains(err.Error(), "has not returned after")) {
			t.Errorf("first poll in the stall: %v, want the stall reported", err)
		}
		if i > 1 && err != nil {
			t.Errorf("poll %d in the stall: %v, want nothing reported again", i, err)
		}
		if n := got[localSource]["Local"+strconv.Itoa(i)]; n != 1 {
			t.Errorf("poll %d in the stall: the local JVM's line read %d times, want 1", i, n)
		}
	}
	t.Logf("polls while one JVM's mount hangs: %v (%d calls blocked on it)", took, sfs.Blocked())
	if sfs.Blocked() == 0 {
		t.Error("nothing blocked on the stalled mount: the test stalls nothing")
	}
	stalls := refused[RefusedStalled]
	if stalls < 1 || stalls > 2 { // the file's read, and its JVM's scan
		t.Errorf("stalls counted %d, want the read and the scan at most, once each", stalls)
	}
	if got[stalledSource]["Stalled2"] != 0 {
		t.Errorf("a line of the stalled file arrived during the stall: %v", got[stalledSource])
	}

	sfs.Release()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for got[stalledSource]["Stalled2"] == 0 && ctx.Err() == nil {
		if _, err := pollGuarded(t, s, got); err != nil {
			t.Errorf("poll after the release: %v", err)
		}
	}
	if got[stalledSource]["Stalled2"] != 1 || got[stalledSource]["Stalled1"] != 1 {
		t.Errorf("after the release, the stalled file's lines read %v, want each once", got[stalledSource])
	}

	// Stalled again, and the collector shuts down.
	sfs.Stall()
	sfs.WriteFile("gc.log", []byte(stalledLog+safepointLine("Stalled3")))
	if _, err := pollGuarded(t, s, got); err == nil {
		t.Error("the second stall not reported")
	}
	closing := time.Now()
	done := make(chan struct{})
	go func() {
		s.Close()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(pollTimeout + 10*time.Second):
		t.Fatal("Close still waits for the stalled mount")
	}
	closed = true
	t.Logf("Close with a call hanging took %v", time.Since(closing))
	sfs.Release()
	// The source's descriptors on the JVMs' files and roots are closed by
	// the released calls (the mount's own are its server's).
	base := filepath.Dir(p.dir)
	for len(descriptorsUnder(t, base)) > 0 && ctx.Err() == nil {
		time.Sleep(10 * time.Millisecond)
	}
	if open := descriptorsUnder(t, base); len(open) > 0 {
		t.Errorf("descriptors still open on the JVMs' files after the released calls returned: %v", open)
	}
}

// descriptorsUnder lists this process's descriptors on paths under dir.
func descriptorsUnder(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if target, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name())); err == nil && strings.HasPrefix(target, dir+"/") {
			out = append(out, target)
		}
	}
	return out
}

// TestStalledIncludePatternHoldsOnlyItself: an xlog::include pattern whose
// folder stops answering (its listing and its file's read hang) holds
// neither the other pattern's file nor Close.
func TestStalledIncludePatternHoldsOnlyItself(t *testing.T) {
	sfs := stallfs.Mount(t)
	sfs.WriteFile("a.log", []byte(safepointLine("A1")))
	local := t.TempDir()
	b := filepath.Join(local, "b.log")
	appendFile(t, b, safepointLine("B1"))
	refused := map[string]int{}
	s := NewSource(Config{Include: []string{filepath.Join(sfs.Dir(), "*.log"), filepath.Join(local, "*.log")}, FromStart: true,
		DiscoveryInterval: 0, Clock: window.NewFixedClock(0), Refused: func(reason string) { refused[reason]++ }})
	got := operations{}
	if _, err := pollGuarded(t, s, got); err != nil || got[filepath.Join(sfs.Dir(), "a.log")]["A1"] != 1 || got[b]["B1"] != 1 {
		t.Fatalf("before the stall: %v, read %v", err, got)
	}
	sfs.Stall()
	for i := 2; i <= 3; i++ {
		appendFile(t, b, safepointLine("B"+strconv.Itoa(i)))
		_, err := pollGuarded(t, s, got)
		if (err != nil) != (i == 2) {
			t.Errorf("poll %d in the stall: %v; want the stall reported at the first only", i, err)
		}
		if got[b]["B"+strconv.Itoa(i)] != 1 {
			t.Errorf("poll %d in the stall: the other pattern's line not read: %v", i, got[b])
		}
	}
	if refused[RefusedStalled] < 1 {
		t.Errorf("refusals counted %v, want the stall", refused)
	}
	done := make(chan struct{})
	go func() {
		s.Close()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(pollTimeout + 10*time.Second):
		t.Fatal("Close still waits for the stalled folder")
	}
	sfs.Release()
}
