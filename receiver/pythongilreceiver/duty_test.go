package pythongilreceiver

import (
	"context"
	"errors"
	"math"
	"os"
	"strconv"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component/componenttest"

	"github.com/otelcol-ai/otelcol-ai/internal/window"
	"github.com/otelcol-ai/otelcol-ai/receiver/pythongilreceiver/internal/gil"
	"github.com/otelcol-ai/otelcol-ai/receiver/pythongilreceiver/internal/workloadtest"
)

func TestRatioFor(t *testing.T) {
	cfg := OverheadConfig{Budget: 0.02, Period: 10 * time.Second, CostPerHit: time.Microsecond}
	tests := []struct {
		name      string
		hits      float64
		attached  float64
		processes int
		want      float64
	}{
		{"no hits", 0, 1, 1, 1},
		{"nothing attached", 100, 0, 1, 1},
		{"within budget: 10k hits/s at 1us is 1%", 10_000, 1, 1, 1},
		{"at budget", 20_000, 1, 1, 1},
		{"twice the budget", 40_000, 1, 1, 0.5},
		{"2M hits/s: 100x the budget", 2_000_000, 1, 1, 0.01},
		{"averaged over processes", 40_000, 1, 2, 1},
		{"floor at 1%", 1e9, 1, 1, minRatio},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ratioFor(cfg, tt.hits, tt.attached, tt.processes); !(math.Abs(tt.want-got) <= 1e-9) {
				t.Errorf("ratioFor(cfg, tt.hits, tt.attached, tt.processes): got %v, want %v ± %v", got, tt.want, 1e-9)
			}
		})
	}
}

// TestSpendAccountsWhatTheProbesCost: the budget accrues with time, hits
// spend it at the configured cost per hit (averaged over processes), and
// both credit and debt stay within one period's budget.
func TestSpendAccountsWhatTheProbesCost(t *testing.T) {
	cfg := OverheadConfig{Budget: 0.02, Period: 10 * time.Second, CostPerHit: time.Microsecond}
	t0 := 1000 * time.Second
	d := newBudgetBucket(cfg, t0)
	steps := []struct {
		name      string
		after     time.Duration
		hits      uint64
		processes int
		want      float64
	}{
		{"first estimate at full cost: 50 ms of 730k hits/s", 50 * time.Millisecond, 36_500, 1, 0.001 - 0.0365},
		{"paid back over 1.775 s detached", 1775 * time.Millisecond, 0, 1, 0},
		{"two processes share the cost", time.Second, 20_000, 2, 0.02 - 0.01},
		{"credit capped at a period's budget", time.Hour, 0, 1, 0.2},
		{"debt capped at a period's budget", 0, 1_000_000, 1, -0.2},
	}
	now := t0
	for _, s := range steps {
		now += s.after
		d.spend(now, s.hits, s.processes)
		if !(math.Abs(s.want-d.tokens) <= 1e-9) {
			t.Errorf("%v: got %v, want %v ± %v", s.name, d.tokens, s.want, 1e-9)
		}
	}
}

// TestBudgetDutyCyclesAnExpensiveWorkload runs a GIL-churning process under
// a budget it exceeds: the receiver detaches for part of each period,
// reports a sampling ratio below 1 and puts it on the windows it emits.
func TestBudgetDutyCyclesAnExpensiveWorkload(t *testing.T) {
	w := workloadtest.Start(t, "churn", "0", "1000000", "--exit")
	cfg := fastConfig(w.PID)
	cfg.MinDuration = 0 // every release a window, so that windows carry the ratio
	// About 15 times the budget: attached about 7% of each period, after
	// detached phases that pay for the attached ones.
	cfg.Overhead = OverheadConfig{Budget: 0.05, Period: 300 * time.Millisecond, CostPerHit: time.Microsecond}
	h := startReceiver(t, cfg, componenttest.NewNopHost())
	h.waitAttached(w.PID)
	var res churnResult
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.Run(&res)
	}()
	waitFor(t, "a sampling ratio below 1", func() bool {
		h.core.stateMu.Lock()
		defer h.core.stateMu.Unlock()
		return h.core.state != nil && h.core.state.sampling < 1
	})
	<-done
	if err := h.faces[0].Shutdown(context.Background()); err != nil {
		t.Fatalf("h.faces[0].Shutdown: %v", err)
	}
	var sampled, total int
	for _, r := range h.windows(w.PID) {
		total++
		if ratio, ok := r.w.Attributes[window.AttrSamplingRatio].(float64); ok {
			sampled++
			if !(ratio > 0.0) {
				t.Errorf("ratio: got %v, want > %v", ratio, 0.0)
			}
			if !(ratio < 1.0) {
				t.Errorf("ratio: got %v, want < %v", ratio, 1.0)
			}
		}
	}
	if total <= 0 {
		t.Errorf("total: got %v, want > %v", total, 0)
	}
	if sampled <= 0 {
		t.Errorf("no window carries %s: got %v, want > %v", window.AttrSamplingRatio, sampled, 0)
	}
	// The ratio also goes out with the metrics.
	var gauge float64 = -1
	for _, md := range h.metrics.AllMetrics() {
		for _, rm := range md.ResourceMetrics().All() {
			for _, sm := range rm.ScopeMetrics().All() {
				for _, m := range sm.Metrics().All() {
					if m.Name() == metricSamplingRatio {
						gauge = m.Gauge().DataPoints().At(0).DoubleValue()
					}
				}
			}
		}
	}
	if !(gauge >= 0.0) {
		t.Errorf("no %s metric: got %v, want >= %v", metricSamplingRatio, gauge, 0.0)
	}
	t.Logf("%d of %d windows sampled; last ratio gauge %s", sampled, total, strconv.FormatFloat(gauge, 'f', 3, 64))
}

// TestDetachedPhaseEndsToLearnAGIL: with waits from the futex tracepoints,
// a detached phase ends early, once the budget has paid for the next
// attached phase, while a probed process's GIL is not known (the real
// probes here know none); not before it is paid, not when every process's
// GIL is known (no process), and not with waits from the uprobes.
func TestDetachedPhaseEndsToLearnAGIL(t *testing.T) {
	cfg := OverheadConfig{Budget: 0.02, Period: 10 * time.Second, CostPerHit: time.Microsecond}
	for _, tt := range []struct {
		name      string
		futex     bool
		processes int
		tokens    float64
		attached  bool
	}{
		{"futex, a GIL not known, paid", true, 1, 0.01, true},
		{"futex, a GIL not known, not paid", true, 1, -0.01, false},
		{"futex, no process without a GIL", true, 0, 0.01, false},
		{"uprobes", false, 1, 0.01, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p, err := gil.Load(gil.Options{MinDuration: 100 * time.Microsecond, Futex: tt.futex})
			if errors.Is(err, gil.ErrUnavailable) {
				if os.Getenv("CI") != "" {
					t.Fatalf("eBPF unavailable: %v", err)
				}
				t.Skipf("eBPF unavailable: %v", err)
			}
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			defer p.Close()
			d := newDutyCycle(cfg, p, monotonicNow)
			if err := p.SetActive(false); err != nil {
				t.Fatalf("p.SetActive: %v", err)
			}
			now := monotonicNow()
			d.phase, d.since, d.plan.ratio = phaseDetached, now, 0.1
			d.offUntil, d.nextCost = now+cfg.Period, 0.005
			d.bucket.tokens, d.bucket.tokensAt = tt.tokens, now
			_, err = d.step(tt.processes, nil)
			if err != nil {
				t.Fatalf("d.step: %v", err)
			}
			if d.attached() != tt.attached {
				t.Errorf("attached: got %v, want %v", d.attached(), tt.attached)
			}
			if got := p.Active(); got != tt.attached {
				t.Errorf("uprobes attached: got %v, want %v", got, tt.attached)
			}
		})
	}
}

// TestPeriodCostIsWhatTheBudgetHoldsTo: python.gil.probe.cost is the cost
// spent over the last period per second, detached time (no checks)
// included, not the last check's rate.
func TestPeriodCostIsWhatTheBudgetHoldsTo(t *testing.T) {
	cfg := OverheadConfig{Budget: 0.02, Period: 10 * time.Second, CostPerHit: time.Microsecond}
	t0 := 1000 * time.Second
	d := newBudgetBucket(cfg, t0)
	steps := []struct {
		name string
		at   time.Duration
		hits uint64
		want float64
	}{
		{"one check: nothing to measure over", 0, 0, 0},
		{"a burst of 0.01 CPU-s in the first second", time.Second, 10_000, 0.01},
		{"the same burst over 5 s, 4 of them detached", 5 * time.Second, 0, 0.002},
		{"a period later the burst is forgotten", 11 * time.Second, 0, 0},
	}
	for _, s := range steps {
		d.spend(t0+s.at, s.hits, 1)
		if got := d.periodCost(); !(math.Abs(s.want-got) <= 1e-9) {
			t.Errorf("%s: got %v, want %v", s.name, got, s.want)
		}
	}
}

// TestBurstPaidFromTheBudgetStaysAttached: a burst of probe hits (50k
// hashlib calls flat out, some 100k hits, 0.1 CPU-s at 1 us a hit: far
// over 2% of a CPU for the fraction of a second it lasts) keeps the probes
// attached, ratio 1, when the budget accrued before it pays for it (a
// full bucket); with the bucket in debt (as after a phase that spent ahead)
// the same burst detaches them at a ratio below 1.
func TestBurstPaidFromTheBudgetStaysAttached(t *testing.T) {
	cfg := OverheadConfig{Budget: 0.02, Period: 10 * time.Second, CostPerHit: time.Microsecond}
	lib := workloadtest.PrivateLibPython(t)
	for _, tt := range []struct {
		name     string
		tokens   float64
		attached bool
	}{
		{"paid from the budget accrued before it", cfg.Budget * cfg.Period.Seconds(), true},
		{"in debt", -cfg.Budget * cfg.Period.Seconds(), false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p, err := gil.Load(gil.Options{MinDuration: 100 * time.Microsecond, Futex: true})
			if errors.Is(err, gil.ErrUnavailable) {
				t.Skipf("eBPF unavailable: %v", err)
			}
			if err != nil {
				t.Fatalf("gil.Load: %v", err)
			}
			defer p.Close()
			w := workloadtest.Churn(t, lib, 0, 50_000)
			path, err := workloadtest.LibPython(w.PID)
			if err != nil {
				t.Fatal(err)
			}
			f, err := os.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			_, err = p.Attach(f)
			_ = f.Close()
			if err != nil {
				t.Fatalf("p.Attach: %v", err)
			}
			d := newDutyCycle(cfg, p, monotonicNow)
			d.bucket.tokens, d.bucket.tokensAt = tt.tokens, monotonicNow()
			var res churnResult
			w.Run(&res)
			ratio, err := d.step(1, nil)
			if err != nil {
				t.Fatalf("d.step: %v", err)
			}
			c, err := p.Counters()
			if err != nil {
				t.Fatal(err)
			}
			if c.Hits < 2*uint64(res.Calls) {
				t.Fatalf("%d hits for %d calls, want at least 2 a call", c.Hits, res.Calls)
			}
			if d.attached() != tt.attached || p.Active() != tt.attached {
				t.Errorf("attached: duty cycle %v, uprobes %v; want %v (rate %.3f of a CPU, tokens %.4f CPU-s)", d.attached(), p.Active(), tt.attached, d.rate, d.bucket.tokens)
			}
			if tt.attached && ratio != 1 {
				t.Errorf("ratio: got %v, want 1", ratio)
			}
			if !tt.attached && !(ratio < 1) {
				t.Errorf("ratio: got %v, want < 1", ratio)
			}
		})
	}
}

// TestKeptRatio: with waits from the futex tracepoints, which stay attached
// while the duty cycle detaches the uprobes, every wait and forced switch is
// kept; released windows, GC pauses and held time are sampled. With waits
// from uprobes everything is sampled.
func TestKeptRatio(t *testing.T) {
	futex := createDefaultConfig().(*Config)
	uprobes := createDefaultConfig().(*Config)
	uprobes.WaitSource = waitSourceUprobes
	for _, tt := range []struct {
		cfg  *Config
		kind gil.Kind
		want float64
	}{
		{futex, gil.KindWait, 1},
		{futex, gil.KindSwitch, 1},
		{futex, gil.KindReleased, 0.25},
		{futex, gil.KindGC, 0.25},
		{futex, gil.KindHeld, 0.25},
		{uprobes, gil.KindWait, 0.25},
		{uprobes, gil.KindSwitch, 0.25},
		{uprobes, gil.KindReleased, 0.25},
	} {
		if got := keptRatio(tt.cfg, tt.kind, 0.25); got != tt.want {
			t.Errorf("wait_source %s, kind %d: kept ratio %g, want %g", tt.cfg.WaitSource, tt.kind, got, tt.want)
		}
	}
}
