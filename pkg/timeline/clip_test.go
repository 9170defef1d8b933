package timeline

import (
	"strings"
	"testing"
	"unicode/utf8"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otelcol-ai/otelcol-ai/internal/window"
)

func TestClipBoundsTenantStrings(t *testing.T) {
	for _, s := range []string{"", "short", strings.Repeat("x", MaxText), strings.Repeat("é", MaxText), strings.Repeat("a", 1<<20)} {
		got := Clip(s)
		if len(got) > MaxText {
			t.Errorf("Clip(%d bytes) = %d bytes, want at most %d", len(s), len(got), MaxText)
		}
		if !utf8.ValidString(got) {
			t.Errorf("Clip(%d bytes of %q...) is not valid UTF-8", len(s), s[:min(len(s), 4)])
		}
		if len(s) <= MaxText && got != s {
			t.Errorf("Clip(%q) = %q, want it unchanged", s, got)
		}
	}
}

// TestTenantStringsAreClipped: a span name, a pod name, a GC cause and
// the inference attributes a workload sends are kept bounded.
func TestTenantStringsAreClipped(t *testing.T) {
	huge := strings.Repeat("z", 1<<20)
	sp := ptrace.NewSpan()
	sp.SetName(huge)
	for i := range 1000 {
		sp.Attributes().PutStr("inference.x"+strings.Repeat("k", i%3)+string(rune('a'+i%26))+strings.Repeat("y", i), huge)
	}
	s := SpanOf(sp)
	if len(s.Name) > MaxText {
		t.Errorf("span name kept %d bytes", len(s.Name))
	}
	if len(s.Scores) > MaxScores {
		t.Errorf("%d inference attributes kept, want at most %d", len(s.Scores), MaxScores)
	}
	for k, v := range s.Scores {
		if len(k) > MaxText || len(v.(string)) > MaxText {
			t.Errorf("score %d bytes = %d bytes kept", len(k), len(v.(string)))
		}
	}
	attrs := pcommon.NewMap()
	attrs.PutStr("k8s.pod.name", huge)
	var l Lane
	FillLane(&l, attrs)
	if len(l.PodName) > MaxText {
		t.Errorf("pod name kept %d bytes", len(l.PodName))
	}
	detail, cause := WindowDetail(window.Window{Kind: window.KindJVMGCPause, Attributes: map[string]any{
		window.AttrJVMGCName: huge, window.AttrJVMGCCause: huge}})
	if len(detail) > MaxText || len(cause) > MaxText {
		t.Errorf("GC name and cause kept %d and %d bytes", len(detail), len(cause))
	}
}
