// Package memstat reads the process's memory as the leak checks need it:
// resident set size, and the bytes in use on the C heap, where ONNX Runtime
// allocates sessions, tensors and its arenas.
package memstat // import "github.com/otelcol-ai/otelcol-ai/extension/onnxinferenceextension/internal/memstat"

/*
#include <malloc.h>

static long long c_heap_in_use(void) {
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
	struct mallinfo2 mi = mallinfo2();
	return (long long)(mi.uordblks + mi.hblkhd);
#else
	return -1;
#endif
}

static void c_heap_trim(void) {
#if defined(__GLIBC__)
	malloc_trim(0);
#endif
}
*/
import "C"

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
)

// CHeapInUse returns the bytes allocated on the C heap and not yet freed
// (glibc's mallinfo2: arena plus mmapped blocks), or -1 where unknown.
func CHeapInUse() int64 { return int64(C.c_heap_in_use()) }

// TrimCHeap returns free C heap memory to the system, so that RSS reflects
// what is in use.
func TrimCHeap() { C.c_heap_trim() }

// RSS returns the resident set size in bytes, from /proc/self/statm.
func RSS() (int64, error) {
	data, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0, fmt.Errorf("memstat: %w", err)
	}
	fields := bytes.Fields(data)
	if len(fields) < 2 {
		return 0, fmt.Errorf("memstat: /proc/self/statm: %q", data)
	}
	pages, err := strconv.ParseInt(string(fields[1]), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("memstat: /proc/self/statm: %w", err)
	}
	return pages * int64(os.Getpagesize()), nil
}
