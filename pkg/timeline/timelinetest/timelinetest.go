// Package timelinetest reads what the timeline page drew, for tests that
// load it in headless Chromium (internal/cdptest).
package timelinetest // import "github.com/otelcol-ai/otelcol-ai/pkg/timeline/timelinetest"

import (
	"testing"

	"github.com/otelcol-ai/otelcol-ai/internal/cdptest"
)

// Drawn is what the page reports having drawn, read from its SVG.
type Drawn struct {
	FromMs  float64 `json:"fromMs"`
	ToMs    float64 `json:"toMs"`
	PlotX   float64 `json:"plotX"`
	PlotW   float64 `json:"plotW"`
	Mode    string  `json:"mode"`
	Lanes   []string
	Windows []Rect
	Spans   []Rect
	Buckets int
	Overlap int
}

// Rect is one drawn rectangle: its kind or span id, lane, SVG geometry,
// the times it stands for (ms) and its centre in the viewport.
type Rect struct {
	Lane int     `json:"lane"`
	Kind string  `json:"kind"`
	Span string  `json:"span"`
	X    float64 `json:"x"`
	W    float64 `json:"w"`
	Y    float64 `json:"y"`
	T0   float64 `json:"t0"`
	T1   float64 `json:"t1"`
	CX   float64 `json:"cx"`
	CY   float64 `json:"cy"`
}

// drawnJS collects the chart's lanes, windows, spans and buckets with
// their SVG geometry and viewport centres.
const drawnJS = `(() => {
  const c = document.getElementById("chart");
  const rect = (e) => { const b = e.getBoundingClientRect(); return {
    lane: Number(e.closest("g.lane").dataset.lane), kind: e.dataset.kind || "", span: e.dataset.span || "",
    x: Number(e.getAttribute("x")), w: Number(e.getAttribute("width")), y: Number(e.getAttribute("y")),
    t0: Number(e.dataset.t0), t1: Number(e.dataset.t1), cx: b.left + b.width / 2, cy: b.top + b.height / 2 }; };
  return {
    fromMs: Number(c.dataset.fromMs), toMs: Number(c.dataset.toMs), plotX: Number(c.dataset.plotX), plotW: Number(c.dataset.plotW),
    mode: c.dataset.mode,
    Lanes: [...c.querySelectorAll("g.lane")].map((g) => g.dataset.name),
    Windows: [...c.querySelectorAll("rect.win")].map(rect),
    Spans: [...c.querySelectorAll("rect.span")].map(rect),
    Buckets: c.querySelectorAll("rect.bucket").length,
    Overlap: c.querySelectorAll("rect.overlap").length,
  };
})()`

// XOf is where the page should draw Unix-ns t.
func (d Drawn) XOf(t int64) float64 {
	ms := float64(t/1e6) + float64(t%1e6)/1e6
	return d.PlotX + (ms-d.FromMs)/(d.ToMs-d.FromMs)*d.PlotW
}

// ReadDrawn reads what the page in b has drawn.
func ReadDrawn(t testing.TB, b *cdptest.Browser) Drawn {
	t.Helper()
	var d Drawn
	if err := b.Eval(drawnJS, &d); err != nil {
		t.Fatal(err)
	}
	return d
}
