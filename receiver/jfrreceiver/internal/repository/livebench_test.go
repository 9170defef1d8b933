package repository

import (
	"context"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/otelcol-ai/otelcol-ai/pkg/jfr"
	"github.com/otelcol-ai/otelcol-ai/pkg/jfr/jfrtest"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/jvmevent"
)

// BenchmarkLiveJVM follows a real JDK 17 JVM producing a GC-heavy `profile`
// recording for 8 s at the receiver's default poll interval (1 s) and
// discovery (5 s, here through /proc), and reports the collector's own CPU
// over that time as a share of one core, the same normalized to 10k
// events/s, the JVM's event rate, and the most heap retained while
// following it (measured after a forced GC each second, whose CPU counts as
// the receiver's), and how long after a window ended it was delivered
// (the JVM's flush interval plus the poll interval bound it).
// One iteration is one JVM; run with -benchtime 1x.
//
//	go test -run '^$' -bench LiveJVM -benchtime 1x ./receiver/jfrreceiver/internal/repository
func BenchmarkLiveJVM(b *testing.B) {
	j := jfrtest.Find(b, 17)
	src, jfc, err := jfrtest.Workload()
	if err != nil {
		b.Fatal(err)
	}
	for range b.N {
		dir := b.TempDir()
		dump := filepath.Join(dir, "dump.jfr")
		cmd := exec.Command(j.Java(), "-Xmx128m", "-XX:FlightRecorderOptions:repository="+dir,
			"-XX:StartFlightRecording:settings=profile,settings="+jfc+",filename="+dump, src, "8000")
		cmd.Dir = dir
		s := New(Config{Discover: true, ProcRoot: "/proc", DiscoveryInterval: 5 * time.Second})
		_ = s.Poll(context.Background(), func(jvmevent.Batch) {})
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		pid := cmd.Process.Pid
		runtime.GC()
		var base runtime.MemStats
		runtime.ReadMemStats(&base)
		var before, after syscall.Rusage
		syscall.Getrusage(syscall.RUSAGE_SELF, &before)
		start := time.Now()
		var heap uint64
		var delays []time.Duration // window end → delivered, while the JVM ran
		var followed time.Time     // when the source first followed the JVM
		windows := 0
		running := true
		ticker := time.NewTicker(time.Second)
		for running || len(s.Following()) > 0 {
			select {
			case err := <-done:
				if err != nil {
					b.Fatal(err)
				}
				running = false
			case <-ticker.C:
			}
			_ = s.Poll(context.Background(), func(bt jvmevent.Batch) {
				if bt.JVM.PID != pid {
					return
				}
				windows += len(bt.Windows)
				if running && !followed.IsZero() {
					now := time.Now().UnixNano()
					for _, w := range bt.Windows {
						// Windows that ended before discovery found the
						// JVM wait for discovery, not for the JVM's flush.
						if w.End() > followed.UnixNano() {
							delays = append(delays, time.Duration(now-w.End()))
						}
					}
				}
			})
			if followed.IsZero() && followsPID(s, pid) {
				followed = time.Now()
			}
			if running {
				// Retained heap: collect first (its CPU is counted as
				// the receiver's, which overstates the receiver's cost).
				runtime.GC()
				var ms runtime.MemStats
				runtime.ReadMemStats(&ms)
				heap = max(heap, ms.HeapAlloc)
			}
			if !running && !followsPID(s, pid) {
				break
			}
		}
		ticker.Stop()
		wall := time.Since(start)
		syscall.Getrusage(syscall.RUSAGE_SELF, &after)
		s.Close()
		cpu := time.Duration(after.Utime.Nano() + after.Stime.Nano() - before.Utime.Nano() - before.Stime.Nano())
		events := countEvents(b, dump)
		rate := float64(events) / wall.Seconds()
		share := cpu.Seconds() / wall.Seconds() * 100
		b.ReportMetric(share, "%core")
		b.ReportMetric(share*10_000/rate, "%core@10k-events/s")
		b.ReportMetric(rate, "events/s")
		b.ReportMetric(float64(heap)-float64(base.HeapAlloc), "peak-retained-heap-B/JVM")
		b.ReportMetric(float64(windows), "windows")
		if len(delays) > 0 {
			slices.Sort(delays)
			b.ReportMetric(delays[len(delays)/2].Seconds(), "p50-delay-s")
			b.ReportMetric(delays[len(delays)*99/100].Seconds(), "p99-delay-s")
		}
	}
}

func followsPID(s *Source, pid int) bool {
	for _, f := range s.followers {
		if f.jvm.PID == pid {
			return true
		}
	}
	return false
}

func countEvents(b *testing.B, path string) int {
	r, err := jfr.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	n := 0
	for i := range r.Chunks() {
		c, err := r.Chunk(i)
		if err != nil {
			b.Fatal(err)
		}
		sc := c.Scan(jfr.NewSelection())
		for sc.Next() {
		}
		n += sc.Count()
	}
	return n
}
