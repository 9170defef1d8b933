package gil

import (
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
)

// The ELF files read here are written by the processes probed, which may be
// hostile: a "libpython" may claim a 512 MiB symbol table in a 4 KiB file,
// or be a sparse file of any size. debug/elf believes section sizes (it
// reads them in 10 MiB chunks, and builds a Symbol per entry), so what it
// may read is checked first, every byte it reads is charged to a budget,
// and the symbol tables are scanned here, through a fixed buffer, rather
// than by File.Symbols.

// Errors callers branch on with errors.Is.
var (
	// ErrLimit is wrapped by the error for a file that claims more than
	// Limits allow.
	ErrLimit = errors.New("ELF file exceeds a limit")
	// ErrMalformed is wrapped by the error for a file whose headers
	// contradict themselves or its real size.
	ErrMalformed = errors.New("malformed ELF file")
)

// Limits bound what reading one ELF file may cost, whatever it claims.
type Limits struct {
	// Bytes bounds what is read from the file into memory: program and
	// section headers, section names, string tables, notes.
	Bytes int64
	// Sections bounds the section headers.
	Sections int
	// Symbols bounds the entries of one symbol table.
	Symbols int
	// Notes bounds the notes of .note.stapsdt.
	Notes int
}

// DefaultLimits keep one file under 64 MiB of memory: 32 MiB of data read,
// plus what debug/elf builds per section (about 200 bytes, 64Ki sections)
// and per segment (about 100 bytes, at most 64Ki) and its 10 MiB read
// chunk. An unstripped libpython3.11 has 36 sections, 15k symbols, about
// 1 MiB of string tables; Debian's python3.11 about 20 USDT notes.
var DefaultLimits = Limits{Bytes: 32 << 20, Sections: 1 << 16, Symbols: 1 << 21, Notes: 1 << 12}

// ELFError says where in an ELF file reading stopped, and why. It wraps
// ErrLimit, ErrMalformed or the I/O error.
type ELFError struct {
	// Where names the part: "file header", "section headers", ".symtab".
	Where string
	// Offset is the part's offset in the file.
	Offset uint64
	Err    error
}

func (e *ELFError) Error() string {
	return fmt.Sprintf("gil: ELF %s at offset %d: %v", e.Where, e.Offset, e.Err)
}

func (e *ELFError) Unwrap() error { return e.Err }

// Image is what the probes use of one ELF file.
type Image struct {
	// Symbols are the probed functions the file defines, at their file
	// offsets.
	Symbols Symbols
	// USDT are the file's SDT probes.
	USDT []USDTProbe
	// USDTErr says why notes the file has could not be decoded; the file
	// can still be probed through its symbols.
	USDTErr error
	// Decoded names the probed static functions (take_gil, drop_gil,
	// gc_collect_main) that the symbol tables lacked and that were found
	// by decoding their exported callers instead (static.go); they are in
	// Symbols like the others.
	Decoded []string
	// DecodeErr says why static functions the symbol tables lacked could
	// not be found by decoding; nil when none was missing or all were
	// found.
	DecodeErr error
}

// ReadFile reads the image of the open file f within DefaultLimits, its
// size taken from fstat: what the file is, not what it says.
func ReadFile(f *os.File) (*Image, error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("gil: stat %s: %w", f.Name(), err)
	}
	img, err := ReadImage(f, fi.Size(), DefaultLimits)
	if err != nil {
		return nil, fmt.Errorf("gil: %s: %w", f.Name(), err)
	}
	return img, nil
}

// ReadImage reads the image of the ELF file r, size bytes long, within lim.
// Only 64-bit ELF executables and shared objects are read.
func ReadImage(r io.ReaderAt, size int64, lim Limits) (*Image, error) {
	rd := &imageReader{r: r, size: uint64(max(size, 0)), left: lim.Bytes, lim: lim}
	if err := rd.checkHeaders(); err != nil {
		return nil, err
	}
	f, err := rd.parse()
	if err != nil {
		return nil, err
	}
	if f.Type != elf.ET_EXEC && f.Type != elf.ET_DYN {
		return nil, &ELFError{Where: "file header", Err: fmt.Errorf("%w: type %s is neither an executable nor a shared object", ErrMalformed, f.Type)}
	}
	img := &Image{Symbols: Symbols{}}
	// .dynsym last: where a name is in both it wins, as it did when
	// cilium/ebpf resolved the symbols.
	for _, typ := range []elf.SectionType{elf.SHT_SYMTAB, elf.SHT_DYNSYM} {
		if err := rd.scanSymbols(f, typ, img.Symbols); err != nil {
			return nil, err
		}
	}
	img.USDT, err = rd.readUSDT(f)
	if err != nil {
		var ee *ELFError
		if errors.As(err, &ee) {
			return nil, err
		}
		img.USDT, img.USDTErr = nil, err
	}
	if img.Symbols.HasGIL() {
		img.Decoded, img.DecodeErr = rd.decodeStatic(f, img.Symbols, hasUSDTGC(img.USDT))
	}
	return img, nil
}

// imageReader reads one file within its limits; left is what remains of
// lim.Bytes.
type imageReader struct {
	r    io.ReaderAt
	size uint64
	left int64
	lim  Limits
}

// ReadAt is what debug/elf reads through: every byte is charged.
func (rd *imageReader) ReadAt(p []byte, off int64) (int, error) {
	if int64(len(p)) > rd.left {
		return 0, &ELFError{Where: "headers", Offset: uint64(off), Err: fmt.Errorf("%w: a read of %d bytes past the %d-byte budget", ErrLimit, len(p), rd.lim.Bytes)}
	}
	rd.left -= int64(len(p))
	return rd.r.ReadAt(p, off)
}

// within checks that n bytes at off lie inside the file.
func (rd *imageReader) within(where string, off, n uint64) error {
	if off > rd.size || n > rd.size-off {
		return &ELFError{Where: where, Offset: off, Err: fmt.Errorf("%w: %d bytes claimed past the end of the %d-byte file", ErrMalformed, n, rd.size)}
	}
	return nil
}

// charge takes n bytes from the budget.
func (rd *imageReader) charge(where string, off, n uint64) error {
	if n > uint64(max(rd.left, 0)) {
		return &ELFError{Where: where, Offset: off, Err: fmt.Errorf("%w: %d bytes, %d left of the %d-byte budget", ErrLimit, n, rd.left, rd.lim.Bytes)}
	}
	rd.left -= int64(n)
	return nil
}

// checkHeaders checks, before debug/elf allocates for them, the counts and
// sizes the file header claims: the program and section header tables and
// the section name table lie inside the file, the sections are within the
// limit.
func (rd *imageReader) checkHeaders() error {
	var h elf.Header64
	ident := h.Ident[:]
	if _, err := rd.r.ReadAt(ident, 0); err != nil {
		return &ELFError{Where: "file header", Err: fmt.Errorf("%w: %w", ErrMalformed, err)}
	}
	if string(ident[:4]) != elf.ELFMAG {
		return &ELFError{Where: "file header", Err: fmt.Errorf("%w: bad magic %q", ErrMalformed, ident[:4])}
	}
	if elf.Class(ident[elf.EI_CLASS]) != elf.ELFCLASS64 {
		return &ELFError{Where: "file header", Err: fmt.Errorf("%w: %s, only 64-bit files are probed", ErrMalformed, elf.Class(ident[elf.EI_CLASS]))}
	}
	bo, err := byteOrder(ident)
	if err != nil {
		return err
	}
	if err := rd.readStruct("file header", 0, bo, &h); err != nil {
		return err
	}
	if err := rd.within("program headers", h.Phoff, uint64(h.Phnum)*uint64(h.Phentsize)); err != nil {
		return err
	}
	shnum, shstrndx := uint64(h.Shnum), uint64(h.Shstrndx)
	if h.Shoff == 0 {
		return nil
	}
	if shnum == 0 || shstrndx == uint64(elf.SHN_XINDEX) {
		// Extended numbering: the counts are in section header 0.
		var sh0 elf.Section64
		if err := rd.readStruct("section header 0", h.Shoff, bo, &sh0); err != nil {
			return err
		}
		if shnum == 0 {
			shnum = sh0.Size
		}
		if shstrndx == uint64(elf.SHN_XINDEX) {
			shstrndx = uint64(sh0.Link)
		}
	}
	if shnum > uint64(rd.lim.Sections) {
		return &ELFError{Where: "section headers", Offset: h.Shoff, Err: fmt.Errorf("%w: %d sections, at most %d", ErrLimit, shnum, rd.lim.Sections)}
	}
	if err := rd.within("section headers", h.Shoff, shnum*uint64(h.Shentsize)); err != nil {
		return err
	}
	if shstrndx == 0 || shstrndx >= shnum || h.Shentsize < uint16(binary.Size(elf.Section64{})) {
		// debug/elf refuses these itself, before reading names.
		return nil
	}
	var shstr elf.Section64
	at := h.Shoff + shstrndx*uint64(h.Shentsize)
	if err := rd.readStruct("section name table header", at, bo, &shstr); err != nil {
		return err
	}
	if err := rd.within("section name table", shstr.Off, shstr.Size); err != nil {
		return err
	}
	if elf.SectionFlag(shstr.Flags)&elf.SHF_COMPRESSED != 0 {
		// debug/elf would inflate it to the size its compression header
		// claims, allocating before it reads; no toolchain compresses it.
		return &ELFError{Where: "section name table", Offset: shstr.Off, Err: fmt.Errorf("%w: compressed", ErrMalformed)}
	}
	if shstr.Size > uint64(max(rd.left, 0)) {
		return &ELFError{Where: "section name table", Offset: shstr.Off, Err: fmt.Errorf("%w: %d bytes, budget %d", ErrLimit, shstr.Size, rd.lim.Bytes)}
	}
	return nil
}

func byteOrder(ident []byte) (binary.ByteOrder, error) {
	switch elf.Data(ident[elf.EI_DATA]) {
	case elf.ELFDATA2LSB:
		return binary.LittleEndian, nil
	case elf.ELFDATA2MSB:
		return binary.BigEndian, nil
	}
	return nil, &ELFError{Where: "file header", Err: fmt.Errorf("%w: data encoding %d", ErrMalformed, ident[elf.EI_DATA])}
}

// readStruct decodes a fixed-size header at off.
func (rd *imageReader) readStruct(where string, off uint64, bo binary.ByteOrder, v any) error {
	n := uint64(binary.Size(v))
	if err := rd.within(where, off, n); err != nil {
		return err
	}
	if err := binary.Read(io.NewSectionReader(rd.r, int64(off), int64(n)), bo, v); err != nil {
		return &ELFError{Where: where, Offset: off, Err: err}
	}
	return nil
}

// parse runs debug/elf on the checked file, through the budget. A panic in
// debug/elf (it has had several on crafted input) is a malformed file.
func (rd *imageReader) parse() (f *elf.File, err error) {
	defer func() {
		if p := recover(); p != nil {
			f, err = nil, &ELFError{Where: "headers", Err: fmt.Errorf("%w: debug/elf panicked: %v", ErrMalformed, p)}
		}
	}()
	f, err = elf.NewFile(rd)
	if err != nil {
		var ee *ELFError
		if errors.As(err, &ee) {
			return nil, err
		}
		return nil, &ELFError{Where: "headers", Err: fmt.Errorf("%w: %w", ErrMalformed, err)}
	}
	return f, nil
}

// readSection reads a section whole, after checking it lies inside the
// file and fits the budget.
func (rd *imageReader) readSection(s *elf.Section) ([]byte, error) {
	if s.Type == elf.SHT_NOBITS {
		return nil, nil
	}
	if s.Flags&elf.SHF_COMPRESSED != 0 {
		return nil, &ELFError{Where: s.Name, Offset: s.Offset, Err: fmt.Errorf("%w: compressed", ErrMalformed)}
	}
	if err := rd.within(s.Name, s.Offset, s.FileSize); err != nil {
		return nil, err
	}
	if err := rd.charge(s.Name, s.Offset, s.FileSize); err != nil {
		return nil, err
	}
	data := make([]byte, s.FileSize)
	if _, err := rd.r.ReadAt(data, int64(s.Offset)); err != nil {
		return nil, &ELFError{Where: s.Name, Offset: s.Offset, Err: err}
	}
	return data, nil
}

// symbolChunk is how many symbol table entries are read at once.
const symbolChunk = 2048

// probedSet is probedSymbols as a set.
var probedSet = func() map[string]bool {
	m := map[string]bool{}
	for _, s := range probedSymbols {
		m[s] = true
	}
	return m
}()

// scanSymbols adds the probed functions of the first symbol table of type
// typ to out, at their file offsets.
func (rd *imageReader) scanSymbols(f *elf.File, typ elf.SectionType, out Symbols) error {
	s := f.SectionByType(typ)
	if s == nil || s.Type == elf.SHT_NOBITS || s.FileSize == 0 {
		return nil
	}
	if s.Flags&elf.SHF_COMPRESSED != 0 {
		return &ELFError{Where: s.Name, Offset: s.Offset, Err: fmt.Errorf("%w: compressed", ErrMalformed)}
	}
	return rd.eachSymbol(f, s, func(sym symbolEntry, _, _ uint64) error {
		value := sym.value()
		if sym.typ() != elf.STT_FUNC || value == 0 {
			return nil
		}
		name := sym.name()
		if !probedSet[string(name)] {
			return nil
		}
		if off, ok := codeOffset(f, value); ok && off < rd.size {
			out[string(name)] = off
		}
		return nil
	})
}

// symbolEntry is one Elf64_Sym of a symbol table being walked: name u32,
// info u8, other u8, shndx u16, value u64, size u64.
type symbolEntry struct {
	e    []byte
	bo   binary.ByteOrder
	strs []byte // the table's string table
}

func (y symbolEntry) name() []byte              { return cString(y.strs, y.bo.Uint32(y.e[0:4])) }
func (y symbolEntry) typ() elf.SymType          { return elf.ST_TYPE(y.e[4]) }
func (y symbolEntry) section() elf.SectionIndex { return elf.SectionIndex(y.bo.Uint16(y.e[6:8])) }
func (y symbolEntry) value() uint64             { return y.bo.Uint64(y.e[8:16]) }
func (y symbolEntry) size() uint64              { return y.bo.Uint64(y.e[16:24]) }

// eachSymbol checks symbol table s (whole entries, inside the file, at
// most Limits.Symbols of them, a string table linked) and calls yield with
// each entry, its index and its file offset; an error from yield ends the
// walk. Entries are read through a fixed buffer; only their names' string
// table is held whole.
func (rd *imageReader) eachSymbol(f *elf.File, s *elf.Section, yield func(sym symbolEntry, index, offset uint64) error) error {
	if s.FileSize%elf.Sym64Size != 0 {
		return &ELFError{Where: s.Name, Offset: s.Offset, Err: fmt.Errorf("%w: size %d is not a multiple of %d", ErrMalformed, s.FileSize, elf.Sym64Size)}
	}
	if err := rd.within(s.Name, s.Offset, s.FileSize); err != nil {
		return err
	}
	n := s.FileSize / elf.Sym64Size
	if n > uint64(rd.lim.Symbols) {
		return &ELFError{Where: s.Name, Offset: s.Offset, Err: fmt.Errorf("%w: %d symbols, at most %d", ErrLimit, n, rd.lim.Symbols)}
	}
	if int(s.Link) >= len(f.Sections) || f.Sections[s.Link].Type != elf.SHT_STRTAB {
		return &ELFError{Where: s.Name, Offset: s.Offset, Err: fmt.Errorf("%w: string table link %d", ErrMalformed, s.Link)}
	}
	strs, err := rd.readSection(f.Sections[s.Link])
	if err != nil {
		return err
	}
	buf := make([]byte, symbolChunk*elf.Sym64Size)
	for i := uint64(0); i < n; {
		k := min(n-i, symbolChunk)
		b := buf[:k*elf.Sym64Size]
		at := s.Offset + i*elf.Sym64Size
		if _, err := rd.r.ReadAt(b, int64(at)); err != nil {
			return &ELFError{Where: s.Name, Offset: at, Err: err}
		}
		for j := range k {
			e := b[j*elf.Sym64Size : (j+1)*elf.Sym64Size]
			if err := yield(symbolEntry{e: e, bo: f.ByteOrder, strs: strs}, i+j, at+j*elf.Sym64Size); err != nil {
				return err
			}
		}
		i += k
	}
	return nil
}

// cString returns the NUL-terminated string at off in a string table.
func cString(tab []byte, off uint32) []byte {
	if uint64(off) >= uint64(len(tab)) {
		return nil
	}
	s := tab[off:]
	for i, c := range s {
		if c == 0 {
			return s[:i]
		}
	}
	return s
}

// codeOffset converts a function's address to its file offset, where its
// uprobe goes, through the executable loadable segment holding it.
func codeOffset(f *elf.File, addr uint64) (uint64, bool) {
	for _, p := range f.Progs {
		if p.Type != elf.PT_LOAD || p.Flags&elf.PF_X == 0 {
			continue
		}
		if addr >= p.Vaddr && addr-p.Vaddr < p.Filesz {
			off := addr - p.Vaddr + p.Off
			// 0 asks cilium/ebpf to look the symbol up itself.
			return off, off != 0
		}
	}
	return 0, false
}

// decodeStatic finds by decoding the static functions syms lacks. A file
// that cannot be decoded within its limits still has its exported
// functions probed: the error is returned, not fatal.
// GC pauses come from the interpreter's own USDT probes where it has
// them (usdtGC): gc_collect_main is then not looked for.
func (rd *imageReader) decodeStatic(f *elf.File, syms Symbols, usdtGC bool) ([]string, error) {
	want := func(t staticTarget) bool { return t.wanted(syms) && !(usdtGC && t.symbol == SymGCCollectMain) }
	if !slices.ContainsFunc(staticTargets, want) {
		return nil, nil
	}
	c, err := rd.newCodeImage(f)
	if err != nil {
		return nil, err
	}
	return findStatic(c, syms, want)
}

// hasUSDTGC reports whether probes has both of CPython's GC probes.
func hasUSDTGC(probes []USDTProbe) bool {
	var start, done bool
	for _, p := range probes {
		start = start || p.Provider == USDTProvider && p.Name == USDTGCStart
		done = done || p.Provider == USDTProvider && p.Name == USDTGCDone
	}
	return start && done
}
