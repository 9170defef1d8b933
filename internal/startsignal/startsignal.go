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
// takes the signal instead; when the collector does not shut the component
// down soon after (it had no handler yet), the Guard asks for the shutdown
// the signal meant, as a fatal status event, which the collector acts on as
// soon as it runs.
package startsignal

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// settle is how long a Guard that took a signal waits for its component to
// be shut down by the collector's own handling of the same signal before
// it asks for the shutdown itself. The collector shuts receivers down
// first, within milliseconds of the signal.
var settle = time.Second

// Guard holds SIGTERM and SIGINT for one component.
type Guard struct {
	ch      chan os.Signal
	release chan struct{}
	done    chan struct{}
}

// Hold starts taking SIGTERM and SIGINT. When one comes and Release is not
// called within a second, ask is called, in a goroutine of its own that it
// may block (a fatal status event waits for the collector's main loop),
// with an error naming the signal. Release before the component's
// resources go.
func Hold(ask func(error)) *Guard {
	g := &Guard{ch: make(chan os.Signal, 1), release: make(chan struct{}), done: make(chan struct{})}
	signal.Notify(g.ch, syscall.SIGTERM, os.Interrupt)
	go g.wait(ask)
	return g
}

func (g *Guard) wait(ask func(error)) {
	defer close(g.done)
	var sig os.Signal
	select {
	case sig = <-g.ch:
	case <-g.release:
		return
	}
	t := time.NewTimer(settle)
	defer t.Stop()
	select {
	case <-g.release:
		// The collector handled it.
	case <-t.C:
		go ask(fmt.Errorf("%v received while the collector was starting, before it handles signals itself: shutting down as soon as it has started", sig))
	}
}

// Release stops taking the signals; a signal taken and not yet acted on is
// dropped (the component is being shut down). A nil Guard is released
// already.
func (g *Guard) Release() {
	if g == nil {
		return
	}
	signal.Stop(g.ch)
	close(g.release)
	<-g.done
}
