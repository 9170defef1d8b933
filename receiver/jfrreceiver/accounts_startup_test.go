package jfrreceiver

import (
	"bufio"
	_ "embed"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/collector/receiver/receivertest"

	"github.com/otelcol-ai/otelcol-ai/extension/runtimestateextension/runtimestatetest"
	"github.com/otelcol-ai/otelcol-ai/internal/leak"
	"github.com/otelcol-ai/otelcol-ai/internal/procresource"
	"github.com/otelcol-ai/otelcol-ai/internal/runtimestate"
	"github.com/otelcol-ai/otelcol-ai/pkg/jfr/jfrtest"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/leaktest"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/metadata"
)

//go:embed testdata/startupburst/StartupBurst.java
var startupBurstSource []byte

var startupFor = flag.Duration("accounts.startup", 0, "how long TestAccountStartupFigures reads its JVMs (0 skips it)")

// burstProgram is the leak workload's program with StartupBurst and its
// generated classes compiled beside it.
type burstProgram struct {
	leaktest.Program
	classpath string
}

// buildBurst writes classes generated classes (G0..G<n-1>, each a static
// array and two methods) and StartupBurst.java, and compiles them with
// jdk's javac beside prog.
func buildBurst(t testing.TB, jdk jfrtest.JDK, prog leaktest.Program, classes int) burstProgram {
	t.Helper()
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	if err := os.Mkdir(src, 0o755); err != nil {
		t.Fatal(err)
	}
	files := []string{filepath.Join(src, "StartupBurst.java")}
	if err := os.WriteFile(files[0], startupBurstSource, 0o644); err != nil {
		t.Fatal(err)
	}
	for i := range classes {
		java := fmt.Sprintf("public class G%[1]d {\n"+
			"    static long[] data = new long[%[2]d];\n"+
			"    public static long f(long x) { long s = x; for (int i = 0; i < data.length; i++) { s += data[i] ^ (x * %[1]d + i); } return s + \"G%[1]d\".hashCode(); }\n"+
			"    public static String g(Object o) { return \"G%[1]d:\" + o + f(%[1]d); }\n"+
			"}\n", i, i%64+1)
		f := filepath.Join(src, fmt.Sprintf("G%d.java", i))
		if err := os.WriteFile(f, []byte(java), 0o644); err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	out := filepath.Join(dir, "classes")
	args := append([]string{"-d", out, "-cp", prog.Classes}, files...)
	if b, err := exec.Command(filepath.Join(jdk.Home, "bin", "javac"), args...).CombinedOutput(); err != nil {
		t.Fatalf("javac: %s: %v", b, err)
	}
	return burstProgram{Program: prog, classpath: out + string(os.PathListSeparator) + prog.Classes}
}

// burstJVM is a running StartupBurst.
type burstJVM struct {
	PID     int
	started time.Time

	mu     sync.Mutex
	phases map[string]time.Time
	out    strings.Builder
}

// startBurst runs StartupBurst with java: nativeBytes malloc'd once,
// threads idle threads, classes classes over seconds, then the healthy
// work. It is killed when the test ends.
func startBurst(t testing.TB, java string, p burstProgram, nativeBytes, threads, classes int, seconds time.Duration, opts []string) *burstJVM {
	t.Helper()
	args := append(append([]string{}, opts...), "-cp", p.classpath, "StartupBurst", p.Library,
		strconv.Itoa(nativeBytes), strconv.Itoa(threads), strconv.Itoa(classes), strconv.Itoa(int(seconds.Seconds())),
		strconv.Itoa(100<<10), "20")
	cmd := exec.Command(java, args...)
	cmd.Dir = t.TempDir()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	j := &burstJVM{phases: map[string]time.Time{}}
	cmd.Stderr = writerTo(j.write)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	j.PID, j.started = cmd.Process.Pid, time.Now()
	read := make(chan struct{})
	go func() {
		defer close(read)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if phase, ok := strings.CutPrefix(sc.Text(), "burst "); ok {
				j.mu.Lock()
				j.phases[strings.Fields(phase)[0]] = time.Now()
				j.mu.Unlock()
			} else if !strings.HasPrefix(sc.Text(), "leaked ") {
				j.write([]byte(sc.Text() + "\n"))
			}
		}
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-read
		_ = cmd.Wait()
	})
	return j
}

type writerTo func([]byte)

func (w writerTo) Write(b []byte) (int, error) { w(b); return len(b), nil }

func (j *burstJVM) write(b []byte) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.out.Len() < 64<<10 {
		j.out.Write(b)
	}
}

// phase returns how long after the JVM's start a phase ended.
func (j *burstJVM) phase(name string) (time.Duration, bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	at, ok := j.phases[name]
	return at.Sub(j.started), ok
}

func (j *burstJVM) output() string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.out.String()
}

// windowFigures is what the fast tier's window saw of one account: the
// highest least-squares rate and floor rise of any assessment, the same
// of the assessments whose floor rose in all three quarter steps (the
// fast tier's steadiness rule, whatever the thresholds), the rise from
// the first reading to the highest, and how many assessments the fast
// tier's defaults suspected.
type windowFigures struct {
	readings                 int
	first                    time.Time
	maxRate, steadyRate      float64
	maxFloorRise, steadyRise int64
	rise                     int64
	suspected                int
}

// replayAccounts sets every account of p that the receiver shared through
// store against the fast tier's defaults, and against its window and
// steadiness rule with thresholds that every reading meets.
func replayAccounts(store *runtimestate.Store, p runtimestate.Process) map[string]windowFigures {
	fast := defaultAccountsConfig().LeakDetection.Fast.thresholds()
	anyRise := fast
	anyRise.MinGrowthRate, anyRise.MinGrowth = 1e-9, 1
	out := map[string]windowFigures{}
	for account, rs := range store.Accounts(p, time.Time{}) {
		defaults, steady := leak.New[string](fast), leak.New[string](anyRise)
		f := windowFigures{readings: len(rs)}
		for i, r := range rs {
			if i == 0 {
				f.first = r.At
			}
			if defaults.Observe(account, r.At, r.Value).Suspected {
				f.suspected++
			}
			as := steady.Observe(account, r.At, r.Value)
			if as.Ready {
				f.maxRate = max(f.maxRate, as.GrowthRate)
				f.maxFloorRise = max(f.maxFloorRise, as.FloorGrowth)
			}
			if as.Suspected {
				f.steadyRate = max(f.steadyRate, as.GrowthRate)
				f.steadyRise = max(f.steadyRise, as.FloorGrowth)
			}
			f.rise = max(f.rise, r.Value-rs[0].Value)
		}
		out[account] = f
	}
	return out
}

func processOf(t testing.TB, pid int) runtimestate.Process {
	t.Helper()
	start, err := procresource.NewReader("/proc", 0).StartTicks(pid)
	if err != nil {
		t.Fatal(err)
	}
	return runtimestate.Process{PID: pid, StartTicks: start}
}

// TestAccountStartupFigures measures what JVM start-ups look like to the
// fast leak tier: for -accounts.startup each, JDK 17 and then JDK 25 run
// three JVMs on their default heap: a plain one (the leak workload's
// healthy work) and two start-up bursts (StartupBurst: 64 MiB malloc'd
// once, 200 threads, then 3000 classes over 20 s or 6000 over 60 s, then
// the same work), read by the receiver on its default configuration
// (attach on, as the embedded default). It logs, per account, the highest
// growth rate and floor rise any fast window saw, the same of the windows
// whose floor rose in all three quarters, the rise from the first
// reading, and how many assessments the fast tier's defaults suspected.
//
//	go test -run TestAccountStartupFigures -v -timeout 30m ./receiver/jfrreceiver/ -accounts.startup=4m
func TestAccountStartupFigures(t *testing.T) {
	if *startupFor <= 0 {
		t.Skip("-accounts.startup not set")
	}
	for _, major := range []int{17, 25} {
		t.Run(fmt.Sprintf("JDK%d", major), func(t *testing.T) { startupFigures(t, major) })
	}
}

// startupFigures is one JDK's part of TestAccountStartupFigures; its JVMs
// end with it.
func startupFigures(t *testing.T, major int) {
	jdk := jfrtest.Find(t, major)
	prog := leaktest.Build(t, jdk)
	burst := buildBurst(t, jdk, prog, 6000)
	type jvm struct {
		name  string
		pid   int
		burst *burstJVM
	}
	plain := leaktest.Start(t, jdk.Java(), prog, leaktest.Healthy, 100<<10, 20, 0, nil)
	short := startBurst(t, jdk.Java(), burst, 64<<20, 200, 3000, 20*time.Second, nil)
	long := startBurst(t, jdk.Java(), burst, 64<<20, 200, 6000, time.Minute, nil)
	jvms := []jvm{
		{fmt.Sprintf("JDK %d plain", major), plain.PID, nil},
		{fmt.Sprintf("JDK %d burst 3000 classes/20 s", major), short.PID, short},
		{fmt.Sprintf("JDK %d burst 6000 classes/60 s", major), long.PID, long},
	}
	ours := map[int]bool{}
	for _, j := range jvms {
		ours[j.pid] = true
	}
	attachOnly = func(pid int) bool { return ours[pid] }
	host, store := runtimestatetest.Start(t)
	id := runtimestatetest.ID
	cfg := createDefaultConfig().(*Config)
	cfg.Repositories.Attach.Enabled = true
	cfg.Accounts.RuntimeState = &id
	started := time.Now()
	_, _, shutdown := startBoth(t, cfg, receivertest.NewNopSettings(metadata.Type), host)
	time.Sleep(*startupFor)
	shutdown()
	attachOnly = nil
	for _, j := range jvms {
		p := processOf(t, j.pid)
		if j.burst != nil {
			for _, phase := range []string{"native", "threads", "classes"} {
				d, ok := j.burst.phase(phase)
				t.Logf("%s pid %d: %s done %.1f s after start (%v)", j.name, j.pid, phase, d.Seconds(), ok)
			}
		}
		figures := replayAccounts(store, p)
		for _, account := range []string{"native_unaccounted", "direct_buffers", "heap", "metaspace"} {
			f := figures[account]
			t.Logf("%s pid %d %s: %d readings from %.0f s; fast window: highest rate %.2f MiB/s, floor rise %.1f MiB; rising all three quarters %.2f MiB/s, %.1f MiB; rise from the first %.1f MiB; suspected by the defaults %d",
				j.name, j.pid, account, f.readings, f.first.Sub(started).Seconds(), f.maxRate/(1<<20), float64(f.maxFloorRise)/(1<<20),
				f.steadyRate/(1<<20), float64(f.steadyRise)/(1<<20), float64(f.rise)/(1<<20), f.suspected)
		}
		for _, account := range []string{"native_unaccounted", "direct_buffers", "heap", "metaspace"} {
			var b strings.Builder
			for _, r := range store.Accounts(p, time.Time{})[account] {
				fmt.Fprintf(&b, " %.0f:%.1f", r.At.Sub(started).Seconds(), float64(r.Value)/(1<<20))
			}
			t.Logf("%s %s (s:MiB):%s", j.name, account, b.String())
		}
	}
}
