package features

import (
	"math"
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

func readResource(e *Extractor, res pcommon.Resource) *Resource {
	r := new(Resource)
	e.ReadResource(res, r)
	return r
}

func TestSpanRow(t *testing.T) {
	columns := []Column{
		{Source: SourceDuration, Scale: 1e-6},
		{Source: SourceStatus},
		{Source: SourceKind},
		{Source: SourceAttribute, Key: "int"},
		{Source: SourceAttribute, Key: "double", Offset: 1},
		{Source: SourceAttribute, Key: "bool"},
		{Source: SourceAttribute, Key: "numeric string"},
		{Source: SourceAttribute, Key: "absent", HasDefault: true, Default: -1},
		{Source: SourceAttribute, Key: "word", HasDefault: true, Default: -2},
		{Source: SourceAttribute, Key: "nan", HasDefault: true, Default: -3},
		{Source: SourceResourceAttribute, Key: "host.cpu.count", Scale: 2},
	}
	e, err := New(columns, false)
	if err != nil {
		t.Fatal(err)
	}
	res := pcommon.NewResource()
	res.Attributes().PutInt("host.cpu.count", 8)
	span := ptrace.NewSpan()
	span.SetStartTimestamp(1_000_000_000)
	span.SetEndTimestamp(1_250_000_000)
	span.Status().SetCode(ptrace.StatusCodeError)
	span.SetKind(ptrace.SpanKindServer)
	_ = span.Attributes().FromRaw(map[string]any{
		"int": 7, "double": 2.5, "bool": true, "numeric string": "3.25", "word": "slow", "nan": math.NaN(),
	})
	row := make([]float32, e.Width())
	if _, ok := e.Span(readResource(e, res), span, row); !ok {
		t.Fatal("row not complete")
	}
	want := []float32{250, 2, 2, 7, 3.5, 1, 3.25, -1, -2, -3, 16}
	for i := range want {
		if row[i] != want[i] {
			t.Errorf("column %d (%s) = %v, want %v", i, e.Column(i).Name(), row[i], want[i])
		}
	}
}

func TestMissingWithoutDefault(t *testing.T) {
	e, _ := New([]Column{{Source: SourceDuration}, {Source: SourceAttribute, Key: "need"}}, false)
	row := make([]float32, 2)
	if missing, ok := e.Span(readResource(e, pcommon.NewResource()), ptrace.NewSpan(), row); ok || missing != 1 {
		t.Fatalf("missing %d ok %v, want column 1 missing", missing, ok)
	}
}

func TestLogRow(t *testing.T) {
	e, err := New([]Column{{Source: SourceSeverityNumber}, {Source: SourceAttribute, Key: "x"}}, true)
	if err != nil {
		t.Fatal(err)
	}
	rec := plog.NewLogRecord()
	rec.SetSeverityNumber(plog.SeverityNumberError)
	rec.Attributes().PutDouble("x", 0.5)
	row := make([]float32, 2)
	if _, ok := e.Log(readResource(e, pcommon.NewResource()), rec, row); !ok || row[0] != 17 || row[1] != 0.5 {
		t.Fatalf("row %v ok %v", row, ok)
	}
}

func TestFieldsOfTheOtherSignalAreRefused(t *testing.T) {
	if _, err := New([]Column{{Source: SourceKind}}, true); err == nil {
		t.Error("span kind accepted for logs")
	}
	if _, err := New([]Column{{Source: SourceSeverityNumber}}, false); err == nil {
		t.Error("severity accepted for spans")
	}
}
