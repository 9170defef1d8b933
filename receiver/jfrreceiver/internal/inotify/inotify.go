// Package inotify runs an inotify instance and hands each of its events,
// in order, to a function of its owner's: the one reader of struct
// inotify_event for the receiver's watches (JVMs announcing themselves,
// JFR chunk files being created). Watches are added and removed by the
// owner, through FD.
package inotify

import (
	"encoding/binary"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// Event is one struct inotify_event.
type Event struct {
	Watch int32  // the watch descriptor the event is for
	Mask  uint32 // IN_* bits
	Name  string // the entry's name inside the watched folder; empty for events on the folder itself
}

// Instance is an inotify instance whose events a goroutine of its own
// reads and hands to its handler.
type Instance struct {
	fd   int
	file *os.File // fd, non-blocking (File.Fd would make it blocking), read by loop
	done chan struct{}
}

// Start makes a non-blocking inotify instance and starts the goroutine
// that calls handle with each of its events, one at a time, until Close.
// It fails where inotify cannot be used (no instance left to the user).
func Start(handle func(Event)) (*Instance, error) {
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		return nil, os.NewSyscallError("inotify_init1", err)
	}
	in := &Instance{fd: fd, file: os.NewFile(uintptr(fd), "inotify"), done: make(chan struct{})}
	go in.loop(handle)
	return in, nil
}

// FD is the instance's descriptor, for adding and removing watches. It
// is closed by Close.
func (in *Instance) FD() int { return in.fd }

// Close closes the instance and returns once the handler has returned
// for the last time.
func (in *Instance) Close() {
	_ = in.file.Close()
	<-in.done
}

func (in *Instance) loop(handle func(Event)) {
	defer close(in.done)
	buf := make([]byte, 64*(unix.SizeofInotifyEvent+unix.NAME_MAX+1))
	for {
		n, err := in.file.Read(buf)
		if err != nil {
			// Closed by Close; the poller retries EINTR and EAGAIN
			// itself, so any other error would repeat.
			return
		}
		decode(buf[:n], handle)
	}
}

// decode calls handle with each struct inotify_event in buf (wd, mask,
// cookie, len, name[len], the name padded with NULs). A name said to
// run past buf is cut at its end, and a header cut short is passed over.
func decode(buf []byte, handle func(Event)) {
	for off := 0; off+unix.SizeofInotifyEvent <= len(buf); {
		ev := Event{Watch: int32(binary.NativeEndian.Uint32(buf[off:])), Mask: binary.NativeEndian.Uint32(buf[off+4:])}
		nameStart := off + unix.SizeofInotifyEvent
		nameEnd := min(nameStart+int(binary.NativeEndian.Uint32(buf[off+12:])), len(buf))
		ev.Name = strings.TrimRight(string(buf[nameStart:nameEnd]), "\x00")
		off = nameEnd
		handle(ev)
	}
}
