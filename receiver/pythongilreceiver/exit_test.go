package pythongilreceiver

import (
	"os"
	"testing"

	"go.uber.org/zap"

	"github.com/otelcol-ai/otelcol-ai/internal/procresource"
	"github.com/otelcol-ai/otelcol-ai/receiver/pythongilreceiver/internal/discovery"
	"github.com/otelcol-ai/otelcol-ai/receiver/pythongilreceiver/internal/gil"
)

// TestExitEventEndsOnlyTheProcessThatExited: an exit event names a pid
// alone. It ends the process the receiver holds under that pid when that
// process no longer runs (its start time is not the pid's now), but not a
// later process under the pid, found before the earlier one's exit was
// taken: its state, status and library stay. The running process is the
// test's own.
func TestExitEventEndsOnlyTheProcessThatExited(t *testing.T) {
	reader := procresource.NewReader("/proc", 0)
	pid := os.Getpid()
	start, err := reader.StartTicks(pid)
	if err != nil {
		t.Fatalf("reader.StartTicks(%d): %v", pid, err)
	}
	for _, c := range []struct {
		name  string
		start uint64 // of the process the receiver holds under pid
		ended bool
	}{
		{"the later process, still running", start, false},
		{"an earlier process under the pid", start + 1, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			const other = 1 << 30 // another process mapping the library
			lib := &library{lib: &gil.Library{}, pids: map[uint32]struct{}{uint32(pid): {}, other: {}}}
			st := &runState{
				scanner:   discovery.NewScanner(reader, discovery.Filter{}),
				statuses:  discovery.NewStatuses(zap.NewNop(), nil),
				libraries: map[discovery.FileID]*library{{Dev: "0:1", Inode: 1}: lib},
				processes: map[uint32]*process{uint32(pid): {pid: uint32(pid), res: procresource.Resource{PID: pid, StartTicks: c.start}}},
			}
			st.statuses.Set(pid, c.start, discovery.StateProbed, "")

			st.arrived(discovery.Arrivals{Exited: []int{pid}})

			if got := st.processes[uint32(pid)].exited; got != c.ended {
				t.Errorf("process exited: got %v, want %v", got, c.ended)
			}
			if _, known := st.statuses.Get(pid); known == c.ended {
				t.Errorf("status known: got %v, want %v", known, !c.ended)
			}
			if _, mapped := lib.pids[uint32(pid)]; mapped == c.ended {
				t.Errorf("pid among the library's: got %v, want %v", mapped, !c.ended)
			}
			if _, mapped := lib.pids[other]; !mapped {
				t.Error("the other process left the library")
			}
		})
	}
}
