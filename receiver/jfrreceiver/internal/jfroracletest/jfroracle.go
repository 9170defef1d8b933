// Package jfroracletest reads what the JDK's own `jfr print --json` says about a
// recording, for tests that check the receiver's values against it.
package jfroracletest // import "github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/jfroracletest"

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/otelcol-ai/otelcol-ai/pkg/jfr/jfrtest"
)

// Event is one event as `jfr print --json` prints it.
type Event struct {
	Type   string
	Values map[string]any
}

// Events runs `jfr print --json --events <types>` on path with the given
// JDK and returns the events in the order printed.
func Events(t testing.TB, j jfrtest.JDK, path string, types ...string) []Event {
	t.Helper()
	out := jfrtest.Tool(t, j, "print", "--json", "--events", strings.Join(types, ","), path)
	var doc struct {
		Recording struct {
			Events []Event `json:"events"`
		} `json:"recording"`
	}
	if err := json.Unmarshal(out, &doc); err != nil {
		t.Fatalf("jfr print --json %s: %v", path, err)
	}
	return doc.Recording.Events
}

// Time returns a timestamp field in Unix epoch ns.
func (e Event) Time(field string) (int64, error) {
	s, _ := e.Values[field].(string)
	ts, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return 0, fmt.Errorf("%s.%s: %w", e.Type, field, err)
	}
	return ts.UnixNano(), nil
}

// Duration returns an ISO-8601 duration field ("PT0.0045S", "PT1M2.5S").
func (e Event) Duration(field string) (time.Duration, error) {
	s, _ := e.Values[field].(string)
	return ParseISODuration(s)
}

// Int returns a numeric field.
func (e Event) Int(field string) int64 {
	f, _ := e.Values[field].(float64)
	return int64(f)
}

// Str returns a string field ("" when null).
func (e Event) Str(field string) string {
	s, _ := e.Values[field].(string)
	return s
}

// ParseISODuration parses the PTnHnMn.nS durations that jfr prints.
func ParseISODuration(s string) (time.Duration, error) {
	rest, ok := strings.CutPrefix(s, "PT")
	if !ok {
		return 0, fmt.Errorf("duration %q: no PT prefix", s)
	}
	neg := false
	var total time.Duration
	for rest != "" {
		i := strings.IndexAny(rest, "HMS")
		if i < 0 {
			return 0, fmt.Errorf("duration %q: no unit", s)
		}
		num, unit := rest[:i], rest[i]
		rest = rest[i+1:]
		if strings.HasPrefix(num, "-") {
			neg, num = true, num[1:]
		}
		whole, frac, _ := strings.Cut(num, ".")
		w, err := strconv.ParseInt(whole, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("duration %q: %w", s, err)
		}
		var scale time.Duration
		switch unit {
		case 'H':
			scale = time.Hour
		case 'M':
			scale = time.Minute
		default:
			scale = time.Second
		}
		d := time.Duration(w) * scale
		if frac != "" {
			frac = (frac + "000000000")[:9]
			f, err := strconv.ParseInt(frac, 10, 64)
			if err != nil {
				return 0, fmt.Errorf("duration %q: %w", s, err)
			}
			d += time.Duration(f) * scale / time.Second
		}
		total += d
	}
	if neg {
		total = -total
	}
	return total, nil
}
