package timelineextension // import "github.com/otelcol-ai/otelcol-ai/extension/timelineextension"

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/extension"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/otelcol-ai/otelcol-ai/extension/timelineextension/internal/metadata"
	"github.com/otelcol-ai/otelcol-ai/internal/runtimestate"
	"github.com/otelcol-ai/otelcol-ai/pkg/timeline"
)

// Routes.
const (
	pathPage     = "/"
	pathSnapshot = "/api/snapshot"
)

type timelineExtension struct {
	cfg    *Config
	set    extension.Settings
	logger *zap.Logger
	tel    *metadata.TelemetryBuilder
	page   []byte
	// buckets is the summary's resolution when a query names none.
	buckets int

	mu     sync.Mutex
	server *http.Server
	done   chan struct{}
	host   component.Host // from Start: where runtime_state is found
}

func newExtension(set extension.Settings, cfg *Config) (*timelineExtension, error) {
	tel, err := metadata.NewTelemetryBuilder(set.TelemetrySettings)
	if err != nil {
		return nil, fmt.Errorf("timeline: telemetry: %w", err)
	}
	var page bytes.Buffer
	err = timeline.Render(&page, timeline.PageOptions{
		Title: "otelcol-ai timeline", API: pathSnapshot[1:], Poll: cfg.PollInterval, Last: cfg.Range, MaxWindows: cfg.MaxWindows,
	})
	if err != nil {
		tel.Shutdown()
		return nil, err
	}
	return &timelineExtension{cfg: cfg, set: set, logger: set.Logger, tel: tel, page: page.Bytes(), buckets: 1000}, nil
}

func (e *timelineExtension) Start(ctx context.Context, host component.Host) error {
	ln, err := e.cfg.ToListener(ctx)
	if err != nil {
		return fmt.Errorf("timeline: listen on %s: %w", e.cfg.NetAddr.Endpoint, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc(pathPage, e.servePage)
	mux.HandleFunc(pathSnapshot, e.serveSnapshot)
	// Browsers ask for it; the page has none.
	mux.HandleFunc("/favicon.ico", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
	srv, err := e.cfg.ToServer(ctx, host.GetExtensions(), e.set.TelemetrySettings, mux)
	if err != nil {
		_ = ln.Close()
		return fmt.Errorf("timeline: server: %w", err)
	}
	done := make(chan struct{})
	e.mu.Lock()
	e.server, e.done, e.host = srv, done, host
	e.mu.Unlock()
	e.logger.Info("timeline page", zap.String("url", "http://"+ln.Addr().String()+"/"))
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			e.logger.Error("timeline: server stopped", zap.Error(err))
		}
	}()
	return nil
}

func (e *timelineExtension) Shutdown(ctx context.Context) error {
	e.mu.Lock()
	srv, done := e.server, e.done
	e.server = nil
	e.mu.Unlock()
	defer e.tel.Shutdown()
	if srv == nil {
		return nil
	}
	err := srv.Shutdown(ctx)
	<-done
	return err
}

func (e *timelineExtension) count(ctx context.Context, route string, code int) {
	e.tel.TimelineRequests.Add(ctx, 1, metric.WithAttributeSet(attribute.NewSet(
		attribute.String("route", route), attribute.Int("code", code))))
}

func (e *timelineExtension) servePage(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != pathPage {
		http.NotFound(w, r)
		e.count(r.Context(), "page", http.StatusNotFound)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		e.fail(w, r, "page", http.StatusMethodNotAllowed, "timeline: use GET")
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	// Nothing outside this server: the page is self-contained.
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; img-src 'self' data:")
	h.Set("X-Content-Type-Options", "nosniff")
	_, _ = w.Write(e.page)
	e.count(r.Context(), "page", http.StatusOK)
}

func (e *timelineExtension) fail(w http.ResponseWriter, r *http.Request, route string, code int, msg string) {
	http.Error(w, msg, code)
	e.count(r.Context(), route, code)
}

// source finds the processor's state in the runtimestate extension
// (runtime_state), at each request: the processors start after the
// extensions, and a processor's restart registers anew.
func (e *timelineExtension) source() (timeline.Source, error) {
	if e.cfg.RuntimeState == nil {
		return nil, fmt.Errorf("timeline: %w: runtime_state is not set (name the runtimestate extension the runtimecorrelation processor's runtime_state names)", timeline.ErrNoSource)
	}
	e.mu.Lock()
	host := e.host
	e.mu.Unlock()
	if host == nil {
		return nil, fmt.Errorf("timeline: %w: the extension has not started", timeline.ErrNoSource)
	}
	store, err := runtimestate.Lookup(host, *e.cfg.RuntimeState)
	if err != nil {
		return nil, fmt.Errorf("timeline: runtime_state: %w", err)
	}
	return store.Timelines().Lookup(e.cfg.Source)
}

// serveSnapshot answers /api/snapshot: the query's range of the source's
// state as JSON. Bad parameters are a 400 naming each; no source (no
// runtimecorrelation processor running) a 503.
func (e *timelineExtension) serveSnapshot(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	if r.Method != http.MethodGet {
		e.fail(w, r, "snapshot", http.StatusMethodNotAllowed, "timeline: use GET")
		return
	}
	q, err := timeline.ParseQuery(r.URL.Query(), timeline.Query{
		Last: e.cfg.Range, MaxWindows: e.cfg.MaxWindows, Buckets: e.buckets, MaxSpans: e.cfg.MaxSpans,
	})
	if err != nil {
		e.fail(w, r, "snapshot", http.StatusBadRequest, err.Error())
		return
	}
	q.MaxWindows, q.MaxSpans = min(q.MaxWindows, e.cfg.MaxWindows), min(q.MaxSpans, e.cfg.MaxSpans)
	src, err := e.source()
	if err != nil {
		e.fail(w, r, "snapshot", http.StatusServiceUnavailable, err.Error())
		return
	}
	start := time.Now()
	snap, err := src.Snapshot(q)
	if err != nil {
		e.fail(w, r, "snapshot", http.StatusInternalServerError, err.Error())
		return
	}
	var body bytes.Buffer
	if err := json.NewEncoder(&body).Encode(snap); err != nil {
		e.fail(w, r, "snapshot", http.StatusInternalServerError, "timeline: encode: "+err.Error())
		return
	}
	e.tel.TimelineSnapshotDuration.Record(ctx, time.Since(start).Seconds())
	e.tel.TimelineSnapshotWindows.Record(ctx, int64(snap.WindowsInRange))
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(body.Bytes())
	e.count(ctx, "snapshot", http.StatusOK)
}
