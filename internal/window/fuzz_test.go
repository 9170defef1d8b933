package window

import (
	"testing"

	"go.opentelemetry.io/collector/pdata/plog"
)

// FuzzDecode feeds Decode every record of arbitrary OTLP log payloads: it
// must never panic, and whatever it accepts must survive a re-encode.
func FuzzDecode(f *testing.F) {
	seed := plog.NewLogs()
	lrs := seed.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords()
	_ = Encode(Window{Kind: KindPythonGILWait, Start: start, Duration: 100, ThreadID: 3, ThreadName: "t",
		Attributes: map[string]any{AttrPythonGILWaitCause: GILWaitCauseRestore}}, lrs.AppendEmpty())
	_ = Encode(Window{Kind: KindJVMGCPause, Start: start, Duration: 1, Attributes: map[string]any{AttrJVMGCID: int64(1)}}, lrs.AppendEmpty())
	lrs.AppendEmpty().Body().SetStr("not a window")
	var m plog.ProtoMarshaler
	data, err := m.MarshalLogs(seed)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(data)
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		var u plog.ProtoUnmarshaler
		logs, err := u.UnmarshalLogs(data)
		if err != nil {
			return
		}
		for _, rl := range logs.ResourceLogs().All() {
			for _, sl := range rl.ScopeLogs().All() {
				for _, lr := range sl.LogRecords().All() {
					w, err := Decode(lr)
					if err != nil {
						continue
					}
					again := plog.NewLogRecord()
					if err := Encode(w, again); err != nil {
						t.Fatalf("decoded %+v but cannot encode it: %v", w, err)
					}
					w2, err := Decode(again)
					if err != nil {
						t.Fatalf("re-decode: %v", err)
					}
					if w2.Kind != w.Kind || w2.Start != w.Start || w2.Duration != w.Duration || w2.ThreadID != w.ThreadID || w2.ThreadName != w.ThreadName || len(w2.Attributes) != len(w.Attributes) {
						t.Fatalf("round trip changed %+v into %+v", w, w2)
					}
				}
			}
		}
	})
}
