// Package cdptest drives headless Chromium (Debian's chromium package) over
// the Chrome DevTools Protocol on --remote-debugging-pipe, for tests of
// pages: navigate, evaluate, move the mouse, take screenshots, and collect
// console errors and uncaught exceptions. Messages are JSON, each ended by
// a NUL byte, on fds 3 (to the browser) and 4 (from it); no WebSocket, no
// dependency.
package cdptest // import "github.com/otelcol-ai/otelcol-ai/internal/cdptest"

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

// Binary returns the Chromium to run: $CHROMIUM, else chromium on PATH. It
// skips the test when there is none, and fails it under CI.
func Binary(t testing.TB) string {
	t.Helper()
	if b := os.Getenv("CHROMIUM"); b != "" {
		return b
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	msg := "cdptest: no chromium on PATH (make test-deps installs Debian's chromium)"
	if os.Getenv("CI") != "" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// Browser is one headless Chromium with one page attached.
type Browser struct {
	cmd     *exec.Cmd
	toB     *os.File
	fromB   *os.File
	session string

	mu      sync.Mutex
	nextID  int64
	waiting map[int64]chan reply
	events  []Event
	notify  chan struct{}
	readErr error
	done    chan struct{}
}

type reply struct {
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// Event is one protocol event.
type Event struct {
	Method    string          `json:"method"`
	Params    json.RawMessage `json:"params"`
	SessionID string          `json:"sessionId"`
}

// Start launches Chromium at width×height and attaches to a blank page;
// the browser is closed when the test ends.
func Start(t testing.TB, width, height int) *Browser {
	t.Helper()
	bin := Binary(t)
	toR, toW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	fromR, fromW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
		"--no-default-browser-check", "--disable-extensions", "--disable-background-networking",
		"--disable-dev-shm-usage", "--remote-debugging-pipe", "--user-data-dir="+t.TempDir(),
		fmt.Sprintf("--window-size=%d,%d", width, height), "about:blank")
	cmd.ExtraFiles = []*os.File{toR, fromW} // fd 3: it reads; fd 4: it writes
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("cdptest: start %s: %v", bin, err)
	}
	_ = toR.Close()
	_ = fromW.Close()
	b := &Browser{cmd: cmd, toB: toW, fromB: fromR, waiting: map[int64]chan reply{}, notify: make(chan struct{}, 1), done: make(chan struct{})}
	go b.read()
	t.Cleanup(func() {
		_ = b.toB.Close()
		exited := make(chan struct{})
		go func() { _ = cmd.Wait(); close(exited) }()
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		_ = b.fromB.Close()
		<-b.done
		if t.Failed() {
			t.Logf("chromium stderr:\n%s", tail(stderr.String(), 3000))
		}
	})
	var target struct {
		TargetID string `json:"targetId"`
	}
	if err := b.call("", "Target.createTarget", map[string]any{"url": "about:blank"}, &target); err != nil {
		t.Fatalf("cdptest: %v\n%s", err, tail(stderr.String(), 2000))
	}
	var attached struct {
		SessionID string `json:"sessionId"`
	}
	if err := b.call("", "Target.attachToTarget", map[string]any{"targetId": target.TargetID, "flatten": true}, &attached); err != nil {
		t.Fatal(err)
	}
	b.session = attached.SessionID
	for _, m := range []string{"Runtime.enable", "Log.enable", "Page.enable"} {
		if err := b.Call(m, nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Call("Emulation.setDeviceMetricsOverride", map[string]any{
		"width": width, "height": height, "deviceScaleFactor": 1, "mobile": false,
	}, nil); err != nil {
		t.Fatal(err)
	}
	return b
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

func (b *Browser) read() {
	defer close(b.done)
	r := bufio.NewReaderSize(b.fromB, 1<<20)
	for {
		msg, err := r.ReadBytes(0)
		if err != nil {
			b.mu.Lock()
			b.readErr = err
			for id, ch := range b.waiting {
				close(ch)
				delete(b.waiting, id)
			}
			b.mu.Unlock()
			return
		}
		msg = msg[:len(msg)-1]
		var m struct {
			ID int64 `json:"id"`
			reply
			Event
		}
		if err := json.Unmarshal(msg, &m); err != nil {
			continue
		}
		b.mu.Lock()
		if m.ID != 0 {
			if ch, ok := b.waiting[m.ID]; ok {
				ch <- m.reply
				delete(b.waiting, m.ID)
			}
		} else if m.Method != "" {
			b.events = append(b.events, m.Event)
			select {
			case b.notify <- struct{}{}:
			default:
			}
		}
		b.mu.Unlock()
	}
}

// Call sends a command to the page and decodes its result into out (when
// not nil).
func (b *Browser) Call(method string, params, out any) error {
	return b.call(b.session, method, params, out)
}

func (b *Browser) call(session, method string, params, out any) error {
	b.mu.Lock()
	if b.readErr != nil {
		b.mu.Unlock()
		return fmt.Errorf("cdptest: %s: browser gone: %w", method, b.readErr)
	}
	b.nextID++
	id := b.nextID
	ch := make(chan reply, 1)
	b.waiting[id] = ch
	b.mu.Unlock()
	msg := map[string]any{"id": id, "method": method}
	if params != nil {
		msg["params"] = params
	}
	if session != "" {
		msg["sessionId"] = session
	}
	data, err := json.Marshal(msg)
	if err != nil {
		return err
	}
	if _, err := b.toB.Write(append(data, 0)); err != nil {
		return fmt.Errorf("cdptest: %s: %w", method, err)
	}
	select {
	case r, ok := <-ch:
		if !ok {
			return fmt.Errorf("cdptest: %s: browser gone", method)
		}
		if r.Error != nil {
			return fmt.Errorf("cdptest: %s: %s (%d)", method, r.Error.Message, r.Error.Code)
		}
		if out != nil {
			return json.Unmarshal(r.Result, out)
		}
		return nil
	case <-time.After(60 * time.Second):
		return fmt.Errorf("cdptest: %s: no answer in 60s", method)
	}
}

// Navigate loads url and waits for its load event.
func (b *Browser) Navigate(ctx context.Context, url string) error {
	b.mu.Lock()
	seen := len(b.events)
	b.mu.Unlock()
	var nav struct {
		ErrorText string `json:"errorText"`
	}
	if err := b.Call("Page.navigate", map[string]any{"url": url}, &nav); err != nil {
		return err
	}
	if nav.ErrorText != "" {
		return fmt.Errorf("cdptest: navigate %s: %s", url, nav.ErrorText)
	}
	_, err := b.WaitEvent(ctx, "Page.loadEventFired", seen)
	return err
}

// WaitEvent waits for an event named method among those from index from on.
func (b *Browser) WaitEvent(ctx context.Context, method string, from int) (Event, error) {
	for {
		b.mu.Lock()
		for _, e := range b.events[min(from, len(b.events)):] {
			if e.Method == method {
				b.mu.Unlock()
				return e, nil
			}
		}
		b.mu.Unlock()
		select {
		case <-b.notify:
		case <-ctx.Done():
			return Event{}, fmt.Errorf("cdptest: waiting for %s: %w", method, ctx.Err())
		}
	}
}

// Eval evaluates a JavaScript expression in the page (awaiting a promise)
// and decodes its value, which must be JSON-serialisable, into out.
func (b *Browser) Eval(expr string, out any) error {
	var r struct {
		Result struct {
			Value json.RawMessage `json:"value"`
		} `json:"result"`
		ExceptionDetails *struct {
			Text      string `json:"text"`
			Exception struct {
				Description string `json:"description"`
			} `json:"exception"`
		} `json:"exceptionDetails"`
	}
	if err := b.Call("Runtime.evaluate", map[string]any{"expression": expr, "returnByValue": true, "awaitPromise": true}, &r); err != nil {
		return err
	}
	if r.ExceptionDetails != nil {
		return fmt.Errorf("cdptest: %s: %s %s", expr, r.ExceptionDetails.Text, r.ExceptionDetails.Exception.Description)
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(r.Result.Value, out)
}

// MoveMouse moves the mouse to (x, y) in CSS pixels of the viewport.
func (b *Browser) MoveMouse(x, y float64) error {
	return b.Call("Input.dispatchMouseEvent", map[string]any{"type": "mouseMoved", "x": x, "y": y}, nil)
}

// Screenshot returns a PNG of the page, its full height.
func (b *Browser) Screenshot() ([]byte, error) {
	var r struct {
		Data string `json:"data"`
	}
	if err := b.Call("Page.captureScreenshot", map[string]any{"format": "png", "captureBeyondViewport": true}, &r); err != nil {
		return nil, err
	}
	return base64.StdEncoding.DecodeString(r.Data)
}

// Problems returns the console errors, uncaught exceptions and error log
// entries the page produced so far.
func (b *Browser) Problems() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for _, e := range b.events {
		switch e.Method {
		case "Runtime.exceptionThrown":
			out = append(out, "exception: "+string(e.Params))
		case "Runtime.consoleAPICalled":
			var p struct {
				Type string `json:"type"`
			}
			if json.Unmarshal(e.Params, &p) == nil && (p.Type == "error" || p.Type == "assert") {
				out = append(out, "console."+p.Type+": "+string(e.Params))
			}
		case "Log.entryAdded":
			var p struct {
				Entry struct {
					Level string `json:"level"`
					Text  string `json:"text"`
					URL   string `json:"url"`
				} `json:"entry"`
			}
			if json.Unmarshal(e.Params, &p) == nil && p.Entry.Level == "error" {
				out = append(out, "log: "+p.Entry.Text+" "+p.Entry.URL)
			}
		}
	}
	return out
}

// ErrTimeout is returned by Until when the condition did not hold in time.
var ErrTimeout = errors.New("cdptest: condition not met in time")

// Until evaluates a boolean expression every 100 ms until it is true.
func (b *Browser) Until(ctx context.Context, expr string) error {
	for {
		var ok bool
		if err := b.Eval(expr, &ok); err != nil {
			return err
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: %s", ErrTimeout, expr)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
