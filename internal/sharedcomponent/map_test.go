package sharedcomponent

import (
	"errors"
	"testing"
)

func TestOneValuePerKeyUntilTheLastRelease(t *testing.T) {
	var m Map[string, *int]
	made, destroyed := 0, 0
	create := func() (*int, error) { made++; v := made; return &v, nil }
	destroy := func(*int) { destroyed++ }

	logs, err := m.Acquire("rc", create, destroy)
	if err != nil {
		t.Fatal(err)
	}
	traces, _ := m.Acquire("rc", create, destroy)
	other, _ := m.Acquire("rc/2", create, destroy)
	if logs.Value() != traces.Value() || logs.Value() == other.Value() {
		t.Fatalf("logs %d traces %d other %d: want logs and traces to share", *logs.Value(), *traces.Value(), *other.Value())
	}
	logs.Release()
	logs.Release() // a second release of one reference does nothing
	if destroyed != 0 || m.Len() != 2 {
		t.Fatalf("after one of two released: destroyed %d, len %d", destroyed, m.Len())
	}
	traces.Release()
	if destroyed != 1 || m.Len() != 1 {
		t.Fatalf("after the last released: destroyed %d, len %d", destroyed, m.Len())
	}
	again, _ := m.Acquire("rc", create, destroy)
	if *again.Value() != 3 {
		t.Errorf("a new pipeline build got value %d, want a fresh one (3)", *again.Value())
	}
	again.Release()
	other.Release()
	if destroyed != 3 || m.Len() != 0 {
		t.Errorf("destroyed %d, len %d; want 3, 0", destroyed, m.Len())
	}
}

func TestCreateErrorStoresNothing(t *testing.T) {
	var m Map[string, int]
	boom := errors.New("boom")
	if _, err := m.Acquire("rc", func() (int, error) { return 0, boom }, nil); !errors.Is(err, boom) {
		t.Fatalf("err = %v", err)
	}
	if m.Len() != 0 {
		t.Errorf("len %d after a failed create", m.Len())
	}
	r, err := m.Acquire("rc", func() (int, error) { return 7, nil }, nil)
	if err != nil || r.Value() != 7 {
		t.Fatalf("retry: %v %v", r, err)
	}
	r.Release()
}
