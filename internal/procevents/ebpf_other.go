//go:build !linux || !(amd64 || arm64)

package procevents

import "errors"

func openEBPF() (source, error) {
	return nil, errors.New("no BPF objects for this platform")
}
