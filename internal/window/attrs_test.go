package window

import (
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
)

// TestAttrs: an int attribute is read from an int or a decimal string (a
// pid from OTLP JSON), nothing else; a string attribute only from a
// string.
func TestAttrs(t *testing.T) {
	attrs := pcommon.NewMap()
	attrs.PutInt("int", 42)
	attrs.PutStr("decimal", "-7")
	attrs.PutStr("word", "forty")
	attrs.PutDouble("double", 4.2)
	attrs.PutBool("bool", true)
	for _, c := range []struct {
		key     string
		wantInt int64
		wantOK  bool
		wantStr string
	}{
		{"int", 42, true, ""},
		{"decimal", -7, true, "-7"},
		{"word", 0, false, "forty"},
		{"double", 0, false, ""},
		{"bool", 0, false, ""},
		{"absent", 0, false, ""},
	} {
		if got, ok := IntAttr(attrs, c.key); got != c.wantInt || ok != c.wantOK {
			t.Errorf("IntAttr(%q) = %d, %v; want %d, %v", c.key, got, ok, c.wantInt, c.wantOK)
		}
		if got := StrAttr(attrs, c.key); got != c.wantStr {
			t.Errorf("StrAttr(%q) = %q, want %q", c.key, got, c.wantStr)
		}
	}
}
