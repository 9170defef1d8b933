// Package procdiscoverytest feeds procdiscovery's Events with process
// events a test writes, so that what Events does with each is checked
// without root or a kernel's event source; and measures a receiver's
// discovery under a storm of processes (Storm).
package procdiscoverytest // import "github.com/otelcol-ai/otelcol-ai/internal/procdiscovery/procdiscoverytest"

import (
	"sync"
	"testing"
	"time"

	"github.com/otelcol-ai/otelcol-ai/internal/procevents"
	"github.com/otelcol-ai/otelcol-ai/internal/procevents/proceventstest"
)

// Feed is a procdiscovery.Source whose events are those given to Send.
type Feed struct {
	ready chan struct{}

	mu      sync.Mutex
	pending procevents.Batch
	closed  bool
}

// NewFeed returns a Feed with nothing pending.
func NewFeed() *Feed { return &Feed{ready: make(chan struct{}, 1)} }

// Send hands events to the Feed's reader as one batch (with what is still
// pending); overflow says events were lost.
func (f *Feed) Send(overflow bool, events ...procevents.Event) {
	f.mu.Lock()
	f.pending.Events = append(f.pending.Events, events...)
	f.pending.Overflow = f.pending.Overflow || overflow
	f.mu.Unlock()
	select {
	case f.ready <- struct{}{}:
	default:
	}
}

// Mechanism names the Feed as the netlink proc connector, whose execs come
// without a command name.
func (f *Feed) Mechanism() procevents.Mechanism { return procevents.MechanismNetlink }

// Ready fires when events are pending.
func (f *Feed) Ready() <-chan struct{} { return f.ready }

// Take returns the pending events and forgets them.
func (f *Feed) Take() procevents.Batch {
	f.mu.Lock()
	defer f.mu.Unlock()
	b := f.pending
	f.pending = procevents.Batch{}
	return b
}

// Close records that the reader is done with the Feed.
func (f *Feed) Close() {
	f.mu.Lock()
	f.closed = true
	f.mu.Unlock()
}

// Closed reports whether Close was called.
func (f *Feed) Closed() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.closed
}

// Storm measures the CPU a receiver's process-events discovery costs the
// collector under a storm of 200 short-lived processes a second for 10 s
// (proceventstest.Storm), against the storm's own CPU (x-storm-cpu),
// taking what it hands over as the receiver would: when ready fires, take
// (which returns how many exits it handed over). It runs once, whatever
// b.N; it skips without events.
func Storm(b *testing.B, mechanism procevents.Mechanism, ready <-chan struct{}, take func() (exits int)) {
	if mechanism == procevents.MechanismNone {
		b.Skip("no process events here")
	}
	stop := make(chan struct{})
	taken := make(chan int)
	go func() {
		n := 0
		for {
			select {
			case <-stop:
				taken <- n
				return
			case <-ready:
				n += take()
			}
		}
	}()
	b.ResetTimer()
	r := proceventstest.Storm(b, 200, 10*time.Second)
	b.StopTimer()
	close(stop)
	exits := <-taken
	r.Report(b)
	b.Logf("%d processes in %v (%s); discovery CPU %v, the storm's own %v; %d exits seen",
		r.Processes, r.Wall.Round(time.Millisecond), mechanism, r.CPU, r.StormCPU, exits)
}
