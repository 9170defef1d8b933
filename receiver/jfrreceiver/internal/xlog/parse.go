// Package xlog reads HotSpot unified-logging output (-Xlog:gc*,safepoint)
// of JDK 17, 21 and 25: safepoint and GC pause lines become jvm.safepoint
// and jvm.gc.pause windows and safepoint measurements. Source tails such
// files as the JVM writes them, rotation-aware.
//
// A line is "[decorator]…[decorator] message". Times come from the
// decorators, best first: timenanos (CLOCK_MONOTONIC, converted with
// window.Clock), then time / utctime / timemillis (milliseconds), then
// uptimenanos / uptimemillis / uptime against a JVM start time learned from
// lines that also carry an absolute decorator. HotSpot writes a pause line
// when the pause ends: the window starts at that time minus the duration
// the line reports.
package xlog // import "github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/xlog"

import (
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Decorators holds the times and ids a line's decorators carry; a field is
// 0 (or "") when its decorator is absent.
type Decorators struct {
	// Epoch is an absolute time in Unix ns (time, utctime, timemillis), with
	// millisecond resolution.
	Epoch int64
	// Monotonic is timenanos: CLOCK_MONOTONIC ns.
	Monotonic int64
	// Uptime is the time since the JVM started (uptimenanos, or the
	// coarser uptimemillis / uptime), ns; UptimeSet says it is present.
	Uptime    int64
	UptimeSet bool
	// MonotonicGuessed says Monotonic comes from a lone nanosecond
	// decorator that could also be uptimenanos; a caller with an absolute
	// time on the line (Epoch) and a clock can tell.
	MonotonicGuessed bool
	// PID is the pid decorator.
	PID int
	// Tags are the tag set, e.g. "gc,phases".
	Tags string
}

// Resolve settles a guessed Monotonic against the line's absolute time: a
// value that, read as CLOCK_MONOTONIC, lands more than a second away from
// the epoch decorator is the JVM's uptime instead.
func (d *Decorators) Resolve(toUnix func(monotonic int64) int64) {
	if !d.MonotonicGuessed || d.Epoch == 0 {
		return
	}
	if diff := toUnix(d.Monotonic) - d.Epoch; diff > int64(time.Second) || diff < -int64(time.Second) {
		d.Uptime, d.UptimeSet, d.Monotonic = d.Monotonic, true, 0
	}
	d.MonotonicGuessed = false
}

// Line is a parsed log line.
type Line struct {
	Decorators
	// Message is the text after the decorators.
	Message string
}

const timeLayout = "2006-01-02T15:04:05.000-0700"

// ParseLine splits a line into decorators and message. ok is false for a
// line without decorators (a continuation or another program's output).
func ParseLine(s string) (Line, bool) {
	var l Line
	var nanos []int64 // "…ns" values in order: timenanos comes before uptimenanos
	var uptimeSecs float64
	hasUptimeSecs := false
	n := 0
	for strings.HasPrefix(s, "[") {
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return Line{}, false
		}
		d := strings.TrimSpace(s[1:end])
		s = s[end+1:]
		n++
		switch {
		case len(d) >= len(timeLayout)-2 && d[4] == '-' && d[10] == 'T':
			if t, err := time.Parse(timeLayout, d); err == nil {
				l.Epoch = t.UnixNano()
			}
		case strings.HasSuffix(d, "ns") && isDigits(d[:len(d)-2]):
			v, _ := strconv.ParseInt(d[:len(d)-2], 10, 64)
			nanos = append(nanos, v)
		case strings.HasSuffix(d, "ms") && isDigits(d[:len(d)-2]):
			v, _ := strconv.ParseInt(d[:len(d)-2], 10, 64)
			// timemillis is epoch ms (13 digits today); uptimemillis is
			// far smaller.
			if v > 1e12 {
				l.Epoch = v * 1e6
			} else {
				l.Uptime, l.UptimeSet = v*1e6, true
			}
		case strings.HasSuffix(d, "s") && isDecimal(d[:len(d)-1]):
			v, _ := strconv.ParseFloat(d[:len(d)-1], 64)
			uptimeSecs, hasUptimeSecs = v, true
		case isDigits(d):
			// pid comes before tid; keep the first.
			if l.PID == 0 {
				l.PID, _ = strconv.Atoi(d)
			}
		case isLevel(d):
		default:
			l.Tags = d
		}
	}
	if n == 0 {
		return Line{}, false
	}
	switch len(nanos) {
	case 1:
		// One nanosecond decorator: timenanos or uptimenanos. The uptime
		// decorator, when present, tells them apart; else a value that
		// matches the line's uptime in seconds is uptimenanos.
		v := nanos[0]
		if hasUptimeSecs && absf(float64(v)/1e9-uptimeSecs) < 0.01 {
			l.Uptime, l.UptimeSet = v, true
		} else {
			l.Monotonic, l.MonotonicGuessed = v, true
		}
	case 2:
		l.Monotonic = nanos[0]
		l.Uptime, l.UptimeSet = nanos[1], true
	}
	if !l.UptimeSet && hasUptimeSecs {
		l.Uptime, l.UptimeSet = int64(uptimeSecs*1e9), true
	}
	l.Message = strings.TrimLeft(s, " ")
	return l, true
}

func absf(f float64) float64 {
	if f < 0 {
		return -f
	}
	return f
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func isDecimal(s string) bool {
	whole, frac, ok := strings.Cut(s, ".")
	return ok && isDigits(whole) && isDigits(frac)
}

func isLevel(s string) bool {
	switch s {
	case "trace", "debug", "info", "warning", "error":
		return true
	}
	return false
}

// Safepoint is a parsed -Xlog:safepoint line (written when the safepoint
// ends).
type Safepoint struct {
	Operation string
	// Total is the whole stop; Reaching the time to reach the safepoint
	// (-1 when the line lacks it).
	Total, Reaching time.Duration
}

// ParseSafepoint reads `Safepoint "Op", Time since last: N ns, Reaching
// safepoint: N ns, …, Total: N ns[, Threads: …]` by field name, as JDK 17,
// 21 and 25 write it.
func ParseSafepoint(msg string) (Safepoint, bool) {
	rest, ok := strings.CutPrefix(msg, `Safepoint "`)
	if !ok {
		return Safepoint{}, false
	}
	op, rest, ok := strings.Cut(rest, `"`)
	if !ok {
		return Safepoint{}, false
	}
	sp := Safepoint{Operation: op, Total: -1, Reaching: -1}
	for _, field := range strings.Split(rest, ",") {
		name, val, ok := strings.Cut(strings.TrimSpace(field), ": ")
		if !ok {
			continue
		}
		num, isNs := strings.CutSuffix(val, " ns")
		if !isNs {
			continue
		}
		v, err := strconv.ParseInt(num, 10, 64)
		if err != nil {
			continue
		}
		switch name {
		case "Total":
			sp.Total = time.Duration(v)
		case "Reaching safepoint":
			sp.Reaching = time.Duration(v)
		}
	}
	if sp.Total < 0 {
		return Safepoint{}, false
	}
	return sp, true
}

// Pause is a parsed GC pause line.
type Pause struct {
	GCID int64
	// Name is the pause as logged: "Pause Young (Normal) (G1 Evacuation
	// Pause)", "Pause Full (System.gc())", "Pause Mark Start", …
	Name string
	// Cause is the last parenthesized part when it names a cause.
	Cause    string
	Duration time.Duration
	// Generation is generational ZGC's "Y" (young) or "O" (old), else "".
	Generation string
}

// maxPause bounds a logged pause: a longer one is a malformed line.
const maxPause = 24 * time.Hour

// pauseLine matches `GC(12) Pause … [24M->2M(256M)] 3.456ms`, with the
// generational ZGC's "Y: " / "O: " prefix.
var pauseLine = regexp.MustCompile(`^GC\((\d+)\) (?:([YO]): )?(Pause .*?)(?: \d+[KMGT]?->\d+[KMGT]?\(\d+[KMGT]?\))? (\d+(?:\.\d+)?)ms$`)

// ParsePause reads a GC pause line (tags gc or gc,phases).
func ParsePause(msg string) (Pause, bool) {
	m := pauseLine.FindStringSubmatch(msg)
	if m == nil {
		return Pause{}, false
	}
	id, _ := strconv.ParseInt(m[1], 10, 64)
	ms, err := strconv.ParseFloat(m[4], 64)
	if err != nil || ms*1e6 > float64(maxPause) {
		return Pause{}, false // not a pause any JVM logs (and past int64 ns)
	}
	p := Pause{GCID: id, Name: m[3], Duration: time.Duration(ms * 1e6), Generation: m[2]}
	// "Pause Young (Normal) (G1 Evacuation Pause)": the cause is the last
	// group, unless it is the only one and a pause type.
	if i := strings.LastIndex(p.Name, " ("); i >= 0 && strings.HasSuffix(p.Name, ")") {
		c := p.Name[i+2 : len(p.Name)-1]
		switch c {
		case "Normal", "Concurrent Start", "Prepare Mixed", "Mixed", "Concurrent End", "Major", "Minor":
		default:
			p.Cause = c
		}
	}
	return p, true
}
