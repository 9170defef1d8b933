//go:build !linux

package procevents

import "errors"

func openNetlink() (source, error) {
	return nil, errors.New("the proc connector is Linux only")
}
