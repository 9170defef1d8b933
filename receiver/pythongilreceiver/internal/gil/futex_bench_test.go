//go:build linux && amd64

package gil

import (
	"runtime"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// BenchmarkFutexOthers is what the futex tracepoints cost the rest of the
// host: every futex syscall of every thread runs sys_enter_futex's
// program, which does work only for a thread blocked on a known GIL. It
// reports the program's own run time (the kernel's program statistics,
// themselves two clock reads a run) for a wake with no waiter and for a
// wait that returns at once (EAGAIN), both on a word of no GIL by a thread
// the probe never met.
//
//	go test -run '^$' -bench FutexOthers ./receiver/pythongilreceiver/internal/gil/
func BenchmarkFutexOthers(b *testing.B) {
	p, err := Load(futexDefaults)
	if err != nil {
		b.Skipf("eBPF unavailable: %v", err)
	}
	defer p.Close()
	st, err := EnableProgramStats()
	if err != nil {
		b.Skipf("no BPF program statistics: %v", err)
	}
	defer st.Close()
	const private = 128 // FUTEX_PRIVATE_FLAG
	for _, c := range []struct {
		name    string
		op, val uintptr
	}{{"wake", 1 | private, 1}, {"wait-eagain", 0 | private, 0}} {
		b.Run(c.name, func(b *testing.B) {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			word := uint32(1)
			addr := uintptr(unsafe.Pointer(&word))
			s0, err := p.objs.FutexEnter.Stats()
			if err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				unix.Syscall6(unix.SYS_FUTEX, addr, c.op, c.val, 0, 0, 0)
			}
			s1, err := p.objs.FutexEnter.Stats()
			if err != nil {
				b.Fatal(err)
			}
			// Runs are the host's: other threads' futex calls count too.
			if runs := s1.RunCount - s0.RunCount; runs > 0 {
				b.ReportMetric(float64(s1.Runtime-s0.Runtime)/float64(runs), "prog-ns/run")
			}
			runtime.KeepAlive(&word)
		})
	}
}
