package repository

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/otelcol-ai/otelcol-ai/internal/stallfs"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/jvmevent"
)

// TestStalledMountHoldsOnlyItsJVM: a container's /tmp, which holds its
// JVM's repository, is a FUSE mount whose calls block until released
// (stallfs), as a hard NFS mount whose server is gone. Stalled before the
// JVM is discovered, the look for its repository folders hangs: the poll
// gives up on it after pollTimeout, counts and reports it once, and every
// other JVM, one discovered during the stall included, is read at every
// poll without waiting for it again. Released, its repository is followed
// and its events arrive. Stalled again while it is followed, its read and
// the next look hang and another JVM is still read (that poll held
// pollTimeout by each, once); the source shuts down (Finish, then Close,
// as the receiver does) within pollTimeout of each while the calls still
// hang.
func TestStalledMountHoldsOnlyItsJVM(t *testing.T) {
	old := pollTimeout
	pollTimeout = time.Second
	defer func() { pollTimeout = old }()
	n := newNodetest(t)
	mount := stalledTmptest(t, n.hostileRoot)
	mount.WriteFile("tmp/"+repoName+"/a.jfr", chunkFile(t, 0, false))
	var refused refusalstest
	s := n.source(t, &refused, Config{})
	jvm := func(pid int) string { // another honest JVM, with one chunk
		_, repo := fakeJVMtest(t, n.proc, pid)
		write(t, filepath.Join(repo, "a.jfr"), chunkFile(t, 0, true))
		s.Rescan()
		return filepath.Join(n.proc, strconv.Itoa(pid), "root", "tmp", repoName)
	}

	mount.Stall()
	first, took := pollGuarded(t, s)
	t.Logf("first poll, the look at the stalled JVM's /tmp hanging: %v", took)
	if first.err == nil || !strings.Contains(first.err.Error(), "looking for its repository folders") || !strings.Contains(first.err.Error(), "pid 101") {
		t.Errorf("stall not reported: %v", first.err)
	}
	if first.pauses[n.honKey] != n.want || !first.ended[n.honKey] {
		t.Errorf("honest JVM during the stall: %d pauses, ended %v; want %d and the end", first.pauses[n.honKey], first.ended[n.honKey], n.want)
	}
	if took > pollTimeout+time.Second {
		t.Errorf("the first poll took %v, want about pollTimeout (%v)", took, pollTimeout)
	}
	key := jvm(103)
	during, took := pollGuarded(t, s)
	t.Logf("a JVM discovered during the stall: read in a poll of %v", took)
	if during.pauses[key] != n.want || during.err != nil {
		t.Errorf("pid 103 during the stall: %d pauses (want %d), error %v (want none: the stall was reported)", during.pauses[key], n.want, during.err)
	}
	if took > pollTimeout/2 {
		t.Errorf("a poll waited %v for the stalled look, reported already", took)
	}
	if c := refused.get(RefusedStalled); c != 1 {
		t.Errorf("%d stalls counted, want 1", c)
	}

	mount.Release()
	var after pausesBy
	for deadline := time.Now().Add(10 * time.Second); after.pauses[n.hostileKey] == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the stalled JVM's events never came after the release: following %v", s.Following())
		}
		s.Rescan()
		after, _ = pollGuarded(t, s)
	}
	if after.pauses[n.hostileKey] != n.want {
		t.Errorf("after the release: %d pauses of the stalled JVM, want %d", after.pauses[n.hostileKey], n.want)
	}

	mount.Stall()
	key = jvm(104)
	again, took := pollGuarded(t, s)
	t.Logf("its read stalled while followed: another JVM read in a poll of %v", took)
	if again.pauses[key] != n.want {
		t.Errorf("pid 104 while the followed JVM's read hangs: %d pauses, want %d", again.pauses[key], n.want)
	}
	// The rescan for pid 104 looks at pid 101's root again: that look and
	// the read each hang, each held the poll pollTimeout, once.
	if took > 2*pollTimeout+time.Second {
		t.Errorf("the poll in which the look and the read stalled took %v, want at most 2 × pollTimeout", took)
	}
	if again.err == nil || !strings.Contains(again.err.Error(), "a read has not returned") || refused.get(RefusedStalled) != 3 {
		t.Errorf("second stall: %v, %d counted; want the read's reported, and 3 stalls counted in all (two looks, one read)", again.err, refused.get(RefusedStalled))
	}
	if next, took := pollGuarded(t, s); next.err != nil || took > pollTimeout/2 {
		t.Errorf("the poll after: %v, %v; want no report again and no wait", took, next.err)
	}
	start := time.Now()
	s.Finish(func(jvmevent.Batch) {})
	s.Close()
	t.Logf("shutdown (Finish, Close) with the read hanging: %v", time.Since(start))
	if took := time.Since(start); took > 2*pollTimeout+time.Second {
		t.Errorf("shutdown took %v with a read hanging, want at most 2 × pollTimeout", took)
	}
	if mount.Blocked() == 0 {
		t.Error("no call was blocked at shutdown: the test proved nothing")
	}
}

// stalledTmptest makes the /tmp of the container whose root is root a
// folder of a stallfs mount (at /stalled in the container, /tmp a link to
// /stalled/tmp: a link inside the root resolves inside it); files go under
// "tmp/" of the mount.
func stalledTmptest(t *testing.T, root string) *stallfs.FS {
	t.Helper()
	dir := filepath.Join(root, "stalled")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	mount := stallfs.MountAt(t, dir)
	if err := os.RemoveAll(filepath.Join(root, "tmp")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/stalled/tmp", filepath.Join(root, "tmp")); err != nil {
		t.Fatal(err)
	}
	return mount
}
