package gil

import (
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// USDT probes: CPython built with --with-dtrace (Debian's and Fedora's
// system pythons are) marks points such as the GC's start and end with
// SystemTap SDT probes, described by NT_STAPSDT notes in .note.stapsdt. A
// probe is a nop at a known address; a uprobe placed there fires with the
// registers the note's argument specs name. Where the probe has a semaphore,
// the code only reaches the nop while the semaphore is non-zero, which the
// kernel maintains for uprobes given its file offset (ref_ctr_offset).

// USDT probe names of CPython's provider.
const (
	USDTProvider  = "python"
	USDTGCStart   = "gc__start" // arg 1: the generation collected
	USDTGCDone    = "gc__done"  // arg 1: objects collected
	ntSTAPSDT     = 3
	stapsdtNote   = ".note.stapsdt"
	stapsdtBase   = ".stapsdt.base"
	stapsdtOwner  = "stapsdt"
	stapsdtAddrSz = 8
)

// GCUSDT is what Library.GC returns for GC pauses from USDT probes.
const GCUSDT = "usdt:python:gc__start/gc__done"

// USDTProbe is one SDT probe of an ELF file.
type USDTProbe struct {
	Provider string
	Name     string
	// Offset is where the probe's uprobe goes: the file offset of its
	// instruction.
	Offset uint64
	// SemaphoreOffset is the file offset of the probe's semaphore, 0 when
	// it has none.
	SemaphoreOffset uint64
	// Args is the argument specification as written in the note, such as
	// "-4@%edi -8@16(%rsp)"; see ParseUSDTArgs.
	Args string
}

// ArgLocation says where a USDT argument's value is.
type ArgLocation uint8

// Argument locations.
const (
	ArgConstant ArgLocation = 1 // the value itself (Offset)
	ArgRegister ArgLocation = 2 // the value of register Reg
	ArgMemory   ArgLocation = 3 // Size bytes at Reg + Offset in the process's memory
)

// USDTArg is one parsed argument specification, on x86-64.
type USDTArg struct {
	// Size in bytes: 1, 2, 4 or 8.
	Size   int
	Signed bool
	Loc    ArgLocation
	// Reg is the 64-bit name of the register ("rdi" for %edi), for
	// ArgRegister and ArgMemory.
	Reg string
	// Offset is the constant for ArgConstant, the displacement for
	// ArgMemory.
	Offset int64
}

// USDTError says which note or argument could not be read.
type USDTError struct {
	// Where names the note or argument, e.g. "python:gc__start arg 1".
	Where string
	Err   error
}

func (e *USDTError) Error() string { return "gil: usdt " + e.Where + ": " + e.Err.Error() }

func (e *USDTError) Unwrap() error { return e.Err }

// ErrUnsupportedArg is wrapped by the error for an argument form the probes
// cannot read (rip-relative or indexed memory operands, 8- or 16-bit
// register halves).
var ErrUnsupportedArg = errors.New("unsupported argument form")

// readUSDT returns the SDT probes of f; none (and no error) when it has no
// .note.stapsdt section. Errors reading the section (its size, its place)
// are *ELFError; a note that does not decode is a *USDTError.
func (rd *imageReader) readUSDT(f *elf.File) ([]USDTProbe, error) {
	notes := f.Section(stapsdtNote)
	if notes == nil {
		return nil, nil
	}
	data, err := rd.readSection(notes)
	if err != nil {
		return nil, err
	}
	// A prelinked file moved its sections after the notes were written:
	// the note records where .stapsdt.base was, the section where it is.
	var baseAddr uint64
	if s := f.Section(stapsdtBase); s != nil {
		baseAddr = s.Addr
	}
	bo := f.ByteOrder
	var out []USDTProbe
	for off, count := 0, 0; off < len(data); count++ {
		where := func(err error) error {
			return &USDTError{Where: fmt.Sprintf("%s at offset %d", stapsdtNote, off), Err: err}
		}
		if count >= rd.lim.Notes {
			return nil, &ELFError{Where: stapsdtNote, Offset: notes.Offset, Err: fmt.Errorf("%w: more than %d notes", ErrLimit, rd.lim.Notes)}
		}
		if len(data)-off < 12 {
			return nil, where(errors.New("truncated note header"))
		}
		nameSz := uint64(bo.Uint32(data[off:]))
		descSz := uint64(bo.Uint32(data[off+4:]))
		typ := bo.Uint32(data[off+8:])
		nameAt := uint64(off) + 12
		descAt := nameAt + align4(nameSz)
		next := descAt + align4(descSz)
		if next > uint64(len(data)) {
			return nil, where(fmt.Errorf("note sizes %d/%d overrun the section", nameSz, descSz))
		}
		owner := string(bytes.TrimRight(data[nameAt:nameAt+nameSz], "\x00"))
		if typ == ntSTAPSDT && owner == stapsdtOwner {
			p, err := parseSTAPSDT(f, data[descAt:descAt+descSz], baseAddr)
			if err != nil {
				return nil, where(err)
			}
			out = append(out, p)
		}
		off = int(next)
	}
	return out, nil
}

func align4(n uint64) uint64 { return (n + 3) &^ 3 }

// parseSTAPSDT reads one note's descriptor: pc, base and semaphore
// addresses, then provider, name and arguments as NUL-terminated strings.
func parseSTAPSDT(f *elf.File, desc []byte, baseAddr uint64) (USDTProbe, error) {
	if len(desc) < 3*stapsdtAddrSz {
		return USDTProbe{}, errors.New("descriptor shorter than its three addresses")
	}
	bo := f.ByteOrder
	pc := bo.Uint64(desc)
	base := bo.Uint64(desc[8:])
	sem := bo.Uint64(desc[16:])
	strs := strings.SplitN(string(desc[24:]), "\x00", 4)
	if len(strs) < 3 {
		return USDTProbe{}, errors.New("descriptor lacks provider, name or arguments")
	}
	p := USDTProbe{Provider: strs[0], Name: strs[1], Args: strs[2]}
	if baseAddr != 0 && base != 0 {
		pc += baseAddr - base
		if sem != 0 {
			sem += baseAddr - base
		}
	}
	var err error
	if p.Offset, err = fileOffset(f, pc, elf.PF_X); err != nil {
		return USDTProbe{}, fmt.Errorf("%s:%s pc: %w", p.Provider, p.Name, err)
	}
	if sem != 0 {
		if p.SemaphoreOffset, err = fileOffset(f, sem, elf.PF_W); err != nil {
			return USDTProbe{}, fmt.Errorf("%s:%s semaphore: %w", p.Provider, p.Name, err)
		}
	}
	return p, nil
}

// fileOffset converts a virtual address to an offset in the file through
// the loadable segment, with the given permission, that contains it:
// uprobes and their semaphores are placed by file offset, wherever the
// segment is loaded.
func fileOffset(f *elf.File, addr uint64, flag elf.ProgFlag) (uint64, error) {
	for _, p := range f.Progs {
		if p.Type != elf.PT_LOAD || p.Flags&flag == 0 {
			continue
		}
		if addr >= p.Vaddr && addr < p.Vaddr+p.Filesz {
			return addr - p.Vaddr + p.Off, nil
		}
	}
	return 0, fmt.Errorf("address %#x is in no loadable %s segment", addr, flag)
}

// ParseUSDTArgs parses an x86-64 argument specification: space-separated
// "size@operand", size negative for signed values, operand "%reg",
// "$constant", "disp(%reg)" or "(%reg)".
func ParseUSDTArgs(spec string) ([]USDTArg, error) {
	var out []USDTArg
	for i, field := range strings.Fields(spec) {
		a, err := parseUSDTArg(field)
		if err != nil {
			return nil, &USDTError{Where: fmt.Sprintf("arg %d %q", i+1, field), Err: err}
		}
		out = append(out, a)
	}
	return out, nil
}

func parseUSDTArg(s string) (USDTArg, error) {
	sizeStr, op, ok := strings.Cut(s, "@")
	if !ok {
		return USDTArg{}, errors.New("no size@operand")
	}
	size, err := strconv.Atoi(sizeStr)
	if err != nil {
		return USDTArg{}, fmt.Errorf("size: %w", err)
	}
	a := USDTArg{Size: size, Signed: size < 0}
	if a.Signed {
		a.Size = -size
	}
	switch a.Size {
	case 1, 2, 4, 8:
	default:
		return USDTArg{}, fmt.Errorf("size %d is not 1, 2, 4 or 8", size)
	}
	switch {
	case strings.HasPrefix(op, "$"):
		a.Loc = ArgConstant
		if a.Offset, err = strconv.ParseInt(op[1:], 0, 64); err != nil {
			return USDTArg{}, fmt.Errorf("constant: %w", err)
		}
	case strings.HasPrefix(op, "%"):
		a.Loc = ArgRegister
		if a.Reg, err = register64(op[1:]); err != nil {
			return USDTArg{}, err
		}
	case strings.HasSuffix(op, ")"):
		disp, reg, ok := strings.Cut(strings.TrimSuffix(op, ")"), "(")
		if !ok || !strings.HasPrefix(reg, "%") || strings.Contains(reg, ",") {
			return USDTArg{}, fmt.Errorf("memory operand: %w", ErrUnsupportedArg)
		}
		a.Loc = ArgMemory
		if a.Reg, err = register64(reg[1:]); err != nil {
			return USDTArg{}, err
		}
		if a.Reg == "rip" {
			return USDTArg{}, fmt.Errorf("rip-relative operand: %w", ErrUnsupportedArg)
		}
		if disp != "" {
			if a.Offset, err = strconv.ParseInt(disp, 0, 64); err != nil {
				return USDTArg{}, fmt.Errorf("displacement %q (symbolic?): %w", disp, ErrUnsupportedArg)
			}
		}
	default:
		return USDTArg{}, fmt.Errorf("operand %q: %w", op, ErrUnsupportedArg)
	}
	return a, nil
}

// registers64 are the x86-64 general-purpose registers (and rip), by their
// 64-bit names.
var registers64 = []string{"rax", "rbx", "rcx", "rdx", "rsi", "rdi", "rbp", "rsp",
	"r8", "r9", "r10", "r11", "r12", "r13", "r14", "r15", "rip"}

// register64 returns the 64-bit name of a register given by its 64- or
// 32-bit name: the probe reads the whole register and truncates to the
// argument's size.
func register64(name string) (string, error) {
	for _, r := range registers64 {
		if name == r {
			return r, nil
		}
	}
	switch {
	case len(name) == 3 && name[0] == 'e': // eax, edi, esp, ...
		r := "r" + name[1:]
		for _, x := range registers64[:8] {
			if x == r {
				return r, nil
			}
		}
	case strings.HasPrefix(name, "r") && strings.HasSuffix(name, "d"): // r8d .. r15d
		r := strings.TrimSuffix(name, "d")
		for _, x := range registers64[8:16] {
			if x == r {
				return r, nil
			}
		}
	}
	return "", fmt.Errorf("register %q: %w", name, ErrUnsupportedArg)
}
