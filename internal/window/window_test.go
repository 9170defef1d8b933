package window

import (
	"errors"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
)

const start = int64(1_764_410_400_123_456_789) // 2025-11-29T10:00:00.123456789Z

func TestEncodeDecodeRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		in   Window
		want Window // zero means "same as in"
	}{
		{
			name: "gil released with thread",
			in:   Window{Kind: KindPythonGILReleased, Start: start, Duration: 2 * time.Millisecond, ThreadID: 4242, ThreadName: "worker-1"},
		},
		{
			name: "gil wait with cause",
			in: Window{Kind: KindPythonGILWait, Start: start, Duration: 150 * time.Microsecond, ThreadID: 7,
				Attributes: map[string]any{AttrPythonGILWaitCause: GILWaitCauseSwitch}},
		},
		{
			name: "python gc generation widened to int64",
			in:   Window{Kind: KindPythonGCPause, Start: start, Duration: time.Millisecond, ThreadID: 1, Attributes: map[string]any{AttrPythonGCGeneration: 2}},
			want: Window{Kind: KindPythonGCPause, Start: start, Duration: time.Millisecond, ThreadID: 1, Attributes: map[string]any{AttrPythonGCGeneration: int64(2)}},
		},
		{
			name: "jvm gc pause with every gc attribute",
			in: Window{Kind: KindJVMGCPause, Start: start, Duration: 3456 * time.Microsecond, Attributes: map[string]any{
				AttrJVMGCName: "G1 Young", AttrJVMGCCause: "G1 Evacuation Pause", AttrJVMGCID: int64(12), AttrSamplingRatio: 0.25,
			}},
		},
		{
			name: "whole-process safepoint of zero length",
			in:   Window{Kind: KindJVMSafepoint, Start: 1, Attributes: map[string]any{AttrJVMSafepointID: uint32(9), AttrJVMVMOperation: "G1CollectForAllocation"}},
			want: Window{Kind: KindJVMSafepoint, Start: 1, Attributes: map[string]any{AttrJVMSafepointID: int64(9), AttrJVMVMOperation: "G1CollectForAllocation"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lr := plog.NewLogRecord()
			if err := Encode(tt.in, lr); err != nil {
				t.Fatalf("Encode: %v", err)
			}
			if got := lr.EventName(); got != string(tt.in.Kind) {
				t.Errorf("EventName = %q, want %q", got, tt.in.Kind)
			}
			if got := int64(lr.Timestamp()); got != tt.in.Start {
				t.Errorf("Timestamp = %d, want %d", got, tt.in.Start)
			}
			if d, _ := lr.Attributes().Get(AttrDuration); d.Int() != int64(tt.in.Duration) {
				t.Errorf("%s = %d, want %d", AttrDuration, d.Int(), tt.in.Duration)
			}
			got, err := Decode(lr)
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			want := tt.want
			if want.Kind == "" {
				want = tt.in
			}
			assertWindow(t, got, want)
		})
	}
}

func assertWindow(t *testing.T, got, want Window) {
	t.Helper()
	if got.Kind != want.Kind || got.Start != want.Start || got.Duration != want.Duration ||
		got.ThreadID != want.ThreadID || got.ThreadName != want.ThreadName {
		t.Errorf("window = %+v, want %+v", got, want)
	}
	if len(got.Attributes) != len(want.Attributes) {
		t.Fatalf("attributes = %v, want %v", got.Attributes, want.Attributes)
	}
	for k, v := range want.Attributes {
		if got.Attributes[k] != v {
			t.Errorf("attribute %s = %#v, want %#v", k, got.Attributes[k], v)
		}
	}
}

func TestEndIsStartPlusDuration(t *testing.T) {
	w := Window{Start: 1000, Duration: 250}
	if w.End() != 1250 {
		t.Fatalf("End = %d, want 1250", w.End())
	}
}

func TestKinds(t *testing.T) {
	want := []Kind{"jvm.safepoint", "jvm.gc.pause", "python.gil.released", "python.gil.wait", "python.gc.pause"}
	got := Kinds()
	if len(got) != len(want) {
		t.Fatalf("Kinds = %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] || !got[i].Known() {
			t.Errorf("Kinds[%d] = %q (known %v), want %q", i, got[i], got[i].Known(), want[i])
		}
	}
	got[0] = "mutated"
	if Kinds()[0] != KindJVMSafepoint {
		t.Error("Kinds returned the package's own slice")
	}
	if Kind("jvm.safepoints").Known() {
		t.Error("a misspelt kind is known")
	}
}

func TestEncodeRejects(t *testing.T) {
	tests := []struct {
		name     string
		in       Window
		wantErr  error
		wantAttr string
	}{
		{"unknown kind", Window{Kind: "python.gil.held", Start: start}, ErrUnknownKind, ""},
		{"zero start", Window{Kind: KindJVMSafepoint}, ErrMalformed, ""},
		{"negative duration", Window{Kind: KindJVMSafepoint, Start: start, Duration: -1}, ErrMalformed, AttrDuration},
		{"attribute shadows a field", Window{Kind: KindJVMSafepoint, Start: start, Attributes: map[string]any{AttrThreadID: int64(1)}}, ErrMalformed, AttrThreadID},
		{"unsupported value type", Window{Kind: KindJVMSafepoint, Start: start, Attributes: map[string]any{"x": struct{}{}}}, ErrMalformed, "x"},
		{"uint64 overflow", Window{Kind: KindJVMSafepoint, Start: start, Attributes: map[string]any{"x": uint64(1 << 63)}}, ErrMalformed, "x"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Encode(tt.in, plog.NewLogRecord())
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Encode error = %v, want %v", err, tt.wantErr)
			}
			var we *Error
			if !errors.As(err, &we) || we.Attribute != tt.wantAttr {
				t.Fatalf("error %#v, want *Error naming attribute %q", err, tt.wantAttr)
			}
		})
	}
}

func TestDecodeRejects(t *testing.T) {
	tests := []struct {
		name     string
		build    func(lr plog.LogRecord)
		wantErr  error
		wantAttr string
	}{
		{"plain log line", func(lr plog.LogRecord) { lr.Body().SetStr("hello") }, ErrNotWindow, ""},
		{"event without duration", func(lr plog.LogRecord) {
			lr.SetEventName("device.xid")
			lr.SetTimestamp(1)
		}, ErrNotWindow, AttrDuration},
		{"newer kind", func(lr plog.LogRecord) {
			lr.SetEventName("python.gil.held")
			lr.SetTimestamp(1)
			lr.Attributes().PutInt(AttrDuration, 5)
		}, ErrUnknownKind, ""},
		{"duration as string", func(lr plog.LogRecord) {
			lr.SetEventName(string(KindJVMSafepoint))
			lr.SetTimestamp(1)
			lr.Attributes().PutStr(AttrDuration, "5ms")
		}, ErrMalformed, AttrDuration},
		{"negative duration", func(lr plog.LogRecord) {
			lr.SetEventName(string(KindJVMSafepoint))
			lr.SetTimestamp(1)
			lr.Attributes().PutInt(AttrDuration, -5)
		}, ErrMalformed, AttrDuration},
		{"no timestamp", func(lr plog.LogRecord) {
			lr.SetEventName(string(KindJVMSafepoint))
			lr.Attributes().PutInt(AttrDuration, 5)
		}, ErrMalformed, ""},
		{"thread id as string", func(lr plog.LogRecord) {
			lr.SetEventName(string(KindPythonGILWait))
			lr.SetTimestamp(1)
			lr.Attributes().PutInt(AttrDuration, 5)
			lr.Attributes().PutStr(AttrThreadID, "12")
		}, ErrMalformed, AttrThreadID},
		{"thread name as int", func(lr plog.LogRecord) {
			lr.SetEventName(string(KindPythonGILWait))
			lr.SetTimestamp(1)
			lr.Attributes().PutInt(AttrDuration, 5)
			lr.Attributes().PutInt(AttrThreadName, 12)
		}, ErrMalformed, AttrThreadName},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lr := plog.NewLogRecord()
			tt.build(lr)
			_, err := Decode(lr)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Decode error = %v, want %v", err, tt.wantErr)
			}
			var we *Error
			if !errors.As(err, &we) || we.Attribute != tt.wantAttr {
				t.Fatalf("error %#v, want *Error naming attribute %q", err, tt.wantAttr)
			}
			if we.Error() == "" {
				t.Fatal("empty error text")
			}
		})
	}
}

func TestEncodeKeepsOtherAttributesAndObservedTimestamp(t *testing.T) {
	lr := plog.NewLogRecord()
	lr.SetObservedTimestamp(pcommon.Timestamp(start + 5))
	lr.Attributes().PutStr("note", "kept")
	if err := Encode(Window{Kind: KindPythonGILWait, Start: start, Duration: 10}, lr); err != nil {
		t.Fatal(err)
	}
	if int64(lr.ObservedTimestamp()) != start+5 {
		t.Errorf("ObservedTimestamp changed to %d", lr.ObservedTimestamp())
	}
	w, err := Decode(lr)
	if err != nil {
		t.Fatal(err)
	}
	if w.Attributes["note"] != "kept" {
		t.Errorf("attributes = %v, want note=kept", w.Attributes)
	}
}
