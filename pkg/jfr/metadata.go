package jfr

import (
	"slices"
	"strconv"
	"unicode/utf8"
)

// Kind classifies a [Type] by how its values are encoded.
type Kind uint8

// Type kinds. Struct covers every class with fields (events included);
// the others are the JFR primitive types and java.lang.String.
const (
	KindStruct Kind = iota
	KindBoolean
	KindByte
	KindChar
	KindShort
	KindInt
	KindLong
	KindFloat
	KindDouble
	KindString
)

var primitiveKinds = map[string]Kind{
	"boolean":          KindBoolean,
	"byte":             KindByte,
	"char":             KindChar,
	"short":            KindShort,
	"int":              KindInt,
	"long":             KindLong,
	"float":            KindFloat,
	"double":           KindDouble,
	"java.lang.String": KindString,
}

// Type is a class declared in a chunk's metadata: an event type, a
// constant-pool type such as java.lang.Thread, an inline struct, an
// annotation, or a primitive.
type Type struct {
	ID          int64
	Name        string
	SuperType   string // "jdk.jfr.Event" for event types
	SimpleType  bool   // a struct with one field that readers may flatten
	Kind        Kind
	Fields      []Field
	Settings    []Setting
	Annotations []Annotation

	// nodes is how many values decoding one value of the type visits: the
	// value itself, and its inline fields recursively, an array counting
	// as one (its elements are charged when their count is read). Set
	// when the metadata is built; at most maxTypeNodes.
	nodes int32
	// varintsOnly says that a value of the type, in a chunk of compressed
	// integers, is exactly varints compressed integers (integer and
	// constant-pool fields, inline structs of them, no arrays): skipping
	// it needs no walk of the fields. Set with nodes.
	varintsOnly bool
	varints     int32
}

// IsEvent reports whether the type is an event type.
func (t *Type) IsEvent() bool { return t.SuperType == "jdk.jfr.Event" }

// Label returns the value of the type's jdk.jfr.Label annotation, or "".
func (t *Type) Label() string { return annotationValue(t.Annotations, "jdk.jfr.Label") }

// FieldIndex returns the index of the field with the given name, or -1.
func (t *Type) FieldIndex(name string) int {
	for i := range t.Fields {
		if t.Fields[i].Name == name {
			return i
		}
	}
	return -1
}

// Field is one field of a [Type].
type Field struct {
	Name         string
	Type         *Type
	ConstantPool bool // the value is a key into the constant pool of Type
	Array        bool // dimension 1: a count followed by elements
	Annotations  []Annotation

	// Units from the well-known annotations, "" when absent.
	Unsigned   bool   // jdk.jfr.Unsigned
	Timestamp  string // jdk.jfr.Timestamp: "TICKS", "NANOSECONDS_SINCE_EPOCH", "MILLISECONDS_SINCE_EPOCH"
	Timespan   string // jdk.jfr.Timespan: "TICKS", "NANOSECONDS", "MICROSECONDS", "MILLISECONDS", "SECONDS"
	DataAmount string // jdk.jfr.DataAmount: "BYTES", "BITS"
}

// Label returns the value of the field's jdk.jfr.Label annotation, or "".
func (f *Field) Label() string { return annotationValue(f.Annotations, "jdk.jfr.Label") }

// Setting is a setting declared by an event type (e.g. "threshold").
type Setting struct {
	Name         string
	Type         *Type
	DefaultValue string
	Annotations  []Annotation
}

// Annotation is an annotation element: its type and its attribute values as
// written in the metadata ("value", or "value-0", "value-1", … for arrays).
type Annotation struct {
	Type   *Type
	Values []Attribute
}

// Attribute is a key/value pair of a metadata element.
type Attribute struct{ Key, Value string }

// Value returns the annotation's attribute named key, or "".
func (a *Annotation) Value(key string) string {
	for _, kv := range a.Values {
		if kv.Key == key {
			return kv.Value
		}
	}
	return ""
}

func annotationValue(as []Annotation, typeName string) string {
	for i := range as {
		if as[i].Type != nil && as[i].Type.Name == typeName {
			return as[i].Value("value")
		}
	}
	return ""
}

// Metadata is the type system of a chunk. Chunks whose metadata events are
// identical share one Metadata, across files too: treat it, and the Types
// it holds, as read-only.
type Metadata struct {
	Types      []*Type // in declaration order
	EventTypes []*Type // the subset whose super type is jdk.jfr.Event
	// From the "region" element.
	Locale    string
	GMTOffset int64 // milliseconds east of UTC
	DST       int64

	dense  []*Type // by ID when IDs are small
	sparse map[int64]*Type
	byName map[string]*Type
	slab   *typeSlab    // while building
	tree   *elementTree // while building
}

// TypeByID returns the type with the given ID, or nil.
func (m *Metadata) TypeByID(id int64) *Type {
	if uint64(id) < uint64(len(m.dense)) {
		return m.dense[id]
	}
	return m.sparse[id]
}

// TypeByName returns the type with the given name, or nil.
func (m *Metadata) TypeByName(name string) *Type { return m.byName[name] }

// elementTree is the metadata event's element tree, flat and without
// pointers, so that the collector need not scan it: elements in the order
// read (the root first), their attributes as pairs of string-table
// indexes, their children as element indexes. A JDK's metadata has
// thousands of elements and more attributes; as structs of strings and
// slices they were most of what parsing it allocated.
type elementTree struct {
	strs  []string
	els   []element
	attrs []uint32 // key and value string indexes, in pairs
	kids  []int32
}

// element is a node of the tree: its name's string index, and where its
// attribute pairs and children are in the tree's arrays.
type element struct {
	name          uint32
	attrs, nattrs int32
	kids, nkids   int32
}

func (t *elementTree) name(e int32) string { return t.strs[t.els[e].name] }

func (t *elementTree) children(e int32) []int32 {
	el := &t.els[e]
	return t.kids[el.kids : el.kids+el.nkids]
}

// pairs returns e's attributes: key and value string indexes, in pairs.
func (t *elementTree) pairs(e int32) []uint32 {
	el := &t.els[e]
	return t.attrs[2*el.attrs : 2*(el.attrs+el.nattrs)]
}

func (t *elementTree) attr(e int32, k string) string {
	p := t.pairs(e)
	for i := 0; i+1 < len(p); i += 2 {
		if t.strs[p[i]] == k {
			return t.strs[p[i+1]]
		}
	}
	return ""
}

// Limits on metadata. Real JDK metadata is about 100 KB and declares a few
// hundred classes nested a few levels deep, and a decoded value visits a
// few dozen values (a stack trace of 2048 frames about 10,000); the limits
// leave room for many custom events while bounding what a hostile file can
// make one chunk cost: parsing allocates a few dozen bytes per metadata
// byte, and every class may get a constant pool.
const (
	maxElementDepth = 32
	maxMetadataSize = 4 << 20
	maxClasses      = 1 << 16
	// maxTypeNodes bounds Type.nodes: a DAG of structs, each with two
	// inline fields of the next, encodes in a few bytes per class yet
	// doubles the values to decode per level.
	maxTypeNodes = 1 << 16
	// maxInlineDepth bounds how deeply structs nest inline, and so the
	// recursion of decoding.
	maxInlineDepth = 64
	// maxValueNodes bounds the values decoded or skipped for one event or
	// constant, array elements included (see decoder.charge).
	maxValueNodes = 1 << 20
)

// parseMetadata decodes the metadata event at d.pos. It returns a detail
// error (wrapping ErrTruncated/ErrCorrupt) without position; the caller adds
// chunk and offset.
func parseMetadata(d *decoder) (*Metadata, error) {
	body, err := metadataBody(d)
	if err != nil {
		return nil, err
	}
	return parseMetadataBody(body, d.compressed)
}

// metadataBody checks the header of the metadata event at d.pos (its size,
// type 0) and returns its body: what follows its start time, duration and
// metadata id. The body and the chunk's integer encoding are all that
// parseMetadataBody reads, so equal bodies parse to equal metadata.
func metadataBody(d *decoder) ([]byte, error) {
	start := d.pos
	size := d.u32()
	if d.failed() || size == 0 || size > uint64(len(d.buf)-start) {
		return nil, detail(ErrTruncated, "metadata event of size %d runs past the chunk end", size)
	}
	if size > maxMetadataSize {
		return nil, detail(ErrTooLarge, "metadata event of %d bytes, limit is %d", size, maxMetadataSize)
	}
	d2 := &decoder{buf: d.buf[:start+int(size)], pos: d.pos, compressed: d.compressed}
	if typ := d2.u64(); typ != 0 {
		return nil, detail(ErrCorrupt, "metadata event has type %d", typ)
	}
	d2.u64() // start time
	d2.u64() // duration
	d2.u64() // metadata id
	// A header cut short leaves pos at the end: an empty body, which
	// fails as a truncated string table.
	return d2.buf[d2.pos:], nil
}

// parseMetadataBody parses a metadata event's body (see metadataBody).
func parseMetadataBody(body []byte, compressed bool) (*Metadata, error) {
	d := &decoder{buf: body, compressed: compressed}
	strs, err := parseStringTable(d)
	if err != nil {
		return nil, err
	}
	t := &elementTree{
		strs:  strs,
		els:   make([]element, 0, len(body)/16),
		attrs: make([]uint32, 0, len(body)/4),
		kids:  make([]int32, 0, len(body)/16),
	}
	if _, err := parseElement(d, t, 0); err != nil {
		return nil, err
	}
	return buildMetadata(t)
}

// parseStringTable decodes the strings that metadata elements name by index.
func parseStringTable(d *decoder) ([]string, error) {
	n := d.count(len(d.buf) - d.pos)
	if n < 0 {
		return nil, decodeErr(d, "metadata string table")
	}
	strs := make([]string, n)
	// UTF-8 and ASCII strings become slices of one string made of the
	// whole table: one allocation instead of one per string.
	type span struct{ i, off, n int32 }
	spans := make([]span, 0, min(n, 8192)) // a JDK's table has 2-3 thousand
	start := d.pos
	for i := range strs {
		// UTF-16 units that are all below 0x80 are one byte each when
		// compressed: the bytes are the (ASCII) string.
		if p := d.pos; p+1 < len(d.buf) && (d.buf[p] == strUTF8 || d.buf[p] == strLatin1 || d.buf[p] == strUTF16 && d.compressed) {
			d.pos++
			k := d.count(len(d.buf))
			if k > 0 && d.need(k) {
				if b := d.buf[d.pos : d.pos+k]; d.buf[p] == strUTF8 && utf8.Valid(b) || isASCII(b) {
					spans = append(spans, span{int32(i), int32(d.pos - start), int32(k)})
					d.pos += k
					continue
				}
			}
			d.pos = p
		}
		strs[i], _ = d.str(nil)
		if d.failed() {
			return nil, decodeErr(d, "metadata string table")
		}
	}
	if d.failed() {
		return nil, decodeErr(d, "metadata string table")
	}
	whole := string(d.buf[start:d.pos])
	for _, sp := range spans {
		strs[sp.i] = whole[sp.off : sp.off+sp.n]
	}
	return strs, nil
}

func decodeErr(d *decoder, what string) error {
	if d.tooLarge {
		return detail(ErrTooLarge, "%s: one value would decode more than %d values", what, maxValueNodes)
	}
	if d.short {
		return detail(ErrTruncated, "%s", what)
	}
	return detail(ErrCorrupt, "%s", what)
}

// parseElement reads one element and its children into t and returns its
// index.
func parseElement(d *decoder, t *elementTree, depth int) (int32, error) {
	if depth > maxElementDepth {
		return 0, detail(ErrCorrupt, "metadata elements nested deeper than %d", maxElementDepth)
	}
	str := func() uint32 {
		i := d.u32()
		if i >= uint64(len(t.strs)) {
			d.bad = true
			return 0
		}
		return uint32(i)
	}
	idx := int32(len(t.els))
	t.els = append(t.els, element{})
	name := str()
	// Each attribute takes at least 2 bytes, each child at least 3.
	na := d.count((len(d.buf) - d.pos) / 2)
	first := int32(len(t.attrs) / 2)
	for i := 0; i < na; i++ {
		k := str()
		t.attrs = append(t.attrs, k, str())
	}
	nc := d.count((len(d.buf) - d.pos) / 3)
	if d.failed() {
		return 0, decodeErr(d, "metadata element")
	}
	kids := int32(len(t.kids))
	t.kids = slices.Grow(t.kids, nc)[:len(t.kids)+nc]
	t.els[idx] = element{name: name, attrs: first, nattrs: int32(na), kids: kids, nkids: int32(nc)}
	for i := range int32(nc) {
		c, err := parseElement(d, t, depth+1)
		if err != nil {
			return 0, err
		}
		t.kids[kids+i] = c
	}
	return idx, nil
}

// buildMetadata turns the element tree into a Metadata in four steps: find
// the classes and the region, declare a Type per class (so that members can
// reference classes declared after them), resolve each class's members, and
// size the types.
func buildMetadata(t *elementTree) (*Metadata, error) {
	m := &Metadata{tree: t}
	classes := m.readRoot()
	if len(classes) > maxClasses {
		return nil, detail(ErrTooLarge, "metadata declares %d classes, limit is %d", len(classes), maxClasses)
	}
	m.sparse = make(map[int64]*Type, len(classes))
	m.byName = make(map[string]*Type, len(classes))
	m.slab = newTypeSlab(t, classes)
	if err := m.declare(classes); err != nil {
		return nil, err
	}
	for i, cl := range classes {
		if err := m.resolve(m.Types[i], cl); err != nil {
			return nil, err
		}
	}
	if err := sizeTypes(m); err != nil {
		return nil, err
	}
	m.slab, m.tree = nil, nil
	return m, nil
}

// readRoot returns the class elements under the root's "metadata" element,
// and reads the "region" element into m.
func (m *Metadata) readRoot() []int32 {
	t := m.tree
	var classes []int32
	for _, c := range t.children(0) {
		switch t.name(c) {
		case "metadata":
			for _, cl := range t.children(c) {
				if t.name(cl) == "class" {
					classes = append(classes, cl)
				}
			}
		case "region":
			m.Locale = t.attr(c, "locale")
			m.GMTOffset, _ = strconv.ParseInt(t.attr(c, "gmtOffset"), 10, 64)
			m.DST, _ = strconv.ParseInt(t.attr(c, "dst"), 10, 64)
		}
	}
	return classes
}

// declare adds a Type, without members, for every class and indexes them by
// ID and name (the first of a name wins).
func (m *Metadata) declare(classes []int32) error {
	var maxID int64
	tr := m.tree
	for _, cl := range classes {
		id, err := strconv.ParseInt(tr.attr(cl, "id"), 10, 64)
		if err != nil {
			return detail(ErrCorrupt, "class %q has id %q", tr.attr(cl, "name"), tr.attr(cl, "id"))
		}
		t := m.slab.typ()
		*t = Type{ID: id, Name: tr.attr(cl, "name"), SuperType: tr.attr(cl, "superType"), SimpleType: tr.attr(cl, "simpleType") == "true"}
		if k, ok := primitiveKinds[t.Name]; ok {
			t.Kind = k
		}
		m.Types = append(m.Types, t)
		m.sparse[id] = t
		if _, dup := m.byName[t.Name]; !dup {
			m.byName[t.Name] = t
		}
		maxID = max(maxID, id)
	}
	if maxID < 1<<16 {
		m.dense = make([]*Type, maxID+1)
		for id, t := range m.sparse {
			if id >= 0 {
				m.dense[id] = t
			}
		}
	}
	return nil
}

// resolve fills in t's annotations, fields and settings from its class
// element cl.
func (m *Metadata) resolve(t *Type, cl int32) error {
	var err error
	kids := m.tree.children(cl)
	if t.Annotations, err = m.annotations(t.Name, kids); err != nil {
		return err
	}
	t.Fields = m.slab.fieldList(m.tree.countNamed(kids, "field"))
	for _, c := range kids {
		switch m.tree.name(c) {
		case "field":
			f, err := m.field(t.Name, c)
			if err != nil {
				return err
			}
			t.Fields = append(t.Fields, f)
		case "setting":
			s, err := m.setting(t.Name, c)
			if err != nil {
				return err
			}
			if t.Settings == nil {
				t.Settings = m.slab.settingList(m.tree.countNamed(kids, "setting"))
			}
			t.Settings = append(t.Settings, s)
		}
	}
	if t.Kind != KindStruct && len(t.Fields) > 0 {
		return detail(ErrCorrupt, "primitive class %s declares fields", t.Name)
	}
	if t.IsEvent() {
		m.EventTypes = append(m.EventTypes, t)
	}
	return nil
}

// field builds the field that element c of class owner declares, with the
// units its well-known annotations give.
func (m *Metadata) field(owner string, c int32) (Field, error) {
	tr := m.tree
	ft, err := m.ref(owner, "field", tr.attr(c, "name"), tr.attr(c, "class"))
	if err != nil {
		return Field{}, err
	}
	f := Field{Name: tr.attr(c, "name"), Type: ft, ConstantPool: tr.attr(c, "constantPool") == "true", Array: tr.attr(c, "dimension") == "1"}
	if f.Annotations, err = m.annotations(owner, tr.children(c)); err != nil {
		return Field{}, err
	}
	for _, a := range f.Annotations {
		switch a.Type.Name {
		case "jdk.jfr.Unsigned":
			f.Unsigned = true
		case "jdk.jfr.Timestamp":
			f.Timestamp = a.Value("value")
		case "jdk.jfr.Timespan":
			f.Timespan = a.Value("value")
		case "jdk.jfr.DataAmount":
			f.DataAmount = a.Value("value")
		}
	}
	return f, nil
}

// setting builds the setting that element c of class owner declares.
func (m *Metadata) setting(owner string, c int32) (Setting, error) {
	tr := m.tree
	st, err := m.ref(owner, "setting", tr.attr(c, "name"), tr.attr(c, "class"))
	if err != nil {
		return Setting{}, err
	}
	s := Setting{Name: tr.attr(c, "name"), Type: st, DefaultValue: tr.attr(c, "defaultValue")}
	if s.Annotations, err = m.annotations(owner, tr.children(c)); err != nil {
		return Setting{}, err
	}
	return s, nil
}

// annotations builds the annotations among els, children of an element of
// class owner.
func (m *Metadata) annotations(owner string, els []int32) ([]Annotation, error) {
	tr := m.tree
	n := tr.countNamed(els, "annotation")
	if n == 0 {
		return nil, nil
	}
	as := m.slab.annotationList(n)
	for _, a := range els {
		if tr.name(a) != "annotation" {
			continue
		}
		at, err := m.ref(owner, "annotation", "", tr.attr(a, "class"))
		if err != nil {
			return nil, err
		}
		an := Annotation{Type: at}
		// The element's attributes less "class", usually none or one.
		if nv := tr.annotationValues(a); nv > 0 {
			an.Values = m.slab.attributeList(nv)
			p := tr.pairs(a)
			for i := 0; i+1 < len(p); i += 2 {
				if k := tr.strs[p[i]]; k != "class" {
					an.Values = append(an.Values, Attribute{Key: k, Value: tr.strs[p[i+1]]})
				}
			}
		}
		as = append(as, an)
	}
	return as, nil
}

// annotationValues counts the attributes of annotation element a other
// than "class".
func (t *elementTree) annotationValues(a int32) int {
	p, n := t.pairs(a), 0
	for i := 0; i+1 < len(p); i += 2 {
		if t.strs[p[i]] != "class" {
			n++
		}
	}
	return n
}

// typeSlab holds a metadata's types and their fields, settings and
// annotations in one array each, sized by counting the elements first: a
// JDK's metadata declares a few hundred classes, a few thousand fields and
// more annotations, and one allocation each was most of the allocations of
// parsing it. Lists are handed out with their capacity capped, so that an
// append past it (which counting rules out) could not overwrite a
// neighbour.
type typeSlab struct {
	types       []Type
	fields      []Field
	settings    []Setting
	annotations []Annotation
	attributes  []Attribute // annotations' values
}

func newTypeSlab(t *elementTree, classes []int32) *typeSlab {
	var nf, ns, na, nv int
	annotations := func(els []int32) {
		for _, a := range els {
			if t.name(a) == "annotation" {
				na++
				nv += t.annotationValues(a)
			}
		}
	}
	for _, cl := range classes {
		kids := t.children(cl)
		annotations(kids)
		for _, c := range kids {
			switch t.name(c) {
			case "field":
				nf++
				annotations(t.children(c))
			case "setting":
				ns++
				annotations(t.children(c))
			}
		}
	}
	return &typeSlab{
		types:       make([]Type, len(classes)),
		fields:      make([]Field, nf),
		settings:    make([]Setting, ns),
		annotations: make([]Annotation, na),
		attributes:  make([]Attribute, nv),
	}
}

func (t *elementTree) countNamed(els []int32, name string) int {
	n := 0
	for _, e := range els {
		if t.name(e) == name {
			n++
		}
	}
	return n
}

func (s *typeSlab) typ() *Type {
	if len(s.types) == 0 {
		return &Type{}
	}
	t := &s.types[0]
	s.types = s.types[1:]
	return t
}

// fieldList returns an empty list with room for n fields.
func (s *typeSlab) fieldList(n int) []Field {
	if n > len(s.fields) {
		return make([]Field, 0, n)
	}
	l := s.fields[:0:n]
	s.fields = s.fields[n:]
	return l
}

func (s *typeSlab) settingList(n int) []Setting {
	if n > len(s.settings) {
		return make([]Setting, 0, n)
	}
	l := s.settings[:0:n]
	s.settings = s.settings[n:]
	return l
}

func (s *typeSlab) attributeList(n int) []Attribute {
	if n > len(s.attributes) {
		return make([]Attribute, 0, n)
	}
	l := s.attributes[:0:n]
	s.attributes = s.attributes[n:]
	return l
}

func (s *typeSlab) annotationList(n int) []Annotation {
	if n > len(s.annotations) {
		return make([]Annotation, 0, n)
	}
	l := s.annotations[:0:n]
	s.annotations = s.annotations[n:]
	return l
}

// ref resolves the class ID attr that what (a member of class owner) names.
// ref resolves a class id attribute; what and name say whose (e.g.
// "field", "startTime") in the error.
func (m *Metadata) ref(owner, what, name, attr string) (*Type, error) {
	id, err := strconv.ParseInt(attr, 10, 64)
	t := m.TypeByID(id)
	if err != nil || t == nil {
		if name != "" {
			what += " " + name
		}
		return nil, detail(ErrCorrupt, "%s of %s references missing class %q", what, owner, attr)
	}
	return t, nil
}

// isVarintKind reports whether values of kind k are compressed integers
// in a chunk that compresses integers.
func isVarintKind(k Kind) bool {
	return k == KindChar || k == KindShort || k == KindInt || k == KindLong
}

// sizeTypes sets every type's nodes, and rejects metadata in which a
// struct contains itself inline (not through a constant pool: such a value
// has no finite encoding, or through arrays an unbounded depth), structs
// nest inline deeper than maxInlineDepth, or one value of a type would
// visit more than maxTypeNodes values. Each type is walked once, so this
// is linear in the metadata however its types share each other.
func sizeTypes(m *Metadata) error {
	const (
		unvisited = iota
		visiting
		done
	)
	state := make(map[*Type]uint8, len(m.Types))
	height := make(map[*Type]int, len(m.Types))
	var visit func(t *Type, depth int) error
	visit = func(t *Type, depth int) error {
		switch state[t] {
		case visiting:
			return detail(ErrCorrupt, "class %s contains itself inline", t.Name)
		case done:
			return nil
		}
		if depth > maxInlineDepth {
			return detail(ErrTooLarge, "classes nest inline deeper than %d (at %s)", maxInlineDepth, t.Name)
		}
		state[t] = visiting
		nodes, h := int64(1), 1
		only, varints := t.Kind == KindStruct || isVarintKind(t.Kind), int64(0)
		if t.Kind != KindStruct {
			varints = 1
		}
		for i := range t.Fields {
			f := &t.Fields[i]
			switch {
			case f.Array:
				only = false
			case f.ConstantPool || isVarintKind(f.Type.Kind):
				varints++
			case f.Type.Kind != KindStruct:
				only = false
			}
			if f.ConstantPool || f.Type.Kind != KindStruct {
				nodes++
				continue
			}
			if err := visit(f.Type, depth+1); err != nil {
				return err
			}
			h = max(h, 1+height[f.Type])
			if f.Array {
				nodes++
			} else {
				nodes += int64(f.Type.nodes)
				only = only && f.Type.varintsOnly
				varints += int64(f.Type.varints)
			}
			if nodes > maxTypeNodes {
				return detail(ErrTooLarge, "a value of class %s expands to more than %d fields", t.Name, maxTypeNodes)
			}
		}
		if h > maxInlineDepth {
			return detail(ErrTooLarge, "classes nest inline deeper than %d (in %s)", maxInlineDepth, t.Name)
		}
		t.nodes, height[t] = int32(nodes), h
		t.varintsOnly, t.varints = only, int32(varints) // varints <= nodes
		state[t] = done
		return nil
	}
	for _, t := range m.Types {
		if err := visit(t, 0); err != nil {
			return err
		}
	}
	return nil
}
