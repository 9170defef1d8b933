package jfr

import (
	"encoding/binary"
	"errors"
	"math"
	"runtime"
	"strconv"
	"testing"
	"unicode/utf16"
)

// synth writes small chunks by hand, so that tests cover what no JDK here
// writes (fixed-width integers, every string encoding, pools split over
// checkpoints, 64-bit keys) and fuzzing has small seeds.
type synth struct {
	b     []byte
	fixed bool
}

func (s *synth) varint(v uint64) {
	for i := 0; i < 8; i++ {
		if v < 0x80 {
			s.b = append(s.b, byte(v))
			return
		}
		s.b = append(s.b, byte(v)|0x80)
		v >>= 7
	}
	s.b = append(s.b, byte(v))
}

func (s *synth) int(width int, v uint64) {
	if !s.fixed {
		s.varint(v)
		return
	}
	switch width {
	case 2:
		s.b = binary.BigEndian.AppendUint16(s.b, uint16(v))
	case 4:
		s.b = binary.BigEndian.AppendUint32(s.b, uint32(v))
	default:
		s.b = binary.BigEndian.AppendUint64(s.b, v)
	}
}

func (s *synth) long(v int64) { s.int(8, uint64(v)) }
func (s *synth) i32(v int)    { s.int(4, uint64(v)) }

func (s *synth) utf8(str string) {
	s.b = append(s.b, strUTF8)
	s.i32(len(str))
	s.b = append(s.b, str...)
}

func (s *synth) utf16(str string) {
	u := utf16.Encode([]rune(str))
	s.b = append(s.b, strUTF16)
	s.i32(len(u))
	for _, c := range u {
		s.int(2, uint64(c))
	}
}

func (s *synth) latin1(str string) {
	s.b = append(s.b, strLatin1)
	s.i32(len([]rune(str)))
	for _, r := range str {
		s.b = append(s.b, byte(r))
	}
}

// record wraps a body as an event record of the given type; the size is
// written with a padded 4-byte varint (as HotSpot does) or 4 bytes fixed.
func (s *synth) record(typ int64, body func(*synth)) int {
	start := len(s.b)
	inner := &synth{fixed: s.fixed}
	inner.long(typ)
	body(inner)
	size := 4 + len(inner.b)
	if s.fixed {
		s.b = binary.BigEndian.AppendUint32(s.b, uint32(size))
	} else {
		s.b = append(s.b, byte(size)|0x80, byte(size>>7)|0x80, byte(size>>14)|0x80, byte(size>>21))
	}
	s.b = append(s.b, inner.b...)
	return start
}

type el struct {
	name     string
	attrs    [][2]string
	children []el
}

func class(id int, name, super string, children ...el) el {
	a := [][2]string{{"id", strconv.Itoa(id)}, {"name", name}}
	if super != "" {
		a = append(a, [2]string{"superType", super})
	}
	return el{name: "class", attrs: a, children: children}
}

func field(name string, typ int, extra ...string) el {
	a := [][2]string{{"name", name}, {"class", strconv.Itoa(typ)}}
	for i := 0; i+1 < len(extra); i += 2 {
		a = append(a, [2]string{extra[i], extra[i+1]})
	}
	return el{name: "field", attrs: a}
}

func annotation(typ int, value string) el {
	return el{name: "annotation", attrs: [][2]string{{"class", strconv.Itoa(typ)}, {"value", value}}}
}

// Type IDs of the synthetic metadata.
const (
	sBoolean, sByte, sChar, sShort, sInt, sLong, sFloat, sDouble, sString = 4, 5, 6, 7, 8, 9, 10, 11, 12
	sThread, sPair, sTimestamp, sTimespan, sUnsigned, sSample             = 20, 21, 30, 31, 32, 1000
	sThreadKey                                                            = uint64(1) << 40
)

func synthMetadata() el {
	prims := []el{}
	for id, n := range map[int]string{sBoolean: "boolean", sByte: "byte", sChar: "char", sShort: "short", sInt: "int", sLong: "long", sFloat: "float", sDouble: "double", sString: "java.lang.String"} {
		prims = append(prims, class(id, n, ""))
	}
	classes := append(prims,
		class(sTimestamp, "jdk.jfr.Timestamp", "java.lang.annotation.Annotation", field("value", sString)),
		class(sTimespan, "jdk.jfr.Timespan", "java.lang.annotation.Annotation", field("value", sString)),
		class(sUnsigned, "jdk.jfr.Unsigned", "java.lang.annotation.Annotation"),
		class(sThread, "java.lang.Thread", "", field("osName", sString), field("javaThreadId", sLong)),
		class(sPair, "test.Pair", "", field("a", sInt), field("b", sLong)),
		class(sSample, "test.Sample", "jdk.jfr.Event",
			el{name: "field", attrs: [][2]string{{"name", "startTime"}, {"class", strconv.Itoa(sLong)}}, children: []el{annotation(sTimestamp, "TICKS")}},
			el{name: "field", attrs: [][2]string{{"name", "duration"}, {"class", strconv.Itoa(sLong)}}, children: []el{annotation(sTimespan, "TICKS")}},
			field("eventThread", sThread, "constantPool", "true"),
			field("flag", sBoolean), field("b", sByte), field("s", sShort), field("c", sChar),
			el{name: "field", attrs: [][2]string{{"name", "u"}, {"class", strconv.Itoa(sInt)}}, children: []el{{name: "annotation", attrs: [][2]string{{"class", strconv.Itoa(sUnsigned)}}}}},
			field("f", sFloat), field("d", sDouble), field("text", sString),
			field("values", sInt, "dimension", "1"), field("pair", sPair)),
	)
	return el{name: "root", children: []el{
		{name: "metadata", children: classes},
		{name: "region", attrs: [][2]string{{"locale", "en_US"}, {"gmtOffset", "3600000"}}},
	}}
}

func (s *synth) metadata(root el) {
	var strs []string
	index := map[string]int{}
	intern := func(x string) {
		if _, ok := index[x]; !ok {
			index[x] = len(strs)
			strs = append(strs, x)
		}
	}
	var walk func(e el)
	walk = func(e el) {
		intern(e.name)
		for _, a := range e.attrs {
			intern(a[0])
			intern(a[1])
		}
		for _, c := range e.children {
			walk(c)
		}
	}
	walk(root)
	s.record(0, func(s *synth) {
		s.long(0)
		s.long(0)
		s.long(1)
		s.i32(len(strs))
		for _, x := range strs {
			s.utf8(x)
		}
		var emit func(e el)
		emit = func(e el) {
			s.i32(index[e.name])
			s.i32(len(e.attrs))
			for _, a := range e.attrs {
				s.i32(index[a[0]])
				s.i32(index[a[1]])
			}
			s.i32(len(e.children))
			for _, c := range e.children {
				emit(c)
			}
		}
		emit(root)
	})
}

type sample struct {
	start, dur int64
	thread     uint64
	flag       bool
	b          int8
	s          int16
	c          uint16
	u          uint32
	f          float32
	d          float64
	text       func(*synth)
	wantText   string
	values     []int32
	a          int32
	pb         int64
	count      int // when > 0, the array count written instead of len(values)
}

var samples = []sample{
	{start: 1_000_500, dur: 2000, thread: sThreadKey, flag: true, b: -3, s: -300, c: 'é', u: math.MaxUint32, f: 1.5, d: math.Pi,
		text: func(s *synth) { s.utf8("ünïcode") }, wantText: "ünïcode", values: []int32{1, -2, 3}, a: -7, pb: 1 << 40},
	{start: 1_001_000, dur: 0, thread: 2, b: 127, s: 32767, c: 'x', u: 5, f: float32(math.Inf(-1)), d: -0.25,
		text: func(s *synth) { s.utf16("中文 \U0001F600") }, wantText: "中文 \U0001F600", a: 1, pb: -1},
	{start: 1_002_000, dur: 1, thread: 99, text: func(s *synth) { s.latin1("café") }, wantText: "café"},
	{start: 1_003_000, text: func(s *synth) { s.b = append(s.b, strPool); s.long(7) }, wantText: "pooled"},
	{start: 1_004_000, text: func(s *synth) { s.b = append(s.b, strEmpty) }, wantText: ""},
}

// sample writes x as a test.Sample event record.
func (s *synth) sample(x sample) {
	s.record(sSample, func(s *synth) {
		s.long(x.start)
		s.long(x.dur)
		s.long(int64(x.thread))
		if x.flag {
			s.b = append(s.b, 1)
		} else {
			s.b = append(s.b, 0)
		}
		s.b = append(s.b, byte(x.b))
		s.int(2, uint64(uint16(x.s)))
		s.int(2, uint64(x.c))
		s.int(4, uint64(x.u))
		s.b = binary.BigEndian.AppendUint32(s.b, math.Float32bits(x.f))
		s.b = binary.BigEndian.AppendUint64(s.b, math.Float64bits(x.d))
		x.text(s)
		if x.count > 0 {
			s.i32(x.count)
		} else {
			s.i32(len(x.values))
		}
		for _, v := range x.values {
			s.int(4, uint64(uint32(v)))
		}
		s.int(4, uint64(uint32(x.a)))
		s.long(x.pb)
	})
}

// synthChunk builds a finished chunk: events, metadata in the middle (as
// HotSpot places it), and two checkpoints that split the Thread pool.
func synthChunk(fixed bool) []byte { return synthChunkOf(fixed, samples) }

func synthChunkOf(fixed bool, samples []sample) []byte {
	s := &synth{fixed: fixed, b: make([]byte, HeaderSize)}
	s.sample(samples[0])
	s.sample(samples[1])
	cp1 := s.record(1, func(s *synth) {
		s.long(0)
		s.long(0)
		s.long(0) // delta 0: first checkpoint
		s.b = append(s.b, 1)
		s.i32(1)
		s.long(sThread)
		s.i32(1)
		s.long(int64(sThreadKey))
		s.utf8("main")
		s.long(1)
	})
	meta := len(s.b)
	s.metadata(synthMetadata())
	s.sample(samples[2])
	s.sample(samples[3])
	s.record(12345, func(s *synth) { s.long(42) }) // an undeclared type: skipped
	s.sample(samples[4])
	cp2 := len(s.b)
	s.record(1, func(s *synth) {
		s.long(0)
		s.long(0)
		s.long(int64(cp1 - cp2))
		s.b = append(s.b, 1)
		s.i32(2)
		s.long(sThread)
		s.i32(1)
		s.long(2)
		s.latin1("GC Thread#0")
		s.long(0)
		s.long(sString)
		s.i32(1)
		s.long(7)
		s.utf8("pooled")
	})
	flags := uint16(flagCompressedInts)
	if fixed {
		flags = 0
	}
	copy(s.b, headerBytes(Header{Major: 2, Minor: 1, Size: int64(len(s.b)), CheckpointOffset: int64(cp2), MetadataOffset: int64(meta),
		StartNanos: 1_700_000_000_000_000_000, StartTicks: 1_000_000, TicksPerSecond: 2_000_000_000, Flags: flags}))
	return s.b
}

func TestSyntheticChunk(t *testing.T) {
	for _, fixed := range []bool{false, true} {
		t.Run(map[bool]string{false: "compressed integers", true: "fixed-width integers"}[fixed], func(t *testing.T) {
			c, err := NewChunk(synthChunk(fixed), 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			if c.Metadata.GMTOffset != 3600000 || c.Metadata.Locale != "en_US" {
				t.Errorf("region: %d %q", c.Metadata.GMTOffset, c.Metadata.Locale)
			}
			if got := c.PoolSize("java.lang.Thread"); got != 2 {
				t.Errorf("Thread pool merged from two checkpoints has %d entries, want 2", got)
			}
			er := c.Events()
			i := 0
			for ; er.Next(); i++ {
				ev := er.Event()
				w := samples[i]
				wantThread := map[uint64]string{sThreadKey: "main", 2: "GC Thread#0"}[w.thread]
				checks := []struct {
					name      string
					got, want any
				}{
					{"startTime (epoch ns)", ev.StartNanos(), 1_700_000_000_000_000_000 + (w.start-1_000_000)/2},
					{"duration (ns)", ev.DurationNanos(), w.dur / 2},
					{"eventThread.osName", ev.Value("eventThread.osName").Str(), wantThread},
					{"eventThread is null when the key is missing", ev.Value("eventThread").IsNull(), wantThread == ""},
					{"flag", ev.Value("flag").Bool(), w.flag},
					{"b", ev.Value("b").Int(), int64(w.b)},
					{"s", ev.Value("s").Int(), int64(w.s)},
					{"c", ev.Value("c").Int(), int64(w.c)},
					{"u (unsigned)", ev.Value("u").Uint(), uint64(w.u)},
					{"f", ev.Value("f").Float(), float64(w.f)},
					{"d", ev.Value("d").Float(), w.d},
					{"text", ev.Value("text").Str(), w.wantText},
					{"len(values)", ev.Value("values").Len(), len(w.values)},
					{"pair.a", ev.Value("pair.a").Int(), int64(w.a)},
					{"pair.b", ev.Value("pair.b").Int(), w.pb},
				}
				for k, v := range w.values {
					checks = append(checks, struct {
						name      string
						got, want any
					}{"values[" + strconv.Itoa(k) + "]", ev.Value("values").Index(k).Int(), int64(v)})
				}
				for _, ck := range checks {
					if ck.got != ck.want {
						t.Errorf("event %d %s = %v, want %v", i, ck.name, ck.got, ck.want)
					}
				}
			}
			if er.Err() != nil || i != len(samples) {
				t.Fatalf("read %d events (err %v), want %d", i, er.Err(), len(samples))
			}
			sel := NewSelection()
			sel.Add("test.Sample", "text", "eventThread.javaThreadId", "pair.b", "d")
			sc := c.Scan(sel)
			i = 0
			for ; sc.Next(); i++ {
				r := sc.Record()
				if r.Str(0) != samples[i].wantText || r.Int(2) != samples[i].pb || r.Float(3) != samples[i].d {
					t.Errorf("scan %d: text %q pair.b %d d %v", i, r.Str(0), r.Int(2), r.Float(3))
				}
			}
			if sc.Err() != nil || i != len(samples) {
				t.Fatalf("scanned %d (err %v), want %d", i, sc.Err(), len(samples))
			}
		})
	}
}

func TestMetadataErrors(t *testing.T) {
	missing := synthMetadata()
	missing.children[0].children = append(missing.children[0].children, class(2000, "test.Broken", "jdk.jfr.Event", field("x", 4242)))
	selfInline := synthMetadata()
	selfInline.children[0].children = append(selfInline.children[0].children, class(2001, "test.Loop", "", field("again", 2001)))
	tests := []struct {
		name string
		root el
	}{
		{"field references a missing class", missing},
		{"struct contains itself inline", selfInline},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &synth{}
			s.metadata(tt.root)
			_, err := parseMetadata(&decoder{buf: s.b, compressed: true})
			if err == nil {
				t.Fatal("no error")
			}
		})
	}
}

// TestHostileArrayCount: an array that claims 2^30 elements in a record of
// a few dozen bytes is an error, without allocating for the claim.
func TestHostileArrayCount(t *testing.T) {
	hostile := append([]sample{}, samples...)
	hostile[2].count = 1 << 30
	c, err := NewChunk(synthChunkOf(false, hostile), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	n := 0
	er := c.Events()
	for er.Next() {
		n++
	}
	runtime.ReadMemStats(&after)
	if !errors.Is(er.Err(), ErrCorrupt) && !errors.Is(er.Err(), ErrTruncated) {
		t.Fatalf("err %v, want a corrupt/truncated error", er.Err())
	}
	if n != 2 {
		t.Errorf("%d events before the damaged one, want 2", n)
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 1<<20 {
		t.Errorf("allocated %d bytes for a 2^30-element claim", grew)
	}
}
