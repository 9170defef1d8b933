package jfr

import "testing"

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
