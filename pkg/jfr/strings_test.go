package jfr

import "testing"

// Event strings stay encoded in the chunk until read; every encoding must
// read back the same as a decoded string would, also after the reader has
// moved on and when read more than once.
func TestEventStringsReadLazily(t *testing.T) {
	text := func(enc func(*synth)) sample { return sample{start: 1_000_000, text: enc} }
	cases := []struct {
		name string
		s    sample
		want string
	}{
		{"UTF-16, all ASCII", text(func(s *synth) { s.utf16("GC Thread#3 phase") }), "GC Thread#3 phase"},
		{"UTF-16, Latin-1 range", text(func(s *synth) { s.utf16("déjà vu") }), "déjà vu"},
		{"Latin-1, all ASCII", text(func(s *synth) { s.latin1("Allocation Failure") }), "Allocation Failure"},
		{"UTF-8, invalid bytes replaced", text(func(s *synth) { s.utf8("a\xffb") }), "a\uFFFDb"},
		{"null", text(func(s *synth) { s.b = append(s.b, strNull) }), ""},
	}
	samples := make([]sample, len(cases))
	for i, c := range cases {
		samples[i] = c.s
	}
	for _, fixed := range []bool{false, true} {
		c, err := NewChunk(synthChunkOf(fixed, samples), 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		var kept []Value
		er := c.Events()
		for i := 0; er.Next(); i++ {
			v := er.Event().Value("text")
			if got := v.Str(); got != cases[i].want {
				t.Errorf("fixed=%v %s: %q, want %q", fixed, cases[i].name, got, cases[i].want)
			}
			if got := v.Str(); got != cases[i].want {
				t.Errorf("fixed=%v %s read again: %q, want %q", fixed, cases[i].name, got, cases[i].want)
			}
			if null := v.IsNull(); null != (cases[i].name == "null") {
				t.Errorf("fixed=%v %s: IsNull %v", fixed, cases[i].name, null)
			}
			kept = append(kept, v.Clone())
		}
		if er.Err() != nil || len(kept) != len(cases) {
			t.Fatalf("fixed=%v: read %d events (err %v)", fixed, len(kept), er.Err())
		}
		for i, v := range kept {
			if got := v.Str(); got != cases[i].want {
				t.Errorf("fixed=%v %s kept: %q, want %q", fixed, cases[i].name, got, cases[i].want)
			}
		}
	}
}
