package startsignal

import (
	"strings"
	"syscall"
	"testing"
	"time"
)

// A SIGTERM while a Guard is held does not kill the process (were it not
// taken, this test binary would die), and without a Release the Guard asks
// for the shutdown, naming the signal.
func TestSignalWithoutShutdownAsksForIt(t *testing.T) {
	asked := make(chan error, 1)
	g := Hold(func(err error) { asked <- err })
	defer g.Release()
	if err := syscall.Kill(syscall.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-asked:
		if !strings.Contains(err.Error(), "terminated") || !strings.Contains(err.Error(), "starting") {
			t.Errorf("the request says %q, want the signal and why", err)
		}
	case <-time.After(settle + 10*time.Second):
		t.Fatal("no shutdown asked for after a SIGTERM")
	}
}

// A signal the collector handles itself (it shuts the component down,
// which releases the Guard) is not asked for again.
func TestSignalFollowedByShutdownIsNotAskedFor(t *testing.T) {
	old := settle
	settle = 500 * time.Millisecond
	defer func() { settle = old }()
	asked := make(chan error, 1)
	g := Hold(func(err error) { asked <- err })
	if err := syscall.Kill(syscall.Getpid(), syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	// The signal is delivered asynchronously: give it time to arrive
	// before the shutdown, as it does in the collector.
	time.Sleep(100 * time.Millisecond)
	g.Release()
	select {
	case err := <-asked:
		t.Fatalf("asked for a shutdown that was under way: %v", err)
	case <-time.After(2 * settle):
	}
}

// Released without a signal, a Guard leaves nothing running.
func TestReleaseWithoutSignal(t *testing.T) {
	g := Hold(func(err error) { t.Errorf("asked: %v", err) })
	g.Release()
	select {
	case <-g.done:
	default:
		t.Fatal("its goroutine still runs")
	}
}
