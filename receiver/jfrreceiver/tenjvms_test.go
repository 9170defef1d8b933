package jfrreceiver

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/otelcol-ai/otelcol-ai/internal/window"
	"github.com/otelcol-ai/otelcol-ai/pkg/jfr"
	"github.com/otelcol-ai/otelcol-ai/pkg/jfr/jfrtest"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/jfrstream"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/jvmevent"
)

// gcLoop is a light JVM: a few explicit collections, little else, so that
// ten of them fit on a small machine.
const gcLoop = `public class GCLoop {
    public static void main(String[] args) throws Exception {
        long end = System.currentTimeMillis() + Long.parseLong(args[0]);
        Object[] keep = new Object[64];
        int i = 0;
        while (System.currentTimeMillis() < end) {
            keep[i++ & 63] = new byte[64 << 10];
            if (i % 16 == 0) { System.gc(); Thread.sleep(150); }
        }
    }
}
`

// TestTenLiveJVMs starts ten JDK 17 JVMs that record JFR while the
// receiver runs with discovery; each JVM's pause windows arrive once, all of
// them (as many as the recording the JVM dumped at exit holds), under its
// own pid, and nothing is left open after shutdown.
func TestTenLiveJVMs(t *testing.T) {
	j := jfrtest.Find(t, 17)
	const jvms = 10
	base := t.TempDir()
	if err := os.WriteFile(filepath.Join(base, "GCLoop.java"), []byte(gcLoop), 0o644); err != nil {
		t.Fatal(err)
	}
	javac := filepath.Join(j.Home, "bin", "javac")
	if out, err := exec.Command(javac, "-d", base, filepath.Join(base, "GCLoop.java")).CombinedOutput(); err != nil {
		t.Fatalf("javac: %v\n%s", err, out)
	}
	fdsBefore := openFDs(t)

	f := NewFactory()
	cfg := f.CreateDefaultConfig().(*Config)
	cfg.PollInterval = 200 * time.Millisecond
	cfg.Repositories.DiscoveryInterval = 200 * time.Millisecond
	r, logs := startLogs(t, cfg)
	defer r.Shutdown(context.Background())

	type jvm struct {
		pid  int
		dump string
		out  bytes.Buffer
		err  error
	}
	all := make([]*jvm, jvms)
	var wg sync.WaitGroup
	for i := range all {
		dir := filepath.Join(base, "jvm"+strconv.Itoa(i))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		v := &jvm{dump: filepath.Join(dir, "dump.jfr")}
		all[i] = v
		cmd := exec.Command(j.Java(), "-Xmx32m", "-XX:TieredStopAtLevel=1", "-Xshare:auto",
			"-XX:FlightRecorderOptions:repository="+dir,
			"-XX:StartFlightRecording:settings=profile,filename="+v.dump,
			"-cp", base, "GCLoop", "2500")
		cmd.Dir = dir
		cmd.Stdout, cmd.Stderr = &v.out, &v.out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		v.pid = cmd.Process.Pid
		wg.Add(1)
		go func() {
			defer wg.Done()
			v.err = cmd.Wait()
		}()
	}
	wg.Wait()
	want := map[int64]int{}
	for _, v := range all {
		if v.err != nil {
			t.Fatalf("JVM %d: %v\n%s", v.pid, v.err, v.out.String())
		}
		want[int64(v.pid)] = pausesIn(t, v.dump)
	}

	got := map[int64]int{}
	deadline := time.Now().Add(60 * time.Second)
	for {
		clear(got)
		for _, ld := range logs.AllLogs() {
			for i := range ld.ResourceLogs().Len() {
				rl := ld.ResourceLogs().At(i)
				recs := rl.ScopeLogs().At(0).LogRecords()
				for k := range recs.Len() {
					if recs.At(k).EventName() == string(window.KindJVMGCPause) {
						got[pidOf(rl.Resource())]++
					}
				}
			}
		}
		done := true
		for pid, n := range want {
			if got[pid] < n {
				done = false
			}
		}
		if done || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := r.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	for pid, n := range want {
		if got[pid] != n || n == 0 {
			t.Errorf("pid %d: %d pause windows, its recording has %d", pid, got[pid], n)
		}
	}
	if after := openFDs(t); after > fdsBefore {
		t.Errorf("%d file descriptors open before, %d after", fdsBefore, after)
	}
	if t.Failed() {
		for _, v := range all {
			fmt.Println(v.pid, v.out.String())
		}
	}
}

// pausesIn counts the GC pause windows of a finished recording.
func pausesIn(t *testing.T, path string) int {
	t.Helper()
	rd, err := jfr.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	s := jfrstream.New()
	var b jvmevent.Batch
	for i := range rd.Chunks() {
		c, err := rd.Chunk(i)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Chunk(c, &b); err != nil {
			t.Fatal(err)
		}
	}
	s.Flush(&b, true)
	n := 0
	for _, w := range b.Windows {
		if w.Kind == window.KindJVMGCPause {
			n++
		}
	}
	return n
}
