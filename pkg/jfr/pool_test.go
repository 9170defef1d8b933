package jfr

import (
	"path/filepath"
	"testing"
)

// A key defined in several checkpoints keeps its first definition (the
// newest checkpoint is indexed first), also when later checkpoints are
// indexed separately (a live chunk) and when large keys move the pool from
// a table to a map.
func TestPoolKeepsFirstDefinition(t *testing.T) {
	p := &pool{}
	p.add(5, 100)
	p.add(7, 200)
	p.add(5, 300)
	p.index()
	check := func(when string, key uint64, off int32) {
		t.Helper()
		e := p.lookup(key)
		switch {
		case off < 0 && e != nil:
			t.Errorf("%s: key %d found at %d, want none", when, key, e.off)
		case off >= 0 && (e == nil || e.off != off):
			t.Errorf("%s: key %d = %v, want offset %d", when, key, e, off)
		}
	}
	check("table", 5, 100)
	check("table", 7, 200)
	check("table", 6, -1)
	check("table", 1<<20, -1)
	if p.size != 2 {
		t.Errorf("table: size %d, want 2", p.size)
	}
	p.add(5, 400)
	p.add(1<<40, 500)
	p.add(9, 600)
	p.index()
	if p.keys == nil {
		t.Fatal("a key of 1<<40 should move the pool to a map")
	}
	check("map", 5, 100)
	check("map", 7, 200)
	check("map", 9, 600)
	check("map", 1<<40, 500)
	check("map", 6, -1)
	if p.size != 4 {
		t.Errorf("map: size %d, want 4", p.size)
	}
}

// TestConstantsReadWhenUsed: a chunk's pools become entries on their first
// lookup and the arrays inside constants (a stack trace's frames) are
// decoded when first read; what a reader gets is the same either way.
func TestConstantsReadWhenUsed(t *testing.T) {
	r, err := Open(filepath.Join("testdata", "g1-default-jdk17.jfr"))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	c, err := r.Chunk(0)
	if err != nil {
		t.Fatal(err)
	}
	methods := c.pools.find(c.Metadata.TypeByName("jdk.types.Method").ID)
	if methods == nil || methods.pending == nil || methods.n != 0 {
		t.Fatal("the method pool was made into entries before anyone read it")
	}
	er := c.AllEvents()
	var st Value
	for er.Next() && st.Kind() != KindStructValue {
		st = er.Event().Value("stackTrace")
	}
	if st.Kind() != KindStructValue {
		t.Fatal("no event with a stack trace")
	}
	frames := st.Field("frames")
	if frames.kind != kindLazy {
		t.Fatalf("frames decoded with their stack trace (kind %d)", frames.kind)
	}
	if frames.Kind() != KindArrayValue || frames.Type() == nil || frames.Type().Name != "jdk.types.StackFrame" {
		t.Fatalf("undecoded frames: kind %v, type %v", frames.Kind(), frames.Type())
	}
	if methods.n != 0 {
		t.Error("reading a stack trace made the method pool into entries")
	}
	n := frames.Len()
	if n == 0 {
		t.Fatal("no frames")
	}
	name := frames.Index(0).Field("method").Field("name").Str()
	if name == "" || methods.pending != nil || methods.size != c.PoolSize("jdk.types.Method") || methods.size == 0 {
		t.Errorf("first frame's method %q; method pool pending %v, %d entries", name, methods.pending, methods.size)
	}
	if again := st.Field("frames"); again.Len() != n || again.Index(0).Field("method").Field("name").Str() != name {
		t.Error("frames read twice differ")
	}
}

// TestKeyTable: every key inserted is found, the first definition of a key
// wins, and absent keys are not found, while the table grows from its
// first size, for keys a JVM writes (sequential, shifted ids, -1) and random
// ones.
func TestKeyTable(t *testing.T) {
	var keys []uint64
	for i := uint64(1); i <= 3000; i++ {
		keys = append(keys, i<<20, i*0x9e3779b97f4a7c15, ^i)
	}
	tab := newKeyTable(4)
	ents := make([]poolEntry, len(keys))
	for i, k := range keys {
		if !tab.insert(k, &ents[i]) {
			t.Fatalf("key %#x inserted twice", k)
		}
	}
	for i, k := range keys {
		if tab.insert(k, &poolEntry{}) {
			t.Fatalf("key %#x replaced", k)
		}
		if e := tab.find(k); e != &ents[i] {
			t.Fatalf("key %#x: found %p, want %p", k, e, &ents[i])
		}
	}
	for _, k := range []uint64{1<<20 + 1, 3001 << 20, 12345} {
		if e := tab.find(k); e != nil {
			t.Errorf("absent key %#x found", k)
		}
	}
	if 2*tab.n > len(tab.slots) {
		t.Errorf("%d keys in %d slots: more than half full", tab.n, len(tab.slots))
	}
}

// TestDenseBudget: a pool whose keys are too sparse for the per-entry rule
// (a class pool: a few hundred ids up to a few thousand) is still a table
// while the chunk's budget lasts; past it, pools use a keyTable.
func TestDenseBudget(t *testing.T) {
	c := &Chunk{}
	classes := &pool{chunk: c}
	for i := uint64(1); i <= 450; i++ {
		classes.add(i*9, int32(i))
	}
	classes.index()
	if classes.keys != nil || classes.lookup(450*9) == nil || classes.lookup(3) != nil {
		t.Fatalf("class-like pool: keyTable %v", classes.keys != nil)
	}
	spentBefore := c.denseSpent
	for i := range 100 {
		p := &pool{chunk: c}
		p.add(4000, 0) // one entry: the per-entry rule wants a keyTable
		p.index()
		if p.keys != nil {
			if n := (c.denseSpent - spentBefore) / (8 * 4001); n != i {
				t.Errorf("%d tables paid for, %d pools made tables", n, i)
			}
			if c.denseSpent > denseBudget || denseBudget-c.denseSpent >= 8*4001 {
				t.Errorf("budget %d, %d spent when a pool was refused its table", denseBudget, c.denseSpent)
			}
			return
		}
	}
	t.Error("pools of one large key kept getting tables past the chunk's budget")
}
