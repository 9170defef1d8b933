package procsocket

import (
	"math"
	"testing"
	"time"
)

// TestScanBudgetsPerNetNS: each namespace has its own burst and rate, and
// one that spends its own takes nothing from another's or from the
// unplaced peers'.
func TestScanBudgetsPerNetNS(t *testing.T) {
	now := time.Unix(1e9, 0)
	b := newScanBudgets(3, 16)
	spend := func(netns uint64, n int) (allowed int) {
		for range n {
			if b.allow(netns, now) {
				allowed++
			}
		}
		return allowed
	}
	if got := spend(101, 100); got != 3 {
		t.Fatalf("a storm from netns 101: %d scans allowed, want its burst, 3", got)
	}
	if got := spend(102, 3); got != 3 {
		t.Fatalf("netns 102 during 101's storm: %d of 3 scans allowed", got)
	}
	if got := spend(unplaced, 3); got != 3 {
		t.Fatalf("unplaced peers during 101's storm: %d of 3 scans allowed", got)
	}
	now = now.Add(400 * time.Millisecond) // 1.2 scans
	if got := spend(101, 100); got != 1 {
		t.Fatalf("netns 101 0.4 s later: %d scans allowed, want 1", got)
	}
	if got := spend(102, 3); got != 1 {
		t.Fatalf("netns 102 0.4 s later: %d scans allowed, want 1", got)
	}
}

// TestScanBudgetsBounded: at most max namespaces hold a bucket; a bucket
// that has refilled is dropped, and a namespace that finds every bucket in
// use shares the unplaced peers' until one refills.
func TestScanBudgetsBounded(t *testing.T) {
	now := time.Unix(1e9, 0)
	b := newScanBudgets(2, 4)
	for ns := uint64(1); ns <= 4; ns++ {
		if !b.allow(ns, now) {
			t.Fatalf("netns %d: first scan refused", ns)
		}
	}
	// Full: namespace 5 draws on the unplaced bucket (burst 2).
	if !b.allow(5, now) || !b.allow(5, now) || b.allow(5, now) {
		t.Fatal("netns 5, with every bucket in use, did not get the unplaced burst of 2")
	}
	if b.allow(unplaced, now) {
		t.Fatal("the unplaced bucket was not the one netns 5 spent")
	}
	if n := b.len(); n != 4 {
		t.Fatalf("%d buckets, want 4", n)
	}
	// Half a second refills one scan each: 1..4 (one spent) are full
	// again and dropped; 5 gets a bucket of its own.
	now = now.Add(time.Second / 2)
	if !b.allow(5, now) || !b.allow(5, now) {
		t.Fatal("netns 5 has no burst of its own once the others refilled")
	}
	if n := b.len(); n != 1 {
		t.Fatalf("%d buckets after the others refilled, want 1 (netns 5's)", n)
	}
	// Many namespaces over time never hold more than max buckets.
	for i := range uint64(10000) {
		now = now.Add(time.Millisecond)
		b.allow(100+i, now)
		if n := b.len(); n > 4 {
			t.Fatalf("%d buckets, over the bound of 4", n)
		}
	}
}

func TestScanBudgetsUnbounded(t *testing.T) {
	b := newScanBudgets(math.Inf(1), 4)
	now := time.Unix(1e9, 0)
	for ns := range uint64(100) {
		for range 10 {
			if !b.allow(ns, now) {
				t.Fatalf("netns %d refused with no rate limit", ns)
			}
		}
	}
	if n := b.len(); n != 0 {
		t.Fatalf("%d buckets kept with no rate limit, want 0", n)
	}
}
