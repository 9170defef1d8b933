package timeline // import "github.com/otelcol-ai/otelcol-ai/pkg/timeline"

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"strings"
	"time"
)

var (
	//go:embed page/index.html
	pageHTML string
	//go:embed page/timeline.js
	pageJS string
	//go:embed page/timeline.css
	pageCSS string
)

// PageOptions say how the page gets its data.
type PageOptions struct {
	// Title heads the page.
	Title string
	// API is the snapshot endpoint, relative to the page, for a live page.
	API string
	// Poll is how often a visible live page asks for a snapshot.
	Poll time.Duration
	// Last is the range a live page starts with.
	Last time.Duration
	// MaxWindows is the most windows the embedded page draws one by one
	// before summarising (a live page leaves that to the API).
	MaxWindows int
	// Data, when set, is embedded and the page is static.
	Data *Snapshot
}

type pageConfig struct {
	Live       bool      `json:"live"`
	API        string    `json:"api,omitempty"`
	PollMs     int64     `json:"pollMs,omitempty"`
	Last       int64     `json:"last,omitempty"`
	MaxWindows int       `json:"maxWindows"`
	Data       *Snapshot `json:"data,omitempty"`
}

// Render writes the page, self-contained: its script, style and (static)
// data inline, nothing fetched from anywhere but the API.
func Render(w io.Writer, opt PageOptions) error {
	cfg := pageConfig{Live: opt.Data == nil, API: opt.API, PollMs: opt.Poll.Milliseconds(),
		Last: opt.Last.Milliseconds(), MaxWindows: opt.MaxWindows, Data: opt.Data}
	if cfg.MaxWindows <= 0 {
		cfg.MaxWindows = 5000
	}
	var conf bytes.Buffer
	// json.Encoder escapes <, > and & as \u003c…, so nothing in the data
	// can close the script element.
	if err := json.NewEncoder(&conf).Encode(cfg); err != nil {
		return fmt.Errorf("timeline: page config: %w", err)
	}
	title := opt.Title
	if title == "" {
		title = "timeline"
	}
	r := strings.NewReplacer("{{TITLE}}", html.EscapeString(title), "{{CSS}}", pageCSS, "{{JS}}", pageJS,
		"{{CONFIG}}", strings.TrimSpace(conf.String()))
	_, err := r.WriteString(w, pageHTML)
	return err
}
