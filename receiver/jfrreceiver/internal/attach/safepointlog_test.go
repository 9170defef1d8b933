package attach

import (
	"errors"
	"testing"
)

// checkVerbose is JFR.check verbose=true's shape (JDK 17 and 25): one
// block per recording, one label line and one settings line per event.
func checkVerbose(recordings ...string) string {
	out := "12345:\n"
	for _, r := range recordings {
		out += r
	}
	return out
}

func recording(name, state, begin, end, op string) string {
	return "Recording 1: name=" + name + " maxsize=250.0MB (" + state + ")\n\n" +
		" Flight Recording (jdk.ActiveRecording)\n   [enabled=true]\n" +
		" Safepoint Begin (jdk.SafepointBegin)\n   [" + begin + "]\n" +
		" Safepoint End (jdk.SafepointEnd)\n   [" + end + "]\n" +
		" Execute VM Operation (jdk.ExecuteVMOperation)\n   [" + op + "]\n\n"
}

func TestRecordsSafepoints(t *testing.T) {
	const (
		def     = "threshold=10 ms,enabled=true"
		off     = "threshold=10 ms,enabled=false"
		zero    = "threshold=0 ms,enabled=true"
		zeroOff = "threshold=0 ms,enabled=false"
	)
	for _, c := range []struct {
		name              string
		check             string
		running, complete bool
	}{
		{"none", "12345:\nNo available recordings.\n\nUse jcmd 12345 JFR.start to start a recording.\n", false, false},
		{"default", checkVerbose(recording("1", "running", def, off, def)), true, false},
		{"profile", checkVerbose(recording("1", "running", zero, zero, "threshold=10 ms,enabled=true")), true, true},
		{"end from the VM operation", checkVerbose(recording("1", "running", zero, zeroOff, zero)), true, true},
		{"begin only", checkVerbose(recording("1", "running", zero, off, def)), true, false},
		{"begin off", checkVerbose(recording("1", "running", zeroOff, zero, zero)), true, false},
		{"a union of two", checkVerbose(recording("1", "running", def, off, def), recording("x", "running", zero, zero, zero)), true, true},
		{"a stopped one counts for nothing", checkVerbose(recording("1", "running", def, off, def), recording("x", "stopped", zero, zero, zero)), true, false},
		{"only a delayed one", checkVerbose(recording("1", "delayed", zero, zero, zero)), false, false},
		{"nanoseconds", checkVerbose(recording("1", "running", "threshold=0 ns,enabled=true", "enabled=true,threshold=0 s", def)), true, true},
		{"a garbled threshold is not zero", checkVerbose(recording("1", "running", "threshold=zero,enabled=true", zero, zero)), true, false},
		{"hostile text", "Recording 1: (running)\n (jdk.SafepointBegin)\n[\n(jdk.)\n [enabled=true\n", true, false},
	} {
		running, complete := recordsSafepoints(c.check)
		if running != c.running || complete != c.complete {
			t.Errorf("%s: running %v complete %v, want %v %v", c.name, running, complete, c.running, c.complete)
		}
	}
}

func TestVMLogError(t *testing.T) {
	for out, bad := range map[string]bool{
		"":   false,
		"\n": false,
		"Output options for existing outputs are ignored.\n": false,
		"Error opening log file '/tmp/x/sp.log': No such file or directory\nInitialization of output 'file=/tmp/x/sp.log' using options '(null)' failed.\n": true,
		"Invalid decorator 'x'.\n": true,
	} {
		err := vmLogError(out)
		if (err != nil) != bad || (err != nil && !errors.Is(err, ErrRefused)) {
			t.Errorf("%q: %v", out, err)
		}
	}
}

func FuzzRecordsSafepoints(f *testing.F) {
	f.Add(checkVerbose(recording("1", "running", "threshold=0 ms,enabled=true", "threshold=0 ms,enabled=true", "")))
	f.Add("Recording 1: name=1 (running)\n Safepoint Begin (jdk.SafepointBegin)\n   [threshold=10 ms,enabled=true]\n")
	f.Fuzz(func(t *testing.T, s string) {
		running, complete := recordsSafepoints(s)
		if complete && !running {
			t.Fatal("complete without a running recording")
		}
	})
}
