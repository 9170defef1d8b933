package window

import (
	"strconv"

	"go.opentelemetry.io/collector/pdata/pcommon"
)

// StrAttr returns the string attribute key of attrs, "" when it is absent
// or not a string.
func StrAttr(attrs pcommon.Map, key string) string {
	v, ok := attrs.Get(key)
	if !ok || v.Type() != pcommon.ValueTypeStr {
		return ""
	}
	return v.Str()
}

// IntAttr returns the int attribute key of attrs, also from a decimal
// string: process.pid is an int by the semantic conventions, but OTLP JSON
// and some SDKs send it as a string.
func IntAttr(attrs pcommon.Map, key string) (int64, bool) {
	v, ok := attrs.Get(key)
	if !ok {
		return 0, false
	}
	switch v.Type() {
	case pcommon.ValueTypeInt:
		return v.Int(), true
	case pcommon.ValueTypeStr:
		i, err := strconv.ParseInt(v.Str(), 10, 64)
		return i, err == nil
	}
	return 0, false
}
