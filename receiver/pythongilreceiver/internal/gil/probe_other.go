//go:build !(linux && amd64)

package gil

import "errors"

// Probe is unavailable on this platform: the BPF objects are built for
// linux/amd64 only.
type Probe struct{}

// Library is unavailable on this platform.
type Library struct{}

// Load always fails here.
func Load(Options) (*Probe, error) {
	return nil, &UnavailableError{Op: "load BPF programs", Err: errUnsupportedPlatform}
}

var errUnsupportedPlatform = errors.New("only linux/amd64 is supported")
