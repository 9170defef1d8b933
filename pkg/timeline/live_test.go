package timeline_test

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/extension/extensiontest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/otelcol-ai/otelcol-ai/extension/runtimestateextension/runtimestatetest"
	"github.com/otelcol-ai/otelcol-ai/extension/timelineextension"
	"github.com/otelcol-ai/otelcol-ai/internal/cdptest"
	"github.com/otelcol-ai/otelcol-ai/internal/window"
	"github.com/otelcol-ai/otelcol-ai/pkg/timeline/timelinetest"
	"github.com/otelcol-ai/otelcol-ai/processor/runtimecorrelationprocessor"
)

// TestLivePageSummarisesAMillionWindows: a runtimecorrelation processor
// holding a million windows of four processes, the timeline extension
// serving it, the page in headless Chromium: at coarse zoom it draws the
// summary (bounded: at most lanes × kinds × buckets bars) and stays
// responsive (it answers an evaluation while polling); zoomed in to 20 ms it
// draws each window again.
func TestLivePageSummarisesAMillionWindows(t *testing.T) {
	if testing.Short() {
		t.Skip("a million windows")
	}
	cdptest.Binary(t)
	// The processor registers its state in a runtimestate extension, which
	// the timeline extension draws from (both name it: runtime_state).
	host, _ := runtimestatetest.Start(t)
	stateID := runtimestatetest.ID
	pf := runtimecorrelationprocessor.NewFactory()
	pcfg := pf.CreateDefaultConfig().(*runtimecorrelationprocessor.Config)
	pcfg.Windows.MaxWindows, pcfg.Windows.MaxPerScope = 1_000_000, 1_000_000
	pcfg.Windows.Retention = time.Hour
	pcfg.Windows.MaxClockSkew = time.Hour
	pcfg.OverlapPairs = [][]window.Kind{}
	pcfg.RuntimeState = &stateID
	pset := processortest.NewNopSettings(pf.Type())
	pset.ID = component.MustNewIDWithName("runtimecorrelation", "million")
	logs, err := pf.CreateLogs(context.Background(), pset, pcfg, consumertest.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	if err := logs.Start(context.Background(), host); err != nil {
		t.Fatal(err)
	}
	defer logs.Shutdown(context.Background())

	const n, batch = 1_000_000, 20_000
	end := time.Now().Add(-time.Second).UnixNano()
	start := end - int64(n)*50_000 // 50 s of windows, 50 µs apart
	kinds := []window.Kind{window.KindJVMSafepoint, window.KindPythonGILWait, window.KindPythonGILReleased, window.KindPythonGCPause}
	for i := 0; i < n; i += batch {
		ld := plog.NewLogs()
		var lrs [4]plog.LogRecordSlice
		for p := range lrs {
			rl := ld.ResourceLogs().AppendEmpty()
			rl.Resource().Attributes().PutStr("host.name", "node-m")
			rl.Resource().Attributes().PutInt("process.pid", int64(100+p))
			lrs[p] = rl.ScopeLogs().AppendEmpty().LogRecords()
		}
		for j := 0; j < batch; j++ {
			k := i + j
			lr := lrs[k%4].AppendEmpty()
			lr.SetEventName(string(kinds[k/4%4]))
			lr.SetTimestamp(pcommon.Timestamp(start + int64(k)*50_000))
			lr.Attributes().PutInt(window.AttrDuration, 30_000)
			lr.Attributes().PutInt(window.AttrThreadID, int64(k%3+1))
		}
		if err := logs.ConsumeLogs(window.Measured(context.Background(), component.MustNewID("jfr")), ld); err != nil {
			t.Fatal(err)
		}
	}

	ef := timelineextension.NewFactory()
	ecfg := ef.CreateDefaultConfig().(*timelineextension.Config)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ecfg.NetAddr.Endpoint = ln.Addr().String()
	ln.Close()
	ecfg.Source = pset.ID.String()
	ecfg.RuntimeState = &stateID
	ecfg.Range = time.Minute
	ext, err := ef.Create(context.Background(), extensiontest.NewNopSettings(ef.Type()), ecfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := ext.Start(context.Background(), host); err != nil {
		t.Fatal(err)
	}
	defer ext.Shutdown(context.Background())

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	b := cdptest.Start(t, 1400, 900)
	if err := b.Navigate(ctx, "http://"+ecfg.NetAddr.Endpoint+"/"); err != nil {
		t.Fatal(err)
	}
	// The whole 50 s that the windows cover (ingesting them took a while).
	if err := b.Eval(fmt.Sprintf("timeline.setView(%d, %d, false)", start/1e6, end/1e6+1), nil); err != nil {
		t.Fatal(err)
	}
	if err := b.Until(ctx, fmt.Sprintf(`document.getElementById("chart").dataset.mode === "summary" && document.getElementById("chart").dataset.fromMs == "%d"`, start/1e6)); err != nil {
		t.Fatal(err)
	}
	d := timelinetest.ReadDrawn(t, b)
	var inRange int
	if err := b.Eval(`timeline.snapshot.inRange`, &inRange); err != nil {
		t.Fatal(err)
	}
	if inRange != n || len(d.Windows) != 0 || d.Buckets == 0 || d.Buckets > 4*3*1000 || len(d.Lanes) != 4 {
		t.Fatalf("coarse view: %d in range, %d windows, %d bars, lanes %q; want %d summarised in bounded bars over 4 lanes",
			inRange, len(d.Windows), d.Buckets, d.Lanes, n)
	}
	var counts string
	if err := b.Eval(`document.getElementById("counts").textContent`, &counts); err != nil || !strings.Contains(counts, "summary") {
		t.Errorf("counts line %q (%v), want it to say it is a summary", counts, err)
	}
	// Zoom in on 20 ms: 400 windows, each drawn.
	mid := (start + end) / 2 / 1e6
	if err := b.Eval(fmt.Sprintf("timeline.setView(%d, %d, false)", mid, mid+20), nil); err != nil {
		t.Fatal(err)
	}
	if err := b.Until(ctx, fmt.Sprintf(`document.getElementById("chart").dataset.mode === "windows" && document.getElementById("chart").dataset.fromMs == "%d"`, mid)); err != nil {
		t.Fatal(err)
	}
	d = timelinetest.ReadDrawn(t, b)
	if len(d.Windows) < 395 || len(d.Windows) > 405 {
		t.Errorf("zoomed to 20 ms: %d windows drawn, want about 400", len(d.Windows))
	}
	for _, r := range d.Windows {
		if x := d.XOf(int64(r.T0 * 1e6)); x-r.X > 1 || r.X-x > 1 {
			t.Errorf("window at x=%.1f, its start says %.1f", r.X, x)
			break
		}
	}
	if p := b.Problems(); len(p) > 0 {
		t.Errorf("console: %q", p)
	}
}
