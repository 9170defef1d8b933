package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otelcol-ai/otelcol-ai/internal/window"
	"github.com/otelcol-ai/otelcol-ai/pkg/timeline"
)

func writeOutput(t *testing.T, dir string) {
	t.Helper()
	base := time.Now().UnixNano()
	ld := plog.NewLogs()
	rl := ld.ResourceLogs().AppendEmpty()
	rl.Resource().Attributes().PutStr("host.name", "node-a")
	rl.Resource().Attributes().PutInt("process.pid", 4242)
	lrs := rl.ScopeLogs().AppendEmpty().LogRecords()
	for i, k := range []window.Kind{window.KindJVMSafepoint, window.KindPythonGILWait} {
		if err := window.Encode(window.Window{Kind: k, Start: base + int64(i)*1e6, Duration: time.Millisecond, ThreadID: 7}, lrs.AppendEmpty()); err != nil {
			t.Fatal(err)
		}
	}
	lrs.AppendEmpty().Body().SetStr("not a window")
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutInt("process.pid", 4242)
	sp := rs.ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	sp.SetName("GET /")
	sp.SetStartTimestamp(pcommon.Timestamp(base))
	sp.SetEndTimestamp(pcommon.Timestamp(base + 5e6))
	var lm plog.JSONMarshaler
	var tm ptrace.JSONMarshaler
	lb, _ := lm.MarshalLogs(ld)
	tb, _ := tm.MarshalTraces(td)
	for name, data := range map[string][]byte{"logs.jsonl": lb, "traces.jsonl": tb} {
		if err := os.WriteFile(filepath.Join(dir, name), append(data, '\n'), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// TestRendersTheFileExportersOutput: a folder as `make run` writes it
// becomes one HTML file holding its windows and spans, laned by process.
func TestRendersTheFileExportersOutput(t *testing.T) {
	dir := t.TempDir()
	writeOutput(t, dir)
	out := filepath.Join(t.TempDir(), "t.html")
	var log strings.Builder
	if err := run([]string{"-o", out, dir}, &log); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(log.String(), "1 processes, 2 windows, 1 spans") {
		t.Errorf("log %q", log.String())
	}
	page, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(page), `<script id="timeline-config" type="application/json">`)
	if !ok {
		t.Fatal("no embedded data")
	}
	conf, _, _ := strings.Cut(rest, "</script>")
	var cfg struct {
		Live bool
		Data timeline.Snapshot
	}
	if err := json.Unmarshal([]byte(conf), &cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.Live || len(cfg.Data.Windows) != 2 || len(cfg.Data.Spans) != 1 || cfg.Data.Spans[0].Lane != cfg.Data.Windows[0].Lane || cfg.Data.Spans[0].Dur != 5e6 {
		t.Errorf("embedded %+v", cfg)
	}
}

// TestBadInput: each says what and where.
func TestBadInput(t *testing.T) {
	empty := t.TempDir()
	bad := t.TempDir()
	if err := os.WriteFile(filepath.Join(bad, "logs.jsonl"), []byte("{}\n{not json\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{empty}, "no traces*.jsonl, metrics*.jsonl or logs*.jsonl"},
		{[]string{filepath.Join(bad, "logs.jsonl")}, "logs line 2"},
		{[]string{filepath.Join(empty, "absent")}, "no such file"},
		{[]string{"-max-windows", "0", bad}, "-max-windows"},
	} {
		err := run(append([]string{"-o", filepath.Join(t.TempDir(), "x.html")}, tc.args...), &strings.Builder{})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want %q", tc.args, err, tc.want)
		}
	}
}
