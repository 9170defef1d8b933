package discovery

import (
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
	s.Set(10, StateFound, "")
	s.Set(10, StateProbed, "")
	s.Set(10, StateProbed, "")
	s.Set(11, StateRefused, "free_threaded")
	s.Set(12, StateRefused, "mismatch")
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
	s.Prune(func(pid int) bool { return pid != 12 })
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
