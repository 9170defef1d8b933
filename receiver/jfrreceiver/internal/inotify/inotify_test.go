package inotify

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	"golang.org/x/sys/unix"
)

// The reader goroutine ends with Close.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// event encodes one struct inotify_event whose name field is size bytes
// long (the kernel pads names with NULs); nameLen, when not negative,
// is written as the len field instead of size.
func event(wd int32, mask uint32, name string, size, nameLen int) []byte {
	b := make([]byte, unix.SizeofInotifyEvent+size)
	binary.NativeEndian.PutUint32(b[0:], uint32(wd))
	binary.NativeEndian.PutUint32(b[4:], mask)
	if nameLen < 0 {
		nameLen = size
	}
	binary.NativeEndian.PutUint32(b[12:], uint32(nameLen))
	copy(b[unix.SizeofInotifyEvent:], name)
	return b
}

func TestDecode(t *testing.T) {
	cat := func(parts ...[]byte) []byte {
		var b []byte
		for _, p := range parts {
			b = append(b, p...)
		}
		return b
	}
	tests := []struct {
		name string
		buf  []byte
		want []Event
	}{
		{"empty", nil, nil},
		{"one named, NUL padding dropped", event(3, unix.IN_CREATE, "chunk.jfr", 16, -1),
			[]Event{{Watch: 3, Mask: unix.IN_CREATE, Name: "chunk.jfr"}}},
		{"on the folder itself, no name", event(7, unix.IN_IGNORED, "", 0, -1),
			[]Event{{Watch: 7, Mask: unix.IN_IGNORED}}},
		{"several in a row", cat(event(1, unix.IN_CREATE, "1234", 8, -1), event(-1, unix.IN_Q_OVERFLOW, "", 0, -1), event(2, unix.IN_MOVED_TO|unix.IN_ISDIR, "2026_01_02_03_04_05_1234", 32, -1)),
			[]Event{{Watch: 1, Mask: unix.IN_CREATE, Name: "1234"}, {Watch: -1, Mask: unix.IN_Q_OVERFLOW}, {Watch: 2, Mask: unix.IN_MOVED_TO | unix.IN_ISDIR, Name: "2026_01_02_03_04_05_1234"}}},
		{"a name said to run past the buffer is cut at its end", event(4, unix.IN_CREATE, "abcdefgh", 8, 1<<20),
			[]Event{{Watch: 4, Mask: unix.IN_CREATE, Name: "abcdefgh"}}},
		{"a header cut short is passed over", cat(event(5, unix.IN_CREATE, "x", 4, -1), event(6, unix.IN_CREATE, "", 0, -1)[:unix.SizeofInotifyEvent-1]),
			[]Event{{Watch: 5, Mask: unix.IN_CREATE, Name: "x"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []Event
			decode(tt.buf, func(e Event) { got = append(got, e) })
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("decoded %+v, want %+v", got, tt.want)
			}
		})
	}
}

// A real instance hands over the kernel's events for a watched folder,
// in order.
func TestInstanceHandsOverEvents(t *testing.T) {
	events := make(chan Event, 16)
	in, err := Start(func(e Event) { events <- e })
	if err != nil {
		t.Skipf("no inotify instance: %v", err)
	}
	defer in.Close()
	dir := t.TempDir()
	wd, err := unix.InotifyAddWatch(in.FD(), dir, unix.IN_CREATE|unix.IN_ONLYDIR)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "a.jfr"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o700); err != nil {
		t.Fatal(err)
	}
	want := []Event{{Watch: int32(wd), Mask: unix.IN_CREATE, Name: "a.jfr"}, {Watch: int32(wd), Mask: unix.IN_CREATE | unix.IN_ISDIR, Name: "sub"}}
	for i, w := range want {
		select {
		case got := <-events:
			if got != w {
				t.Fatalf("event %d: %+v, want %+v", i, got, w)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("event %d (%+v) never came", i, w)
		}
	}
}

// Close returns only once the handler has returned: its owner may tear
// down what the handler uses right after. The handler here returns only
// after Close has closed the descriptor. (Correct code passes however the
// threads are scheduled.)
func TestCloseWaitsForTheHandler(t *testing.T) {
	var fd atomic.Int64
	var first, returned atomic.Bool
	entered := make(chan struct{}, 1)
	in, err := Start(func(Event) {
		if !first.CompareAndSwap(false, true) {
			return
		}
		entered <- struct{}{}
		for {
			if _, err := unix.FcntlInt(uintptr(fd.Load()), unix.F_GETFD, 0); err == unix.EBADF {
				break
			}
			time.Sleep(time.Millisecond)
		}
		// Closing an inotify instance goes on in the kernel after the
		// descriptor is gone; a Close that did not wait for the handler
		// would have returned by the end of this.
		time.Sleep(50 * time.Millisecond)
		returned.Store(true)
	})
	if err != nil {
		t.Skipf("no inotify instance: %v", err)
	}
	fd.Store(int64(in.FD()))
	dir := t.TempDir()
	if _, err := unix.InotifyAddWatch(in.FD(), dir, unix.IN_CREATE|unix.IN_ONLYDIR); err != nil {
		in.Close()
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "a.jfr"), nil, 0o600); err != nil {
		in.Close()
		t.Fatal(err)
	}
	<-entered
	in.Close()
	if !returned.Load() {
		t.Fatal("Close returned while the handler was running")
	}
}
