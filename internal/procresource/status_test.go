package procresource

import "testing"

func TestStatusField(t *testing.T) {
	status := []byte("Name:\tjava\nUidx:\t7\nUid:\t0\t1001\t0\t0\nRssAnon:\t   61440 kB\r\nThreads:\t23")
	tests := []struct {
		key, want string
		ok        bool
	}{
		{"Name", "java", true},
		{"Uid", "0\t1001\t0\t0", true}, // not Uidx, the line before it
		{"RssAnon", "61440 kB", true},  // blanks and a carriage return trimmed
		{"Threads", "23", true},        // the last line, without a newline
		{"NSpid", "", false},           // no such line
		{"Nam", "", false},             // a key that only starts a line's key
	}
	for _, tt := range tests {
		got, ok := StatusField(status, tt.key)
		if ok != tt.ok || string(got) != tt.want {
			t.Errorf("StatusField(%q): %q, %v; want %q, %v", tt.key, got, ok, tt.want, tt.ok)
		}
	}
}
