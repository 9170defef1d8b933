package procevents

import (
	"os"
	"os/exec"
	"testing"
	"time"

	"go.uber.org/goleak"
	"go.uber.org/zap/zaptest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// needRoot skips where the mechanisms cannot work; in CI, which runs as
// root with BPF, it fails instead.
func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() == 0 {
		return
	}
	if os.Getenv("CI") != "" {
		t.Fatal("process events need root (CAP_BPF, CAP_NET_ADMIN); CI runs as root")
	}
	t.Skip("process events need root")
}

// runTrue runs /bin/true and returns its pid once it has exited.
func runTrue(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("/bin/true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	return cmd.Process.Pid
}

// waitFor takes batches from next until exec and exit of pid were both
// seen, or the deadline passes; it returns the exec event.
func waitFor(t *testing.T, next func(time.Duration) ([]Event, bool), pid int) Event {
	t.Helper()
	var execEv Event
	sawExec, sawExit := false, false
	deadline := time.Now().Add(5 * time.Second)
	for !(sawExec && sawExit) {
		left := time.Until(deadline)
		if left <= 0 {
			t.Fatalf("pid %d: exec seen %v, exit seen %v within 5 s", pid, sawExec, sawExit)
		}
		evs, _ := next(left)
		for _, ev := range evs {
			if ev.PID != pid {
				continue
			}
			switch ev.Kind {
			case Exec:
				if sawExit {
					t.Fatalf("pid %d: exit reported before exec", pid)
				}
				sawExec, execEv = true, ev
			case Exit:
				sawExit = true
			}
		}
	}
	return execEv
}

func subscriptionNext(s *Subscription) func(time.Duration) ([]Event, bool) {
	return func(d time.Duration) ([]Event, bool) {
		select {
		case <-s.Ready():
			b := s.Take()
			return b.Events, b.Overflow
		case <-time.After(d):
			return nil, false
		}
	}
}

func TestSubscribeReportsExecAndExitOfARealProcess(t *testing.T) {
	needRoot(t)
	s := Subscribe(zaptest.NewLogger(t))
	defer s.Close()
	if s.Mechanism() != MechanismEBPF {
		if os.Getenv("CI") != "" {
			t.Fatalf("mechanism %q, want ebpf in CI", s.Mechanism())
		}
		t.Skipf("eBPF unavailable here (mechanism %q)", s.Mechanism())
	}
	pid := runTrue(t)
	ev := waitFor(t, subscriptionNext(s), pid)
	if ev.Comm != "true" {
		t.Errorf("exec comm = %q, want %q", ev.Comm, "true")
	}
}

func TestSubscribersShareOneWatcherAndEachGetsEveryEvent(t *testing.T) {
	needRoot(t)
	a := Subscribe(zaptest.NewLogger(t))
	b := Subscribe(zaptest.NewLogger(t))
	if a.w != b.w {
		t.Fatal("two subscriptions in one process got two watchers")
	}
	if n := watchers.Len(); n != 1 {
		t.Fatalf("%d watchers held, want 1", n)
	}
	if a.Mechanism() == MechanismNone {
		a.Close()
		b.Close()
		t.Skip("no process events here")
	}
	pid := runTrue(t)
	waitFor(t, subscriptionNext(a), pid)
	waitFor(t, subscriptionNext(b), pid)
	a.Close()
	if n := watchers.Len(); n != 1 {
		t.Fatalf("after one close: %d watchers held, want 1", n)
	}
	b.Close()
	if n := watchers.Len(); n != 0 {
		t.Fatalf("after the last close: %d watchers held, want 0", n)
	}
}

func TestProcConnectorReportsExecAndExit(t *testing.T) {
	needRoot(t)
	src, err := openNetlink()
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	w := &Watcher{mechanism: MechanismNetlink, src: src, subs: map[*Subscription]struct{}{}, done: make(chan struct{})}
	s := &Subscription{w: w, ready: make(chan struct{}, 1)}
	w.subs[s] = struct{}{}
	go w.run()
	defer w.close()
	pid := runTrue(t)
	ev := waitFor(t, subscriptionNext(s), pid)
	if ev.Comm != "" {
		t.Errorf("the proc connector gave comm %q; it has none", ev.Comm)
	}
}

func TestSubscriberFallingBehindIsToldToRescan(t *testing.T) {
	w := &Watcher{subs: map[*Subscription]struct{}{}}
	s := &Subscription{w: w, ready: make(chan struct{}, 1)}
	many := make([]Event, MaxPending+10)
	for i := range many {
		many[i] = Event{PID: i + 1, Kind: Exec}
	}
	s.deliver(many[:10], false)
	s.deliver(many[10:], false)
	b := s.Take()
	if len(b.Events) != MaxPending || !b.Overflow {
		t.Fatalf("took %d events, overflow %v; want %d and true", len(b.Events), b.Overflow, MaxPending)
	}
	if b.Events[0].PID != 1 || b.Events[MaxPending-1].PID != MaxPending {
		t.Fatalf("kept pids %d..%d, want the first %d", b.Events[0].PID, b.Events[len(b.Events)-1].PID, MaxPending)
	}
	s.deliver(many[:1], false)
	if b := s.Take(); len(b.Events) != 1 || b.Overflow {
		t.Fatalf("after a take: %d events, overflow %v; want 1, false", len(b.Events), b.Overflow)
	}
}

func TestAppendNetlinkSkipsDamagedMessages(t *testing.T) {
	for _, data := range [][]byte{nil, {1, 2, 3}, make([]byte, 16), {0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}} {
		if evs := appendNetlink(nil, data); len(evs) != 0 {
			t.Errorf("%x: decoded %v", data, evs)
		}
	}
}

// FuzzAppendNetlink: any datagram decodes without panicking, into events
// of the two kinds only.
func FuzzAppendNetlink(f *testing.F) {
	// One exec message for pid 4242 as the kernel sends it (nlmsghdr,
	// cn_msg, proc_event header, pid and tgid).
	msg := make([]byte, 16+sizeofCnMsg+sizeofProcEvent+8)
	msg[0] = byte(len(msg))
	msg[16] = cnIdxProc
	msg[16+4] = cnValProc
	msg[16+sizeofCnMsg] = procEventExec
	for _, off := range []int{16 + sizeofCnMsg + sizeofProcEvent, 16 + sizeofCnMsg + sizeofProcEvent + 4} {
		msg[off], msg[off+1] = 0x92, 0x10
	}
	if evs := appendNetlink(nil, msg); len(evs) != 1 || evs[0] != (Event{PID: 4242, Kind: Exec}) {
		f.Fatalf("seed decodes to %v", evs)
	}
	f.Add(msg)
	f.Add(append(append([]byte{}, msg...), msg...))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, ev := range appendNetlink(nil, data) {
			if ev.Kind != Exec && ev.Kind != Exit {
				t.Fatalf("kind %v", ev.Kind)
			}
		}
	})
}
