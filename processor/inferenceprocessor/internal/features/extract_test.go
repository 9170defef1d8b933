package features

import (
	"fmt"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// spanFromJSON builds a span from OTLP JSON attributes, which, unlike the
// Put functions, can repeat a key.
func spanFromJSON(t *testing.T, resourceAttrs, attrs string) (pcommon.Resource, ptrace.Span) {
	t.Helper()
	doc := `{"resourceSpans":[{"resource":{"attributes":[` + resourceAttrs + `]},` +
		`"scopeSpans":[{"spans":[{"traceId":"01000000000000000000000000000000","spanId":"0100000000000000",` +
		`"startTimeUnixNano":"1000","endTimeUnixNano":"3000","attributes":[` + attrs + `]}]}]}]}`
	td, err := (&ptrace.JSONUnmarshaler{}).UnmarshalTraces([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	rs := td.ResourceSpans().At(0)
	return rs.Resource(), rs.ScopeSpans().At(0).Spans().At(0)
}

func kv(key, value string) string { return `{"key":"` + key + `","value":` + value + `}` }

func assertRow(t *testing.T, e *Extractor, row, want []float32) {
	t.Helper()
	for i := range want {
		if row[i] != want[i] {
			t.Errorf("column %d (%s) = %v, want %v", i, e.Column(i).Name(), row[i], want[i])
		}
	}
}

func TestDuplicateKeysFirstCounts(t *testing.T) {
	e, err := New([]Column{
		{Source: SourceAttribute, Key: "a"},
		{Source: SourceAttribute, Key: "b", HasDefault: true, Default: -1},
	}, false)
	if err != nil {
		t.Fatal(err)
	}
	// "a" twice: the first, 1, counts. "b" first as a word (not a number,
	// so missing: the default), then as a number, which does not count.
	res, span := spanFromJSON(t, "", strings.Join([]string{
		kv("a", `{"intValue":"1"}`), kv("b", `{"stringValue":"slow"}`),
		kv("a", `{"intValue":"2"}`), kv("b", `{"intValue":"5"}`),
	}, ","))
	if span.Attributes().Len() != 4 {
		t.Fatalf("span has %d attributes, want the 4 with repeats", span.Attributes().Len())
	}
	row := make([]float32, e.Width())
	if _, ok := e.Span(readResource(e, res), span, row); !ok {
		t.Fatal("row not complete")
	}
	assertRow(t, e, row, []float32{1, -1})
}

func TestColumnsSharingAKey(t *testing.T) {
	e, _ := New([]Column{
		{Source: SourceAttribute, Key: "ms", Scale: 1e-3},
		{Source: SourceAttribute, Key: "ms"},
		{Source: SourceAttribute, Key: "ms", Offset: 1},
		{Source: SourceResourceAttribute, Key: "ms", Scale: 2},
	}, false)
	res := pcommon.NewResource()
	res.Attributes().PutInt("ms", 10)
	span := ptrace.NewSpan()
	span.Attributes().PutInt("ms", 2000)
	row := make([]float32, e.Width())
	if _, ok := e.Span(readResource(e, res), span, row); !ok {
		t.Fatal("row not complete")
	}
	assertRow(t, e, row, []float32{2, 2000, 2001, 20})
}

func TestKeysOfTheSameLength(t *testing.T) {
	e, _ := New([]Column{
		{Source: SourceAttribute, Key: "ab"},
		{Source: SourceAttribute, Key: "cd"},
		{Source: SourceAttribute, Key: "abc"},
	}, false)
	span := ptrace.NewSpan()
	_ = span.Attributes().FromRaw(map[string]any{"cd": 2, "ab": 1, "abc": 3, "ef": 9, "a": 8, "abcdef": 7})
	row := make([]float32, e.Width())
	if _, ok := e.Span(readResource(e, pcommon.NewResource()), span, row); !ok {
		t.Fatal("row not complete")
	}
	assertRow(t, e, row, []float32{1, 2, 3})
}

func TestResourceColumns(t *testing.T) {
	e, _ := New([]Column{
		{Source: SourceResourceAttribute, Key: "cpus", Scale: 0.5},
		{Source: SourceResourceAttribute, Key: "zone", HasDefault: true, Default: 7},
		{Source: SourceAttribute, Key: "x"},
	}, false)
	span := ptrace.NewSpan()
	span.Attributes().PutBool("x", true)
	row := make([]float32, e.Width())

	// One Resource read for one resource and then another: nothing of the
	// first remains.
	var r Resource
	first := pcommon.NewResource()
	first.Attributes().PutStr("cpus", "8")
	first.Attributes().PutInt("zone", 3)
	e.ReadResource(first, &r)
	if _, ok := e.Span(&r, span, row); !ok {
		t.Fatal("row not complete")
	}
	assertRow(t, e, row, []float32{4, 3, 1})

	second := pcommon.NewResource()
	second.Attributes().PutInt("cpus", 2)
	e.ReadResource(second, &r)
	if _, ok := e.Span(&r, span, row); !ok {
		t.Fatal("row not complete")
	}
	assertRow(t, e, row, []float32{1, 7, 1})

	// The resource is read once for all of its items, and the span's own
	// attributes of the same name are not the resource's.
	third := pcommon.NewResource()
	e.ReadResource(third, &r)
	span.Attributes().PutInt("cpus", 16)
	if missing, ok := e.Span(&r, span, row); ok || missing != 0 {
		t.Fatalf("missing %d ok %v, want column 0 missing", missing, ok)
	}
}

func TestFirstMissingColumn(t *testing.T) {
	e, _ := New([]Column{
		{Source: SourceDuration},
		{Source: SourceAttribute, Key: "has default", HasDefault: true},
		{Source: SourceResourceAttribute, Key: "absent"},
		{Source: SourceAttribute, Key: "absent too"},
	}, false)
	row := make([]float32, e.Width())
	if missing, ok := e.Span(readResource(e, pcommon.NewResource()), ptrace.NewSpan(), row); ok || missing != 2 {
		t.Fatalf("missing %d ok %v, want column 2 missing", missing, ok)
	}
	span := ptrace.NewSpan()
	span.Attributes().PutStr("absent too", "Inf")
	res := pcommon.NewResource()
	res.Attributes().PutDouble("absent", 1)
	if missing, ok := e.Span(readResource(e, res), span, row); ok || missing != 3 {
		t.Fatalf("missing %d ok %v, want column 3 missing (Inf is not a usable number)", missing, ok)
	}
}

func TestManyKeys(t *testing.T) {
	// More keys than the extractor tracks without allocating.
	const n = 300
	columns := make([]Column, n)
	span := ptrace.NewSpan()
	for i := range columns {
		key := fmt.Sprintf("k%d", i)
		columns[i] = Column{Source: SourceAttribute, Key: key, HasDefault: true, Default: -1}
		if i%3 != 0 {
			span.Attributes().PutInt(key, int64(i))
		}
	}
	e, _ := New(columns, false)
	row := make([]float32, e.Width())
	if _, ok := e.Span(readResource(e, pcommon.NewResource()), span, row); !ok {
		t.Fatal("row not complete")
	}
	for i, v := range row {
		want := float32(i)
		if i%3 == 0 {
			want = -1
		}
		if v != want {
			t.Errorf("column %d = %v, want %v", i, v, want)
		}
	}
}

func TestLogRowWithResource(t *testing.T) {
	e, _ := New([]Column{
		{Source: SourceResourceAttribute, Key: "r", Offset: 1},
		{Source: SourceAttribute, Key: "x", HasDefault: true, Default: 9},
		{Source: SourceDuration, HasDefault: true, Default: 5}, // refused by New for logs; reads as missing
	}, true)
	res := pcommon.NewResource()
	res.Attributes().PutDouble("r", 0.5)
	row := make([]float32, e.Width())
	if _, ok := e.Log(readResource(e, res), plog.NewLogRecord(), row); !ok {
		t.Fatal("row not complete")
	}
	assertRow(t, e, row, []float32{1.5, 9, 5})
}

// referenceSpan is the extraction one column at a time with Map.Get, which
// Span must match.
func referenceSpan(columns []Column, res pcommon.Resource, span ptrace.Span, row []float32) (int, bool) {
	for i, c := range columns {
		var attrs pcommon.Map
		switch c.Source {
		case SourceAttribute:
			attrs = span.Attributes()
		case SourceResourceAttribute:
			attrs = res.Attributes()
		case SourceDuration:
			row[i] = c.apply(float64(int64(span.EndTimestamp()) - int64(span.StartTimestamp())))
			continue
		default:
			return i, false
		}
		v, ok := attrs.Get(c.Key)
		var f float64
		if ok {
			f, ok = number(v)
		}
		switch {
		case ok:
			row[i] = c.apply(f)
		case c.HasDefault:
			row[i] = c.Default
		default:
			return i, false
		}
	}
	return 0, true
}

func TestSpanMatchesOneLookupPerColumn(t *testing.T) {
	keys := []string{"a", "b", "bb", "ab", "abc", "runtime.overlap.x", "runtime.overlap.y"}
	values := []string{`{"intValue":"3"}`, `{"doubleValue":2.5}`, `{"boolValue":true}`, `{"stringValue":"4.5"}`,
		`{"stringValue":"word"}`, `{"stringValue":"NaN"}`, `{"arrayValue":{}}`}
	var columns []Column
	for i, k := range keys {
		source := SourceAttribute
		if i%3 == 2 {
			source = SourceResourceAttribute
		}
		columns = append(columns,
			Column{Source: source, Key: k, HasDefault: i != 1, Default: float32(-i), Scale: float64(i), Offset: 0.25},
			Column{Source: SourceDuration, Scale: 1e-3})
	}
	e, _ := New(columns, false)
	pick := func(seed, n int) string {
		var kvs []string
		for j := range n {
			x := seed*31 + j*17
			kvs = append(kvs, kv(keys[x%len(keys)], values[(x/len(keys))%len(values)]))
		}
		return strings.Join(kvs, ",")
	}
	complete := 0
	for seed := range 200 {
		res, span := spanFromJSON(t, pick(seed+1000, seed%5), pick(seed, seed%9))
		got, want := make([]float32, e.Width()), make([]float32, e.Width())
		gotMissing, gotOK := e.Span(readResource(e, res), span, got)
		wantMissing, wantOK := referenceSpan(columns, res, span, want)
		if gotOK != wantOK || gotMissing != wantMissing {
			t.Fatalf("seed %d: missing %d ok %v, want %d %v", seed, gotMissing, gotOK, wantMissing, wantOK)
		}
		if wantOK {
			complete++
			assertRow(t, e, got, want)
		}
	}
	if complete < 20 || complete > 180 {
		t.Errorf("%d of 200 rows complete: the cases do not cover both outcomes", complete)
	}
	t.Logf("%d of 200 rows complete", complete)
}
