package timeline_test

import (
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/otelcol-ai/otelcol-ai/pkg/timeline"
)

// FuzzParseQuery: any query string parses or is a bad query; what parses
// is within the limits.
func FuzzParseQuery(f *testing.F) {
	for _, s := range []string{"", "last=30s", "from=1&to=2", "kind=span,gpu,jvm.safepoint", "pid=-1", "max_windows=100001", "from=2026-12-01T10:00:00Z&to=2026-12-01T10:01:00Z", "%zz", "buckets=1&buckets=2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		v, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		q, err := timeline.ParseQuery(v, timeline.Query{MaxWindows: 10, Buckets: 10, MaxSpans: 10})
		if err != nil {
			if !errors.Is(err, timeline.ErrBadQuery) {
				t.Fatalf("%q: %v is not a bad query", raw, err)
			}
			return
		}
		if q.MaxWindows < 1 || q.MaxWindows > timeline.MaxQueryWindows || q.Buckets < 1 || q.Buckets > timeline.MaxQueryBuckets || q.Last < 0 || q.Last > timeline.MaxQueryRange {
			t.Fatalf("%q: parsed out of limits: %+v", raw, q)
		}
		if q.From != 0 && q.To != 0 && (q.From >= q.To || q.To-q.From > int64(timeline.MaxQueryRange)) {
			t.Fatalf("%q: range %d..%d", raw, q.From, q.To)
		}
	})
}

// FuzzRecordingLogs: any logs file is read or refused with an error naming
// its line; what is read makes a snapshot whose windows have lanes.
func FuzzRecordingLogs(f *testing.F) {
	f.Add(`{"resourceLogs":[{"resource":{"attributes":[{"key":"process.pid","value":{"intValue":"42"}}]},"scopeLogs":[{"logRecords":[{"timeUnixNano":"1750000000000000000","eventName":"jvm.safepoint","attributes":[{"key":"runtime.window.duration","value":{"intValue":"1000"}}]}]}]}]}`)
	f.Add("{}\n\n{\"resourceLogs\":[]}\n")
	f.Add("{not json")
	f.Fuzz(func(t *testing.T, data string) {
		rec := timeline.NewRecording()
		if err := rec.ReadLogs(strings.NewReader(data)); err != nil {
			if !strings.Contains(err.Error(), "timeline: logs") {
				t.Fatalf("error %v does not say where", err)
			}
			return
		}
		s := rec.Snapshot("fuzz", 100, 10)
		for _, w := range s.Windows {
			if w.Lane < 0 || w.Lane >= len(s.Lanes) || w.Dur < 0 {
				t.Fatalf("window %+v with %d lanes", w, len(s.Lanes))
			}
		}
	})
}
