package timelineextension

import (
	"github.com/otelcol-ai/otelcol-ai/extension/runtimestateextension/runtimestatetest"
	"github.com/otelcol-ai/otelcol-ai/internal/runtimestate"

	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/extension/extensiontest"

	"github.com/otelcol-ai/otelcol-ai/extension/timelineextension/internal/metadata"
	"github.com/otelcol-ai/otelcol-ai/pkg/timeline"
)

// querySource answers every query with an empty snapshot of the range it
// was asked for, and remembers the query.
type querySource struct{ last timeline.Query }

func (s *querySource) Snapshot(q timeline.Query) (*timeline.Snapshot, error) {
	s.last = q
	snap := &timeline.Snapshot{Source: "test", Lanes: []timeline.Lane{}, Windows: []timeline.Window{}, Spans: []timeline.Span{}, GPU: []timeline.GPUPoint{}}
	from, to := q.Range(time.Now().UnixNano())
	snap.SetBase(from)
	snap.From, snap.To = from-snap.Base, to-snap.Base
	return snap, nil
}

func freeEndpoint(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func startExtension(t *testing.T, configure func(*Config)) string {
	t.Helper()
	base, _ := startExtensionWithState(t, configure)
	return base
}

// startExtensionWithState starts the extension with a runtimestate
// extension of its own (runtime_state names it unless configure unsets
// it), as the embedded default config has them, and returns where it
// serves and the store processors register in.
func startExtensionWithState(t *testing.T, configure func(*Config)) (string, *runtimestate.Store) {
	t.Helper()
	host, store := runtimestatetest.Start(t)
	stateID := runtimestatetest.ID
	cfg := createDefaultConfig().(*Config)
	cfg.NetAddr.Endpoint = freeEndpoint(t)
	cfg.RuntimeState = &stateID
	if configure != nil {
		configure(cfg)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	ext, err := NewFactory().Create(context.Background(), extensiontest.NewNopSettings(metadata.Type), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := ext.Start(context.Background(), host); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := ext.Shutdown(context.Background()); err != nil {
			t.Error(err)
		}
	})
	return "http://" + cfg.NetAddr.Endpoint, store
}

func get(t *testing.T, url string) (int, string, http.Header) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(body), resp.Header
}

// TestPageIsSelfContained: the page is one HTML document whose script and
// style are inline, refers to nothing outside this server, and says so in
// its Content-Security-Policy.
func TestPageIsSelfContained(t *testing.T) {
	base := startExtension(t, nil)
	code, body, h := get(t, base+"/")
	if code != http.StatusOK || !strings.HasPrefix(h.Get("Content-Type"), "text/html") {
		t.Fatalf("GET / = %d %s", code, h.Get("Content-Type"))
	}
	for _, bad := range []string{"<script src", "<link", "@import", "https://", "url(http"} {
		if strings.Contains(body, bad) {
			t.Errorf("page contains %q", bad)
		}
	}
	if csp := h.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "connect-src 'self'") {
		t.Errorf("Content-Security-Policy %q", csp)
	}
	if !strings.Contains(body, `"api":"api/snapshot"`) || !strings.Contains(body, `"pollMs":1000`) {
		t.Errorf("page config lacks the API or the poll interval")
	}
	if code, _, _ := get(t, base+"/nope"); code != http.StatusNotFound {
		t.Errorf("GET /nope = %d, want 404", code)
	}
}

// TestSnapshotWithoutSourceIs503: no runtimecorrelation processor, or no
// runtime_state, or one that names no extension, means a 503 that says
// what is missing.
func TestSnapshotWithoutSourceIs503(t *testing.T) {
	base := startExtension(t, func(c *Config) { c.Source = "runtimecorrelation/absent" })
	code, body, _ := get(t, base+"/api/snapshot")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, `"runtimecorrelation/absent"`) || !strings.Contains(body, "no timeline source") {
		t.Fatalf("= %d %q", code, body)
	}
	base = startExtension(t, func(c *Config) { c.RuntimeState = nil })
	if code, body, _ := get(t, base+"/api/snapshot"); code != http.StatusServiceUnavailable || !strings.Contains(body, "runtime_state is not set") {
		t.Errorf("without runtime_state: %d %q", code, body)
	}
	absent := component.MustNewIDWithName("runtimestate", "absent")
	base = startExtension(t, func(c *Config) { c.RuntimeState = &absent })
	if code, body, _ := get(t, base+"/api/snapshot"); code != http.StatusServiceUnavailable || !strings.Contains(body, "runtimestate/absent is not among the service's extensions") {
		t.Errorf("runtime_state naming no extension: %d %q", code, body)
	}
}

// TestSnapshotQueries: good queries reach the source (capped by the
// config), bad ones are 400s naming every bad parameter, and an empty
// state is an empty snapshot.
func TestSnapshotQueries(t *testing.T) {
	src := &querySource{}
	name := component.MustNewIDWithName("runtimecorrelation", strings.ToLower(t.Name())).String()
	base, store := startExtensionWithState(t, func(c *Config) { c.Source = name; c.MaxWindows = 300 })
	defer store.Timelines().Register(name, src)()

	code, body, _ := get(t, base+"/api/snapshot?last=10s&pid=42&kind=jvm.safepoint,span&max_windows=100000&buckets=20")
	if code != http.StatusOK {
		t.Fatalf("= %d %s", code, body)
	}
	var snap timeline.Snapshot
	if err := json.Unmarshal([]byte(body), &snap); err != nil {
		t.Fatal(err)
	}
	if snap.To-snap.From != int64(10*time.Second) || len(snap.Lanes) != 0 || snap.Windows == nil {
		t.Errorf("empty state: %+v", snap)
	}
	if q := src.last; q.PID != 42 || q.Last != 10*time.Second || q.MaxWindows != 300 || q.Buckets != 20 || fmt.Sprint(q.Kinds) != "[jvm.safepoint span]" {
		t.Errorf("query reached the source as %+v", q)
	}

	for _, tc := range []struct{ query, want string }{
		{"from=yesterday", "from: \"yesterday\" is neither Unix epoch ns nor RFC 3339"},
		{"from=20&to=10", "from: must be before to"},
		{"last=-1s", "last: -1s is outside"},
		{"last=soon", "last: \"soon\" is not a duration"},
		{"pid=abc", "pid: \"abc\" is not a positive integer"},
		{"kind=jvm.nap", "kind: \"jvm.nap\" is not span, gpu, accounts or a window kind"},
		{"max_windows=0", "max_windows: \"0\" is not an integer in [1, 100000]"},
		{"buckets=1e9", "buckets: \"1e9\" is not an integer"},
		{"zoom=2", "zoom: unknown parameter"},
		{"pid=1&pid=2", "pid: given more than once"},
		{"pid=x&last=y", "last: \"y\" is not a duration (e.g. 30s, 5m)\npid: \"x\" is not a positive integer"},
	} {
		code, body, _ := get(t, base+"/api/snapshot?"+tc.query)
		if code != http.StatusBadRequest || !strings.Contains(body, tc.want) {
			t.Errorf("?%s = %d %q, want 400 with %q", tc.query, code, body, tc.want)
		}
	}
}

func TestConfigValidateReportsEveryKey(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	cfg.NetAddr.Endpoint = ""
	cfg.Source = "not a/valid/id"
	cfg.PollInterval = time.Millisecond
	cfg.Range = 0
	cfg.MaxWindows = 0
	cfg.MaxSpans = 1 << 30
	err := cfg.Validate()
	if err == nil {
		t.Fatal("no error")
	}
	for _, key := range []string{"endpoint:", "source:", "poll_interval:", "range:", "max_windows:", "max_spans:"} {
		if !strings.Contains(err.Error(), key) {
			t.Errorf("error %q does not name %s", err, key)
		}
	}
	if err := createDefaultConfig().(*Config).Validate(); err != nil {
		t.Errorf("default config: %v", err)
	}
}
