package sharedcomponent

import (
	"context"
	"sync"

	"go.opentelemetry.io/collector/component"
)

// Core is a value that runs while any of its faces runs: the first face to
// start starts it, the last started face to shut down stops it.
type Core[C any] struct {
	value C
	start func(context.Context, component.Host) error
	stop  func(context.Context) error

	// mu is held across start and stop, so that a face starting while the
	// last one stops waits for the stop to finish and then starts afresh.
	mu      sync.Mutex
	started int // faces started and not yet shut down
}

// NewCore returns a core around value. start is called when the first face
// starts and stop when the last started face shuts down; either may be nil.
// stop is only called after a start that returned no error, and the two
// never run at the same time.
func NewCore[C any](value C, start func(ctx context.Context, host component.Host) error, stop func(ctx context.Context) error) *Core[C] {
	return &Core[C]{value: value, start: start, stop: stop}
}

// Value returns the value the core was made around.
func (c *Core[C]) Value() C { return c.value }

// Started returns the number of faces started and not yet shut down.
func (c *Core[C]) Started() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.started
}

// NewFace returns a new face of the core with the given hooks. Its Shutdown
// stops only its own share of the core; a face from Cores.Acquire also lets
// go of its key's core.
func (c *Core[C]) NewFace(h Hooks) *Face[C] {
	return &Face[C]{core: c, hooks: h}
}

// enter counts one more started face, starting the core for the first. On
// an error from start nothing is counted.
func (c *Core[C]) enter(ctx context.Context, host component.Host) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.started == 0 && c.start != nil {
		if err := c.start(ctx, host); err != nil {
			return err
		}
	}
	c.started++
	return nil
}

// leave counts one started face less, stopping the core after the last. It
// reports whether that face was the last.
func (c *Core[C]) leave(ctx context.Context) (last bool, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.started == 0 {
		return false, nil
	}
	c.started--
	if c.started > 0 {
		return false, nil
	}
	if c.stop != nil {
		err = c.stop(ctx)
	}
	return true, err
}

// Hooks connect one face's pipeline to the core. Each is optional.
type Hooks struct {
	// Open runs on Start before the core is started (or counted), so that a
	// core started by this face finds its pipeline connected.
	Open func()
	// Final runs on the Shutdown of a face that is not the last started one,
	// after it stopped counting and before Close: other faces keep the core
	// running, so this is where the face sends what it still holds for its
	// pipeline. (For the last face, stopping the core is what flushes.)
	Final func(ctx context.Context)
	// Close runs on every Shutdown: after the core stopped (last face), after
	// Final (other faces), or alone for a face not started, so that a
	// pipeline connected before Start is disconnected too. It also runs on a
	// Start whose core failed to start. It must be safe to call again.
	Close func()
}

// Face is one pipeline's component: its Start and Shutdown are counted on
// the shared core. Start is a no-op on a started face; Shutdown is safe
// without Start and when called twice, and a face shut down can be started
// again.
type Face[C any] struct {
	core    *Core[C]
	hooks   Hooks
	release func() // lets go of the core in Cores; nil when not from Cores

	mu      sync.Mutex
	started bool
}

var _ component.Component = (*Face[int])(nil)

// Value returns the shared core's value.
func (f *Face[C]) Value() C { return f.core.value }

// Core returns the shared core.
func (f *Face[C]) Core() *Core[C] { return f.core }

// Start runs the Open hook and counts the face on the core, starting the
// core when no other face has. When the core fails to start, the Close hook
// runs, nothing is counted and the error is returned.
func (f *Face[C]) Start(ctx context.Context, host component.Host) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.started {
		return nil
	}
	if f.hooks.Open != nil {
		f.hooks.Open()
	}
	if err := f.core.enter(ctx, host); err != nil {
		if f.hooks.Close != nil {
			f.hooks.Close()
		}
		return err
	}
	f.started = true
	return nil
}

// Shutdown stops counting a started face, stopping the core when it was the
// last started one (else running the Final hook), then runs the Close hook
// and lets go of the core in Cores. It returns the error of the core's stop.
func (f *Face[C]) Shutdown(ctx context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	var err error
	if f.started {
		f.started = false
		var last bool
		last, err = f.core.leave(ctx)
		if !last && f.hooks.Final != nil {
			f.hooks.Final(ctx)
		}
	}
	if f.hooks.Close != nil {
		f.hooks.Close()
	}
	if f.release != nil {
		f.release()
	}
	return err
}

// Cores holds one Core per key (a component ID) while any face that Acquire
// made for it has not been shut down: the faces of one pipeline build share
// the core, and the next build after they all shut down gets a fresh one.
// The zero Cores is ready to use.
type Cores[K comparable, C any] struct {
	m Map[K, *Core[C]]
}

// Acquire returns a new face of the core under key, made by create when
// there is none. hooks, which may be nil, gives the face's hooks from the
// core's value. An error from create is returned as is and nothing is kept.
func (cs *Cores[K, C]) Acquire(key K, create func() (*Core[C], error), hooks func(C) Hooks) (*Face[C], error) {
	ref, err := cs.m.Acquire(key, create, nil)
	if err != nil {
		return nil, err
	}
	core := ref.Value()
	var h Hooks
	if hooks != nil {
		h = hooks(core.value)
	}
	f := core.NewFace(h)
	f.release = ref.Release
	return f, nil
}

// Lifecycle is how a core's value runs: Start when the first face starts,
// Stop when the last started face shuts down. A component gives its own
// methods as method expressions, e.g.
// Lifecycle[*rcv]{Start: (*rcv).start, Stop: (*rcv).shutdown}.
type Lifecycle[C any] struct {
	Start func(C, context.Context, component.Host) error
	Stop  func(C, context.Context) error
}

// Core returns a core around value that runs value's lifecycle.
func (l Lifecycle[C]) Core(value C) *Core[C] {
	var start func(context.Context, component.Host) error
	var stop func(context.Context) error
	if l.Start != nil {
		start = func(ctx context.Context, host component.Host) error { return l.Start(value, ctx, host) }
	}
	if l.Stop != nil {
		stop = func(ctx context.Context) error { return l.Stop(value, ctx) }
	}
	return NewCore(value, start, stop)
}

// Share is what a factory's create functions call: it returns a new face
// of the core under key, whose value create makes, run by lc, when there is
// none. hooks, which may be nil, connects the face's pipeline. An error from
// create is returned as is and nothing is kept.
func (cs *Cores[K, C]) Share(key K, create func() (C, error), lc Lifecycle[C], hooks func(C) Hooks) (*Face[C], error) {
	return cs.Acquire(key, func() (*Core[C], error) {
		v, err := create()
		if err != nil {
			return nil, err
		}
		return lc.Core(v), nil
	}, hooks)
}

// Len returns the number of cores held.
func (cs *Cores[K, C]) Len() int { return cs.m.Len() }
