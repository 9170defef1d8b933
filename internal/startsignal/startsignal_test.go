package startsignal

import (
	"os"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A SIGTERM while a Guard is held does not kill the process (were it not
// taken, this test binary would die); without a Release the Guard says so
// once, naming the signal, and sends it again every settle, so that a
// handler installed after the first one (the collector's, once it has
// started) gets it.
func TestSignalWithoutShutdownIsSentAgain(t *testing.T) {
	old := settle
	settle = 200 * time.Millisecond
	defer func() { settle = old }()
	resent := make(chan error, 10)
	g := Hold(func(err error) { resent <- err })
	defer g.Release()
	if err := syscall.Kill(syscall.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-resent:
		if !strings.Contains(err.Error(), "terminated") || !strings.Contains(err.Error(), "starting") {
			t.Errorf("the log line says %q, want the signal and why", err)
		}
	case <-time.After(settle + 10*time.Second):
		t.Fatal("not sent again after a SIGTERM")
	}
	// Installed only now: it can only get a signal the Guard sends.
	late := make(chan os.Signal, 8)
	signal.Notify(late, syscall.SIGTERM)
	defer signal.Stop(late)
	for i := range 2 {
		select {
		case <-late:
		case <-time.After(settle + 10*time.Second):
			t.Fatalf("send %d did not come", i+1)
		}
	}
	if n := len(resent); n != 0 {
		t.Errorf("said it %d more times, want once", n)
	}
}

// A signal the collector handles itself (it shuts the component down,
// which releases the Guard) is not sent again.
func TestSignalFollowedByShutdownIsNotSentAgain(t *testing.T) {
	old := settle
	settle = 500 * time.Millisecond
	defer func() { settle = old }()
	resent := make(chan error, 1)
	g := Hold(func(err error) { resent <- err })
	// The collector's handler.
	own := make(chan os.Signal, 8)
	signal.Notify(own, syscall.SIGINT)
	defer signal.Stop(own)
	if err := syscall.Kill(syscall.Getpid(), syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	<-own
	g.Release()
	select {
	case err := <-resent:
		t.Fatalf("sent again during a shutdown under way: %v", err)
	case <-own:
		t.Fatal("sent again during a shutdown under way")
	case <-time.After(2 * settle):
	}
}

// Released while the signal it sent again is on its way, a Guard waits
// for it: with no handler left, it would kill the process (this test
// binary).
func TestReleaseWaitsForTheSignalSentAgain(t *testing.T) {
	old := settle
	settle = 50 * time.Millisecond
	defer func() { settle = old }()
	for range 20 {
		told := make(chan struct{})
		g := Hold(func(error) { close(told) })
		if err := syscall.Kill(syscall.Getpid(), syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		<-told // the send follows at once
		g.Release()
	}
}

// Released without a signal, a Guard leaves nothing running.
func TestReleaseWithoutSignal(t *testing.T) {
	g := Hold(func(err error) { t.Errorf("resent: %v", err) })
	g.Release()
	select {
	case <-g.done:
	default:
		t.Fatal("its goroutine still runs")
	}
}
