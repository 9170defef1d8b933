//go:build !(linux && (amd64 || arm64))

package gil

import (
	"errors"
	"os"
	"time"
)

// The BPF objects are built for linux/amd64 and linux/arm64 only; elsewhere Load fails with
// ErrUnavailable and the rest of the API exists so that callers compile.

var errUnsupportedPlatform = errors.New("the BPF objects are built for linux/amd64 and linux/arm64 only")

// ErrFlushed is wrapped by ReadEvent's error after Flush.
var ErrFlushed = errors.New("gil: flushed")

// Probe is unavailable on this platform.
type Probe struct{}

// Library is unavailable on this platform.
type Library struct{}

// Load always fails here.
func Load(Options) (*Probe, error) {
	return nil, &UnavailableError{Op: "load BPF programs", Err: errUnsupportedPlatform}
}

// Close does nothing.
func (p *Probe) Close() error { return nil }

// Attach always fails here.
func (p *Probe) Attach(*os.File) (*Library, error) { return nil, ErrClosed }

// SetActive always fails here.
func (p *Probe) SetActive(bool) error { return ErrClosed }

// Active is always false here.
func (p *Probe) Active() bool { return false }

// SetDeadline does nothing.
func (p *Probe) SetDeadline(time.Time) {}

// Flush does nothing.
func (p *Probe) Flush() error { return nil }

// ReadEvent always fails here.
func (p *Probe) ReadEvent() (Event, error) { return Event{}, ErrClosed }

// Aggregates always fails here.
func (p *Probe) Aggregates() (map[AggregateKey]Aggregate, error) { return nil, ErrClosed }

// KnownGILs always fails here.
func (p *Probe) KnownGILs() (int, error) { return 0, ErrClosed }

// WaitsFromFutex is false here.
func (p *Probe) WaitsFromFutex() bool { return false }

// Forget always fails here.
func (p *Probe) Forget(uint32) error { return ErrClosed }

// Select always fails here.
func (p *Probe) Select(uint32) error { return ErrClosed }

// Counters always fails here.
func (p *Probe) Counters() (Counters, error) { return Counters{}, ErrClosed }

// Symbols is empty here.
func (l *Library) Symbols() Symbols { return Symbols{} }

// GC is "" here.
func (l *Library) GC() (string, error) { return "", nil }

// Links is 0 here.
func (l *Library) Links() int { return 0 }

// Detach always fails here.
func (p *Probe) Detach(map[*Library][]uint32) error { return ErrClosed }

// Detached is false: there are no probes here.
func (l *Library) Detached() bool { return false }

// Close does nothing.
func (l *Library) Close() error { return nil }
