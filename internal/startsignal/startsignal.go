// Package startsignal keeps a SIGTERM or SIGINT that comes while the
// collector is still starting from killing it before its components can
// undo what they did.
//
// The collector core installs its own handler for SIGTERM and SIGINT only
// after every component has started; until then either signal kills the
// process at once. Kubernetes sends SIGTERM to a DaemonSet pod that is
// replaced or deleted, however far its start has got, and a component's
// Start (and the goroutines it begins) may already have changed other
// processes: the jfr receiver starts recordings in JVMs it finds, which its
// shutdown stops. A Guard, held from a component's Start to its Shutdown,
// takes the signal too; when the component is not shut down soon after,
// the Guard sends the same signal to the process again, and again every
// settle until it is released: once the collector's own handler is
// installed the collector gets one and shuts down gracefully (releasing
// the Guard on the way); before that the Guard takes them, so none kills.
// When the collector had its handler all along, the signals sent again
// change nothing: the collector is shutting down already.
//
// The Guard does not ask for the shutdown through a fatal status event. The
// core sends such an event on an unbuffered channel while holding the lock
// every status report takes; once the collector's main loop has stopped
// reading that channel (it got the signal itself and is shutting down, and
// the component is not shut down within settle, say because its own
// shutdown stops recordings in several JVMs), every status report after it
// waits forever and the collector hangs until it is killed: on a node,
// the 30 s grace period of every helm upgrade.
package startsignal

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// settle is how long a Guard that took a signal waits for its component to
// be shut down before it sends the signal again, and then between two
// sends. The collector shuts receivers down first, within milliseconds of
// the signal.
var settle = time.Second

// echoWait bounds how long a Guard being released waits for the signal it
// sent last to come back to it: released while the signal is on its way
// (the process's handlers are looked up when it arrives), that signal
// could find no handler left and kill the process.
const echoWait = time.Second

// Guard holds SIGTERM and SIGINT for one component.
type Guard struct {
	ch      chan os.Signal
	release chan struct{}
	done    chan struct{}
}

// Hold starts taking SIGTERM and SIGINT. When one comes and Release is not
// called within settle, the signal is sent to the process again (see the
// package's comment), every settle until Release; resent is called once,
// before the first such send, with an error naming the signal (for a log
// line). Release when the component's shutdown is done with what the
// signal must not interrupt.
func Hold(resent func(error)) *Guard {
	g := &Guard{ch: make(chan os.Signal, 4), release: make(chan struct{}), done: make(chan struct{})}
	signal.Notify(g.ch, syscall.SIGTERM, os.Interrupt)
	go g.wait(resent)
	return g
}

func (g *Guard) wait(resent func(error)) {
	defer close(g.done)
	var sig os.Signal
	select {
	case sig = <-g.ch:
	case <-g.release:
		return
	}
	told := false
	for {
		t := time.NewTimer(settle)
		select {
		case <-g.release:
			// Shut down, by the collector's handling of the signal or by
			// the signal sent again.
			t.Stop()
			return
		case <-t.C:
		}
		if !told {
			told = true
			resent(fmt.Errorf("%v received while the collector was starting, before it handles signals itself: sending it again until the collector shuts down", sig))
		}
		s, ok := sig.(syscall.Signal)
		if !ok || syscall.Kill(syscall.Getpid(), s) != nil {
			return
		}
		// Take the echo before anything else: the Guard is one of the
		// signal's handlers.
		e := time.NewTimer(echoWait)
		select {
		case <-g.ch:
		case <-e.C:
		}
		e.Stop()
	}
}

// Release stops taking the signals; a signal taken and not yet acted on is
// dropped (the component is being shut down). A nil Guard is released
// already.
func (g *Guard) Release() {
	if g == nil {
		return
	}
	close(g.release)
	<-g.done
	signal.Stop(g.ch)
}
