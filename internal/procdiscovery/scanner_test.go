package procdiscovery

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/otelcol-ai/otelcol-ai/internal/procresource"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeProc is a proc tree a test writes: each process a stat (with its
// start time and state) and a "kind" file that the test's Inspect reads.
type fakeProc struct {
	t    *testing.T
	root string
}

func newFakeProc(t *testing.T) *fakeProc { return &fakeProc{t: t, root: t.TempDir()} }

// add writes process pid, started at start, in state (R, Z), of kind
// ("found", "refused", "vanishing": it exits while inspected; anything
// else: not the receiver's).
func (f *fakeProc) add(pid int, start uint64, state, kind string) {
	f.t.Helper()
	f.write(pid, "stat", strconv.Itoa(pid)+" (x) "+state+" 1 1 1 0 -1 4194304 0 0 0 0 0 0 0 0 20 0 1 0 "+strconv.FormatUint(start, 10)+" 0 0\n")
	f.write(pid, "kind", kind)
}

func (f *fakeProc) write(pid int, name, data string) {
	f.t.Helper()
	dir := filepath.Join(f.root, strconv.Itoa(pid))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		f.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fakeProc) remove(pid int) {
	f.t.Helper()
	if err := os.RemoveAll(filepath.Join(f.root, strconv.Itoa(pid))); err != nil {
		f.t.Fatal(err)
	}
}

var errRefused = errors.New("refused by the test's inspection")

// scanner returns a Scanner over f whose Inspect reads each process's kind
// file, and the pids it was called with.
func (f *fakeProc) scanner() (*Scanner[int], func() []int) {
	var (
		mu    sync.Mutex
		calls []int
	)
	s := NewScanner(procresource.NewReader(f.root, 0), func(pid int) (int, bool, error) {
		mu.Lock()
		calls = append(calls, pid)
		mu.Unlock()
		kind, err := os.ReadFile(filepath.Join(f.root, strconv.Itoa(pid), "kind"))
		if err == nil && string(kind) == "vanishing" {
			// It exits while inspected: its entry goes, reads fail.
			f.remove(pid)
			_, err = os.ReadFile(filepath.Join(f.root, strconv.Itoa(pid), "kind"))
		}
		switch {
		case err != nil:
			return 0, false, nil // vanished
		case string(kind) == "refused":
			return 0, false, errRefused
		}
		return pid, string(kind) == "found", nil
	})
	return s, func() []int {
		mu.Lock()
		defer mu.Unlock()
		out := slices.Clone(calls)
		calls = nil
		slices.Sort(out)
		return out
	}
}

func refusedPIDs(rs []Refusal) []int {
	var out []int
	for _, r := range rs {
		out = append(out, r.PID)
	}
	slices.Sort(out)
	return out
}

// TestScanReportsARefusalOncePerProcess: a refused process is reported at
// the first scan only while it runs; another process that reuses its pid
// (another start time) is inspected and reported afresh, and so is one
// after the pid's entry was gone at a scan.
func TestScanReportsARefusalOncePerProcess(t *testing.T) {
	fp := newFakeProc(t)
	fp.add(10, 100, "S", "found")
	fp.add(20, 200, "S", "refused")
	fp.add(30, 300, "S", "other")
	s, calls := fp.scanner()

	found, refused, err := s.Scan()
	if err != nil || !slices.Equal(found, []int{10}) || !slices.Equal(refusedPIDs(refused), []int{20}) || !errors.Is(refused[0].Err, errRefused) || refused[0].StartTicks != 200 {
		t.Fatalf("first scan: found %v, refused %+v, %v; want [10], pid 20 (start 200) with the inspection's error", found, refused, err)
	}
	if got := calls(); !slices.Equal(got, []int{10, 20, 30}) {
		t.Errorf("first scan inspected %v", got)
	}
	if _, refused, _ := s.Scan(); len(refused) != 0 {
		t.Errorf("second scan refused %+v again", refused)
	}
	if got := calls(); !slices.Equal(got, []int{10, 30}) {
		t.Errorf("second scan inspected %v, want the refused process skipped", got)
	}

	fp.add(20, 201, "S", "refused") // pid 20 reused
	if _, refused, _ := s.Scan(); !slices.Equal(refusedPIDs(refused), []int{20}) || refused[0].StartTicks != 201 {
		t.Errorf("a new process on the refused pid: refused %+v, want it reported with its start 201", refused)
	}
	fp.remove(20)
	if _, refused, _ := s.Scan(); len(refused) != 0 {
		t.Errorf("scan without pid 20 refused %+v", refused)
	}
	fp.add(20, 201, "S", "refused")
	if _, refused, _ := s.Scan(); !slices.Equal(refusedPIDs(refused), []int{20}) {
		t.Errorf("pid 20 back after a scan without it: refused %+v, want it reported", refused)
	}
}

// TestScanTakesOnlyProcessDirectories: a proc root's entries that are not
// a pid as the kernel writes it (a sign, a leading zero, past 32 bits,
// names such as self) are never inspected, nor is the collector itself,
// named by the proc root's self link; a self link that names no pid skips
// nothing.
func TestScanTakesOnlyProcessDirectories(t *testing.T) {
	fp := newFakeProc(t)
	for _, name := range []string{"+5", "05", "-3", "0", "4294967301", "12a", "1 2", "net", "sys"} {
		if err := os.MkdirAll(filepath.Join(fp.root, name), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	fp.add(5, 1, "S", "found")
	fp.add(7, 1, "S", "found")
	if err := os.Symlink("7", filepath.Join(fp.root, "self")); err != nil {
		t.Fatal(err)
	}
	s, calls := fp.scanner()
	found, refused, err := s.Scan()
	if err != nil || len(refused) != 0 || !slices.Equal(found, []int{5}) {
		t.Fatalf("found %v, refused %+v, %v; want [5]", found, refused, err)
	}
	if got := calls(); !slices.Equal(got, []int{5}) {
		t.Errorf("inspected %v, want [5] only", got)
	}

	if err := os.Remove(filepath.Join(fp.root, "self")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../../7", filepath.Join(fp.root, "self")); err != nil {
		t.Fatal(err)
	}
	s, _ = fp.scanner()
	if found, _, _ := s.Scan(); !slices.Equal(found, []int{5, 7}) {
		t.Errorf("with a self link naming no pid: found %v, want [5 7]", found)
	}
}

// TestScanOfARealProcRootSkipsTheCollector: under /proc, the self link is
// this process, which is never inspected; other processes are.
func TestScanOfARealProcRootSkipsTheCollector(t *testing.T) {
	var inspected []int
	s := NewScanner(procresource.NewReader("/proc", 0), func(pid int) (int, bool, error) {
		inspected = append(inspected, pid)
		return pid, false, nil
	})
	if _, _, err := s.Scan(); err != nil {
		t.Fatal(err)
	}
	if slices.Contains(inspected, os.Getpid()) || !slices.Contains(inspected, os.Getppid()) {
		t.Errorf("inspected %d processes, this one (%d) among them: %v, its parent: %v",
			len(inspected), os.Getpid(), slices.Contains(inspected, os.Getpid()), slices.Contains(inspected, os.Getppid()))
	}
}

func TestScanMissingRoot(t *testing.T) {
	fp := &fakeProc{t: t, root: filepath.Join(t.TempDir(), "nope")}
	s, _ := fp.scanner()
	if _, _, err := s.Scan(); err == nil {
		t.Fatal("Scan of a missing proc root succeeded")
	}
}

// TestProcessVanishingMidScan: a process whose entry goes while it is
// inspected (it exited) is neither found nor refused, nor alive.
func TestProcessVanishingMidScan(t *testing.T) {
	fp := newFakeProc(t)
	fp.add(10, 100, "S", "found")
	fp.add(20, 200, "S", "vanishing")
	s, _ := fp.scanner()
	found, refused, err := s.Scan()
	if err != nil || len(refused) != 0 || !slices.Equal(found, []int{10}) {
		t.Fatalf("found %v, refused %+v, %v; want [10]", found, refused, err)
	}
	if s.Alive(20, 200) || s.Alive(20, 0) {
		t.Error("the vanished process is alive")
	}
}

// TestPanicInOneProcessIsRecovered: a panic while inspecting one process
// is an error wrapping ErrPanic for that pid, reported once; the others
// are found.
func TestPanicInOneProcessIsRecovered(t *testing.T) {
	fp := newFakeProc(t)
	fp.add(100, 1, "S", "found")
	fp.add(200, 2, "S", "found")
	s := NewScanner(procresource.NewReader(fp.root, 0), func(pid int) (int, bool, error) {
		if pid == 200 {
			var decoded []byte
			_ = decoded[pid] // a decoder bug: index out of range
		}
		return pid, true, nil
	})
	found, refused, err := s.Scan()
	if err != nil {
		t.Fatal(err)
	}
	if len(refused) != 1 || refused[0].PID != 200 || !errors.Is(refused[0].Err, ErrPanic) {
		t.Fatalf("refused %+v, want pid 200 with ErrPanic", refused)
	}
	if !slices.Equal(found, []int{100}) {
		t.Fatalf("found %v, want [100]", found)
	}
	if _, refused, _ := s.Scan(); len(refused) != 0 {
		t.Fatalf("second scan refused %+v again", refused)
	}
}

// TestStalledInspectionDoesNotHoldTheScan: inspecting one process hangs
// (its maps behind a stuck memory-map lock, its library on a hung mount):
// the scan finds the others after the timeout, reports the stall once,
// skips the process while the inspection hangs, and finds it once it
// returns.
func TestStalledInspectionDoesNotHoldTheScan(t *testing.T) {
	fp := newFakeProc(t)
	fp.add(100, 1, "S", "found")
	fp.add(200, 2, "S", "found")
	release := make(chan struct{})
	var once sync.Once
	s := NewScanner(procresource.NewReader(fp.root, 0), func(pid int) (int, bool, error) {
		if pid == 200 {
			once.Do(func() { <-release })
		}
		return pid, true, nil
	})
	s.timeout = 100 * time.Millisecond
	scan := func() ([]int, []Refusal) {
		t.Helper()
		done := make(chan struct{})
		var (
			found   []int
			refused []Refusal
			err     error
		)
		go func() {
			defer close(done)
			found, refused, err = s.Scan()
		}()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("a scan did not return within 10 s: a stalled process holds it")
		}
		if err != nil {
			t.Fatal(err)
		}
		return found, refused
	}
	found, refused := scan()
	if len(refused) != 1 || refused[0].PID != 200 || !errors.Is(refused[0].Err, ErrStalled) {
		t.Fatalf("refused %+v, want pid 200 with ErrStalled", refused)
	}
	if !slices.Equal(found, []int{100}) {
		t.Fatalf("found %v, want [100]", found)
	}
	if found, refused := scan(); len(refused) != 0 || !slices.Equal(found, []int{100}) {
		t.Fatalf("second scan, still stalled: found %v, refused %+v; want [100] only, nothing refused again", found, refused)
	}
	close(release)
	// The stalled inspection ends (its result is dropped: the process is
	// looked at afresh).
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		found, refused := scan()
		if len(refused) != 0 {
			t.Fatalf("refused %+v after the inspection returned", refused)
		}
		if len(found) == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("found %v after the inspection returned, want both", found)
		}
	}
}

// TestAliveOfFakeProcesses: a process is alive with its start time (or
// any, 0); not with another (its pid reused), not once exited (a zombie,
// its entry kept until reaped), not when its entry is missing or its stat
// is not a stat (a tenant's file, a FIFO that must not block the read).
func TestAliveOfFakeProcesses(t *testing.T) {
	fp := newFakeProc(t)
	fp.add(10, 100, "S", "")
	fp.add(11, 110, "Z", "")
	fp.add(12, 120, "X", "")
	fp.write(13, "stat", "13 (x) S but not a stat line")
	if err := os.MkdirAll(filepath.Join(fp.root, "14"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(fp.root, "14", "stat"), 0o644); err != nil {
		t.Fatal(err)
	}
	s, _ := fp.scanner()
	for _, c := range []struct {
		pid   int
		start uint64
		want  bool
	}{
		{10, 100, true}, {10, 0, true}, {10, 101, false},
		{11, 110, false}, {11, 0, false}, {12, 0, false},
		{13, 0, false}, {14, 0, false}, {99, 0, false},
	} {
		done := make(chan bool, 1)
		go func() { done <- s.Alive(c.pid, c.start) }()
		select {
		case got := <-done:
			if got != c.want {
				t.Errorf("Alive(%d, %d) = %v, want %v", c.pid, c.start, got, c.want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("Alive(%d, %d) blocked", c.pid, c.start)
		}
	}
}

// TestAliveOfARealProcess: a child is alive with its start time, not with
// another; once it exited it is not, before and after it is reaped.
func TestAliveOfARealProcess(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	r := procresource.NewReader("/proc", 0)
	pid := cmd.Process.Pid
	start, err := r.StartTicks(pid)
	if err != nil {
		t.Fatal(err)
	}
	if !Alive(r, pid, start) || !Alive(r, pid, 0) || Alive(r, pid, start+1) {
		t.Fatalf("running child: Alive with its start %v, any %v, another %v; want true, true, false",
			Alive(r, pid, start), Alive(r, pid, 0), Alive(r, pid, start+1))
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	// Not reaped yet: a zombie once the kill lands.
	for deadline := time.Now().Add(10 * time.Second); Alive(r, pid, start); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the killed child, not reaped, is still alive after 10 s")
		}
	}
	if _, err := r.StartTicks(pid); err != nil {
		t.Errorf("the zombie's entry is gone before the reap: %v", err)
	}
	_ = cmd.Wait()
	if Alive(r, pid, start) || Alive(r, pid, 0) {
		t.Error("the reaped child is alive")
	}
}

// TestEndedByAnExitEvent: an exit event of a pid ends the processes of
// that pid that no longer run (a zombie, one under another start time, one
// whose start time is unknown), never the one that still runs with its
// start time: the event was an earlier process's.
func TestEndedByAnExitEvent(t *testing.T) {
	fp := newFakeProc(t)
	fp.add(10, 100, "S", "")
	fp.add(11, 110, "Z", "")
	s, _ := fp.scanner()
	for _, c := range []struct {
		pid   int
		start uint64
		want  bool
	}{
		{10, 100, false}, {10, 99, true}, {10, 0, true},
		{11, 110, true}, {11, 0, true}, {12, 120, true},
	} {
		if got := s.Ended(c.pid, c.start); got != c.want {
			t.Errorf("Ended(%d, %d) = %v, want %v", c.pid, c.start, got, c.want)
		}
	}
}

// FuzzParsePID: a proc root's entry names, as a tenant's bind mount could
// make them, map to a pid exactly when they are a positive pid as the
// kernel writes it, and that pid writes back as the name.
func FuzzParsePID(f *testing.F) {
	for _, seed := range []string{"1", "4321", "2147483647", "2147483648", "0", "007", "+5", "-1", "self", "12a", "", "99999999999"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, name string) {
		pid, ok := ParsePID(name)
		n, err := strconv.Atoi(name)
		want := err == nil && n > 0 && n <= 1<<31-1 && strconv.Itoa(n) == name
		if ok != want || (ok && pid != n) {
			t.Errorf("ParsePID(%q) = %d, %v; want %d, %v", name, pid, ok, n, want)
		}
	})
}
