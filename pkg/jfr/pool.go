package jfr

import (
	"math/bits"
	"math/rand/v2"
	"unsafe"
)

// poolEntry is one constant. Its value is decoded on first use, so forward
// references between pools (and cycles, e.g. class → class loader → class)
// cost nothing until followed, and then only one level at a time.
type poolEntry struct {
	key     uint64
	off     int32 // offset of the encoded value in the chunk
	decoded bool
	pool    *pool
	val     Value
}

// Entry blocks double from minEntryBlock to entryBlock entries, so that a
// pool with one constant costs a small block: a hostile chunk may declare
// tens of thousands of pools.
const (
	minEntryBlock = 8
	entryBlock    = 256
)

// denseSlack is how far keys may exceed 8 per entry and still be indexed by
// a table (see pool.index); small so that a pool of a few entries with
// large keys costs a map, not a large table.
const denseSlack = 64

// pool is the merged constant pool of one type across all checkpoints of a
// chunk. Loading a chunk only checks the checkpoints and notes where each
// pool's constants are (pending); a pool's entries are made on its first
// lookup, so pools nobody reads (symbols, methods, classes for a reader of
// GC events) cost one walk over their bytes and 4 bytes per constant. Entries live in
// fixed blocks so that pointers to them stay valid as more checkpoints
// are indexed. Indexing a checkpoint only appends entries; index then
// makes them findable by key, in a table by key when the keys are small
// enough (thread, stack trace and most type ids are), in a keyTable
// otherwise.
type pool struct {
	typ     *Type
	chunk   *Chunk
	pending []poolSegment // constants checked but not yet entries, in indexing order
	fast    []*poolEntry  // dense while nothing is pending: lookup's inlined case
	dense   []*poolEntry  // by key, while keys is nil
	keys    *keyTable     // when the keys are too large for dense
	blocks  [][]poolEntry
	n       int // entries appended, duplicate keys included
	indexed int // entries [0, indexed) are in dense or keys
	size    int // distinct keys indexed
	maxKey  uint64
}

// poolSegment is one checkpoint's run of constants of a pool: n keys and
// values, whose offsets are chunk.constants[from:from+n].
type poolSegment struct{ from, n int32 }

// materialize makes entries of the pending segments and indexes them.
func (p *pool) materialize() {
	c := p.chunk
	d := &decoder{buf: c.buf, compressed: c.Header.CompressedInts()}
	for _, sg := range p.pending {
		for _, off := range c.constants[sg.from : sg.from+sg.n] {
			d.pos = int(off)
			key := d.u64()
			p.add(key, int32(d.pos))
		}
	}
	p.pending = nil
	p.index()
	if p.keys == nil {
		p.fast = p.dense
	}
}

// add appends a constant; index makes it findable.
func (p *pool) add(key uint64, off int32) {
	b, i := blockOf(p.n)
	if b == len(p.blocks) {
		size := entryBlock
		if p.n < entryBlock {
			size = max(minEntryBlock, p.n) // doubles the entries so far
		}
		p.blocks = append(p.blocks, make([]poolEntry, size))
	}
	e := &p.blocks[b][i]
	e.key, e.off, e.pool = key, off, p
	p.n++
	p.maxKey = max(p.maxKey, key)
}

// blockOf locates entry i: blocks hold 8, 8, 16, 32, 64, 128 entries,
// then 256 each.
func blockOf(i int) (block, at int) {
	switch {
	case i < minEntryBlock:
		return 0, i
	case i < entryBlock:
		b := bits.Len(uint(i)) - 3 // i in [8<<(b-1), 8<<b)
		return b, i - minEntryBlock<<(b-1)
	}
	return 6 + (i-entryBlock)/entryBlock, i % entryBlock
}

func (p *pool) entry(i int) *poolEntry {
	b, at := blockOf(i)
	return &p.blocks[b][at]
}

// index makes the entries appended since the last call findable. A key
// seen before keeps its first definition (the newest, since checkpoints
// are walked backwards from the last one).
func (p *pool) index() {
	if p.indexed == p.n {
		return
	}
	if p.keys == nil && (p.maxKey < uint64(8*p.n+denseSlack) || p.denseFromBudget()) {
		if uint64(len(p.dense)) <= p.maxKey {
			d := make([]*poolEntry, p.maxKey+1)
			copy(d, p.dense)
			p.dense = d
		}
		for i := p.indexed; i < p.n; i++ {
			if e := p.entry(i); p.dense[e.key] == nil {
				p.dense[e.key] = e
				p.size++
			}
		}
		p.indexed = p.n
		return
	}
	if p.keys == nil {
		p.keys = newKeyTable(p.n)
		for k, e := range p.dense {
			if e != nil {
				p.keys.insert(uint64(k), e)
			}
		}
		p.dense = nil
	}
	for i := p.indexed; i < p.n; i++ {
		e := p.entry(i)
		if p.keys.insert(e.key, e) {
			p.size++
		}
	}
	p.indexed = p.n
}

// denseBudget is how many bytes of tables by key a chunk may spend beyond
// what denseSlack allows: enough for a class pool (a few hundred classes
// with ids up to a few thousand, looked up by many events) to be a table,
// bounded so that a hostile chunk's pools of one large key each cannot
// make it allocate much.
const denseBudget = 256 << 10

// denseFromBudget reports whether the pool's table may grow to its
// largest key out of the chunk's budget, and takes it from the budget.
func (p *pool) denseFromBudget() bool {
	c := p.chunk
	if c == nil || p.maxKey >= denseBudget/8 {
		return false
	}
	grow := 8 * (int(p.maxKey) + 1 - len(p.dense))
	if c.denseSpent+grow > denseBudget {
		return false
	}
	c.denseSpent += grow
	return true
}

func (p *pool) lookup(key uint64) *poolEntry {
	if key < uint64(len(p.fast)) {
		return p.fast[key]
	}
	return p.lookupSlow(key)
}

func (p *pool) lookupSlow(key uint64) *poolEntry {
	if p.pending != nil {
		p.materialize()
		if key < uint64(len(p.fast)) {
			return p.fast[key]
		}
	}
	if p.keys == nil {
		if key < uint64(len(p.dense)) {
			return p.dense[key]
		}
		return nil
	}
	return p.keys.find(key)
}

// keyTable finds a pool's entries by keys too large to index a table (class,
// method and symbol ids): open addressing with linear probing, at most half
// full. Keys are hashed with a random seed of the process, so that a file
// cannot choose keys that all probe the same slots.
type keyTable struct {
	slots []keySlot
	shift uint // 64 - log2(len(slots))
	n     int
}

type keySlot struct {
	key uint64
	e   *poolEntry // nil: the slot is free
}

var keySeed = rand.Uint64()

func newKeyTable(n int) *keyTable {
	t := &keyTable{}
	t.resize(max(16, 2*n))
	return t
}

// resize makes room for at least n slots and moves the entries there.
func (t *keyTable) resize(n int) {
	lg := bits.Len(uint(n - 1))
	old := t.slots
	t.slots, t.shift, t.n = make([]keySlot, 1<<lg), uint(64-lg), 0
	for _, s := range old {
		if s.e != nil {
			t.insert(s.key, s.e)
		}
	}
}

func (t *keyTable) home(key uint64) int {
	hi, lo := bits.Mul64(key^keySeed, 0x9e3779b97f4a7c15)
	return int((hi ^ lo) >> t.shift)
}

// insert adds key unless present (the first definition wins) and reports
// whether it did.
func (t *keyTable) insert(key uint64, e *poolEntry) bool {
	if 2*(t.n+1) > len(t.slots) {
		t.resize(2 * len(t.slots))
	}
	mask := len(t.slots) - 1
	for i := t.home(key); ; i = (i + 1) & mask {
		s := &t.slots[i]
		if s.e == nil {
			s.key, s.e = key, e
			t.n++
			return true
		}
		if s.key == key {
			return false
		}
	}
}

func (t *keyTable) find(key uint64) *poolEntry {
	mask := len(t.slots) - 1
	for i := t.home(key); ; i = (i + 1) & mask {
		s := &t.slots[i]
		if s.e == nil || s.key == key {
			return s.e
		}
	}
}

// value decodes the entry on first use and returns the cached result.
func (e *poolEntry) value() *Value {
	if e.decoded {
		return &e.val
	}
	return e.decode()
}

func (e *poolEntry) decode() *Value {
	c := e.pool.chunk
	d := c.decoder(int(e.off))
	d.lazy = true
	depth := 0
	if e.pool.typ.Kind == KindString {
		depth = -1 // a pooled string may not refer to the pool again
	}
	var v Value
	if t := e.pool.typ; t.Kind == KindStruct && len(t.Fields) > 0 && t.Fields[len(t.Fields)-1].Array {
		// A stack trace: nothing after its frames is read, so they are
		// left where they are, not walked past.
		comp := c.perm.composite()
		comp.typ = t
		comp.elems = c.perm.values(len(t.Fields))
		ops := c.ops(t)
		last := len(ops) - 1
		c.decodeFields(d, ops[:last], comp.elems[:last], 1, &c.perm)
		d.tail = true
		comp.elems[last] = c.decodeOne(d, &ops[last], 1, &c.perm)
		v = Value{kind: KindStructValue, p: unsafe.Pointer(comp)}
	} else {
		v = c.decodeType(d, e.pool.typ, depth, &c.perm)
	}
	if d.failed() {
		// The entry was skipped successfully while indexing, so this
		// cannot happen unless the bytes changed; deliver null.
		v = Value{}
	}
	e.val = v
	e.decoded = true
	return &e.val
}

// poolSet maps type IDs to pools.
type poolSet struct {
	dense  []*pool
	sparse map[int64]*pool
	str    *pool // java.lang.String, for string encoding 2
}

func (s *poolSet) reset(md *Metadata) {
	s.dense = make([]*pool, len(md.dense))
	s.sparse = map[int64]*pool{}
	s.str = nil
}

func (s *poolSet) find(id int64) *pool {
	if uint64(id) < uint64(len(s.dense)) {
		return s.dense[id]
	}
	return s.sparse[id]
}

func (s *poolSet) get(t *Type, c *Chunk) *pool {
	if p := s.find(t.ID); p != nil {
		return p
	}
	p := &pool{typ: t, chunk: c}
	if uint64(t.ID) < uint64(len(s.dense)) {
		s.dense[t.ID] = p
	} else {
		s.sparse[t.ID] = p
	}
	if t.Kind == KindString {
		s.str = p
	}
	return p
}

// lookupString resolves string encoding 2 (a key into the String pool).
func (c *Chunk) lookupString(key uint64) (string, bool) {
	p := c.pools.str
	if p == nil {
		return "", false
	}
	e := p.lookup(key)
	if e == nil {
		return "", false
	}
	v := e.value()
	return v.str(), v.kind == KindStringValue
}

// PoolSize returns the number of constants of the named type in the chunk's
// merged pools.
func (c *Chunk) PoolSize(typeName string) int {
	t := c.Metadata.TypeByName(typeName)
	if t == nil {
		return 0
	}
	if p := c.pools.find(t.ID); p != nil {
		if p.pending != nil {
			p.materialize()
		}
		return p.size
	}
	return 0
}

// Constant returns the constant of the named type with the given key,
// decoded, and whether it exists.
func (c *Chunk) Constant(typeName string, key uint64) (Value, bool) {
	t := c.Metadata.TypeByName(typeName)
	if t == nil {
		return Value{}, false
	}
	p := c.pools.find(t.ID)
	if p == nil {
		return Value{}, false
	}
	e := p.lookup(key)
	if e == nil {
		return Value{}, false
	}
	return *e.value(), true
}
