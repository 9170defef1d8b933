package procresource // import "github.com/otelcol-ai/otelcol-ai/internal/procresource"

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"syscall"
	"time"
)

// userHZ is the unit of the times in /proc/<pid>/stat (USER_HZ, what
// sysconf(_SC_CLK_TCK) returns): 100 on every architecture the project
// builds for, fixed by the kernel's ABI whatever its internal HZ.
const userHZ = 100

// CPUTime is the processor time a process has used, from /proc/<pid>/stat.
type CPUTime struct {
	// User and System are the process's time in user and kernel mode
	// (fields 14 and 15, utime and stime: every thread's, live or exited).
	User, System time.Duration
	// StartTicks is the process's start (field 22), to tell it from a
	// later process with the same pid.
	StartTicks uint64
}

// Total is User + System.
func (c CPUTime) Total() time.Duration { return c.User + c.System }

// CPUTime reads pid's CPU time from /proc/<pid>/stat, a capped read of a
// file the process's name (comm, its own choice) is part of.
func (r *Reader) CPUTime(pid int) (CPUTime, error) {
	var buf [1024]byte
	data, err := readSmall(r.path(pid, "stat"), buf[:])
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ESRCH) {
			return CPUTime{}, fmt.Errorf("procresource: pid %d under %s: %w", pid, r.root, ErrNoProcess)
		}
		return CPUTime{}, fmt.Errorf("procresource: pid %d: %w", pid, err)
	}
	c, err := ParseCPUTime(data)
	if err != nil {
		return CPUTime{}, fmt.Errorf("procresource: pid %d stat: %w", pid, err)
	}
	return c, nil
}

// ParseCPUTime reads utime, stime and starttime out of a /proc/<pid>/stat
// line. Fields are counted from the last ')', since the command name in
// parentheses may hold spaces and parentheses itself.
func ParseCPUTime(stat []byte) (CPUTime, error) {
	end := bytes.LastIndexByte(stat, ')')
	if bytes.IndexByte(stat, '(') < 0 || end < 0 {
		return CPUTime{}, errors.New("no command name in stat line")
	}
	const (
		utimeField = 14
		stimeField = 15
		startField = 22
	)
	var utime, stime uint64
	field := 2
	for word := range bytes.FieldsSeq(stat[end+1:]) {
		field++
		if field != utimeField && field != stimeField && field != startField {
			continue
		}
		v, ok := parseDecimal(word)
		if !ok {
			return CPUTime{}, fmt.Errorf("stat field %d %q is not a number", field, word)
		}
		switch field {
		case utimeField:
			utime = v
		case stimeField:
			stime = v
		case startField:
			return CPUTime{User: ticks(utime), System: ticks(stime), StartTicks: v}, nil
		}
	}
	return CPUTime{}, fmt.Errorf("stat line has %d fields, want at least %d", field, startField)
}

// ticks converts clock ticks to a duration, saturating where a hostile
// value would overflow.
func ticks(n uint64) time.Duration {
	const most = uint64(1<<63-1) / uint64(time.Second/userHZ)
	if n > most {
		n = most
	}
	return time.Duration(n) * (time.Second / userHZ)
}
