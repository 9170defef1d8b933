package jfr_test

import "io"

var ioEOF = io.EOF
