package procresource

import (
	"os"
	"strings"
	"testing"
	"time"
)

func TestParseCPUTime(t *testing.T) {
	// A comm with spaces and parentheses: fields count from the last ')'.
	line := "4242 (java (x) y) S 1 4242 4242 0 -1 4194560 1000 0 0 0 1234 56 0 0 20 0 30 0 987654 100000 2000 18446744073709551615\n"
	c, err := ParseCPUTime([]byte(line))
	if err != nil {
		t.Fatal(err)
	}
	if c.User != 12340*time.Millisecond || c.System != 560*time.Millisecond || c.StartTicks != 987654 {
		t.Errorf("got %+v, want user 12.34 s, system 0.56 s, start 987654", c)
	}
	if c.Total() != 12900*time.Millisecond {
		t.Errorf("total %v", c.Total())
	}
	for _, bad := range []string{
		"", "4242 java S 1", "4242 (java) S 1 2 3",
		"4242 (java) S 1 4242 4242 0 -1 4194560 1000 0 0 0 x 56 0 0 20 0 30 0 987654",
		"4242 (java) S 1 4242 4242 0 -1 4194560 1000 0 0 0 -5 56 0 0 20 0 30 0 987654",
	} {
		if _, err := ParseCPUTime([]byte(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
	// A hostile value saturates instead of wrapping.
	huge := strings.Replace(line, " 1234 ", " 9999999999999999999 ", 1)
	if c, err := ParseCPUTime([]byte(huge)); err != nil || c.User <= 0 {
		t.Errorf("huge utime: %+v, %v", c, err)
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

func FuzzParseCPUTime(f *testing.F) {
	f.Add([]byte("1 (init) S 0 1 1 0 -1 4194560 1 0 0 0 7 3 0 0 20 0 1 0 5 1 1 1\n"))
	f.Add([]byte("2 (a) b) c) R 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20"))
	f.Add([]byte(")"))
	f.Fuzz(func(t *testing.T, stat []byte) {
		c, err := ParseCPUTime(stat)
		if err == nil && (c.User < 0 || c.System < 0) {
			t.Errorf("negative time from %q: %+v", stat, c)
		}
	})
}
