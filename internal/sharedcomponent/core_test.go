package sharedcomponent

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
)

// journal records the calls of a core and its faces' hooks, in order.
type journal struct {
	mu    sync.Mutex
	calls []string
}

func (j *journal) add(format string, args ...any) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.calls = append(j.calls, fmt.Sprintf(format, args...))
}

// take returns the calls so far and forgets them.
func (j *journal) take() string {
	j.mu.Lock()
	defer j.mu.Unlock()
	s := strings.Join(j.calls, " ")
	j.calls = nil
	return s
}

// fakeCore is a core value: which one it is, and whether it runs.
type fakeCore struct {
	n        int
	running  bool
	startErr error
	stopErr  error
}

// testCores makes numbered fake cores under keys, journaling their starts
// and stops.
type testCores struct {
	Cores[string, *fakeCore]
	j    journal
	made int
	// startErr, when set, fails the start of the next cores made.
	startErr error
}

func (tc *testCores) create() (*Core[*fakeCore], error) {
	tc.made++
	v := &fakeCore{n: tc.made, startErr: tc.startErr}
	return NewCore(v,
		func(context.Context, component.Host) error {
			if v.startErr != nil {
				tc.j.add("start%d:err", v.n)
				return v.startErr
			}
			tc.j.add("start%d", v.n)
			v.running = true
			return nil
		},
		func(context.Context) error {
			tc.j.add("stop%d", v.n)
			v.running = false
			return v.stopErr
		}), nil
}

// face acquires a face named name (logs, metrics) of key's core with all
// three hooks journaled.
func (tc *testCores) face(t *testing.T, key, name string) *Face[*fakeCore] {
	t.Helper()
	f, err := tc.Acquire(key, tc.create, func(v *fakeCore) Hooks {
		return Hooks{
			Open: func() { tc.j.add("open:%s%d", name, v.n) },
			Final: func(context.Context) {
				tc.j.add("final:%s%d", name, v.n)
			},
			Close: func() { tc.j.add("close:%s%d", name, v.n) },
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func expect(t *testing.T, tc *testCores, step, want string) {
	t.Helper()
	if got := tc.j.take(); got != want {
		t.Errorf("%s: calls %q, want %q", step, got, want)
	}
}

func TestFirstFaceStartsTheCoreAndTheLastStopsIt(t *testing.T) {
	ctx, host := context.Background(), componenttest.NewNopHost()
	var tc testCores
	logs := tc.face(t, "jfr", "logs")
	metrics := tc.face(t, "jfr", "metrics")
	other := tc.face(t, "jfr/2", "logs")
	if logs.Value() != metrics.Value() || logs.Core() != metrics.Core() || logs.Value() == other.Value() {
		t.Fatal("the faces of one key must share one core, and only they")
	}
	if tc.Len() != 2 {
		t.Fatalf("cores held: %d, want 2", tc.Len())
	}
	expect(t, &tc, "create", "")

	must(t, logs.Start(ctx, host))
	expect(t, &tc, "first Start", "open:logs1 start1")
	must(t, logs.Start(ctx, host))
	expect(t, &tc, "Start of a started face", "")
	must(t, metrics.Start(ctx, host))
	expect(t, &tc, "second Start", "open:metrics1")
	if n := logs.Core().Started(); n != 2 {
		t.Errorf("started faces: %d, want 2", n)
	}

	must(t, logs.Shutdown(ctx))
	expect(t, &tc, "Shutdown of a face that is not the last", "final:logs1 close:logs1")
	if !logs.Value().running {
		t.Error("the core stopped while a face still runs")
	}
	must(t, logs.Shutdown(ctx))
	expect(t, &tc, "second Shutdown", "close:logs1")
	must(t, metrics.Shutdown(ctx))
	expect(t, &tc, "Shutdown of the last face", "stop1 close:metrics1")
	if logs.Value().running {
		t.Error("the core runs after its last face shut down")
	}
	if tc.Len() != 1 {
		t.Errorf("cores held: %d, want 1 (jfr/2)", tc.Len())
	}
	must(t, other.Shutdown(ctx))
	if tc.Len() != 0 {
		t.Errorf("cores held: %d after every face shut down", tc.Len())
	}
	expect(t, &tc, "Shutdown without Start", "close:logs2")
}

func TestANewBuildGetsAFreshCore(t *testing.T) {
	ctx, host := context.Background(), componenttest.NewNopHost()
	var tc testCores
	for build := 1; build <= 2; build++ {
		logs := tc.face(t, "jfr", "logs")
		metrics := tc.face(t, "jfr", "metrics")
		if logs.Value().n != build {
			t.Fatalf("build %d got core %d", build, logs.Value().n)
		}
		must(t, metrics.Start(ctx, host))
		must(t, logs.Start(ctx, host))
		must(t, metrics.Shutdown(ctx))
		must(t, logs.Shutdown(ctx))
		expect(t, &tc, fmt.Sprintf("build %d", build),
			fmt.Sprintf("open:metrics%[1]d start%[1]d open:logs%[1]d final:metrics%[1]d close:metrics%[1]d stop%[1]d close:logs%[1]d", build))
	}
}

func TestShutdownWithoutStartKeepsARunningCore(t *testing.T) {
	ctx, host := context.Background(), componenttest.NewNopHost()
	var tc testCores
	metrics := tc.face(t, "nvml", "metrics")
	logs := tc.face(t, "nvml", "logs")
	must(t, metrics.Start(ctx, host))
	// logs never started: its Shutdown (Close alone) neither stops nor
	// forgets the core the metrics face runs.
	must(t, logs.Shutdown(ctx))
	must(t, logs.Shutdown(ctx))
	expect(t, &tc, "start metrics, shut logs down", "open:metrics1 start1 close:logs1 close:logs1")
	if !metrics.Value().running || tc.Len() != 1 {
		t.Fatalf("running %v, cores %d: the core must run on", metrics.Value().running, tc.Len())
	}
	if again := tc.face(t, "nvml", "logs"); again.Value() != metrics.Value() {
		t.Error("a face made while the core runs must share it")
	} else {
		must(t, again.Shutdown(ctx))
	}
	must(t, metrics.Shutdown(ctx))
	expect(t, &tc, "last Shutdown", "close:logs1 stop1 close:metrics1")
	if tc.Len() != 0 {
		t.Errorf("cores held: %d", tc.Len())
	}
}

func TestStartErrorClosesTheFaceAndCountsNothing(t *testing.T) {
	ctx, host := context.Background(), componenttest.NewNopHost()
	boom := errors.New("boom")
	tc := testCores{startErr: boom}
	logs := tc.face(t, "jfr", "logs")
	metrics := tc.face(t, "jfr", "metrics")
	if err := logs.Start(ctx, host); !errors.Is(err, boom) {
		t.Fatalf("Start: %v, want boom", err)
	}
	expect(t, &tc, "failed Start", "open:logs1 start1:err close:logs1")
	if n := logs.Core().Started(); n != 0 {
		t.Errorf("started faces after a failed start: %d", n)
	}
	must(t, logs.Shutdown(ctx))
	expect(t, &tc, "Shutdown after a failed Start", "close:logs1")

	// The next face to start tries again.
	logs.Value().startErr = nil
	must(t, metrics.Start(ctx, host))
	expect(t, &tc, "retry", "open:metrics1 start1")
	must(t, metrics.Shutdown(ctx))
	expect(t, &tc, "Shutdown", "stop1 close:metrics1")
	if tc.Len() != 0 {
		t.Errorf("cores held: %d", tc.Len())
	}
}

func TestStopErrorIsReturnedByTheLastShutdown(t *testing.T) {
	ctx, host := context.Background(), componenttest.NewNopHost()
	var tc testCores
	logs := tc.face(t, "jfr", "logs")
	metrics := tc.face(t, "jfr", "metrics")
	boom := errors.New("boom")
	logs.Value().stopErr = boom
	must(t, logs.Start(ctx, host))
	must(t, metrics.Start(ctx, host))
	must(t, logs.Shutdown(ctx))
	if err := metrics.Shutdown(ctx); !errors.Is(err, boom) {
		t.Errorf("last Shutdown: %v, want boom", err)
	}
	expect(t, &tc, "", "open:logs1 start1 open:metrics1 final:logs1 close:logs1 stop1 close:metrics1")
	if err := metrics.Shutdown(ctx); err != nil {
		t.Errorf("second Shutdown: %v", err)
	}
}

func TestAFaceRestartsAfterShutdown(t *testing.T) {
	ctx, host := context.Background(), componenttest.NewNopHost()
	var tc testCores
	logs := tc.face(t, "jfr", "logs")
	must(t, logs.Shutdown(ctx))
	for range 2 {
		must(t, logs.Start(ctx, host))
		must(t, logs.Shutdown(ctx))
	}
	expect(t, &tc, "", "close:logs1 open:logs1 start1 stop1 close:logs1 open:logs1 start1 stop1 close:logs1")
}

func TestCreateErrorKeepsNothing(t *testing.T) {
	var cs Cores[string, int]
	boom := errors.New("boom")
	if _, err := cs.Acquire("nvml", func() (*Core[int], error) { return nil, boom }, nil); !errors.Is(err, boom) {
		t.Fatalf("Acquire: %v", err)
	}
	if cs.Len() != 0 {
		t.Errorf("cores held after a failed create: %d", cs.Len())
	}
}

func TestAFaceWithoutHooksOrCores(t *testing.T) {
	ctx, host := context.Background(), componenttest.NewNopHost()
	starts, stops := 0, 0
	core := NewCore(7, func(context.Context, component.Host) error { starts++; return nil }, func(context.Context) error { stops++; return nil })
	a, b := core.NewFace(Hooks{}), core.NewFace(Hooks{})
	must(t, a.Start(ctx, host))
	must(t, b.Start(ctx, host))
	must(t, a.Shutdown(ctx))
	must(t, b.Shutdown(ctx))
	must(t, b.Shutdown(ctx))
	if starts != 1 || stops != 1 || a.Value() != 7 {
		t.Errorf("starts %d stops %d value %d", starts, stops, a.Value())
	}
	// Nil start and stop only count.
	counted := NewCore("x", nil, nil).NewFace(Hooks{})
	must(t, counted.Start(ctx, host))
	must(t, counted.Shutdown(ctx))
}

// TestConcurrentFaces starts and stops the faces of one core from many
// goroutines (run with -race): the core runs exactly while any face does.
func TestConcurrentFaces(t *testing.T) {
	ctx, host := context.Background(), componenttest.NewNopHost()
	var mu sync.Mutex
	running, starts := 0, 0
	core := NewCore(0,
		func(context.Context, component.Host) error {
			mu.Lock()
			defer mu.Unlock()
			running++
			starts++
			return nil
		},
		func(context.Context) error {
			mu.Lock()
			defer mu.Unlock()
			running--
			return nil
		})
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f := core.NewFace(Hooks{})
			for range 100 {
				if err := f.Start(ctx, host); err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				r := running
				mu.Unlock()
				if r != 1 {
					t.Errorf("core running %d times while a face runs", r)
				}
				if err := f.Shutdown(ctx); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	if running != 0 || core.Started() != 0 || starts == 0 {
		t.Errorf("running %d, started faces %d, starts %d", running, core.Started(), starts)
	}
}

// runner is a component value with its own start and shutdown methods, as
// the receivers have.
type runner struct {
	j       *journal
	name    string
	running bool
}

func (r *runner) start(context.Context, component.Host) error {
	r.j.add("start:%s", r.name)
	r.running = true
	return nil
}

func (r *runner) shutdown(context.Context) error {
	r.j.add("stop:%s", r.name)
	r.running = false
	return nil
}

var runnerLifecycle = Lifecycle[*runner]{Start: (*runner).start, Stop: (*runner).shutdown}

func TestShareRunsTheValuesOwnLifecycle(t *testing.T) {
	var cs Cores[string, *runner]
	var j journal
	made := 0
	create := func() (*runner, error) {
		made++
		return &runner{j: &j, name: fmt.Sprintf("r%d", made)}, nil
	}
	hooks := func(name string) func(*runner) Hooks {
		return func(r *runner) Hooks {
			return Hooks{Open: func() { j.add("open:%s:%s", name, r.name) }, Close: func() { j.add("close:%s:%s", name, r.name) }}
		}
	}
	ctx, host := context.Background(), componenttest.NewNopHost()
	logs, err := cs.Share("a", create, runnerLifecycle, hooks("logs"))
	must(t, err)
	metrics, err := cs.Share("a", create, runnerLifecycle, hooks("metrics"))
	must(t, err)
	if logs.Value() != metrics.Value() || made != 1 || cs.Len() != 1 {
		t.Fatalf("two faces of key a: same value %v, %d made, %d cores", logs.Value() == metrics.Value(), made, cs.Len())
	}
	must(t, logs.Start(ctx, host))
	must(t, metrics.Start(ctx, host))
	must(t, logs.Shutdown(ctx))
	if !metrics.Value().running {
		t.Error("the value stopped while the metrics face still runs")
	}
	must(t, metrics.Shutdown(ctx))
	if got, want := j.take(), "open:logs:r1 start:r1 open:metrics:r1 close:logs:r1 stop:r1 close:metrics:r1"; got != want {
		t.Errorf("calls %q, want %q", got, want)
	}
	if cs.Len() != 0 {
		t.Errorf("%d cores held after every face shut down", cs.Len())
	}

	fail := errors.New("no device")
	if _, err := cs.Share("b", func() (*runner, error) { return nil, fail }, runnerLifecycle, nil); !errors.Is(err, fail) || cs.Len() != 0 {
		t.Errorf("create error: got %v with %d cores held, want %v and none", err, cs.Len(), fail)
	}

	// A lifecycle without a stop (or start) runs what it has.
	bare := Lifecycle[*runner]{Start: (*runner).start}.Core(&runner{j: &j, name: "bare"}).NewFace(Hooks{})
	must(t, bare.Start(ctx, host))
	must(t, bare.Shutdown(ctx))
	if got := j.take(); got != "start:bare" {
		t.Errorf("start-only lifecycle: calls %q, want %q", got, "start:bare")
	}
}
