package jfrreceiver

import (
	"slices"

	"github.com/otelcol-ai/otelcol-ai/internal/window"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/jvmevent"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/repository"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/xlog"
)

// safepointSplit shares a JVM's safepoints between its own JFR recording
// and the safepoint log the receiver added to it
// (repositories::attach::safepoint_log): the log has every safepoint that
// ended once it was added (Since), the recording only those over its
// threshold. So the recording's safepoints that end at or after Since are
// dropped, and the log's that end before it; the recording's GC pauses and
// everything else are kept. The log's safepoints count in the metrics of
// the JVM's repository (the same resource, one series), not as a JVM of
// their own.
//
// Use it from the receiver's loop goroutine.
type safepointSplit struct {
	repos *repository.Source
	// keys are the repository batches' JVMs the log's batches were given,
	// by the JVM (pid, start time), kept until the log ends.
	keys map[jvmKey]jvmevent.JVM
}

type jvmKey struct {
	pid   int
	start uint64
}

func newSafepointSplit(repos *repository.Source) *safepointSplit {
	return &safepointSplit{repos: repos, keys: map[jvmKey]jvmevent.JVM{}}
}

// added returns the logs the -Xlog source follows.
func (s *safepointSplit) added() func() []xlog.Added {
	return func() []xlog.Added {
		logs := s.repos.SafepointLogs()
		out := make([]xlog.Added, 0, len(logs))
		for _, l := range logs {
			out = append(out, xlog.Added{JVM: l.JVM, Name: l.Path})
		}
		return out
	}
}

// fromJFR drops from a repository's batch the safepoints its JVM's log
// reports.
func (s *safepointSplit) fromJFR(b *jvmevent.Batch) {
	if b.JVM.StartTicks == 0 {
		return // a pattern's repository, not a discovered JVM
	}
	since, ok := s.repos.SafepointLogSince(b.JVM.PID, b.JVM.StartTicks)
	if !ok {
		return
	}
	b.Windows = slices.DeleteFunc(b.Windows, func(w window.Window) bool {
		return w.Kind == window.KindJVMSafepoint && w.End() >= since
	})
	b.Safepoints = slices.DeleteFunc(b.Safepoints, func(sp jvmevent.Safepoint) bool { return sp.End >= since })
}

// fromLog keeps of a log batch the safepoints that ended once the log was
// added, and gives the batch the JVM's repository's key. It reports
// whether the batch's safepoints go into the metrics: not once the
// repository has ended (the JVM exited; its series are over), when the
// log's last safepoints are windows only.
func (s *safepointSplit) fromLog(b *jvmevent.Batch) (metrics bool) {
	k := jvmKey{b.JVM.PID, b.JVM.StartTicks}
	since, ok := s.repos.SafepointLogSince(k.pid, k.start)
	if !ok {
		// Removed, or its JVM forgotten (exited): what is left is kept.
		since = 0
	}
	b.Windows = slices.DeleteFunc(b.Windows, func(w window.Window) bool {
		return w.Kind != window.KindJVMSafepoint || w.End() < since
	})
	b.Safepoints = slices.DeleteFunc(b.Safepoints, func(sp jvmevent.Safepoint) bool { return sp.End < since })
	b.GCs, b.UnrecordedGCs = nil, nil
	followed := s.repos.Followed()
	key, known := s.keys[k]
	if !known {
		for _, f := range followed {
			if f.Discovered && f.JVM.PID == k.pid && f.JVM.StartTicks == k.start {
				key, known = f.JVM, true // the newest folder last
			}
		}
		if known {
			s.keys[k] = key
		}
	}
	if b.Ended {
		delete(s.keys, k)
	}
	if !known {
		return true // no repository read (an in-memory recording): the log's own
	}
	for _, f := range followed {
		if f.JVM == key {
			b.JVM, b.Ended = key, false
			return true
		}
	}
	return false
}
