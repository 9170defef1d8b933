package gil

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"slices"
	"testing"
)

// strippedtest describes a synthetic stripped libpython: exported callers
// in .dynsym, static functions they call, and PLT stubs through .got
// entries that .rela.plt names, laid out as elftest lays sections out.
type strippedtest struct {
	machine elf.Machine
	// code returns .text, placed at text, given the address of each
	// function and stub (by name) and of each .got entry (by import).
	code func(at map[string]uint64) []byte
	// funcs are the functions and stubs in .text, in order, with their
	// sizes; exported ones are in .dynsym.
	funcs []funcEntry
}

type funcEntry struct {
	name     string
	size     uint64
	exported bool
}

// imports are the functions the stubs call, undefined in .dynsym.
var strippedImports = []string{"pthread_cond_timedwait", "pthread_cond_wait", "PySys_WriteStderr"}

// build lays out .text, .got, .rela.plt, .dynsym, .dynstr and returns
// the file and where each function starts.
func (st strippedtest) build() ([]byte, map[string]uint64) {
	at := map[string]uint64{}
	addr := uint64(textOffset)
	for _, f := range st.funcs {
		at[f.name] = addr
		addr += f.size
	}
	textLen := addr - textOffset
	got := textOffset + textLen
	for i, imp := range strippedImports {
		at["got:"+imp] = got + uint64(i)*8
	}
	text := st.code(at)
	if uint64(len(text)) != textLen {
		panic("code does not fit the functions' sizes")
	}
	// .dynsym: null, the imports (undefined), the exported functions.
	var syms, strs bytes.Buffer
	strs.WriteByte(0)
	write(&syms, elf.Sym64{})
	for _, imp := range strippedImports {
		write(&syms, elf.Sym64{Name: uint32(strs.Len()), Info: elf.ST_INFO(elf.STB_GLOBAL, elf.STT_FUNC)})
		strs.WriteString(imp + "\x00")
	}
	for _, f := range st.funcs {
		if f.exported {
			write(&syms, elf.Sym64{Name: uint32(strs.Len()), Info: elf.ST_INFO(elf.STB_GLOBAL, elf.STT_FUNC), Shndx: 1, Value: at[f.name], Size: f.size})
			strs.WriteString(f.name + "\x00")
		}
	}
	var rela bytes.Buffer
	for i, imp := range strippedImports {
		write(&rela, [3]uint64{at["got:"+imp], uint64(i+1)<<32 | 7, 0})
	}
	// Sections 1-5: .text, .got, .rela.plt (link 4), .dynsym (link 5), .dynstr.
	e := elftest{machine: st.machine, sections: []sectiontest{
		{name: ".text", typ: elf.SHT_PROGBITS, flags: elf.SHF_ALLOC | elf.SHF_EXECINSTR, data: text},
		{name: ".got", typ: elf.SHT_PROGBITS, flags: elf.SHF_ALLOC | elf.SHF_WRITE, data: make([]byte, 8*len(strippedImports))},
		{name: ".rela.plt", typ: elf.SHT_RELA, link: 4, data: rela.Bytes()},
		{name: ".dynsym", typ: elf.SHT_DYNSYM, link: 5, data: syms.Bytes()},
		{name: ".dynstr", typ: elf.SHT_STRTAB, data: strs.Bytes()},
	}}
	return e.build(), at
}

// x86 encodings.
func x86Call(from, to uint64) []byte {
	return binary.LittleEndian.AppendUint32([]byte{0xe8}, uint32(int32(to-(from+5))))
}

func x86Stub(at, slot uint64) []byte {
	b := binary.LittleEndian.AppendUint32([]byte{0xff, 0x25}, uint32(int32(slot-(at+6))))
	return append(b, 0xcc, 0xcc) // padded to 8 bytes
}

// strippedX86 is a stripped libpython for x86-64: PyEval_RestoreThread and
// PyEval_AcquireThread call take_gil, which calls pthread_cond_timedwait;
// PyEval_SaveThread and PyEval_ReleaseThread call drop_gil, which calls
// pthread_cond_wait; PyGC_Collect passes 2 to gc_collect_main, which
// calls PySys_WriteStderr. Every function is a call (or mov and call)
// and a ret, 8 bytes or 12.
func strippedX86() strippedtest {
	type fn struct {
		name, calls string
		gen         bool
		exported    bool
	}
	fns := []fn{
		{SymRestoreThread, SymTakeGIL, false, true}, {SymAcquireThread, SymTakeGIL, false, true},
		{SymSaveThread, SymDropGIL, false, true}, {SymReleaseThread, SymDropGIL, false, true},
		{"PyGC_Collect", SymGCCollectMain, true, true},
		{SymTakeGIL, "plt:pthread_cond_timedwait", false, false}, {SymDropGIL, "plt:pthread_cond_wait", false, false},
		{SymGCCollectMain, "plt:PySys_WriteStderr", false, false},
	}
	st := strippedtest{machine: elf.EM_X86_64}
	for _, f := range fns {
		size := uint64(8)
		if f.gen {
			size = 16
		}
		st.funcs = append(st.funcs, funcEntry{f.name, size, f.exported})
	}
	for _, imp := range strippedImports {
		st.funcs = append(st.funcs, funcEntry{"plt:" + imp, 8, false})
	}
	st.code = func(at map[string]uint64) []byte {
		var b []byte
		for _, f := range fns {
			start := len(b)
			if f.gen {
				b = append(b, 0xbe, 2, 0, 0, 0) // mov esi, 2
			}
			b = append(b, x86Call(at[f.name]+uint64(len(b)-start), at[f.calls])...)
			b = append(b, 0xc3) // ret
			for len(b)-start < 8 || f.gen && len(b)-start < 16 {
				b = append(b, 0xcc)
			}
		}
		for _, imp := range strippedImports {
			b = append(b, x86Stub(at["plt:"+imp], at["got:"+imp])...)
		}
		return b
	}
	return st
}

// arm64 encodings.
func arm64BL(from, to uint64) uint32 { return 0x94000000 | uint32((int64(to)-int64(from))/4)&0x3ffffff }

func arm64Stub(at, slot uint64) []uint32 {
	page := int64(slot&^0xfff) - int64(at&^0xfff)
	imm := uint32(page>>12) & 0x1fffff
	adrp := 0x90000010 | (imm&3)<<29 | (imm>>2)<<5
	ldr := 0xf9400211 | uint32((slot&0xfff)/8)<<10
	add := 0x91000210 | uint32(slot&0xfff)<<10
	return []uint32{adrp, ldr, add, 0xd61f0220} // br x17
}

// strippedARM64 is strippedX86's library for arm64.
func strippedARM64() strippedtest {
	x := strippedX86()
	st := strippedtest{machine: elf.EM_AARCH64}
	for _, f := range x.funcs {
		size := uint64(8) // bl, ret
		if f.name == "PyGC_Collect" {
			size = 16 // mov w1, #2; bl; ret; nop (keeps .got 8-aligned)
		}
		if f.name[:4] == "plt:" {
			size = 16
		}
		st.funcs = append(st.funcs, funcEntry{f.name, size, f.exported})
	}
	calls := map[string]string{SymRestoreThread: SymTakeGIL, SymAcquireThread: SymTakeGIL, SymSaveThread: SymDropGIL,
		SymReleaseThread: SymDropGIL, "PyGC_Collect": SymGCCollectMain, SymTakeGIL: "plt:pthread_cond_timedwait",
		SymDropGIL: "plt:pthread_cond_wait", SymGCCollectMain: "plt:PySys_WriteStderr"}
	st.code = func(at map[string]uint64) []byte {
		var w []uint32
		for _, f := range st.funcs {
			pc := at[f.name]
			switch {
			case f.name[:4] == "plt:":
				w = append(w, arm64Stub(pc, at["got:"+f.name[4:]])...)
			case f.name == "PyGC_Collect":
				w = append(w, 0x52800041, arm64BL(pc+4, at[calls[f.name]]), 0xd65f03c0, 0xd503201f)
			default:
				w = append(w, arm64BL(pc, at[calls[f.name]]), 0xd65f03c0)
			}
		}
		var b []byte
		for _, v := range w {
			b = binary.LittleEndian.AppendUint32(b, v)
		}
		return b
	}
	return st
}

// TestDecodeSyntheticStrippedLibPython: in the synthetic stripped
// libpythons of both architectures the three static functions are found
// at their entries; without the mark of one (its stub's import renamed)
// that one is reported not found, the others still found.
func TestDecodeSyntheticStrippedLibPython(t *testing.T) {
	for _, tc := range []struct {
		name string
		lib  strippedtest
	}{{"x86-64", strippedX86()}, {"arm64", strippedARM64()}} {
		t.Run(tc.name, func(t *testing.T) {
			data, at := tc.lib.build()
			img, err := ReadImage(bytes.NewReader(data), int64(len(data)), DefaultLimits)
			if err != nil {
				t.Fatal(err)
			}
			if img.DecodeErr != nil {
				t.Fatalf("decode: %v", img.DecodeErr)
			}
			for _, name := range []string{SymTakeGIL, SymDropGIL, SymGCCollectMain} {
				// Addresses are file offsets here (one segment from 0).
				if got := img.Symbols[name]; got != at[name] {
					t.Errorf("%s at %#x, want %#x", name, got, at[name])
				}
			}
			renamed := bytes.Replace(data, []byte("pthread_cond_wait\x00"), []byte("pthread_cond_xxxx\x00"), 1)
			img, err = ReadImage(bytes.NewReader(renamed), int64(len(renamed)), DefaultLimits)
			if err != nil {
				t.Fatal(err)
			}
			if !errors.Is(img.DecodeErr, ErrNotDecoded) || img.Symbols.Has(SymDropGIL) {
				t.Errorf("without pthread_cond_wait: drop_gil at %#x, error %v; want none, ErrNotDecoded", img.Symbols[SymDropGIL], img.DecodeErr)
			}
			if !img.Symbols.Has(SymTakeGIL) || !img.Symbols.Has(SymGCCollectMain) {
				t.Errorf("without pthread_cond_wait: decoded %v, want take_gil and gc_collect_main still", img.Decoded)
			}
		})
	}
}

// FuzzDecodeStatic feeds hostile variants of the synthetic stripped
// libpythons to ReadImage, which decodes them: whatever the bytes, it
// returns (no panic, no unbounded time or memory), a decoding that fails
// says why with ErrNotDecoded, ErrLimit or ErrMalformed, and a function
// found lies in the file.
func FuzzDecodeStatic(f *testing.F) {
	x86, _ := strippedX86().build()
	arm, _ := strippedARM64().build()
	f.Add(x86)
	f.Add(arm)
	f.Fuzz(func(t *testing.T, data []byte) {
		lim := Limits{Bytes: 1 << 20, Sections: 1 << 10, Symbols: 1 << 12, Notes: 1 << 6}
		before := allocated()
		img, err := ReadImage(bytes.NewReader(data), int64(len(data)), lim)
		if grown := allocated() - before; grown > 64<<20 {
			t.Fatalf("allocated %d bytes for a %d-byte file", grown, len(data))
		}
		if err != nil {
			return
		}
		if img.DecodeErr != nil && !errors.Is(img.DecodeErr, ErrNotDecoded) && !errors.Is(img.DecodeErr, ErrLimit) && !errors.Is(img.DecodeErr, ErrMalformed) {
			var ee *ELFError
			if !errors.As(img.DecodeErr, &ee) {
				t.Errorf("decode error %v says neither ErrNotDecoded, ErrLimit, ErrMalformed nor where in the file", img.DecodeErr)
			}
		}
		for _, name := range img.Decoded {
			if off := img.Symbols[name]; off == 0 || off >= uint64(len(data)) {
				t.Errorf("%s decoded at %d, outside the %d-byte file", name, off, len(data))
			}
			if !slices.Contains([]string{SymTakeGIL, SymDropGIL, SymGCCollectMain}, name) {
				t.Errorf("decoded %q", name)
			}
		}
	})
}
