//go:build linux && (amd64 || arm64)

package procevents

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"time"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/ringbuf"
	"github.com/cilium/ebpf/rlimit"
	"golang.org/x/sys/unix"
)

var removeMemlock = sync.OnceValue(rlimit.RemoveMemlock)

// A zero deadline waits; one in the past takes only what is there.
var (
	timeZero time.Time
	timePast = time.Unix(1, 0)
)

// ebpfSource owns the BPF objects, the two tracepoint links and the ring
// buffer reader.
type ebpfSource struct {
	objs   proceventsObjects
	links  []link.Link
	reader *ringbuf.Reader
	rec    ringbuf.Record
}

func openEBPF() (source, error) {
	// Kernels before 5.11 charge BPF memory to RLIMIT_MEMLOCK.
	memlockErr := removeMemlock()
	s := &ebpfSource{}
	if err := loadProceventsObjects(&s.objs, nil); err != nil {
		if memlockErr != nil {
			err = errors.Join(err, fmt.Errorf("lift the memlock limit: %w", memlockErr))
		}
		return nil, fmt.Errorf("load BPF programs: %w", err)
	}
	for _, tp := range []struct {
		name string
		prog *ebpf.Program
	}{{"sched_process_exec", s.objs.OnExec}, {"sched_process_exit", s.objs.OnExit}} {
		l, err := link.AttachRawTracepoint(link.RawTracepointOptions{Name: tp.name, Program: tp.prog})
		if err != nil {
			_ = s.close()
			return nil, fmt.Errorf("attach %s: %w", tp.name, err)
		}
		s.links = append(s.links, l)
	}
	var err error
	if s.reader, err = ringbuf.NewReader(s.objs.Events); err != nil {
		_ = s.close()
		return nil, fmt.Errorf("open ring buffer: %w", err)
	}
	return s, nil
}

// read waits for one record, then takes whatever else is already there
// without waiting, so that a burst is handed over in one batch.
func (s *ebpfSource) read(buf []Event) ([]Event, error) {
	s.reader.SetDeadline(timeZero)
	for {
		if err := s.reader.ReadInto(&s.rec); err != nil {
			switch {
			case errors.Is(err, ringbuf.ErrClosed):
				return buf, ErrClosed
			case errors.Is(err, os.ErrDeadlineExceeded):
				return buf, nil
			}
			return buf, err
		}
		if ev, ok := decodeRecord(s.rec.RawSample); ok {
			buf = append(buf, ev)
		}
		if len(buf) >= MaxPending {
			return buf, nil
		}
		// From the second record on, only what is already there.
		s.reader.SetDeadline(timePast)
	}
}

func decodeRecord(raw []byte) (Event, bool) {
	var e proceventsEvent
	if len(raw) < int(unsafe.Sizeof(e)) {
		return Event{}, false
	}
	e = *(*proceventsEvent)(unsafe.Pointer(&raw[0]))
	comm := unsafe.Slice((*byte)(unsafe.Pointer(&e.Comm[0])), len(e.Comm))
	return Event{PID: int(e.Pid), Kind: Kind(e.Kind), Comm: unix.ByteSliceToString(comm)}, true
}

func (s *ebpfSource) lost() uint64 {
	var per []uint64
	if err := s.objs.Counters.Lookup(uint32(0), &per); err != nil {
		return 0
	}
	var n uint64
	for _, v := range per {
		n += v
	}
	return n
}

func (s *ebpfSource) close() error {
	var errs []error
	if s.reader != nil {
		errs = append(errs, s.reader.Close())
	}
	for _, l := range s.links {
		errs = append(errs, l.Close())
	}
	errs = append(errs, s.objs.Close())
	return errors.Join(errs...)
}
