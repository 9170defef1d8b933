// Package jvmaccounts reads, per JVM, the memory accounts that the JVM's JFR
// events leave out, so that a growing process can be blamed on one of them:
// the JNI global and weak global references it holds (from the line a
// HotSpot thread dump ends with) and the resident anonymous memory that no
// JVM account covers (what a native library's malloc leaks into). Package
// leak (internal/leak) decides which account grows.
//
// HotSpot offers the JNI reference counts nowhere else: no perf-data counter
// (hsperfdata), no JFR event, no other diagnostic command has them. A thread
// dump stops the JVM at a safepoint and prints every thread, so the Reader
// takes one at most once per interval per JVM and none of a JVM with more
// threads than a bound.
package jvmaccounts // import "github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/jvmaccounts"

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// JNIRefs is a JVM's JNI reference count.
type JNIRefs struct {
	// Global is the number of JNI global references.
	Global int64
	// Weak is the number of JNI weak global references.
	Weak int64
}

// ErrNoJNILine: the thread dump does not end with the JNI references line
// (not a HotSpot JVM, or an answer cut at its size bound).
var ErrNoJNILine = errors.New("no JNI references line in the thread dump")

// The line JDK 11 and later print ("JNI global refs: 7, weak refs: 0"), and
// JDK 8's ("JNI global references: 7").
const (
	jniLine   = "JNI global refs: "
	jniWeak   = ", weak refs: "
	jniLineV8 = "JNI global references: "
)

// ParseJNIRefs reads the JNI reference counts from a thread dump: the last
// line that carries them, so that a thread named like the line earlier in
// the dump does not count. The numbers are checked, never trusted: a
// negative or unparsable count is an error.
func ParseJNIRefs(dump string) (JNIRefs, error) {
	line, v8 := "", false
	if i := strings.LastIndex(dump, jniLine); i >= 0 {
		line = dump[i+len(jniLine):]
	} else if i := strings.LastIndex(dump, jniLineV8); i >= 0 {
		line, v8 = dump[i+len(jniLineV8):], true
	} else {
		return JNIRefs{}, ErrNoJNILine
	}
	line, _, _ = strings.Cut(line, "\n")
	line = strings.TrimSpace(line)
	if v8 {
		n, err := count(line)
		if err != nil {
			return JNIRefs{}, fmt.Errorf("jni references line %q: %w", line, err)
		}
		return JNIRefs{Global: n}, nil
	}
	global, weak, ok := strings.Cut(line, jniWeak)
	if !ok {
		return JNIRefs{}, fmt.Errorf("jni references line %q: no weak count: %w", line, ErrNoJNILine)
	}
	g, err := count(global)
	if err != nil {
		return JNIRefs{}, fmt.Errorf("jni references line %q: %w", line, err)
	}
	w, err := count(weak)
	if err != nil {
		return JNIRefs{}, fmt.Errorf("jni references line %q: %w", line, err)
	}
	return JNIRefs{Global: g, Weak: w}, nil
}

func count(s string) (int64, error) {
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil {
		return 0, err
	}
	if n < 0 {
		return 0, fmt.Errorf("negative count %d", n)
	}
	return n, nil
}
