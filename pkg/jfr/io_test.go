package jfr_test

import (
	"errors"
	"io"
)

var ioEOF = io.EOF

func errorsIs(err, target error) bool { return errors.Is(err, target) }
