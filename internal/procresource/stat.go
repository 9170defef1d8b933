package procresource // import "github.com/otelcol-ai/otelcol-ai/internal/procresource"

import (
	"bytes"
	"errors"
	"fmt"
	"time"

	"golang.org/x/sys/unix"

	"github.com/otelcol-ai/otelcol-ai/internal/procroot"
)

// Stat is what the project reads of a /proc/<pid>/stat line.
type Stat struct {
	// Comm is field 2, the command name without its parentheses: a slice
	// of the line parsed, named by the process itself.
	Comm []byte
	// State is field 3: R, S, D, Z, X, ...
	State byte
	// UserTicks and SystemTicks are fields 14 and 15 (utime, stime): the
	// process's time in user and kernel mode, every thread's, live or
	// exited, in clock ticks.
	UserTicks, SystemTicks uint64
	// Threads is field 20, num_threads.
	Threads uint64
	// StartTicks is field 22, starttime: the process's start in clock
	// ticks since boot; with the pid, it names the process across pid
	// reuse.
	StartTicks uint64
}

// Fields of a stat line, numbered as proc(5) numbers them.
const (
	stateField   = 3
	utimeField   = 14
	stimeField   = 15
	threadsField = 20
	startField   = 22
)

// ParseStat reads a /proc/<pid>/stat line. The command name is in
// parentheses and may itself hold spaces and parentheses (the process
// chooses it), so fields are counted from the last ')'. Only the fields
// Stat holds are checked; the line may end anywhere after starttime.
func ParseStat(line []byte) (Stat, error) {
	open := bytes.IndexByte(line, '(')
	end := bytes.LastIndexByte(line, ')')
	if open < 0 || end < open {
		return Stat{}, errors.New("no command name in stat line")
	}
	s := Stat{Comm: line[open+1 : end]}
	field := 2
	rest := line[end+1:]
	for {
		rest = bytes.TrimLeft(rest, " \n")
		if len(rest) == 0 {
			return Stat{}, fmt.Errorf("stat line has %d fields, want at least %d", field, startField)
		}
		field++
		word := rest
		if i := bytes.IndexAny(rest, " \n"); i >= 0 {
			word, rest = rest[:i], rest[i:]
		} else {
			rest = nil
		}
		var dst *uint64
		switch field {
		case stateField:
			if len(word) != 1 {
				return Stat{}, fmt.Errorf("state %q is not one letter", word)
			}
			s.State = word[0]
			continue
		case utimeField:
			dst = &s.UserTicks
		case stimeField:
			dst = &s.SystemTicks
		case threadsField:
			dst = &s.Threads
		case startField:
			dst = &s.StartTicks
		default:
			continue
		}
		v, ok := parseDecimal(word)
		if !ok {
			return Stat{}, fmt.Errorf("stat field %d %q is not a number", field, word)
		}
		*dst = v
		if field == startField {
			return s, nil
		}
	}
}

// Exited reports whether the line is that of a process that has exited
// and waits to be reaped: a zombie (or dying) thread-group leader with no
// other thread left. A leader that called pthread_exit while its other
// threads run is a zombie too, but its process still runs.
func (s Stat) Exited() bool {
	return (s.State == 'Z' || s.State == 'X') && s.Threads <= 1
}

// userHZ is the unit of the times in /proc/<pid>/stat (USER_HZ, what
// sysconf(_SC_CLK_TCK) returns): 100 on every architecture the project
// builds for, fixed by the kernel's ABI whatever its internal HZ.
const userHZ = 100

// CPUTime is the processor time a process has used, from /proc/<pid>/stat.
type CPUTime struct {
	// User and System are the process's time in user and kernel mode
	// (utime and stime: every thread's, live or exited).
	User, System time.Duration
	// StartTicks is the process's start, to tell it from a later process
	// with the same pid.
	StartTicks uint64
}

// Total is User + System.
func (c CPUTime) Total() time.Duration { return c.User + c.System }

// CPUTime converts the line's clock ticks to durations.
func (s Stat) CPUTime() CPUTime {
	return CPUTime{User: Ticks(s.UserTicks), System: Ticks(s.SystemTicks), StartTicks: s.StartTicks}
}

// Ticks converts clock ticks (USER_HZ, the unit of /proc/<pid>/stat) to a
// duration, saturating where a hostile value would overflow.
func Ticks(n uint64) time.Duration {
	const most = uint64(1<<63-1) / uint64(time.Second/userHZ)
	if n > most {
		n = most
	}
	return time.Duration(n) * (time.Second / userHZ)
}

// maxStat caps a stat read: the line is a few hundred bytes.
const maxStat = 64 << 10

// Stat reads pid's stat line, a capped read of a file the process's name
// (comm, its own choice) is part of. It fails with ErrNoProcess (wrapped)
// when the process is gone.
func (r *Reader) Stat(pid int) (Stat, error) {
	// Room for the usual line, so that the read allocates nothing more.
	buf := make([]byte, 0, 512)
	data, err := procroot.ReadProcFileAt(unix.AT_FDCWD, r.path(pid, "stat"), buf, maxStat)
	if err != nil {
		return Stat{}, r.processError(pid, "stat", err)
	}
	s, err := ParseStat(data)
	if err != nil {
		return Stat{}, fmt.Errorf("procresource: pid %d stat: %w", pid, err)
	}
	return s, nil
}

// StartTicks returns the start time of pid in clock ticks since boot, read
// from /proc/<pid>/stat. It is the cheap call a cache uses to tell a live
// process from a new one that reused its pid.
func (r *Reader) StartTicks(pid int) (uint64, error) {
	s, err := r.Stat(pid)
	return s.StartTicks, err
}

// Liveness returns the start time of process pid, as StartTicks does, and
// whether it has exited: a process that has exited keeps its /proc entry,
// start time included, until its parent reaps it, which may be never (a
// container's pid 1 that does not wait, a parent stopped in a debugger).
func (r *Reader) Liveness(pid int) (start uint64, exited bool, err error) {
	s, err := r.Stat(pid)
	return s.StartTicks, s.Exited(), err
}

// CPUTime reads pid's CPU time from /proc/<pid>/stat.
func (r *Reader) CPUTime(pid int) (CPUTime, error) {
	s, err := r.Stat(pid)
	if err != nil {
		return CPUTime{}, err
	}
	return s.CPUTime(), nil
}

// parseDecimal parses an unsigned decimal without allocating.
func parseDecimal(b []byte) (uint64, bool) {
	if len(b) == 0 || len(b) > 19 {
		return 0, false
	}
	var v uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + uint64(c-'0')
	}
	return v, true
}
