package procresource

import (
	"bytes"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestParseStat(t *testing.T) {
	// A comm with spaces and parentheses: fields count from the last ')'.
	line := "4242 (java (x) y) S 1 4242 4242 0 -1 4194560 1000 0 0 0 1234 56 0 0 20 0 30 0 987654 100000 2000 18446744073709551615\n"
	s, err := ParseStat([]byte(line))
	if err != nil {
		t.Fatal(err)
	}
	want := Stat{Comm: []byte("java (x) y"), State: 'S', UserTicks: 1234, SystemTicks: 56, Threads: 30, StartTicks: 987654}
	if !reflect.DeepEqual(s, want) {
		t.Errorf("got %+v, want %+v", s, want)
	}
	c := s.CPUTime()
	if c.User != 12340*time.Millisecond || c.System != 560*time.Millisecond || c.StartTicks != 987654 {
		t.Errorf("CPUTime: got %+v, want user 12.34 s, system 0.56 s, start 987654", c)
	}
	if c.Total() != 12900*time.Millisecond {
		t.Errorf("total %v", c.Total())
	}
	// A hostile value saturates instead of wrapping.
	huge := strings.Replace(line, " 1234 ", " 9999999999999999999 ", 1)
	if s, err := ParseStat([]byte(huge)); err != nil || s.CPUTime().User <= 0 {
		t.Errorf("huge utime: %+v, %v", s, err)
	}
}

func TestParseStatErrors(t *testing.T) {
	for _, tt := range []struct{ line, want string }{
		{"", "no command name"},
		{"12 no-parens S 1", "no command name"},
		{"12 ) (x S 1 1 1 0 -1 4 1 0 0 0 5 3 0 0 20 0 1 0 777 1", "no command name"},
		{"12 (x) S 1 2 3", "fields"},
		{"12 (x) SS 1", "one letter"},
		{"12 (x) S 1 1 1 0 -1 4 1 0 0 0 x 3 0 0 20 0 1 0 777", `"x"`},
		{"12 (x) S 1 1 1 0 -1 4 1 0 0 0 -5 3 0 0 20 0 1 0 777", `"-5"`},
		{"12 (x) S 1 1 1 0 -1 4 1 0 0 0 5 3 0 0 20 0 many 0 777", "many"},
		{"12 (x) S 1 1 1 0 -1 4 1 0 0 0 5 3 0 0 20 0 1 0 notanumber 1", "notanumber"},
	} {
		if _, err := ParseStat([]byte(tt.line)); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ParseStat(%q): got error %v, want one containing %q", tt.line, err, tt.want)
		}
	}
}

func TestStatExited(t *testing.T) {
	tests := []struct {
		name string
		line string
		want bool
	}{
		{"running", "12 (java) S 1 12 12 0 -1 4194560 1 0 0 0 5 3 0 0 20 0 31 0 777 1 1", false},
		{"zombie", "12 (java) Z 1 12 12 0 -1 4194560 1 0 0 0 5 3 0 0 20 0 1 0 777 0 0", true},
		{"dead", "12 (java) X 1 12 12 0 -1 4194560 1 0 0 0 5 3 0 0 20 0 0 0 777 0 0", true},
		// The leader called pthread_exit: a zombie leader whose process runs.
		{"zombie leader, threads left", "12 (java) Z 1 12 12 0 -1 4194560 1 0 0 0 5 3 0 0 20 0 4 0 777 0 0", false},
		{"parentheses in comm", "12 (a) Z (b) S 1 12 12 0 -1 4194560 1 0 0 0 5 3 0 0 20 0 2 0 777 1 1", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := ParseStat([]byte(tt.line))
			if err != nil {
				t.Fatalf("ParseStat(%q): %v", tt.line, err)
			}
			if s.StartTicks != 777 {
				t.Errorf("start: got %d, want 777", s.StartTicks)
			}
			if got := s.Exited(); got != tt.want {
				t.Errorf("Exited() of %q: got %v, want %v", tt.line, got, tt.want)
			}
		})
	}
}

func TestCPUTimeOfThisProcess(t *testing.T) {
	r := NewReader(DefaultProcRoot, 0)
	// Burn CPU until the kernel has counted a tick of it (5 s at most).
	var c CPUTime
	var err error
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		if c, err = r.CPUTime(os.Getpid()); err != nil || c.Total() > 0 {
			break
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	start, err := r.StartTicks(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if c.StartTicks != start || c.Total() <= 0 {
		t.Errorf("got %+v, want start %d and some CPU time", c, start)
	}
	if _, err := r.CPUTime(1 << 30); err == nil {
		t.Error("a missing pid gave no error")
	}
}

// FuzzParseStat: a stat line is read from a file whose command name the
// process chooses. Whatever the input, a parse that succeeds says what the
// line says: the name lies between the first '(' and the last ')', and the
// fields written back into a line of the kernel's shape parse to the same
// values.
func FuzzParseStat(f *testing.F) {
	f.Add([]byte("1 (init) S 0 1 1 0 -1 4194560 1 0 0 0 7 3 0 0 20 0 1 0 5 1 1 1\n"))
	f.Add([]byte("2 (a) Z) c) Z 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20"))
	f.Add([]byte("2 (a) b) c) R 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20"))
	f.Add([]byte("4242 (java (x) y) S 1 4242 4242 0 -1 4194560 1000 0 0 0 9999999999999999999 56 0 0 20 0 30 0 987654 100000\n"))
	f.Add([]byte(")"))
	f.Fuzz(func(t *testing.T, line []byte) {
		s, err := ParseStat(line)
		if err != nil {
			return
		}
		open, end := bytes.IndexByte(line, '('), bytes.LastIndexByte(line, ')')
		if !bytes.Equal(s.Comm, line[open+1:end]) {
			t.Fatalf("comm %q, want %q (between the first '(' and the last ')')", s.Comm, line[open+1:end])
		}
		if c := s.CPUTime(); c.User < 0 || c.System < 0 {
			t.Errorf("negative time from %q: %+v", line, c)
		}
		// The state is one byte, not a rune (%c would encode it).
		again := fmt.Appendf(nil, "1 (%s) %s 0 0 0 0 0 0 0 0 0 0 %d %d 0 0 0 0 %d 0 %d 0\n",
			s.Comm, []byte{s.State}, s.UserTicks, s.SystemTicks, s.Threads, s.StartTicks)
		s2, err := ParseStat(again)
		if err != nil || !reflect.DeepEqual(s, s2) {
			t.Errorf("%q parsed to %+v; written back as %q it parses to %+v, %v", line, s, again, s2, err)
		}
	})
}
