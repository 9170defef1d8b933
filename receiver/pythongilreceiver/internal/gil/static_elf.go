package gil

import (
	"debug/elf"
	"fmt"
	"slices"
)

// maxExports bounds the exported functions a search keeps (libpython
// exports about 1,600; a static python executable about as many).
const maxExports = 1 << 16

// relaChunk is how many relocation entries are read at once.
const relaChunk = 2048

// newCodeImage reads what the search needs of f: its executable
// segments, the functions .dynsym defines, and the GOT entries of the
// functions it names (from the SHT_RELA sections that refer to .dynsym).
func (rd *imageReader) newCodeImage(f *elf.File) (*codeImage, error) {
	dec, err := decoderFor(f.Machine)
	if err != nil {
		return nil, err
	}
	c := &codeImage{rd: rd, machine: f.Machine, decode: dec, pages: map[uint64][]byte{},
		exports: map[uint64]string{}, sizes: map[uint64]uint64{}, byName: map[string]uint64{}, slots: map[uint64]string{}, stubs: map[uint64]string{}}
	for _, p := range f.Progs {
		if p.Type == elf.PT_LOAD && p.Flags&elf.PF_X != 0 {
			c.segs = append(c.segs, p.ProgHeader)
		}
	}
	var dynsym *elf.Section
	dynIndex := 0
	for i, s := range f.Sections {
		if s.Type == elf.SHT_DYNSYM {
			dynsym, dynIndex = s, i
			break
		}
	}
	if dynsym == nil || len(c.segs) == 0 {
		return nil, fmt.Errorf("%w: no .dynsym or no executable segment", ErrNotDecoded)
	}
	named, err := rd.readExports(f, dynsym, c)
	if err != nil {
		return nil, err
	}
	if c.starts, err = rd.functionStarts(f); err != nil {
		return nil, err
	}
	for _, s := range f.Sections {
		if s.Type != elf.SHT_RELA || int(s.Link) != dynIndex {
			continue
		}
		if err := rd.readSlots(f, s, named, c); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// readExports fills c.exports and c.byName from .dynsym and returns the
// names of namedCallees by symbol index, for the relocations.
func (rd *imageReader) readExports(f *elf.File, s *elf.Section, c *codeImage) (map[uint32]string, error) {
	named := map[uint32]string{}
	err := rd.eachSymbol(f, s, func(sym symbolEntry, index, offset uint64) error {
		typ := sym.typ()
		if typ != elf.STT_FUNC && typ != elf.STT_GNU_IFUNC {
			return nil
		}
		name := string(sym.name())
		if namedCallees[name] {
			named[uint32(index)] = name
		}
		value := sym.value()
		if value == 0 || sym.section() == elf.SHN_UNDEF {
			return nil
		}
		if len(c.exports) >= maxExports {
			return &ELFError{Where: s.Name, Offset: offset, Err: fmt.Errorf("%w: more than %d exported functions", ErrLimit, maxExports)}
		}
		c.exports[value] = name
		c.sizes[value] = sym.size()
		if isSearchName(name) {
			c.byName[name] = value
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return named, nil
}

// isSearchName reports whether the search looks name up: a caller of a
// static target or a named callee.
func isSearchName(name string) bool {
	if namedCallees[name] || slices.Contains(entryHints, name) {
		return true
	}
	for _, t := range staticTargets {
		for _, c := range t.callers {
			if c == name {
				return true
			}
		}
	}
	return false
}

// readSlots adds the GOT entries of s (an SHT_RELA section over .dynsym)
// that point to named functions.
func (rd *imageReader) readSlots(f *elf.File, s *elf.Section, named map[uint32]string, c *codeImage) error {
	const entSize = 24 // Elf64_Rela: offset u64, info u64, addend i64
	if s.FileSize%entSize != 0 {
		return &ELFError{Where: s.Name, Offset: s.Offset, Err: fmt.Errorf("%w: size %d is not a multiple of %d", ErrMalformed, s.FileSize, entSize)}
	}
	if err := rd.within(s.Name, s.Offset, s.FileSize); err != nil {
		return err
	}
	n := s.FileSize / entSize
	if n > uint64(rd.lim.Symbols) {
		return &ELFError{Where: s.Name, Offset: s.Offset, Err: fmt.Errorf("%w: %d relocations, at most %d", ErrLimit, n, rd.lim.Symbols)}
	}
	bo := f.ByteOrder
	buf := make([]byte, relaChunk*entSize)
	for i := uint64(0); i < n; {
		k := min(n-i, relaChunk)
		b := buf[:k*entSize]
		at := s.Offset + i*entSize
		if _, err := rd.r.ReadAt(b, int64(at)); err != nil {
			return &ELFError{Where: s.Name, Offset: at, Err: err}
		}
		for e := b; len(e) > 0; e = e[entSize:] {
			if name, ok := named[uint32(bo.Uint64(e[8:16])>>32)]; ok {
				c.slots[bo.Uint64(e[0:8])] = name
			}
		}
		i += k
	}
	return nil
}
