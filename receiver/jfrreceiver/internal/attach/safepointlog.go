package attach

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/otelcol-ai/otelcol-ai/internal/fsdeadline"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/discovery"
)

// A JVM that records JFR itself with settings that leave short safepoints
// out (JFR's `default` settings record jdk.SafepointBegin only above 10 ms
// and jdk.SafepointEnd not at all) gets, with RecorderConfig.SafepointLog,
// a unified-logging output of its safepoints added at run time
// (`jcmd <pid> VM.log output=file=… what=safepoint=info`), which the -Xlog
// source reads. The JVM's own recording is left as it was: a second JFR
// recording would put the events into the user's chunks too (JFR records
// the union of every running recording's settings), while a log output
// changes nothing the user dumps.

// SafepointLogPath is the log file, as the JVM sees it, for a JVM whose own
// pid is nspid: in its /tmp, which the attach protocol uses too.
func SafepointLogPath(nspid int) string {
	return Target{PID: nspid}.safepointLog()
}

func (t Target) safepointLog() string { return "/tmp/otelcol-ai-safepoints-" + t.nspid() + ".log" }

// The output's rotation: HotSpot keeps the file and up to
// safepointLogFiles older ones of at most safepointLogSize each, so the
// JVM's /tmp holds at most 3 MiB of it (a safepoint's line is about 230
// bytes: 50 safepoints a second fill a file in about 90 s, read every
// poll).
const (
	safepointLogFiles = 2
	safepointLogSize  = "1m"
)

// safepointDecorators are what the -Xlog source needs on each line: the
// monotonic time (timenanos) to place the safepoint exactly, the JVM's pid.
const safepointDecorators = "time,uptimenanos,timenanos,pid,level,tags"

// SafepointLog is an output added to a JVM: Path as the JVM sees it, Since
// when the JVM had taken it (Unix ns; the log holds the safepoints that
// ended after Since, the JVM's own recording those before).
type SafepointLog struct {
	JVM   discovery.JVM
	Path  string
	Since int64
}

// logState is where a JVM stands with the safepoint log.
type logState int

const (
	logUndecided logState = iota // not looked at yet, or looked at again at the next discovery
	logAdded                     // the output runs (SafepointLog)
	logNotNeeded                 // its recordings keep every safepoint
	logNotAdded                  // opted out, attach off in it, refused, or too many tries
)

// jvmLog is one JVM's safepoint log as the recorder keeps it.
type jvmLog struct {
	state   logState
	reason  string // what the status says about it, "" for nothing
	path    string
	since   int64
	tries   int
	first   time.Time
	call    *fsdeadline.Call[logOutcome]
	started time.Time
	stalled bool
}

// logOutcome is what one look at a JVM found.
type logOutcome struct {
	optedOut string // what opted it out
	disabled bool   // -XX:+DisableAttachMechanism
	notReady string // not far enough in its start to attach
	noneYet  bool   // JFR.check listed no running recording yet
	complete bool   // a running recording keeps every safepoint
	added    bool
	since    int64
	err      error
}

// considerLog looks at e, a JVM that records JFR itself, for the safepoint
// log: the first time, and at each discovery until decided. The exchange
// (its owner's opt-out, readiness, JFR.check verbose=true, then VM.log)
// runs in a goroutine of its own; a later call takes its outcome. It
// returns what to add to the JVM's status reason.
func (r *Recorder) considerLog(e *jvmEntry) string {
	l := &e.log
	if !r.cfg.SafepointLog || !r.cfg.Enabled {
		return ""
	}
	if l.call != nil {
		if !l.call.Done() {
			if !l.stalled && time.Since(l.started) > r.cfg.Timeout+stallGrace {
				l.stalled = true
				l.reason = fmt.Sprintf("adding its safepoint log has not returned after %v", r.cfg.Timeout+stallGrace)
				if r.cfg.Stalled != nil {
					r.cfg.Stalled()
				}
			}
			return l.reason
		}
		x, _ := l.call.Wait(context.Background())
		l.call = nil
		r.logOutcome(e, x)
	}
	if l.state == logUndecided && l.call == nil {
		r.startLog(e)
	}
	return l.reason
}

// startLog starts the exchange that decides and adds the log.
func (r *Recorder) startLog(e *jvmEntry) {
	j := e.jvm
	t := r.target(j)
	read := r.readOptOut(j, false)
	path := t.safepointLog()
	e.log.path = path
	e.log.call = fsdeadline.Start(func() logOutcome {
		var x logOutcome
		o := read()
		switch {
		case o.state == StateOptedOut:
			x.optedOut = o.reason
			return x
		case o.state != "":
			x.notReady = o.reason // its pod's choice not known yet
			return x
		case o.disabled:
			x.disabled = true
			return x
		}
		if ok, why := t.Ready(); !ok {
			x.notReady = why
			return x
		}
		check, err := t.Jcmd("JFR.check verbose=true")
		if err != nil {
			x.err = err
			return x
		}
		running, complete := recordsSafepoints(check)
		switch {
		case !running:
			x.noneYet = true
			return x
		case complete:
			x.complete = true
			return x
		}
		out, err := t.Jcmd(fmt.Sprintf("VM.log output=file=%s output_options=filecount=%d,filesize=%s what=safepoint=info decorators=%s",
			path, safepointLogFiles, safepointLogSize, safepointDecorators))
		if err == nil {
			err = vmLogError(out)
		}
		x.err = err
		x.added = err == nil
		x.since = time.Now().UnixNano()
		return x
	})
	e.log.started, e.log.stalled = time.Now(), false
}

// logOutcome records what a look found.
func (r *Recorder) logOutcome(e *jvmEntry, x logOutcome) {
	l := &e.log
	retry := func(why string) {
		l.tries++
		if l.tries == 1 {
			l.first = time.Now()
		}
		if l.tries >= maxTries && time.Since(l.first) >= minTrying {
			l.state, l.reason = logNotAdded, "no safepoint log: "+why+" after "+strconv.Itoa(l.tries)+" tries"
			return
		}
		l.reason = "safepoint log not added yet: " + why
	}
	switch {
	case x.optedOut != "":
		l.state, l.reason = logNotAdded, "no safepoint log: opted out ("+x.optedOut+")"
	case x.disabled:
		l.state, l.reason = logNotAdded, "no safepoint log: -XX:+DisableAttachMechanism"
	case x.notReady != "":
		l.reason = "safepoint log not added yet: " + x.notReady
	case x.noneYet:
		retry("no recording runs yet (JFR.check)")
	case x.complete:
		l.state, l.reason = logNotNeeded, "its recording keeps every safepoint"
	case x.added:
		l.state, l.since = logAdded, x.since
		l.reason = "safepoints from a log added at run time (VM.log " + l.path + ")"
		r.cfg.Logger.Info("added a safepoint log to a JVM that records JFR without short safepoints; its recording is unchanged")
	case errors.Is(x.err, ErrGone):
		l.state, l.reason = logNotAdded, ""
	case NotYet(x.err) || errors.Is(x.err, os.ErrDeadlineExceeded) || errors.Is(x.err, ErrNoListener):
		retry(x.err.Error())
	default:
		l.state, l.reason = logNotAdded, "no safepoint log: "+x.err.Error()
	}
}

// vmLogError reads VM.log's answer: HotSpot answers code 0 with an empty
// output when the output was configured, and with the reason when it was
// not ("Error opening log file …", "Initialization of output … failed").
func vmLogError(out string) error {
	out = strings.TrimSpace(out)
	if out == "" || !(strings.Contains(out, "rror") || strings.Contains(out, "failed") || strings.Contains(out, "Invalid")) {
		return nil
	}
	return fmt.Errorf("attach: VM.log: %s: %w", firstLine(out), ErrRefused)
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	if len(line) > 512 {
		line = line[:512]
	}
	return line
}

// recordsSafepoints reads JFR.check verbose=true: whether a recording runs,
// and whether the running ones together record every safepoint (JFR
// records the union of their settings): jdk.SafepointBegin at a zero
// threshold, and its end (jdk.SafepointEnd or jdk.ExecuteVMOperation) at a
// zero threshold too. The answer comes from the JVM's socket, the
// container's to write: it only decides whether a log is added.
func recordsSafepoints(check string) (running, complete bool) {
	zero := map[string]bool{}
	inRunning, event := false, ""
	for line := range strings.SplitSeq(check, "\n") {
		line = strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(line, "Recording "):
			inRunning = strings.HasSuffix(line, "(running)")
			running = running || inRunning
			event = ""
		case !inRunning:
		case strings.HasSuffix(line, ")") && strings.Contains(line, "(jdk."):
			event = line[strings.LastIndex(line, "(")+1 : len(line)-1]
		case strings.HasPrefix(line, "[") && event != "":
			if settingsRecordAll(strings.Trim(line, "[]")) {
				zero[event] = true
			}
			event = ""
		}
	}
	complete = zero["jdk.SafepointBegin"] && (zero["jdk.SafepointEnd"] || zero["jdk.ExecuteVMOperation"])
	return running, complete
}

// settingsRecordAll reads one event's settings ("threshold=10 ms,enabled=true"):
// enabled with no threshold, or a zero one.
func settingsRecordAll(settings string) bool {
	enabled, zero := false, true
	for kv := range strings.SplitSeq(settings, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(kv), "=")
		switch k {
		case "enabled":
			enabled = v == "true"
		case "threshold":
			num, _, _ := strings.Cut(strings.TrimSpace(v), " ")
			f, err := strconv.ParseFloat(num, 64)
			zero = err == nil && f == 0
		}
	}
	return enabled && zero
}

// removeLog removes the output from a JVM: an output whose every tag is
// off is deleted by HotSpot (its file stays, as the JVM's to clean up
// with its /tmp).
func removeLog(t Target, path string) error {
	out, err := t.Jcmd("VM.log output=file=" + path + " what=all=off")
	if err == nil {
		err = vmLogError(out)
	}
	return err
}

// SafepointLogSince returns when the safepoint log added to the JVM began
// (SafepointLog.Since), false when it has none.
func (r *Recorder) SafepointLogSince(pid int, startTicks uint64) (int64, bool) {
	e := r.jvms[jvmKey{pid, startTicks}]
	if e == nil || e.log.state != logAdded {
		return 0, false
	}
	return e.log.since, true
}

// SafepointLogs returns the logs added to running JVMs.
func (r *Recorder) SafepointLogs() []SafepointLog {
	var out []SafepointLog
	for _, e := range r.jvms {
		if e.log.state == logAdded {
			out = append(out, SafepointLog{JVM: e.jvm, Path: e.log.path, Since: e.log.since})
		}
	}
	return out
}
