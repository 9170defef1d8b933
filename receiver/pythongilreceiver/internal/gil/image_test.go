package gil

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"testing"
)

// openELF opens path for ReadFile and Attach, closed when the test ends.
func openELF(t testing.TB, path string) *os.File {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	return f
}

// elftest describes a synthetic ELF64 file: sections laid out one after the
// other, one executable PT_LOAD segment covering the whole file.
type elftest struct {
	sections []sectiontest
	// shnum, when set, replaces the section count in the file header (0
	// with extended numbering, the count then in section 0's size).
	shnum    uint16
	extended uint64
	// machine, when set, replaces EM_X86_64.
	machine elf.Machine
}

type sectiontest struct {
	name  string
	typ   elf.SectionType
	flags elf.SectionFlag
	link  uint32
	data  []byte
	// claim, when set, is the size the header claims instead of len(data).
	claim uint64
}

// textOffset is where .text lands in files built by build: right after
// the file header and the one program header.
const textOffset = 64 + 56

// build returns the file's bytes.
func (e elftest) build() []byte {
	var body bytes.Buffer
	offsets := make([]uint64, len(e.sections))
	at := uint64(textOffset)
	for i, s := range e.sections {
		offsets[i] = at
		body.Write(s.data)
		at += uint64(len(s.data))
	}
	// The section name table follows, then the section headers.
	var names bytes.Buffer
	names.WriteByte(0)
	nameOff := make([]uint32, len(e.sections))
	for i, s := range e.sections {
		nameOff[i] = uint32(names.Len())
		names.WriteString(s.name)
		names.WriteByte(0)
	}
	shstrOff := uint64(names.Len())
	names.WriteString(".shstrtab\x00")
	namesAt := at
	at += uint64(names.Len())
	shoff := at
	n := len(e.sections) + 2 // null, sections, .shstrtab
	total := shoff + uint64(n)*64

	var out bytes.Buffer
	hdr := elf.Header64{
		Type: uint16(elf.ET_DYN), Machine: uint16(elf.EM_X86_64), Version: uint32(elf.EV_CURRENT),
		Phoff: 64, Shoff: shoff, Ehsize: 64, Phentsize: 56, Phnum: 1, Shentsize: 64,
		Shnum: uint16(n), Shstrndx: uint16(n - 1),
	}
	copy(hdr.Ident[:], elf.ELFMAG)
	hdr.Ident[elf.EI_CLASS] = byte(elf.ELFCLASS64)
	hdr.Ident[elf.EI_DATA] = byte(elf.ELFDATA2LSB)
	hdr.Ident[elf.EI_VERSION] = byte(elf.EV_CURRENT)
	if e.machine != 0 {
		hdr.Machine = uint16(e.machine)
	}
	if e.shnum != 0 || e.extended != 0 {
		hdr.Shnum = e.shnum
	}
	write(&out, hdr)
	write(&out, elf.Prog64{Type: uint32(elf.PT_LOAD), Flags: uint32(elf.PF_R | elf.PF_X), Filesz: total, Memsz: total, Align: 0x1000})
	out.Write(body.Bytes())
	out.Write(names.Bytes())
	write(&out, elf.Section64{Size: e.extended})
	for i, s := range e.sections {
		size := uint64(len(s.data))
		if s.claim != 0 {
			size = s.claim
		}
		write(&out, elf.Section64{Name: nameOff[i], Type: uint32(s.typ), Flags: uint64(s.flags), Addr: offsets[i],
			Off: offsets[i], Size: size, Link: s.link, Entsize: entsize(s.typ)})
	}
	write(&out, elf.Section64{Name: uint32(shstrOff), Type: uint32(elf.SHT_STRTAB), Off: namesAt, Size: uint64(names.Len())})
	return out.Bytes()
}

func entsize(t elf.SectionType) uint64 {
	if t == elf.SHT_SYMTAB || t == elf.SHT_DYNSYM {
		return elf.Sym64Size
	}
	return 0
}

func write(b *bytes.Buffer, v any) {
	if err := binary.Write(b, binary.LittleEndian, v); err != nil {
		panic(err)
	}
}

// symtab returns a symbol table (with its leading null entry) and its
// string table defining each name as a function at addrs[i].
func symtab(names []string, addrs []uint64, typ elf.SymType) (syms, strs []byte) {
	var sb, tb bytes.Buffer
	tb.WriteByte(0)
	write(&sb, elf.Sym64{})
	for i, n := range names {
		write(&sb, elf.Sym64{Name: uint32(tb.Len()), Info: elf.ST_INFO(elf.STB_GLOBAL, typ), Shndx: 1, Value: addrs[i], Size: 16})
		tb.WriteString(n)
		tb.WriteByte(0)
	}
	return sb.Bytes(), tb.Bytes()
}

// stapsdt returns a .note.stapsdt with one note per name, provider
// "python", its pc at pc.
func stapsdt(pc uint64, names ...string) []byte {
	var b bytes.Buffer
	for _, n := range names {
		var desc bytes.Buffer
		write(&desc, [3]uint64{pc, 0, 0})
		desc.WriteString("python\x00" + n + "\x00-4@%edi\x00")
		for desc.Len()%4 != 0 {
			desc.WriteByte(0)
		}
		write(&b, [3]uint32{8, uint32(desc.Len()), ntSTAPSDT})
		b.WriteString("stapsdt\x00")
		b.Write(desc.Bytes())
	}
	return b.Bytes()
}

// libpythontest is a small synthetic libpython: a .text of nops, the GIL
// and GC functions in .symtab (and .dynsym for the exported ones), and
// the gc__start/gc__done notes.
func libpythontest() elftest {
	text := bytes.Repeat([]byte{0x90}, 256)
	names := []string{SymSaveThread, SymRestoreThread, SymTakeGIL, SymDropGIL, SymGCCollectMain, "unrelated"}
	addrs := []uint64{textOffset, textOffset + 16, textOffset + 32, textOffset + 48, textOffset + 64, textOffset + 80}
	syms, strs := symtab(names, addrs, elf.STT_FUNC)
	dyn, dynstr := symtab(names[:2], addrs[:2], elf.STT_FUNC)
	return elftest{sections: []sectiontest{
		{name: ".text", typ: elf.SHT_PROGBITS, flags: elf.SHF_ALLOC | elf.SHF_EXECINSTR, data: text},
		{name: ".symtab", typ: elf.SHT_SYMTAB, link: 3, data: syms},
		{name: ".strtab", typ: elf.SHT_STRTAB, data: strs},
		{name: ".dynsym", typ: elf.SHT_DYNSYM, link: 5, data: dyn},
		{name: ".dynstr", typ: elf.SHT_STRTAB, data: dynstr},
		{name: stapsdtNote, typ: elf.SHT_NOTE, data: stapsdt(textOffset+96, USDTGCStart, USDTGCDone)},
	}}
}

func TestReadImageSyntheticLibPython(t *testing.T) {
	data := libpythontest().build()
	img, err := ReadImage(bytes.NewReader(data), int64(len(data)), DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	want := Symbols{SymSaveThread: textOffset, SymRestoreThread: textOffset + 16, SymTakeGIL: textOffset + 32,
		SymDropGIL: textOffset + 48, SymGCCollectMain: textOffset + 64}
	if len(img.Symbols) != len(want) {
		t.Errorf("symbols %v, want %v", img.Symbols, want)
	}
	for name, off := range want {
		if img.Symbols[name] != off {
			t.Errorf("%s at %#x, want %#x", name, img.Symbols[name], off)
		}
	}
	if len(img.USDT) != 2 || img.USDT[0].Name != USDTGCStart || img.USDT[1].Name != USDTGCDone || img.USDT[0].Offset != textOffset+96 {
		t.Errorf("USDT %+v, want gc__start and gc__done at %#x", img.USDT, textOffset+96)
	}
}

// TestReadImageMatchesDebugELF reads a real libpython: the offsets are
// those cilium/ebpf computed from debug/elf's symbols before.
func TestReadImageMatchesDebugELF(t *testing.T) {
	libs, _ := filepath.Glob("/root/.pyenv/versions/3.1[0-3]*/lib/libpython3.*.so.1.0")
	if len(libs) == 0 {
		t.Skip("no pyenv libpython here")
	}
	for _, path := range libs {
		t.Run(filepath.Base(path), func(t *testing.T) {
			img, err := ReadFile(openELF(t, path))
			if err != nil {
				t.Fatal(err)
			}
			f, err := elf.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			want := Symbols{}
			syms, _ := f.Symbols()
			dyn, _ := f.DynamicSymbols()
			for _, s := range append(syms, dyn...) {
				if elf.ST_TYPE(s.Info) != elf.STT_FUNC || s.Value == 0 || !probedSet[s.Name] {
					continue
				}
				if off, ok := codeOffset(f, s.Value); ok {
					want[s.Name] = off
				}
			}
			if !img.Symbols.HasGIL() || len(img.Symbols) != len(want) {
				t.Fatalf("symbols %v, want %v", img.Symbols, want)
			}
			for name, off := range want {
				if img.Symbols[name] != off {
					t.Errorf("%s at %#x, debug/elf says %#x", name, img.Symbols[name], off)
				}
			}
		})
	}
}

// allocated returns the bytes allocated by the heap so far.
func allocated() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// claimFile writes data to a file that is size bytes long (sparse past
// data) and opens it.
func claimFile(t *testing.T, data []byte, size int64) *os.File {
	t.Helper()
	path := filepath.Join(t.TempDir(), "libpython3.11.so.1.0")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if size > int64(len(data)) {
		if err := os.Truncate(path, size); err != nil {
			t.Fatal(err)
		}
	}
	return openELF(t, path)
}

// TestReadImageRefusesWhatFilesClaim: files written by the attacker, each
// claiming far more than it may cost; every one is refused with the
// typed error, and reading it allocates less than 64 MiB in all.
func TestReadImageRefusesWhatFilesClaim(t *testing.T) {
	const claim = 512 << 20
	// 512 MiB, to a whole number of symbols.
	const symClaim = claim / elf.Sym64Size * elf.Sym64Size
	withSection := func(i int, edit func(*sectiontest)) elftest {
		e := libpythontest()
		edit(&e.sections[i])
		return e
	}
	manyNotes := libpythontest()
	manyNotes.sections[5].data = stapsdt(textOffset+96, make([]string, DefaultLimits.Notes+1)...)
	manySections := libpythontest()
	manySections.extended = 1 << 30
	tests := []struct {
		name string
		elf  elftest
		size int64 // the file's real size, sparse past the data; 0: as built
		want error
	}{
		{"tiny file claiming a 512 MiB .symtab", withSection(1, func(s *sectiontest) { s.claim = symClaim }), 0, ErrMalformed},
		{"sparse 600 MiB file with a 512 MiB .symtab", withSection(1, func(s *sectiontest) { s.claim = symClaim }), 600 << 20, ErrLimit},
		{"sparse 600 MiB file with a 512 MiB .strtab", withSection(2, func(s *sectiontest) { s.claim = claim }), 600 << 20, ErrLimit},
		{"sparse 600 MiB file with 512 MiB of notes", withSection(5, func(s *sectiontest) { s.claim = claim }), 600 << 20, ErrLimit},
		{"more notes than the limit", manyNotes, 0, ErrLimit},
		{"2^30 sections by extended numbering", manySections, 1 << 40, ErrLimit},
		{"compressed .strtab", withSection(2, func(s *sectiontest) { s.flags |= elf.SHF_COMPRESSED }), 0, ErrMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := claimFile(t, tt.elf.build(), tt.size)
			runtime.GC()
			before := allocated()
			_, err := ReadFile(f)
			grown := allocated() - before
			if !errors.Is(err, tt.want) {
				t.Fatalf("ReadFile = %v, want %v", err, tt.want)
			}
			var ee *ELFError
			if !errors.As(err, &ee) {
				t.Fatalf("error %T, want *ELFError saying where", err)
			}
			t.Logf("%v; allocated %d KiB", err, grown>>10)
			if grown >= 64<<20 {
				t.Errorf("reading allocated %d MiB, want under 64 MiB", grown>>20)
			}
		})
	}
}

// FuzzReadImage: no input panics the reader or makes it allocate past its
// budget, and every offset it returns lies inside the file.
func FuzzReadImage(f *testing.F) {
	f.Add(libpythontest().build())
	f.Fuzz(func(t *testing.T, data []byte) {
		lim := Limits{Bytes: 1 << 20, Sections: 1 << 10, Symbols: 1 << 12, Notes: 1 << 6}
		before := allocated()
		img, err := ReadImage(bytes.NewReader(data), int64(len(data)), lim)
		// The budget, plus what debug/elf builds per section and segment
		// of a file this small.
		if grown := allocated() - before; grown > uint64(lim.Bytes)+uint64(lim.Sections)*512+uint64(len(data))*64+1<<20 {
			t.Fatalf("allocated %d bytes for a %d-byte file", grown, len(data))
		}
		if err != nil {
			return
		}
		for name, off := range img.Symbols {
			if off == 0 || off >= uint64(len(data)) {
				t.Errorf("%s at %d, outside the %d-byte file", name, off, len(data))
			}
		}
	})
}
