package e2etest

import (
	"strings"
	"testing"
	"time"
)

// TestSIGTERMWhileStartingShutsDownGracefully: a SIGTERM sent while the
// collector is still starting, once the jfr receiver has begun its start
// (it may start recordings in other JVMs from then on), ends in the
// collector's graceful shutdown, exit 0, not in death by the signal: the
// collector core installs its own handler only after every component has
// started, and the receiver takes the signal and sends it again until then
// (internal/startsignal). Sent at the receiver's first log line, 20 of 20
// such signals killed the collector before the guard.
func TestSIGTERMWhileStartingShutsDownGracefully(t *testing.T) {
	RequireComponents(t, "jfr")
	for try := range 3 {
		c := Start(t, Options{Configs: []string{"embedded:default"}})
		deadline := time.Now().Add(60 * time.Second)
		for !strings.Contains(c.Log(), "JFR receiver starting") {
			if c.Exited() || time.Now().After(deadline) {
				t.Fatalf("try %d: the jfr receiver never logged its start", try)
			}
			time.Sleep(200 * time.Microsecond)
		}
		code, err := c.Stop(30 * time.Second)
		if err != nil || code != 0 {
			t.Fatalf("try %d: SIGTERM while starting: exit %d, %v (-1: killed by the signal)", try, code, err)
		}
		if log := c.Log(); !strings.Contains(log, "Shutdown complete") {
			t.Fatalf("try %d: no graceful shutdown in the log", try)
		}
		guarded := strings.Contains(c.Log(), "received while the collector was starting")
		t.Logf("try %d: graceful; the signal sent again by the receiver: %v", try, guarded)
	}
}
