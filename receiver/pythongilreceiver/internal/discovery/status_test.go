package discovery

import (
	"maps"
	"slices"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// TestStatusesLogChangesOnceAndCount: a status is logged when it changes,
// not when it is set again; counts follow every process's current state,
// every state present; the hook sees each move; Forget and Prune drop.
func TestStatusesLogChangesOnceAndCount(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	moves := map[State]int{}
	s := NewStatuses(zap.New(core), func(from, to State) {
		if from != "" {
			moves[from]--
		}
		if to != "" {
			moves[to]++
		}
	})
	s.Set(10, 100, StateFound, "")
	s.Set(10, 100, StateProbed, "")
	s.Set(10, 0, StateProbed, "") // start not known: the pid's process
	s.Set(11, 110, StateRefused, "free_threaded")
	s.Set(12, 120, StateRefused, "mismatch")
	if n := logs.Len(); n != 4 {
		t.Fatalf("%d log lines, want 4 (one per change)", n)
	}
	last := logs.All()[3].ContextMap()
	if last["pid"] != int64(12) || last["state"] != "refused" || last["reason"] != "mismatch" {
		t.Errorf("last line %v", last)
	}
	want := map[State]int64{StateFound: 0, StateProbed: 1, StateRefused: 2}
	if got := s.Counts(); len(got) != len(want) || got[StateFound] != 0 || got[StateProbed] != 1 || got[StateRefused] != 2 {
		t.Errorf("counts %v, want %v", got, want)
	}
	s.Forget(11)
	s.Prune(func(pid int, _ uint64) bool { return pid != 12 })
	if got := s.Counts(); got[StateRefused] != 0 || got[StateProbed] != 1 {
		t.Errorf("after forgetting: %v", got)
	}
	if moves[StateProbed] != 1 || moves[StateRefused] != 0 || moves[StateFound] != 0 {
		t.Errorf("hook moves %v, want probed 1, others 0", moves)
	}
	if st, ok := s.Get(10); !ok || st.State != StateProbed {
		t.Errorf("pid 10: %v %v", st, ok)
	}
}

// TestStatusesKnowAProcessByItsStartTime: a process is its pid and start
// time. A status set for a later process under the same pid replaces the
// old process's (logged, counted as the old one leaving); Prune asks
// about each process with the start time it was recorded with, so a pid
// now held by another process does not keep the exited one's status.
func TestStatusesKnowAProcessByItsStartTime(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	var moves []string
	s := NewStatuses(zap.New(core), func(from, to State) { moves = append(moves, string(from)+">"+string(to)) })
	s.Set(10, 100, StateProbed, "")
	s.Set(10, 101, StateProbed, "") // pid 10 reused by another interpreter
	if logs.Len() != 2 || !slices.Equal(moves, []string{">probed", "probed>", ">probed"}) {
		t.Errorf("a reused pid: %d log lines, moves %v; want 2 lines, the old process leaving and the new one entering", logs.Len(), moves)
	}
	s.Set(11, 110, StateRefused, "mismatch")
	s.Set(12, 0, StateFound, "")
	asked := map[int]uint64{}
	s.Prune(func(pid int, start uint64) bool {
		asked[pid] = start
		return start != 110 // pid 11 now runs another process
	})
	if want := map[int]uint64{10: 101, 11: 110, 12: 0}; !maps.Equal(asked, want) {
		t.Errorf("Prune asked %v, want %v", asked, want)
	}
	if _, ok := s.Get(11); ok {
		t.Error("pid 11's exited process kept its status")
	}
	if got := s.Counts(); got[StateProbed] != 1 || got[StateFound] != 1 || got[StateRefused] != 0 {
		t.Errorf("counts %v, want probed 1, found 1", got)
	}
}
